package attest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/verify"
)

// Finder finds and verifies a digest's attestations of one predicate type (verify.Verifier).
type Finder interface {
	Attestations(ctx context.Context, ref, predicateType string) (verify.Attestations, error)
	DescribeTrust() string
	// Fingerprint identifies the trust (verdicts are cached by it).
	Fingerprint() string
	// AttestationsState fingerprints what is attached to a digest (a refusal holds while it is
	// the same).
	AttestationsState(ctx context.Context, ref string) (string, error)
}

// Requirement is one verify.attestations entry, ready to judge: its predicate type's URI, its
// compiled condition (nil: any verified statement of the type) and who must have signed.
type Requirement struct {
	PredicateType string
	Condition     *Condition
	Signers       Finder
}

// Verdict is whether a digest carries every required attestation.
type Verdict struct {
	Passed bool
	// Reason, when it did not pass: AttestationMissing, AttestationRefused or ImageNotFound.
	Reason string
	// Message names the digest, each predicate type and what verified it; or, when it did not
	// pass, the predicate, the signer and the condition that failed.
	Message string
}

// maxDetail bounds how much of the refusals a message repeats.
const maxDetail = 900

// Check judges ref ("repository@sha256:<hex>") against every requirement, in order; the first
// that fails is the verdict. An error means the attestations could not be read (retry).
func Check(ctx context.Context, ref string, reqs []Requirement) (Verdict, error) {
	var passed []string
	for _, req := range reqs {
		found, err := req.Signers.Attestations(ctx, ref, req.PredicateType)
		if err != nil {
			return Verdict{}, err
		}
		if found.ImageNotFound {
			return Verdict{Reason: stagecoachv1.ReasonImageNotFound, Message: fmt.Sprintf("%s does not exist in its repository", ref)}, nil
		}
		ok, why := judge(ctx, ref, req, found)
		if !ok {
			return Verdict{Reason: why.reason, Message: why.message}, nil
		}
		passed = append(passed, why.message)
	}
	return Verdict{Passed: true, Message: strings.Join(passed, "; ")}, nil
}

type judgement struct{ reason, message string }

// judge decides one requirement from what was found: passed when a verified statement meets
// the condition.
func judge(ctx context.Context, ref string, req Requirement, found verify.Attestations) (bool, judgement) {
	var unmet []string
	for _, a := range found.Verified {
		if req.Condition == nil {
			return true, judgement{message: fmt.Sprintf("attestation %s signed %s (%s)", req.PredicateType, a.SignedBy(), a.What)}
		}
		holds, err := req.Condition.Holds(ctx, a.Statement)
		switch {
		case err != nil:
			unmet = append(unmet, fmt.Sprintf("%s signed %s: %v", a.What, a.SignedBy(), err))
		case !holds:
			unmet = append(unmet, fmt.Sprintf("%s signed %s does not meet the condition %s", a.What, a.SignedBy(), req.Condition))
		default:
			return true, judgement{message: fmt.Sprintf("attestation %s signed %s (%s) meets %s", req.PredicateType, a.SignedBy(), a.What, req.Condition)}
		}
	}
	var refused []string
	for _, r := range found.Refused {
		refused = append(refused, r.String())
	}
	if len(unmet) == 0 && len(refused) == 0 {
		return false, judgement{reason: stagecoachv1.ReasonAttestationMissing, message: fmt.Sprintf(
			"%s has no attestation of predicate type %s (no Sigstore bundle referrer, no entry of its .att tag of that type): "+
				"attach one signed by %s", ref, req.PredicateType, req.Signers.DescribeTrust())}
	}
	detail := strings.Join(append(unmet, refused...), "; ")
	if len(detail) > maxDetail {
		detail = detail[:maxDetail] + "…"
	}
	return false, judgement{reason: stagecoachv1.ReasonAttestationRefused, message: fmt.Sprintf(
		"%s has %d attestation(s) of predicate type %s, but none is signed by %s for this digest and meets its condition: %s",
		ref, len(unmet)+len(refused), req.PredicateType, req.Signers.DescribeTrust(), detail)}
}

// Cached is Check with its verdicts kept in cache (shared with the signature verdicts). A pass is
// kept until evicted: an attestation, like a signature, does not change. A refusal is kept for
// the state of what is attached to the digest (verify's AttestationsState: the referrers listed
// and the .att tag), so an attestation attached a moment later (an upstream Stage's, right after
// it verified) counts at once, while a refused one (a large SBOM whose condition fails) is not
// downloaded again at every look; it is also dropped after refusalTTL. The key names the digest
// and everything the verdict depends on: each requirement's predicate type, condition and
// signers' trust. Errors are never kept.
func Cached(ctx context.Context, cache *verify.Cache, now time.Time, ref string, reqs []Requirement) (Verdict, error) {
	if cache == nil || len(reqs) == 0 {
		return Check(ctx, ref, reqs)
	}
	// Each field length-prefixed: no choice of conditions can make two requirement lists hash alike.
	h := sha256.New()
	for _, r := range reqs {
		cond := ""
		if r.Condition != nil {
			cond = r.Condition.String()
		}
		for _, field := range []string{r.PredicateType, cond, r.Signers.Fingerprint()} {
			fmt.Fprintf(h, "%d:%s", len(field), field)
		}
	}
	key := ref + "#attestations#" + hex.EncodeToString(h.Sum(nil))
	if v, ok := cache.Recall(key, now); ok && v.Verified {
		return Verdict{Passed: true, Message: v.Message}, nil
	}
	state, err := reqs[0].Signers.AttestationsState(ctx, ref)
	if err != nil {
		return Verdict{}, err
	}
	refusedKey := key + "#refused#" + state
	if v, ok := cache.Recall(refusedKey, now); ok {
		return Verdict{Reason: v.Reason, Message: v.Message}, nil
	}
	verdict, err := Check(ctx, ref, reqs)
	switch {
	case err != nil:
	case verdict.Passed:
		cache.Remember(key, verify.Verdict{Verified: true, Message: verdict.Message}, time.Time{})
	default:
		cache.Remember(refusedKey, verify.Verdict{Reason: verdict.Reason, Message: verdict.Message}, now.Add(refusalTTL))
	}
	return verdict, err
}

// refusalTTL bounds how long a refusal is kept even while nothing attached changes (a keyless
// trusted root renewed, a clock that moved).
const refusalTTL = 10 * time.Minute
