package promotion

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/applier"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
	plugincheck "github.com/stagecoach-dev/stagecoach/plugin/check"
)

// progressRunning says on the Stage which Promotion runs, and moves it one step.
func (run *Run) progressRunning(ctx context.Context, running *stagecoachv1.Promotion) (time.Duration, error) {
	msg := fmt.Sprintf("Promotion %s is applying %s", running.Name, versionString(running.Status.Version))
	if run.stage.Spec.Suspend {
		msg += "; the Stage is suspended: this Promotion finishes, nothing else starts"
	}
	run.setStageCondition(stagecoachv1.ConditionPromoting, metav1.ConditionTrue, stagecoachv1.ReasonPromoting, msg)
	return run.progress(ctx, running)
}

// progress moves a running Promotion one step through the Stage's rollout.
func (run *Run) progress(ctx context.Context, p *stagecoachv1.Promotion) (time.Duration, error) {
	if version := p.Status.Version; version == nil || version.Digest == "" {
		return 0, run.status.finish(ctx, p, stagecoachv1.PhaseFailed, "the Promotion has no version to apply")
	}
	return run.rollout.step(ctx, run, p)
}

// A Rollout is how a Promotion's version reaches what runs (the progress strategy), chosen with
// the applier (controller/stage): one applier object (applierRollout, below) or the Applications
// of an ApplicationSet, wave by wave (Fleet, waves.go). The loop, progress and
// finish go through it and never ask which one it is.
type Rollout interface {
	// revision is the version running now: "" when none is, or while a fleet's targets differ.
	revision(run *Run) string
	// step moves a running Promotion one step: apply, observe the engine, landed, verify.
	step(ctx context.Context, run *Run, p *stagecoachv1.Promotion) (time.Duration, error)
	// phaseOnApplier reports whether the applier object carries the Promotion annotations (a
	// fleet's Applications carry theirs, written per target by the rollout).
	phaseOnApplier() bool
}

// applierRollout writes the version to one applier object and reads the engine's proof there.
type applierRollout struct {
	applier applier.Applier
}

var _ Rollout = applierRollout{}

// ApplierRollout is the rollout of one applier object through its applier.
func ApplierRollout(a applier.Applier) Rollout { return applierRollout{applier: a} }

func (a applierRollout) revision(run *Run) string { return a.applier.Revision(run.obj) }

func (applierRollout) phaseOnApplier() bool { return true }

// step moves the Promotion one step, from what the applier reports (plan.Progress).
func (a applierRollout) step(ctx context.Context, run *Run, p *stagecoachv1.Promotion) (time.Duration, error) {
	version := p.Status.Version
	obs := a.applier.Observe(run.obj, version.Digest)
	if obs.Phase == applier.Progressing && p.Status.AppliedAt != nil {
		// A rollback after a sync the cluster refused: Argo CD finds the old version running and
		// starts no sync, so the proof is its comparison after the write.
		if at, ok := a.applier.AlreadyLive(run.obj, version.Digest, p.Status.AppliedAt.Time); ok {
			obs = applier.Observation{Phase: applier.Landed, Reason: stagecoachv1.ReasonLanded, Message: fmt.Sprintf(
				"Argo CD compared it at %s after the write: Synced at %s and Healthy, nothing to sync (the cluster already ran it)", at, version.Digest)}
		}
	}
	if obs.Reason == stagecoachv1.ReasonConditionNotMet && p.Status.AppliedAt != nil {
		// Completion rules not met yet (seed 000): the Stage says it waits on them.
		run.setStageCondition(stagecoachv1.ConditionPromoting, metav1.ConditionUnknown, obs.Reason, obs.Message)
	}
	return run.advance(ctx, p, obs, a.applier, func() (bool, string, error) {
		applied, err := a.apply(ctx, run, p)
		return applied, "applied " + versionString(version) + "; waiting for the engine", err
	})
}

// lookAgainAfterApply is how soon a Stage is looked at after its applier was written.
const lookAgainAfterApply = 2 * time.Second

// advance takes the step plan.Progress decides from what the engine reports (obs): apply (once,
// through apply, which says what the Promotion's message becomes), landed, wait, verify or fail.
func (run *Run) advance(ctx context.Context, p *stagecoachv1.Promotion, obs applier.Observation, a applier.Applier,
	apply func() (bool, string, error)) (time.Duration, error) {
	stage := run.stage
	d := plan.Progress(p, obs, run.now, stage.GetGrace(), stage.GetProgressDeadline())
	switch d.Step {
	case plan.StepApply:
		applied, message, err := apply()
		if err != nil || !applied {
			return 0, err
		}
		run.markApplied(p, "")
		p.Status.Message = message
		// Look again soon once, then by the deadline even if the engine never writes: the
		// applier's event of this very write may be taken by a reconcile whose cache does not
		// hold this status yet (it then finds the write done and changes nothing), and the
		// engine may not write again for minutes.
		d.RequeueAfter = min(stage.GetProgressDeadline(), lookAgainAfterApply)
	case plan.StepLanded:
		run.markLanded(p, d.Message)
		p.Status.Message = d.Message
	case plan.StepUnlanded:
		p.Status.LandedAt = nil
		p.Status.Message = d.Message
	case plan.StepWait:
		p.Status.Message = d.Message
	case plan.StepVerify:
		// Without a grace period, landing and verifying are one step.
		run.markLanded(p, d.Message)
		// A chart given by version: its tag must still name the digest (chart.go).
		moved, err := run.tagMoved(ctx, a, p)
		if err != nil {
			return 0, err
		}
		if moved != "" {
			return 0, run.finishFailed(ctx, p, stagecoachv1.ReasonTagMoved, "landed, but "+moved)
		}
		return 0, run.verify(ctx, p, d.Message)
	case plan.StepFail:
		return 0, run.finishFailed(ctx, p, d.Reason, d.Message)
	}
	return d.RequeueAfter, run.status.save(ctx, p)
}

// markApplied stamps the Promotion's first write (the progress deadline counts from it) and
// announces it; how says how it was written ("" for one object).
func (run *Run) markApplied(p *stagecoachv1.Promotion, how string) {
	if p.Status.AppliedAt != nil {
		return
	}
	now := metav1.NewTime(run.now)
	p.Status.AppliedAt = &now
	version := versionString(p.Status.Version)
	run.announce(p, corev1.EventTypeNormal, stagecoachv1.EventPromoted, fmt.Sprintf("Promoted %s to %s%s", run.stage.Name, version, how),
		fmt.Sprintf("Stagecoach promoted %s to %s", run.stage.Name, version))
}

// markLanded stamps when the version landed, once, and announces it with the engine's evidence.
func (run *Run) markLanded(p *stagecoachv1.Promotion, evidence string) {
	if p.Status.LandedAt != nil {
		return
	}
	now := metav1.NewTime(run.now)
	p.Status.LandedAt = &now
	msg := fmt.Sprintf("%s landed in %s: %s", versionString(p.Status.Version), run.stage.Name, evidence)
	run.announce(p, corev1.EventTypeNormal, stagecoachv1.EventLanded, msg, msg)
}

// verify runs the verification checks of a version that landed and held, then finishes the
// Promotion as verified, or as failed when a check failed.
func (run *Run) verify(ctx context.Context, p *stagecoachv1.Promotion, evidence string) error {
	checks := run.stage.GetVerificationChecks()
	if len(checks) == 0 {
		return run.finishVerified(ctx, p, evidence)
	}
	results, failed, done := run.runChecks(p, checks, plugincheck.PhasePostApply)
	if !done {
		p.Status.Message = evidence + "; running the verification checks (" + checkNames(checks) + ")"
		return run.status.save(ctx, p)
	}
	// Saved before the Promotion finishes: a restart between the two writes must not run them again.
	p.Status.Gates = append(p.Status.Gates, results...)
	if err := run.status.save(ctx, p); err != nil {
		return err
	}
	run.r.Checks.forget(p, plugincheck.PhasePostApply, run.now)
	if failed != "" {
		return run.finishFailed(ctx, p, stagecoachv1.ReasonCheckFailed, "landed, but "+failed)
	}
	return run.finishVerified(ctx, p, evidence)
}

// apply writes the version to the applier once. A value there that Stagecoach did not write
// (plan.IsForeignWrite) freezes the Stage instead of being overwritten.
func (a applierRollout) apply(ctx context.Context, run *Run, p *stagecoachv1.Promotion) (bool, error) {
	stage, digest := run.stage, p.Status.Version.Digest
	if takes := a.applier.Takes(run.obj); takes != applier.AnyVersion && takes != applier.KindOf(digest) {
		return false, run.status.finish(ctx, p, stagecoachv1.PhaseFailed, fmt.Sprintf("not applied: %s '%s' takes %s, and %s is not one: promote a version of Stage %s's source",
			run.obj.GetKind(), run.obj.GetName(), takes, digest, stage.Name))
	}
	current := a.applier.Revision(run.obj)
	if plan.IsForeignWrite(stage, run.promotions, current, digest) {
		msg := fmt.Sprintf("%s '%s' runs %q, which Stagecoach did not write: someone else changed it. Check who did, then create an Unfreeze Promotion (stagecoach unfreeze -n %s --stage %s) and promote again",
			run.obj.GetKind(), run.obj.GetName(), current, stage.Namespace, stage.Name)
		run.setFrozen(stagecoachv1.ReasonForeignWrite, msg)
		// Saved before the Promotion finishes (as control does): an Aborted Promotion is never run
		// again, so a Stage write lost after it (a conflict under load) would lose the Frozen
		// condition, and the next promote would write over the foreign value.
		if err := run.commit(ctx); err != nil {
			return false, err
		}
		run.event(stage, corev1.EventTypeWarning, stagecoachv1.EventFrozen, "%s", msg)
		run.engineEvent(p, corev1.EventTypeWarning, stagecoachv1.EventFrozen, msg)
		return false, run.status.finish(ctx, p, stagecoachv1.PhaseAborted, "not applied: "+msg)
	}
	// The previous Promotion's phase annotation first, so that the annotations keep their order.
	if err := run.flushAnnotations(ctx); err != nil {
		return false, err
	}
	if current == digest {
		// Written before a restart: writing again would only wake the engine for nothing.
		stage.Status.LastAppliedDigest = digest
		return true, run.annotate(ctx, p, stagecoachv1.PhaseRunning)
	}
	// A chart given by version: its tag must name the digest where the engine pulls it
	// (chart.go); a Rollback, which skips the gates, too.
	if refused, err := run.checkTagBeforeWrite(ctx, a.applier, p); err != nil || refused {
		return false, err
	}
	if err := run.saveAdoption(ctx); err != nil {
		return false, err
	}
	version := applier.Version{Digest: digest, Tag: p.Status.Version.Tag}
	cfg, err := a.applier.ApplyConfiguration(run.obj, version)
	if err != nil {
		return false, fmt.Errorf("failed to render spec.applyRef.set of Stage %q for %s: %w", run.stage.Name, version.Digest, err)
	}
	if cfg != nil {
		return run.applyServerSide(ctx, p, cfg, version)
	}
	orig := annotationBase(run.obj)
	if err := a.applier.SetRevision(run.obj, version, run.now); err != nil {
		return false, err
	}
	setPromotionAnnotations(run.obj, p, stagecoachv1.PhaseRunning)
	// Only over the object as read: a value someone wrote since (not in the cache yet) must be
	// seen, and judged a foreign write, not silently overwritten.
	if err := run.r.Patch(ctx, run.obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		// Not recorded: the applier still holds the value known before, not someone else's.
		if apierrors.IsConflict(err) {
			return false, fmt.Errorf("%s %q changed since it was read, so %s was not written over it; reading it again: %w",
				run.obj.GetKind(), run.obj.GetName(), digest, err)
		}
		return false, fmt.Errorf("failed to apply %s to %s %q: %w", digest, run.obj.GetKind(), run.obj.GetName(), err)
	}
	// Record the write on the Stage before anything else, so it is never taken for someone else's.
	stage.Status.LastAppliedDigest = digest
	return true, run.commit(ctx)
}

// applyServerSide writes the version's fields with Stagecoach's field manager, taking them over
// from whoever set them before (the Stage owns them from now on).
func (run *Run) applyServerSide(ctx context.Context, p *stagecoachv1.Promotion, cfg *unstructured.Unstructured, v applier.Version) (bool, error) {
	if err := run.r.Patch(ctx, cfg, client.Apply, client.FieldOwner(applier.FieldManager), client.ForceOwnership, client.FieldValidation("Strict")); err != nil {
		return false, fmt.Errorf("failed to apply %s to %s %q: %w", v.Digest, run.obj.GetKind(), run.obj.GetName(), err)
	}
	run.stage.Status.LastAppliedDigest = v.Digest
	if err := run.commit(ctx); err != nil {
		return false, err
	}
	run.obj = cfg // the object as the API server returned it
	return true, run.annotate(ctx, p, stagecoachv1.PhaseRunning)
}

// saveAdoption writes the Stage's status if it holds a takeover not saved yet: the baseline is
// saved before anything is written over it, so that a crash in between never takes the old value
// for someone else's, nor loses what the Stage took over.
// A takeover recorded in this pass is stamped with this pass's time (adopt); committing again
// after it was saved writes nothing.
func (run *Run) saveAdoption(ctx context.Context) error {
	if adopted := run.stage.Status.Adopted; adopted == nil || !adopted.At.Time.Equal(run.now) {
		return nil
	}
	return run.commit(ctx)
}
