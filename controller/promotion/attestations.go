package promotion

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/attest"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
	"github.com/stagecoach-dev/stagecoach/internal/source/registry"
	"github.com/stagecoach-dev/stagecoach/internal/verify"
)

// attestationVerdict judges the attestations the Stage requires of digest (verify.attestations).
func (r *Runner) attestationVerdict(ctx context.Context, stage *stagecoachv1.Stage, digest string, now time.Time) (*plan.SignatureVerdict, error) {
	verdictOf, err := r.attestationVerifier(ctx, stage, now)
	if err != nil {
		return nil, err
	}
	return verdictOf(ctx, digest)
}

// attestationVerifier reads what judging the Stage's required attestations takes (the
// repository its versions live in and its credentials; each requirement's signers and
// condition) once, and returns what judges one digest with it. What keeps every digest from
// being judged (a Secret unreadable, a condition that does not compile, no repository known) is
// each verdict's block; errors are for retries only.
func (r *Runner) attestationVerifier(ctx context.Context, stage *stagecoachv1.Stage, now time.Time) (func(context.Context, string) (*plan.SignatureVerdict, error), error) {
	blocked := func(reason, msg string, until *metav1.Time) *plan.SignatureVerdict {
		return &plan.SignatureVerdict{Block: &stagecoachv1.GateBlock{Gate: stagecoachv1.GateAttestations, Reason: reason, Message: msg, Until: until}}
	}
	always := func(v *plan.SignatureVerdict) (func(context.Context, string) (*plan.SignatureVerdict, error), error) {
		return func(context.Context, string) (*plan.SignatureVerdict, error) { return v, nil }, nil
	}
	repo, insecure, keychain, block, err := r.versionRepository(ctx, stage)
	if err != nil {
		return nil, err
	}
	if block != nil {
		held := *block
		held.Gate = stagecoachv1.GateAttestations
		return always(&plan.SignatureVerdict{Block: &held})
	}
	specs := plan.AttestationRequirements(stage)
	reqs := make([]attest.Requirement, 0, len(specs))
	for i, spec := range specs {
		field := fmt.Sprintf("verify.attestations[%d]", i)
		keys, unreadable, err := r.trustedKeys(ctx, stage, spec.SecretRef, field+".secretRef")
		if err != nil {
			return nil, err
		}
		if unreadable != "" {
			return always(blocked(stagecoachv1.ReasonKeysUnreadable, unreadable, nil))
		}
		identities := make([]verify.Identity, 0, len(spec.MatchOIDCIdentity))
		for _, id := range spec.MatchOIDCIdentity {
			identities = append(identities, verify.Identity{Issuer: id.Issuer, Subject: id.Subject})
		}
		root, rootBlock, err := registry.TrustedRoot(ctx, r.APIReader, stage, spec.TrustedRoot)
		if err != nil {
			return nil, err
		}
		if rootBlock != nil {
			return always(blocked(rootBlock.Reason, rootBlock.Message, nil))
		}
		if root == nil && len(identities) > 0 {
			root = r.SigstoreTrustedRoot // nil still: the shipped one
		}
		signers, err := verify.New(verify.Options{Keys: keys, Identities: identities, TrustedRoot: root, Keychain: keychain,
			Insecure: insecure, Cache: r.Verdicts, Transport: r.RegistryTransport})
		if err != nil {
			return always(blocked(stagecoachv1.ReasonKeysUnreadable, fmt.Sprintf("Stage %s cannot verify %s: %v", stage.Name, field, err), nil))
		}
		req := attest.Requirement{PredicateType: attest.PredicateTypeURI(spec.PredicateType), Signers: signers}
		if spec.Condition != "" {
			if req.Condition, err = attest.Compile(spec.Condition); err != nil {
				return always(blocked(stagecoachv1.ReasonConditionInvalid, fmt.Sprintf("Stage %s: %s.condition: %v: fix the expression", stage.Name, field, err), nil))
			}
		}
		reqs = append(reqs, req)
	}
	return func(ctx context.Context, digest string) (*plan.SignatureVerdict, error) {
		v, err := attest.Check(ctx, repo+"@"+digest, reqs)
		retry := metav1.NewTime(now.Add(verify.DefaultNegativeTTL))
		switch {
		case errors.Is(err, context.Canceled):
			return nil, err
		case err != nil:
			return blocked(stagecoachv1.ReasonVerificationUnavailable, fmt.Sprintf("cannot check the attestations of %s: %v", digest, err), &retry), nil
		case !v.Passed:
			// An attestation attached later (an upstream Stage attests when it verifies) is
			// seen when the gate asks again.
			return blocked(v.Reason, v.Message, &retry), nil
		}
		return &plan.SignatureVerdict{Message: v.Message}, nil
	}, nil
}

// versionRepository is the OCI repository the Stage's versions live in, and how to read it: its
// registry source's, or that of the Stage at the head of its upstream chain (with that Stage's
// registry credentials only when it is in this namespace: a Stage never borrows another
// namespace's Secret). block says why it cannot be told.
func (r *Runner) versionRepository(ctx context.Context, stage *stagecoachv1.Stage) (
	repo string, insecure bool, keychain authn.Keychain, block *stagecoachv1.GateBlock, err error) {
	head := stage
	if stage.Spec.Source.Registry == nil {
		head = r.Charts.Head(ctx, stage)
	}
	if head == nil || head.Spec.Source.Registry == nil {
		return "", false, nil, &stagecoachv1.GateBlock{Reason: stagecoachv1.ReasonVerificationUnavailable,
			Message: fmt.Sprintf("Stage %s cannot tell which OCI repository its versions live in: verify.attestations needs a registry source here or at the head of the upstream chain", stage.Name)}, nil
	}
	src := head.Spec.Source.Registry
	if head.Namespace == stage.Namespace {
		if keychain, block, err = registry.Keychain(ctx, r.APIReader, head, src.SecretRef); err != nil || block != nil {
			return "", false, nil, block, err
		}
	}
	return src.Repository, src.Insecure, keychain, nil, nil
}
