package promotion

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// promotionStatus is the one writer of Promotions' status. Each write is a merge patch of what
// changed since this reconcile last read or wrote the Promotion, with an optimistic lock: a write
// decided from a stale copy fails, and the next reconcile decides again from fresh objects.
//
// Most steps write once, at their end. Two write in the middle, for crash safety: the
// verification checks' verdicts are saved before the Promotion finishes (so a restart does not
// run them again on a verified version), and a Promotion is marked Running before it applies
// (so a restart never applies twice without knowing it). The recorder writes through it too
// (SaveRecord), from copies it reads live.
type promotionStatus struct {
	c   client.Client
	now time.Time
	// saved is each Promotion as last read or written, by UID.
	saved map[types.UID]*stagecoachv1.Promotion
	// observer, when set, learns of each landing and end once it is saved (metrics).
	observer Observer
}

// Observer learns of Promotions that landed or finished, after the write that says so.
type Observer interface {
	Landed(ctx context.Context, p *stagecoachv1.Promotion, seenAt time.Time) error
	Finished(ctx context.Context, p *stagecoachv1.Promotion) error
	// Forget drops what was observed of a Stage that was deleted.
	Forget(namespace, stage string)
	// Follow keeps what was observed of a Stage under its current spec.service and
	// spec.environment (the series of the old values go).
	Follow(stage *stagecoachv1.Stage)
}

// track remembers a Promotion as read from the API server.
func (w *promotionStatus) track(p *stagecoachv1.Promotion) {
	if w.saved == nil {
		w.saved = map[types.UID]*stagecoachv1.Promotion{}
	}
	w.saved[p.UID] = p.DeepCopy()
}

// save patches what changed in p's status since it was last read or written.
func (w *promotionStatus) save(ctx context.Context, p *stagecoachv1.Promotion) error {
	before, ok := w.saved[p.UID]
	if !ok {
		// Never read in this reconcile: send the whole status.
		before = p.DeepCopy()
		before.Status = stagecoachv1.PromotionStatus{}
	}
	p.Status.ObservedGeneration = p.Generation
	if err := w.c.Status().Patch(ctx, p, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("failed to update the status of Promotion %q: %w", p.Name, err)
	}
	landed := before.Status.LandedAt == nil && p.Status.LandedAt != nil
	w.track(p)
	if landed && w.observer != nil {
		if err := w.observer.Landed(ctx, p, w.now); err != nil {
			// Metrics never hold a Promotion back.
			ctrl.LoggerFrom(ctx).Error(err, "failed to observe the landing of a Promotion", "promotion", p.Name)
		}
	}
	return nil
}

// SaveRecord changes what a Promotion says of its record (status.recording, status.record) with
// an optimistic lock, for controller/records. p is a live copy the recorder just read (not one a
// run tracks), so the patch is of what change does to it, and nothing else is written.
func SaveRecord(ctx context.Context, c client.Client, p *stagecoachv1.Promotion, change func(*stagecoachv1.Promotion)) error {
	before := p.DeepCopy()
	change(p)
	if err := c.Status().Patch(ctx, p, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("failed to update the record of Promotion %q: %w", p.Name, err)
	}
	return nil
}

// note says what a running Promotion waits for; it writes only when that changed.
func (w *promotionStatus) note(ctx context.Context, p *stagecoachv1.Promotion, message string) error {
	if p.Status.Message == message {
		return nil
	}
	p.Status.Message = message
	return w.save(ctx, p)
}

// markWaiting says why a Promotion has not started; it writes only when that changed.
func (w *promotionStatus) markWaiting(ctx context.Context, p *stagecoachv1.Promotion, message string) error {
	if p.Status.Phase == stagecoachv1.PhasePending && p.Status.Message == message {
		return nil
	}
	p.Status.Phase = stagecoachv1.PhasePending
	p.Status.Message = message
	return w.save(ctx, p)
}

// markRunning starts a Promotion: from now on it is the one that runs on its Stage.
func (w *promotionStatus) markRunning(ctx context.Context, p *stagecoachv1.Promotion, version *stagecoachv1.VersionReference,
	gates []stagecoachv1.GateResult, message string) error {
	now := metav1.NewTime(w.now)
	p.Status.Phase = stagecoachv1.PhaseRunning
	p.Status.Version = version.DeepCopy()
	p.Status.StartedAt = &now
	p.Status.Gates = gates
	p.Status.Message = message
	return w.save(ctx, p)
}

// finish ends a Promotion in a final phase.
func (w *promotionStatus) finish(ctx context.Context, p *stagecoachv1.Promotion, phase stagecoachv1.Phase, message string) error {
	now := metav1.NewTime(w.now)
	p.Status.Phase = phase
	p.Status.FinishedAt = &now
	p.Status.Message = message
	if err := w.save(ctx, p); err != nil {
		return err
	}
	if w.observer != nil {
		if err := w.observer.Finished(ctx, p); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "failed to observe the end of a Promotion", "promotion", p.Name)
		}
	}
	return nil
}

// Stage conditions the promotion steps own.

func (run *Run) setStageCondition(condType string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&run.stage.Status.Conditions, metav1.Condition{Type: condType, Status: status,
		Reason: reason, Message: message, ObservedGeneration: run.stage.Generation})
}

func (run *Run) setFrozen(reason, message string) {
	run.setStageCondition(stagecoachv1.ConditionFrozen, metav1.ConditionTrue, reason, message)
}

func (run *Run) setPromotingIdle() {
	if run.stage.Spec.Suspend {
		run.setStageCondition(stagecoachv1.ConditionPromoting, metav1.ConditionFalse, stagecoachv1.ReasonSuspended,
			fmt.Sprintf("Stage %s is suspended: no Promotion starts and automation stops until spec.suspend is false", run.stage.Name))
		return
	}
	run.setStageCondition(stagecoachv1.ConditionPromoting, metav1.ConditionFalse, stagecoachv1.ReasonIdle, "no Promotion is running")
}
