package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
)

// queue decides which Promotion runs (plan.Queue) and acts on the rest: Freeze and Unfreeze
// Promotions take effect at once, and waiting automatic Promotions that a newer one replaces are
// aborted. It returns the running Promotion and the next to start.
func (run *promotionRun) queue(ctx context.Context) (running, next *stagecoachv1.Promotion, err error) {
	q := plan.Queue(run.promotions)
	for _, p := range q.Controls {
		if p.Spec.Action == stagecoachv1.ActionAbort {
			// Cancels the running Promotion (promotion_waves.go): nothing runs after it.
			if err := run.abort(ctx, p, q.Running); err != nil {
				return nil, nil, err
			}
			q.Running = nil
			continue
		}
		if err := run.control(ctx, p); err != nil {
			return nil, nil, err
		}
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

// controls carries out the waiting Abort, Freeze and Unfreeze Promotions alone, for a Stage
// whose applier cannot be used: none of them writes to it.
func (run *promotionRun) controls(ctx context.Context) error {
	if err := run.listPromotions(ctx); err != nil {
		return err
	}
	q := plan.Queue(run.promotions)
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

// control carries out a Freeze or Unfreeze Promotion at once.
func (run *promotionRun) control(ctx context.Context, p *stagecoachv1.Promotion) error {
	stage := run.stage
	if p.Spec.Action == stagecoachv1.ActionFreeze {
		run.setFrozen(stagecoachv1.ReasonFrozenByPromotion, fmt.Sprintf("frozen by Promotion %s: %s", p.Name, p.Spec.Reason))
		run.event(stage, corev1.EventTypeNormal, stagecoachv1.EventFrozen, "Stage %s frozen by Promotion %s", stage.Name, p.Name)
		return run.status.finish(ctx, p, stagecoachv1.PhaseSucceeded, "the Stage is frozen")
	}
	run.setStageCondition(stagecoachv1.ConditionFrozen, metav1.ConditionFalse, stagecoachv1.ReasonUnfrozen, fmt.Sprintf("unfrozen by Promotion %s", p.Name))
	message := "the Stage is unfrozen"
	// A person looked at what someone else wrote to the applier and accepts it: the next
	// promote may write over it.
	if run.applier == nil || run.obj == nil {
		// The applier cannot be read now: there is nothing written to accept.
		return run.status.finish(ctx, p, stagecoachv1.PhaseSucceeded, message)
	}
	if current := run.applier.Revision(run.obj); current != stage.Status.LastAppliedDigest {
		stage.Status.LastAppliedDigest = current
		message += fmt.Sprintf("; %q on %s '%s' is accepted as written", current, run.obj.GetKind(), run.obj.GetName())
	}
	return run.status.finish(ctx, p, stagecoachv1.PhaseSucceeded, message)
}

// expireRunning fails the running Promotion once its progress deadline has passed while the
// applier cannot be used (why is the applier's problem), and otherwise says when it will.
func (run *promotionRun) expireRunning(ctx context.Context, why string) (time.Duration, error) {
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
