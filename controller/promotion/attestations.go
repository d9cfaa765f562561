package promotion

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/attest"
	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
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
		v, block, err := r.verifier(ctx, stage, signers{secretRef: spec.SecretRef, identities: spec.MatchOIDCIdentity, root: spec.TrustedRoot,
			gate: stagecoachv1.GateAttestations, field: field, what: field}, insecure,
			func() (authn.Keychain, *stagecoachv1.GateBlock, error) { return keychain, nil, nil })
		if err != nil {
			return nil, err
		}
		if block != nil {
			return always(&plan.SignatureVerdict{Block: block})
		}
		req := attest.Requirement{PredicateType: attest.PredicateTypeURI(spec.PredicateType), Signers: v}
		if spec.Condition != "" {
			if req.Condition, err = attest.Compile(spec.Condition); err != nil {
				return always(blocked(stagecoachv1.ReasonConditionInvalid, fmt.Sprintf("Stage %s: %s.condition: %v: fix the expression", stage.Name, field, err), nil))
			}
		}
		reqs = append(reqs, req)
	}
	return func(ctx context.Context, digest string) (*plan.SignatureVerdict, error) {
		v, err := attest.Cached(ctx, r.Verdicts, now, repo+"@"+digest, reqs)
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
		if keychain, block, err = registry.Keychain(ctx, r.Secrets, head, src.SecretRef, "spec.source.registry.secretRef of Stage "+head.Name); err != nil || block != nil {
			return "", false, nil, block, err
		}
	}
	return src.Repository, src.Insecure, keychain, nil, nil
}

// maxOwedAttestations bounds how many verified Promotions without an attestation one reconcile
// attaches, newest first: a Stage given spec.attest after many promotions attests its latest.
const maxOwedAttestations = 5

// attestBackoff is how soon a promotion attestation that could not be attached is tried again:
// 30 s, doubling with each failure in a row, at most 10 minutes.
func attestBackoff(failures int) time.Duration {
	d := 30 * time.Second
	for range min(failures-1, 5) {
		d *= 2
	}
	return min(d, 10*time.Minute)
}

// catchUpAttestation attaches the promotion attestations the Stage owes (spec.attest): of each
// Promotion of an OCI digest it verified that has none yet, newest first. After the Promotion
// finished, so that a registry outage never holds a verdict back; nor does a crash lose one: the
// next reconcile finds it owed. It returns how soon to try again after a failure (0: nothing
// owed); what failed is a Warning event on the Promotion, naming the fix.
func (run *Run) catchUpAttestation(ctx context.Context) time.Duration {
	stage := run.stage
	if stage.Spec.Attest == nil {
		return 0
	}
	var owed []*stagecoachv1.Promotion
	for i := range run.promotions {
		q := &run.promotions[i]
		if q.Status.Phase == stagecoachv1.PhaseSucceeded && q.Status.Attestation == nil && q.Status.VerifiedAt != nil &&
			q.Status.Version != nil && strings.HasPrefix(q.Status.Version.Digest, "sha256:") {
			owed = append(owed, q)
		}
	}
	if len(owed) == 0 {
		run.r.attestFailures.Delete(client.ObjectKeyFromObject(stage))
		return 0
	}
	slices.SortFunc(owed, func(a, b *stagecoachv1.Promotion) int { return b.Status.VerifiedAt.Compare(a.Status.VerifiedAt.Time) })
	failed := func(p *stagecoachv1.Promotion, format string, args ...any) time.Duration {
		run.event(p, corev1.EventTypeWarning, stagecoachv1.EventAttestationFailed, "%s", fmt.Sprintf(format, args...))
		n, _ := run.r.attestFailures.LoadOrStore(client.ObjectKeyFromObject(stage), 0)
		failures := n.(int) + 1
		run.r.attestFailures.Store(client.ObjectKeyFromObject(stage), failures)
		return attestBackoff(failures)
	}
	if run.r.Attestor == nil {
		return failed(owed[0], "Stage %s asks for promotion attestations (spec.attest), but this controller runs without --attestation-key-secret: "+
			"give it the Secret of a cosign key pair, or remove spec.attest", stage.Name)
	}
	for _, p := range owed[:min(len(owed), maxOwedAttestations)] {
		ref, err := run.attestation(ctx, p)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return 0
			}
			return failed(p, "cannot attach the promotion attestation of %s to %s: %v", versionString(p.Status.Version), stage.Name, err)
		}
		p.Status.Attestation = ref
		if err := run.status.save(ctx, p); err != nil {
			// Attached already: the next reconcile finds it there and records it.
			ctrl.LoggerFrom(ctx).Error(err, "failed to record the promotion attestation", "promotion", p.Name)
			return attestBackoff(1)
		}
		run.event(p, corev1.EventTypeNormal, stagecoachv1.EventAttested, "attached the promotion attestation of %s in %s to %s@%s (referrer %s, key %s)",
			versionString(p.Status.Version), stage.Name, ref.Repository, p.Status.Version.Digest, ref.Digest, ref.KeyID)
	}
	run.r.attestFailures.Delete(client.ObjectKeyFromObject(stage))
	return 0
}

// attestation signs and attaches p's promotion attestation, or finds the one attached before,
// and says where it is. Errors say what to fix.
func (run *Run) attestation(ctx context.Context, p *stagecoachv1.Promotion) (*stagecoachv1.AttestationReference, error) {
	repo, insecure, err := run.attestTarget(ctx)
	if err != nil {
		return nil, err
	}
	keychain, err := run.attestKeychain(ctx)
	if err != nil {
		return nil, err
	}
	d, err := name.NewDigest(repo+"@"+p.Status.Version.Digest, ociclient.NameOptions(insecure)...)
	if err != nil {
		return nil, fmt.Errorf("repository %q: %w", repo, err)
	}
	ropts := ociclient.RemoteOptions(ctx, ociclient.Options{Keychain: keychain, Insecure: insecure, Transport: run.r.RegistryTransport})
	// What counts as attached is a bundle the controller's key signed for this very Promotion,
	// not an annotation anyone who may push could write.
	own, err := verify.New(verify.Options{Keys: [][]byte{run.r.Attestor.PublicKeyPEM()}, Keychain: keychain, Insecure: insecure,
		Transport: run.r.RegistryTransport})
	if err != nil {
		return nil, err
	}
	ref := &stagecoachv1.AttestationReference{Repository: repo, PredicateType: attest.PromotionPredicateType, KeyID: run.r.Attestor.KeyID()}
	if ref.Digest, err = attest.Find(ctx, own, d.String(), p.Namespace, string(p.UID)); err != nil || ref.Digest != "" {
		return ref, ociclient.ClassifyError(repo, err)
	}
	statement, err := attest.Statement(repo, p.Status.Version.Digest, run.promotionPredicate(p))
	if err != nil {
		return nil, err
	}
	bundle, err := run.r.Attestor.Bundle(ctx, statement)
	if err != nil {
		return nil, err
	}
	created := run.now
	if p.Status.VerifiedAt != nil {
		created = p.Status.VerifiedAt.Time
	}
	if err := attest.Attach(d, bundle, fmt.Sprintf("%s/%s/%s", p.Namespace, p.Name, p.UID), created, ropts); err != nil {
		return nil, ociclient.ClassifyError(repo, err)
	}
	if ref.Digest, err = attest.Find(ctx, own, d.String(), p.Namespace, string(p.UID)); err != nil {
		return nil, ociclient.ClassifyError(repo, err)
	}
	if ref.Digest == "" {
		return nil, fmt.Errorf("the registry took the attestation of %s but does not list it among the referrers of %s", p.Name, d.DigestStr())
	}
	return ref, nil
}

// attestTarget is the repository the attestation is pushed to: spec.attest.repository, else the
// Stage's own registry source's, else the repository at the head of its upstream chain. That last
// one is another Stage's spec (maybe another author's): it gets no credentials of this Stage and
// never plain HTTP off loopback.
func (run *Run) attestTarget(ctx context.Context) (repo string, insecure bool, err error) {
	stage := run.stage
	a := stage.Spec.Attest
	if a.Repository != "" {
		return a.Repository, a.Insecure, nil
	}
	if src := stage.Spec.Source.Registry; src != nil {
		return src.Repository, src.Insecure, nil
	}
	if a.SecretRef != nil {
		return "", false, fmt.Errorf("Stage %s takes an upstream's versions, and spec.attest.secretRef goes only to a repository this Stage names: "+
			"set spec.attest.repository (the upstream chain's repository, or a mirror that keeps digests)", stage.Name)
	}
	repo, _, _, block, err := run.r.versionRepository(ctx, stage)
	if err != nil {
		return "", false, err
	}
	if block != nil {
		return "", false, errors.New(block.Message)
	}
	return repo, false, nil
}

// attestKeychain is what the attestation is pushed with: the Secret spec.attest.secretRef names,
// only when the Stage's author may read it (the controller pushes through a Stage only with what
// its author could push with themselves); anonymous without one.
func (run *Run) attestKeychain(ctx context.Context) (authn.Keychain, error) {
	stage := run.stage
	ref := stage.Spec.Attest.SecretRef
	if ref == nil {
		return nil, nil
	}
	keychain, block, err := registry.Keychain(ctx, run.r.Secrets, stage, ref, "spec.attest.secretRef")
	if err != nil {
		return nil, err
	}
	if block != nil {
		return nil, errors.New(block.Message)
	}
	return keychain, nil
}

// promotionPredicate is what the attestation says of p: the Stage, the version, every gate's
// verdict and the engine's proof that it landed.
func (run *Run) promotionPredicate(p *stagecoachv1.Promotion) attest.Promotion {
	stage := run.stage
	pred := attest.Promotion{Cluster: run.r.Cluster, Namespace: stage.Namespace, Stage: stage.Name, Service: stage.Spec.Service,
		Environment: stage.Spec.Environment, Promotion: p.Name, PromotionUID: string(p.UID), Action: string(p.Spec.Action),
		Version: attest.Version{Tag: p.Status.Version.Tag, Digest: p.Status.Version.Digest}, RequestedBy: p.Spec.RequestedBy,
		Gates: make([]attest.Gate, 0, len(p.Status.Gates)), Landed: attest.Landed{Evidence: p.Status.Message}}
	for _, g := range p.Status.Gates {
		pred.Gates = append(pred.Gates, attest.Gate{Gate: g.Gate, Passed: g.Passed, Message: g.Message})
	}
	if a := stage.Status.Applier; a != nil {
		pred.Landed.Applier = a.Kind + "/" + a.Name
	}
	for _, at := range []struct {
		from *metav1.Time
		to   *time.Time
	}{{p.Status.AppliedAt, &pred.Landed.AppliedAt}, {p.Status.LandedAt, &pred.Landed.LandedAt}, {p.Status.VerifiedAt, &pred.Landed.VerifiedAt}} {
		if at.from != nil {
			*at.to = at.from.UTC()
		}
	}
	if s := stage.Status.Stream; s != nil && s.ID != "" {
		pred.Record = &attest.Record{Stream: s.ID}
		if r := p.Status.Record; r != nil {
			pred.Record.Seq, pred.Record.Action, pred.Record.Digest = r.Seq, r.Action, r.Digest
		}
	}
	return pred
}
