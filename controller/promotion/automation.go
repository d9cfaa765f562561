package promotion

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
	"github.com/stagecoach-dev/stagecoach/internal/source"
	"github.com/stagecoach-dev/stagecoach/internal/source/upstream"
)

// automate offers the source's candidate: it creates an automatic Promotion when every gate is
// open (and returns it), and otherwise says in status.candidate what blocks it. recheck is when
// the source should be looked at again (0: on events only): a registry's interval, or a skipped
// signature's verdict expiring.
func (run *Run) automate(ctx context.Context) (created *stagecoachv1.Promotion, recheck time.Duration, err error) {
	stage := run.stage
	offer, err := run.offer(ctx)
	if err != nil {
		return nil, 0, err
	}
	candidate, skipped, verdictsExpire, err := run.eligible(ctx, offer.Candidates)
	recheck = plan.Soonest(offer.Recheck, verdictsExpire)
	if err != nil {
		return nil, recheck, err
	}
	// The newer versions passed over stay listed whatever happens to the candidate.
	stage.Status.Candidate = nil
	if offer.Block != nil || len(skipped) > 0 {
		stage.Status.Candidate = &stagecoachv1.CandidateVersion{Skipped: skipped}
		if offer.Block != nil {
			stage.Status.Candidate.BlockedBy = []stagecoachv1.GateBlock{*offer.Block}
		}
	}
	if candidate == nil || !plan.IsNew(stage, candidate, run.promotions) {
		return nil, recheck, nil
	}
	automation := plan.AutomationBlocks(stage, candidate, run.now)
	promote, _, err := run.promoteGates(ctx, candidate.Digest, false)
	if err != nil {
		return nil, recheck, err
	}
	blocks := plan.CandidateBlocks(automation, promote, run.freezes)
	stage.Status.Candidate = &stagecoachv1.CandidateVersion{Version: candidate.Tag, Digest: candidate.Digest,
		FirstSeen: candidate.FirstSeen, BlockedBy: blocks, Skipped: skipped}
	if len(blocks) > 0 {
		return nil, recheck, nil
	}
	p := run.automaticPromotion(candidate)
	if err := run.r.Create(ctx, p); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, recheck, nil // created before a restart; its own event brings it here
		}
		return nil, recheck, fmt.Errorf("failed to create a Promotion for Stage %q: %w", stage.Name, err)
	}
	run.status.track(p)
	return p, recheck, nil
}

// eligible picks the candidate automation considers from what the source offers: for a
// registry source the newest version that is signed (when the Stage asks) and did not fail here
// before, with the newer ones it passes over; an upstream offers one version, taken as it is
// (the history gate then says why it is not taken). A skipped signature is checked again when
// its verdict expires: expires is how soon the first does (0: none), to look at the Stage again then.
func (run *Run) eligible(ctx context.Context, offered []plan.Candidate) (
	candidate *plan.Candidate, skipped []stagecoachv1.SkippedVersion, expires time.Duration, err error) {
	stage := run.stage
	if stage.Spec.Source.Registry == nil && stage.Spec.Source.Git == nil {
		if len(offered) == 0 {
			return nil, nil, 0, nil
		}
		return &offered[0], nil, 0, nil
	}
	// A verifier's verdict that skips a version expires (a signature or attestation pushed
	// later): expires is how soon the first does.
	skipping := func(gate string, verifier func(context.Context, *stagecoachv1.Stage, time.Time) (func(context.Context, string) (*plan.SignatureVerdict, error), error)) (plan.SignatureOf, error) {
		if !plan.Asks(stage, gate) {
			return nil, nil
		}
		verdictOf, err := verifier(ctx, stage, run.now)
		if err != nil {
			return nil, err
		}
		return func(digest string) (*plan.SignatureVerdict, error) {
			v, err := verdictOf(ctx, digest)
			if b := plan.UnsignedBlock(v); b != nil && b.Until != nil {
				expires = plan.Soonest(expires, b.Until.Sub(run.now))
			}
			return v, err
		}, nil
	}
	signatureOf, err := skipping(stagecoachv1.GateSignature, run.r.signatureVerifier)
	if err != nil {
		return nil, nil, 0, err
	}
	attestationsOf, err := skipping(stagecoachv1.GateAttestations, run.r.attestationVerifier)
	if err != nil {
		return nil, nil, 0, err
	}
	candidate, skipped, err = plan.FirstEligible(stage, offered, signatureOf, attestationsOf)
	return candidate, skipped, expires, err
}

// offer asks the Stage's source what it offers now.
func (run *Run) offer(ctx context.Context) (source.Offer, error) {
	src := run.r.sourceFor(run.stage)
	if src == nil {
		return source.Offer{Block: &stagecoachv1.GateBlock{Gate: stagecoachv1.GateSource, Reason: stagecoachv1.ReasonSourceNotSupported,
			Message: "this controller does not read record sources (upstreamRecords) yet"}}, nil
	}
	return src.Offer(ctx, run.stage, run.now)
}

// automaticPromotion is the Promotion automation creates for a candidate.
func (run *Run) automaticPromotion(c *plan.Candidate) *stagecoachv1.Promotion {
	stage := run.stage
	// Named by the whole digest: after a restart, creating it again finds the first one, and two
	// versions never share a name. A version offered again (its earlier Promotion was stopped by a
	// freeze since lifted: plan.IsNew) is its next attempt, numbered by the earlier ones.
	name := truncateName(stage.Name, "-"+digestHex(c.Digest))
	if n := run.promotesOf(c.Digest); n > 0 {
		name = truncateName(stage.Name, fmt.Sprintf("-%s-%d", digestHex(c.Digest), n+1))
	}
	p := &stagecoachv1.Promotion{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: stage.Namespace,
			Labels:      map[string]string{stagecoachv1.PromotionStageLabel: stage.Name, stagecoachv1.AutomaticLabel: "true"},
			Annotations: map[string]string{stagecoachv1.CreatedAtAnnotation: run.now.UTC().Format(time.RFC3339Nano)},
		},
		Spec: stagecoachv1.PromotionSpec{Stage: stage.Name, Action: stagecoachv1.ActionPromote, RequestedBy: run.r.Identity,
			Version: c.Version(), Reason: "automatic: the source offers " + versionString(c.Version()) + titled(c.Title)},
	}
	if c.FirstSeen != nil { // kept for DORA lead time (internal/dora.FirstSeen)
		p.Annotations[stagecoachv1.FirstSeenAnnotation] = c.FirstSeen.UTC().Format(time.RFC3339)
	}
	_ = controllerutil.SetOwnerReference(stage, p, run.r.Scheme())
	return p
}

// promotesOf counts the Stage's Promotions that promoted digest.
func (run *Run) promotesOf(digest string) int {
	n := 0
	for i := range run.promotions {
		p := &run.promotions[i]
		if p.Spec.Action == stagecoachv1.ActionPromote && p.Spec.Version != nil && p.Spec.Version.Digest == digest {
			n++
		}
	}
	return n
}

// sourceFor is the source the Stage takes its versions from; nil for one not built yet.
func (r *Runner) sourceFor(stage *stagecoachv1.Stage) source.Source {
	switch {
	case stage.Spec.Source.Registry != nil:
		return r.RegistrySource
	case stage.Spec.Source.Git != nil && r.GitSource != nil:
		return r.GitSource
	case stage.Spec.Source.Upstream != nil:
		return upstream.Source{Reader: r.Client}
	case stage.Spec.Source.UpstreamRecords != nil && r.Follower != nil:
		return r.Follower
	}
	return nil
}

// digestHex is a digest's hex part (an OCI digest's or a commit's), for names.
func digestHex(digest string) string {
	if _, hex, ok := strings.Cut(digest, ":"); ok {
		return hex
	}
	return digest
}

// titled quotes a commit's subject line after its version.
func titled(title string) string {
	if title == "" {
		return ""
	}
	const limit = 72
	if r := []rune(title); len(r) > limit {
		title = string(r[:limit]) + "…"
	}
	return fmt.Sprintf(" (%q)", title)
}
