package promotion

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
)

// The Stage's status is committed before a Promotion finishes: a crash between the two writes
// then finds the Promotion still running and finishes it again, and the history entry (keyed by
// Promotion) is not added twice. A verified Promotion's phase annotation on the applier follows
// its result (annotations.go); a failed one's precedes it.

// finishVerified finishes a Promotion whose version held: the Stage runs it now.
func (run *Run) finishVerified(ctx context.Context, p *stagecoachv1.Promotion, evidence string) error {
	stage, v := run.stage, p.Status.Version
	now := metav1.NewTime(run.now)
	stage.Status.Current = &stagecoachv1.CurrentVersion{Version: v.Tag, Digest: v.Digest, PromotedAt: p.Status.AppliedAt,
		VerifiedAt: &now, Promotion: p.Name}
	plan.AddHistory(&stage.Status, run.historyEntry(p, stagecoachv1.PhaseSucceeded))
	if failed := p.Annotations[stagecoachv1.RollbackOfAnnotation]; failed != "" {
		// Until the next verified promote, Verified says that what runs was restored, and from what.
		run.setStageCondition(stagecoachv1.ConditionVerified, metav1.ConditionTrue, stagecoachv1.ReasonRolledBack,
			fmt.Sprintf("rolled back: Promotion %s failed, and %s was restored and verified: %s", failed, versionString(v), evidence))
	} else {
		run.setStageCondition(stagecoachv1.ConditionVerified, metav1.ConditionTrue, stagecoachv1.ReasonVerified, fmt.Sprintf("%s verified: %s", versionString(v), evidence))
	}
	run.setPromotingIdle()
	if err := run.commit(ctx); err != nil {
		return err
	}
	if original := p.Annotations[stagecoachv1.RollbackOfAnnotation]; original != "" {
		if err := run.markRolledBack(ctx, original, p.Name); err != nil {
			return err
		}
	}
	p.Status.VerifiedAt = &now
	msg := fmt.Sprintf("%s verified in %s", versionString(v), stage.Name)
	run.announce(p, corev1.EventTypeNormal, stagecoachv1.EventVerified, msg, msg)
	if err := run.status.finish(ctx, p, stagecoachv1.PhaseSucceeded, "verified: "+evidence); err != nil {
		return err
	}
	// After the result, not before it: see annotations.go.
	return run.annotateVerified(ctx, p)
}

// finishFailed finishes a failed Promotion: the version is never offered automatically again,
// automation holds, and a failed promote rolls back to the last verified version (plan.RollsBack).
func (run *Run) finishFailed(ctx context.Context, p *stagecoachv1.Promotion, reason, message string) error {
	stage, v := run.stage, p.Status.Version
	// A retry after the Stage's status was committed but the Promotion's was not: the rollback
	// was decided (and counted) then, so it is only named again, never created or counted twice.
	retry := plan.InHistory(&stage.Status, p.Name)
	plan.RecordFailedDigest(&stage.Status, p)
	plan.AddHistory(&stage.Status, run.historyEntry(p, stagecoachv1.PhaseFailed))
	stage.Status.Hold = &stagecoachv1.AutomationHold{Reason: plan.HoldReason(p), Promotion: p.Name, Since: metav1.NewTime(run.now),
		Message: fmt.Sprintf("automatic promotion is held since %s failed (%s): promote a version by hand to resume", p.Name, reason)}
	run.setStageCondition(stagecoachv1.ConditionVerified, metav1.ConditionFalse, reason, fmt.Sprintf("%s failed: %s", versionString(v), message))

	var rollback *stagecoachv1.Promotion
	switch {
	case retry:
		var err error
		if rollback, err = run.existingRollback(ctx, p); err != nil {
			return err
		}
	case plan.RollsBack(stage, p):
		// Created before the count is committed: a retry after a failed create or a crash decides
		// from the same count, and finds the Rollback by its name if it exists.
		rollback = run.rollbackFor(p)
		if err := run.r.Create(ctx, rollback); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("failed to create Rollback Promotion %q for Stage %q: %w", rollback.Name, stage.Name, err)
		}
		stage.Status.AutomaticRollbacks++
	}
	if rollback != nil {
		message += fmt.Sprintf("; rolling back to %s with Promotion %s", versionString(rollback.Spec.Version), rollback.Name)
	}
	if err := run.commit(ctx); err != nil {
		return err
	}
	if err := run.annotate(ctx, p, stagecoachv1.PhaseFailed); err != nil {
		return err
	}
	msg := fmt.Sprintf("%s failed in %s: %s", versionString(v), stage.Name, message)
	run.announce(p, corev1.EventTypeWarning, stagecoachv1.EventPromotionFailed, msg, msg)
	return run.status.finish(ctx, p, stagecoachv1.PhaseFailed, message)
}

func (run *Run) historyEntry(p *stagecoachv1.Promotion, phase stagecoachv1.Phase) stagecoachv1.HistoryEntry {
	now := metav1.NewTime(run.now)
	return stagecoachv1.HistoryEntry{Version: p.Status.Version.Tag, Digest: p.Status.Version.Digest, Action: p.Spec.Action,
		Phase: phase, Promotion: p.Name, PromotedAt: p.Status.AppliedAt, FinishedAt: &now}
}

// rollbackFor builds the Rollback Promotion of a failed one, named after it so that a retry after
// a crash finds it instead of creating a second.
func (run *Run) rollbackFor(p *stagecoachv1.Promotion) *stagecoachv1.Promotion {
	cur := run.stage.Status.Current
	rb := &stagecoachv1.Promotion{
		ObjectMeta: metav1.ObjectMeta{
			Name: truncateName(p.Name, "-rollback"), Namespace: p.Namespace,
			Labels:      map[string]string{stagecoachv1.PromotionStageLabel: run.stage.Name},
			Annotations: map[string]string{stagecoachv1.RollbackOfAnnotation: p.Name},
		},
		// The controller names itself, as for automatic promotions: the promotion-requester-guard
		// admission policy refuses a Promotion whose requestedBy is not its creator.
		Spec: stagecoachv1.PromotionSpec{Stage: run.stage.Name, Action: stagecoachv1.ActionRollback, RequestedBy: run.r.Identity,
			Version: &stagecoachv1.VersionReference{Digest: cur.Digest, Tag: cur.Version},
			Reason:  fmt.Sprintf("automatic rollback after %s failed", p.Name)},
	}
	_ = controllerutil.SetOwnerReference(run.stage, rb, run.r.Scheme())
	return rb
}

// existingRollback is the Rollback Promotion created for a failed one, read live (the cache may
// not have it yet); nil when there is none.
func (run *Run) existingRollback(ctx context.Context, failed *stagecoachv1.Promotion) (*stagecoachv1.Promotion, error) {
	rb := &stagecoachv1.Promotion{}
	key := client.ObjectKey{Namespace: failed.Namespace, Name: truncateName(failed.Name, "-rollback")}
	if err := run.r.Get(ctx, key, rb); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("failed to read Rollback Promotion %q for Stage %q: %w", key.Name, run.stage.Name, err)
	}
	if rb.Annotations[stagecoachv1.RollbackOfAnnotation] != failed.Name || rb.Spec.Version == nil {
		return nil, nil
	}
	return rb, nil
}

// markRolledBack records on the failed Promotion that its rollback succeeded.
func (run *Run) markRolledBack(ctx context.Context, name, by string) error {
	p := &stagecoachv1.Promotion{}
	if err := run.r.Get(ctx, client.ObjectKey{Namespace: run.stage.Namespace, Name: name}, p); err != nil {
		return client.IgnoreNotFound(err)
	}
	if p.Status.Phase == stagecoachv1.PhaseRolledBack {
		return nil
	}
	run.status.track(p)
	p.Status.Phase = stagecoachv1.PhaseRolledBack
	p.Status.Message = fmt.Sprintf("rolled back by %s: %s", by, p.Status.Message)
	run.announce(p, corev1.EventTypeNormal, stagecoachv1.EventRolledBack, fmt.Sprintf("Stage %s rolled back by %s", run.stage.Name, by),
		fmt.Sprintf("Stage %s rolled back from %s by %s", run.stage.Name, versionString(p.Status.Version), by))
	return run.status.save(ctx, p)
}
