package promotion

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
	"github.com/stagecoach-dev/stagecoach/internal/semver"
	"github.com/stagecoach-dev/stagecoach/internal/source/registry"
	"github.com/stagecoach-dev/stagecoach/internal/verify"
)

// promoteGates runs plan.PromoteGates on a candidate (automation's chain). It returns the
// blocks and every gate's verdict.
func (run *Run) promoteGates(ctx context.Context, digest string, breakGlass bool) ([]stagecoachv1.GateBlock, []stagecoachv1.GateResult, error) {
	in, err := run.gateInputs(ctx, digest, breakGlass, false)
	if err != nil {
		return nil, nil, err
	}
	blocks, results := plan.RunGates(plan.PromoteGates, in)
	return blocks, results, nil
}

// applyGates runs plan.ApplyGates on a promote about to start: the blocks, every gate's verdict
// and, when a gate rules the version out for good, why (refused). The checks before apply are
// the chain's last gate: they are polled only once every gate before them passes.
func (run *Run) applyGates(ctx context.Context, p *stagecoachv1.Promotion) (
	blocks []stagecoachv1.GateBlock, results []stagecoachv1.GateResult, refused string, err error) {
	in, err := run.gateInputs(ctx, p.Spec.Version.Digest, p.Spec.BreakGlass, true)
	if err != nil {
		return nil, nil, "", err
	}
	if plan.ChecksDue(in) {
		in.Checks = run.preApplyChecks(p)
	}
	blocks, results = plan.RunGates(plan.ApplyGates, in)
	return blocks, results, plan.Refusal(plan.ApplyGates, in), nil
}

// gateInputs gathers what the gate chain decides from, only for the gates the Stage asks for:
// the signature verdict, its Approvals and who promoted the version, the Stages it depends on,
// the API server's version and, when the promote is about to apply, what a follower's upstream
// records say of it.
func (run *Run) gateInputs(ctx context.Context, digest string, breakGlass, applying bool) (plan.GateInputs, error) {
	stage := run.stage
	in := plan.GateInputs{Stage: stage, Digest: digest, BreakGlass: breakGlass, Now: run.now, MatchVersion: matchVersion}
	var err error
	if plan.Asks(stage, stagecoachv1.GateSignature) {
		if in.Signature, err = run.r.signatureVerdict(ctx, stage, digest, run.now); err != nil {
			return in, err
		}
	}
	if plan.Asks(stage, stagecoachv1.GateAttestations) {
		if in.Attestations, err = run.r.attestationVerdict(ctx, stage, digest, run.now); err != nil {
			return in, err
		}
	}
	if plan.Asks(stage, stagecoachv1.GateApprovals) {
		if in.Approvals, in.Promoters, err = run.approvals(ctx, digest); err != nil {
			return in, err
		}
	}
	if plan.Asks(stage, stagecoachv1.GateDependsOn) {
		if in.Dependencies, err = run.dependencies(ctx); err != nil {
			return in, err
		}
	}
	if plan.Asks(stage, stagecoachv1.GatePrereqs) && run.r.ServerVersion != nil {
		if in.KubernetesVersion, err = run.r.ServerVersion(ctx); err != nil {
			return in, fmt.Errorf("failed to read the API server's version for Stage %q: %w", stage.Name, err)
		}
	}
	if applying && plan.Asks(stage, stagecoachv1.GatePublished) {
		if in.Published, err = run.published(ctx, digest); err != nil {
			return in, err
		}
	}
	return in, nil
}

// published reads a follower's upstream records afresh before a promote starts: a version they
// do not show verified waits (NotPublished) until the follower reads them again, one they
// exclude fails for good. Nil without a follower (the manager always sets one up): the gate
// then holds the version.
func (run *Run) published(ctx context.Context, digest string) (*plan.PublishedVerdict, error) {
	if run.r.Follower == nil {
		return nil, nil
	}
	v, err := run.r.Follower.Published(ctx, run.stage, digest, run.now)
	if err != nil {
		return nil, err
	}
	if v.Block != nil && !v.Excluded {
		until := metav1.NewTime(run.now.Add(run.r.Follower.RecheckAfter()))
		v.Block.Until = &until
	}
	return &v, nil
}

// approvals lists the Stage's Approvals and who promoted digest by hand, here or in any Stage up
// its upstream chain (plan.UpstreamChain): they cannot approve it. A hand promote in dev that
// automation carried on to staging still keeps its author from approving it in prod.
func (run *Run) approvals(ctx context.Context, digest string) ([]stagecoachv1.Approval, []plan.Promoter, error) {
	stage := run.stage
	var approvals stagecoachv1.ApprovalList
	if err := run.r.List(ctx, &approvals, client.InNamespace(stage.Namespace),
		client.MatchingFields{ApprovalStageIndexKey: stage.Name}); err != nil {
		return nil, nil, fmt.Errorf("failed to list the Approvals of Stage %q: %w", stage.Name, err)
	}
	promoters := plan.Promoters(digest, run.promotions, run.r.Identity)
	chain, err := plan.UpstreamChain(stage, func(key types.NamespacedName) (*stagecoachv1.Stage, error) {
		up := &stagecoachv1.Stage{}
		if err := run.r.Get(ctx, key, up); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			return nil, fmt.Errorf("failed to read Stage %s up the upstream chain of Stage %q: %w", key, stage.Name, err)
		}
		return up, nil
	})
	if err != nil {
		return nil, nil, err
	}
	for _, key := range chain {
		upstream, err := List(ctx, run.r, key)
		if err != nil {
			return nil, nil, fmt.Errorf("upstream of Stage %q: %w", stage.Name, err)
		}
		promoters = append(promoters, plan.Promoters(digest, upstream, run.r.Identity)...)
	}
	return approvals.Items, promoters, nil
}

// dependencies reads the Stages spec.dependsOn names and their unfinished Promotions, live: a
// cache that lags behind could let a dependent go before its base has settled. A missing Stage
// is left out of the map.
func (run *Run) dependencies(ctx context.Context) (map[types.NamespacedName]plan.Dependency, error) {
	stage := run.stage
	deps := map[types.NamespacedName]plan.Dependency{}
	for _, d := range stage.Spec.DependsOn {
		key := stage.DependencyKey(d)
		other := &stagecoachv1.Stage{}
		if err := run.r.APIReader.Get(ctx, key, other); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("failed to read Stage %s that Stage %q depends on: %w", key, stage.Name, err)
		}
		var promotions stagecoachv1.PromotionList
		if err := run.r.APIReader.List(ctx, &promotions, client.InNamespace(key.Namespace)); err != nil {
			return nil, fmt.Errorf("failed to list the Promotions of Stage %s that Stage %q depends on: %w", key, stage.Name, err)
		}
		dep := plan.Dependency{Stage: other}
		for i := range promotions.Items {
			p := &promotions.Items[i]
			if p.Spec.Stage == key.Name && !plan.IsFinished(p) {
				phase := p.Status.Phase
				if phase == "" {
					phase = stagecoachv1.PhasePending
				}
				dep.Moving = fmt.Sprintf("%s Promotion %s (%s)", p.Spec.Action, p.Name, phase)
				break
			}
		}
		deps[key] = dep
	}
	return deps, nil
}

// matchVersion reports whether a version (a tag such as v1.2.3) meets a semver constraint.
func matchVersion(constraint, version string) (bool, error) {
	c, err := semver.ParseConstraint(constraint)
	if err != nil {
		return false, err
	}
	v, err := semver.Parse(version)
	if err != nil {
		return false, fmt.Errorf("version %q is not semver: %w", version, err)
	}
	return c.Check(v), nil
}

// signatureVerdict verifies digest in the Stage's registry with the keys of verify.secretRef.
// What keeps it from being verified (keys or credentials unreadable, the registry down, no
// trusted signature) is the verdict's block; errors are for retries only. Verdicts are cached per
// digest and key set (process-wide), so asking again is cheap.
func (r *Runner) signatureVerdict(ctx context.Context, stage *stagecoachv1.Stage, digest string, now time.Time) (*plan.SignatureVerdict, error) {
	verdictOf, err := r.signatureVerifier(ctx, stage, now)
	if err != nil {
		return nil, err
	}
	return verdictOf(ctx, digest)
}

// signatureVerifier reads what verifying the Stage's signatures takes (its keys, its registry
// credentials) once, and returns what verifies one digest with it: automation verifies several
// digests of one listing. What keeps every digest from being verified (a Secret unreadable) is
// each verdict's block.
func (r *Runner) signatureVerifier(ctx context.Context, stage *stagecoachv1.Stage, now time.Time) (func(context.Context, string) (*plan.SignatureVerdict, error), error) {
	if stage.Spec.Source.Git != nil {
		return r.commitVerifier(ctx, stage, now)
	}
	src := stage.Spec.Source.Registry
	blocked := func(reason, msg string, until *metav1.Time) *plan.SignatureVerdict {
		return &plan.SignatureVerdict{Block: &stagecoachv1.GateBlock{Gate: stagecoachv1.GateSignature, Reason: reason, Message: msg, Until: until}}
	}
	always := func(v *plan.SignatureVerdict) (func(context.Context, string) (*plan.SignatureVerdict, error), error) {
		return func(context.Context, string) (*plan.SignatureVerdict, error) { return v, nil }, nil
	}
	v, block, err := r.verifier(ctx, stage, signers{secretRef: src.Verify.SecretRef, identities: src.Verify.MatchOIDCIdentity, root: src.Verify.TrustedRoot,
		gate: stagecoachv1.GateSignature, field: "verify", what: "signatures"}, src.Insecure,
		func() (authn.Keychain, *stagecoachv1.GateBlock, error) {
			return registry.Keychain(ctx, r.Secrets, stage, src.SecretRef, "spec.source.registry.secretRef")
		})
	if err != nil {
		return nil, err
	}
	if block != nil {
		return always(&plan.SignatureVerdict{Block: block})
	}
	return func(ctx context.Context, digest string) (*plan.SignatureVerdict, error) {
		verdict, err := v.Verify(ctx, src.Repository+"@"+digest)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return nil, err
			}
			retry := metav1.NewTime(now.Add(verify.DefaultNegativeTTL))
			return blocked(stagecoachv1.ReasonVerificationUnavailable, fmt.Sprintf("cannot check the signature of %s: %v", digest, err), &retry), nil
		}
		if !verdict.Verified {
			// A signature pushed later is seen at the source's next listing, or once the cached
			// verdict expires.
			retry := metav1.NewTime(now.Add(verify.DefaultNegativeTTL))
			return blocked(verdict.Reason, verdict.Message, &retry), nil
		}
		return &plan.SignatureVerdict{Message: verdict.Message}, nil
	}, nil
}

// trustedKeys reads the cosign public keys of a Secret the Stage names in field (none when ref
// is nil); unreadable says why they cannot be used (the Secret is missing, forbidden or holds no
// key), for the gate's block.
func (r *Runner) trustedKeys(ctx context.Context, stage *stagecoachv1.Stage, ref *stagecoachv1.LocalObjectReference, field string) (
	keys [][]byte, unreadable string, err error) {
	if ref == nil {
		return nil, "", nil
	}
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: stage.Namespace, Name: ref.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return nil, fmt.Sprintf("Secret '%s/%s' with the cosign public keys cannot be read (%v): create it or fix %s",
				stage.Namespace, ref.Name, err, field), nil
		}
		return nil, "", fmt.Errorf("failed to read Secret %s/%s for Stage %q: %w", stage.Namespace, ref.Name, stage.Name, err)
	}
	if keys, err = verify.KeysFromSecretData(secret.Data); err != nil {
		return nil, fmt.Sprintf("Secret '%s/%s': %v", stage.Namespace, ref.Name, err), nil
	}
	return keys, "", nil
}

// commitVerifier verifies the signatures of a git source's commits (or tags) from its clone
// (gitsource.Source.Verifier).
func (r *Runner) commitVerifier(ctx context.Context, stage *stagecoachv1.Stage, now time.Time) (func(context.Context, string) (*plan.SignatureVerdict, error), error) {
	if r.GitSource == nil {
		return func(context.Context, string) (*plan.SignatureVerdict, error) {
			return &plan.SignatureVerdict{Block: &stagecoachv1.GateBlock{Gate: stagecoachv1.GateSignature, Reason: stagecoachv1.ReasonVerificationUnavailable,
				Message: "this controller does not read git sources"}}, nil
		}, nil
	}
	verdictOf, err := r.GitSource.Verifier(ctx, stage, now)
	if err != nil {
		return nil, err
	}
	return func(_ context.Context, digest string) (*plan.SignatureVerdict, error) {
		return verdictOf(digest), nil
	}, nil
}
