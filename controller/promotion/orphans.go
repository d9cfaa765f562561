package promotion

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
)

// ForgetStage drops what the runner keeps of a deleted Stage: its metric series, its attestation
// backoff and its checks' runs (they stop).
func (r *Runner) ForgetStage(stage client.ObjectKey) {
	if r.Observer != nil {
		r.Observer.Forget(stage.Namespace, stage.Name)
	}
	r.attestFailures.Delete(stage)
	r.Checks.Retain(stage, nil)
}

// Orphans says on the unfinished Promotions of a Stage that does not exist what becomes of them
// (plan.Orphaned): they wait for it, or end Aborted when it was deleted under them. A Promotion
// naming a missing Stage is mapped to this Stage's key by the Promotion watch, so it comes here.
func (r *Runner) Orphans(ctx context.Context, stage client.ObjectKey) error {
	promotions, err := List(ctx, r, stage)
	if err != nil {
		return fmt.Errorf("missing Stage: %w", err)
	}
	status := promotionStatus{c: r.Client, now: r.clock().Now()}
	for i := range promotions {
		p := &promotions[i]
		phase, message, write := plan.Orphaned(p, stage)
		if !write {
			continue
		}
		status.track(p)
		if phase == stagecoachv1.PhaseAborted {
			err = status.finish(ctx, p, phase, message)
		} else {
			err = status.markWaiting(ctx, p, message)
		}
		if client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}
