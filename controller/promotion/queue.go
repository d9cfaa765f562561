package promotion

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
	"github.com/stagecoach-dev/stagecoach/internal/waves"
)

// queue decides which Promotion runs (plan.Queue) and acts on the rest: Freeze and Unfreeze
// Promotions take effect at once, and waiting automatic Promotions that a newer one replaces are
// aborted. It returns the running Promotion and the next to start.
func (run *Run) queue(ctx context.Context) (running, next *stagecoachv1.Promotion, err error) {
	q := plan.Queue(run.promotions)
	if err := run.runControls(ctx, &q); err != nil {
		return nil, nil, err
	}
	if q.Preempted != nil && q.Running == q.Preempted {
		if err := run.preempt(ctx, q.Preempted, q.Next); err != nil {
			return nil, nil, err
		}
		q.Running = nil
	}
	for _, p := range q.Superseded {
		if err := run.status.finish(ctx, p, stagecoachv1.PhaseAborted, fmt.Sprintf("superseded by a newer automatic Promotion of Stage %s", run.stage.Name)); err != nil {
			return nil, nil, err
		}
		run.event(p, corev1.EventTypeNormal, stagecoachv1.EventSuperseded, "Promotion %s was superseded by a newer automatic one", p.Name)
	}
	// Those whose turn has not come say so (written only when the message changes).
	for _, p := range q.Waiting {
		if msg := q.QueuedMessage(p); msg != "" {
			if err := run.status.markWaiting(ctx, p, msg); err != nil {
				return nil, nil, err
			}
		}
	}
	return q.Running, q.Next, nil
}

// Controls carries out the waiting Abort, Freeze and Unfreeze Promotions alone, for a Stage
// whose applier cannot be used: none of them writes to it.
func (run *Run) Controls(ctx context.Context) error {
	if err := run.listPromotions(ctx); err != nil {
		return err
	}
	q := plan.Queue(run.promotions)
	return run.runControls(ctx, &q)
}

// runControls carries out the queue's Abort, Freeze and Unfreeze Promotions at once. An Abort
// cancels the running Promotion: nothing runs after it in this reconcile.
func (run *Run) runControls(ctx context.Context, q *plan.Queued) error {
	for _, p := range q.Controls {
		if p.Spec.Action == stagecoachv1.ActionAbort {
			if err := run.abort(ctx, p, q.Running); err != nil {
				return err
			}
			q.Running = nil
			continue
		}
		if err := run.control(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// abort carries out an Abort Promotion: the running Promotion ends Aborted with the reason, a
// fleet rollout stops where it is (nothing more is written, nothing is rolled back), and
// automation holds until a person promotes.
func (run *Run) abort(ctx context.Context, a, running *stagecoachv1.Promotion) error {
	stage := run.stage
	if running == nil {
		return run.status.finish(ctx, a, stagecoachv1.PhaseFailed, fmt.Sprintf("nothing to abort: no Promotion of Stage %s is running", stage.Name))
	}
	reason := a.Spec.Reason
	if reason == "" {
		reason = "no reason given"
	}
	msg := fmt.Sprintf("aborted by Promotion %s: %s", a.Name, reason)
	if a.Spec.RequestedBy != "" {
		msg = fmt.Sprintf("aborted by %s with Promotion %s: %s", a.Spec.RequestedBy, a.Name, reason)
	}
	stage.Status.Hold = &stagecoachv1.AutomationHold{Reason: stagecoachv1.ReasonAborted, Promotion: running.Name, Since: metav1.NewTime(run.now),
		Message: fmt.Sprintf("automatic promotion is held since %s was aborted: promote a version by hand to resume", running.Name)}
	if err := run.stop(ctx, running, stagecoachv1.ReasonAborted, msg); err != nil {
		return err
	}
	return run.status.finish(ctx, a, stagecoachv1.PhaseSucceeded, fmt.Sprintf("Promotion %s aborted", running.Name))
}

// preempt stops the running promote for the Rollback waiting behind it (plan.Queued.Preempted):
// it ends Aborted, reason Preempted, naming the Rollback, its open pull request closed and its
// fleet waves stopped, recorded in the Stage's history as aborted (never verified); the Rollback
// then starts in the same reconcile, without waiting for any deadline. The Rollback's author
// needed only the right to create it: that is the right to roll the Stage back.
func (run *Run) preempt(ctx context.Context, running, rollback *stagecoachv1.Promotion) error {
	by := "Rollback " + rollback.Name
	if rollback.Spec.RequestedBy != "" {
		by += " (requested by " + rollback.Spec.RequestedBy + ")"
	}
	msg := fmt.Sprintf("preempted by %s: a rollback does not wait for a promotion to land", by)
	if rollback.Spec.Reason != "" {
		msg += ": " + rollback.Spec.Reason
	}
	return run.stop(ctx, running, stagecoachv1.ReasonPreempted, msg)
}

// newerToStart is the promote that supersedes the running one, when one can start now: the
// waiting Next when its admission and promote gates are open (its checks before apply still run
// when it starts), or else the Promotion automation creates for a newer version (automation
// creates one only when its gates are open). Nil when none can: the running one goes on.
func (run *Run) newerToStart(ctx context.Context, next *stagecoachv1.Promotion) (*stagecoachv1.Promotion, error) {
	if next == nil {
		// Automation looks for a newer version; when it creates none, status.candidate stays
		// what it said while this one ran (its version, what it passed over).
		kept := run.stage.Status.Candidate.DeepCopy()
		created, _, err := run.automate(ctx)
		if created == nil {
			run.stage.Status.Candidate = kept
		}
		return created, err
	}
	if next.Spec.Action != stagecoachv1.ActionPromote || next.Spec.Version == nil {
		return nil, nil
	}
	if a := plan.Admit(run.stage, next, run.freezes); a.Wait != "" || a.Fail != "" {
		return nil, nil
	}
	blocks, _, err := run.promoteGates(ctx, next.Spec.Version.Digest, next.Spec.BreakGlass)
	if err != nil || len(blocks) > 0 {
		return nil, err
	}
	return next, nil
}

// supersede stops the running promote, which has not landed, for a newer one (plan.Supersedable):
// Aborted, superseded, naming the newer Promotion and its version; never verified.
func (run *Run) supersede(ctx context.Context, running, newer *stagecoachv1.Promotion) error {
	msg := fmt.Sprintf("superseded by Promotion %s of %s before it landed (spec.promotion.supersede)", newer.Name, versionString(newer.Spec.Version))
	return run.stop(ctx, running, stagecoachv1.EventSuperseded, msg)
}

// stop ends the running Promotion Aborted with msg (reason is the event's): its open pull
// request closed, its fleet waves stopped, the Stage's history told. The Stage's status (with
// whatever the caller set on it) is saved first, so a lost write cannot lose the stop.
func (run *Run) stop(ctx context.Context, running *stagecoachv1.Promotion, reason, msg string) error {
	stage := run.stage
	digest := ""
	if running.Status.Version != nil {
		digest = running.Status.Version.Digest
	}
	if g, ok := run.rollout.(gitRollout); ok {
		closed, err := g.closeOpen(ctx, run, running)
		if err != nil {
			return fmt.Errorf("failed to close the pull request of Promotion %s: %w", running.Name, err)
		}
		msg += closed
	}
	stage.Status.Waves = waves.Abort(stage.Status.Waves, digest, msg, run.now)
	if running.Status.Version != nil {
		plan.AddHistory(&stage.Status, run.historyEntry(running, stagecoachv1.PhaseAborted))
	}
	if err := run.commit(ctx); err != nil {
		return err
	}
	run.event(running, corev1.EventTypeWarning, reason, "Promotion %s %s", running.Name, msg)
	return run.status.finish(ctx, running, stagecoachv1.PhaseAborted, msg)
}

// control carries out a Freeze or Unfreeze Promotion at once. The Stage's status is saved before
// the Promotion finishes (as abort does): a finished control is never run again, so a Stage write
// lost after it (a conflict under load) would lose the Freeze or Unfreeze for good; run again,
// either is idempotent.
func (run *Run) control(ctx context.Context, p *stagecoachv1.Promotion) error {
	stage := run.stage
	if p.Spec.Action == stagecoachv1.ActionFreeze {
		run.setFrozen(stagecoachv1.ReasonFrozenByPromotion, fmt.Sprintf("frozen by Promotion %s: %s", p.Name, p.Spec.Reason))
		if err := run.commit(ctx); err != nil {
			return err
		}
		run.event(stage, corev1.EventTypeNormal, stagecoachv1.EventFrozen, "Stage %s frozen by Promotion %s", stage.Name, p.Name)
		return run.status.finish(ctx, p, stagecoachv1.PhaseSucceeded, "the Stage is frozen")
	}
	run.setStageCondition(stagecoachv1.ConditionFrozen, metav1.ConditionFalse, stagecoachv1.ReasonUnfrozen, fmt.Sprintf("unfrozen by Promotion %s", p.Name))
	message := "the Stage is unfrozen"
	// A person looked at what someone else wrote to the applier and accepts it: the next
	// promote may write over it.
	// The applier cannot be read now (no rollout): there is nothing written to accept.
	if g, ok := run.rollout.(gitRollout); ok {
		message += g.acceptBranch(run)
	}
	if run.rollout != nil && run.obj != nil {
		if current := run.rollout.revision(run); current != stage.Status.LastAppliedDigest {
			stage.Status.LastAppliedDigest = current
			message += fmt.Sprintf("; %q on %s '%s' is accepted as written", current, run.obj.GetKind(), run.obj.GetName())
		}
	}
	if err := run.commit(ctx); err != nil {
		return err
	}
	return run.status.finish(ctx, p, stagecoachv1.PhaseSucceeded, message)
}

// ExpireRunning fails the running Promotion once its progress deadline has passed while the
// applier cannot be used (why is the applier's problem), and otherwise says when it will.
func (run *Run) ExpireRunning(ctx context.Context, why string) (time.Duration, error) {
	if err := run.listPromotions(ctx); err != nil {
		return 0, err
	}
	p := plan.Queue(run.promotions).Running
	deadline := run.stage.GetProgressDeadline()
	left, started := plan.DeadlineLeft(p, deadline, run.now)
	switch {
	case !started:
		return 0, nil
	case left > 0:
		return left, nil
	}
	return 0, run.finishFailed(ctx, p, stagecoachv1.ReasonDeadlineExceeded, fmt.Sprintf(
		"the version did not land within the progress deadline of %s, and the applier cannot be used: %s", deadline, why))
}

// listPromotions reads the Stage's Promotions (from the cache, by index).
func (run *Run) listPromotions(ctx context.Context) error {
	promotions, err := List(ctx, run.r, client.ObjectKeyFromObject(run.stage))
	if err != nil {
		return err
	}
	run.promotions = promotions
	for i := range run.promotions {
		run.status.track(&run.promotions[i])
	}
	// Check runs of Promotions that are gone or ended some other way are of no use any more.
	unfinished := map[types.UID]bool{}
	for i := range run.promotions {
		if !plan.IsFinished(&run.promotions[i]) {
			unfinished[run.promotions[i].UID] = true
		}
	}
	run.r.Checks.Retain(client.ObjectKeyFromObject(run.stage), unfinished)
	return nil
}
