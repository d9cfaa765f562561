package promotion

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
)

// Orphans says on the unfinished Promotions of a Stage that does not exist what becomes of them
// (plan.Orphaned): they wait for it, or end Aborted when it was deleted under them. A Promotion
// naming a missing Stage is mapped to this Stage's key by the Promotion watch, so it comes here.
func (r *Runner) Orphans(ctx context.Context, stage client.ObjectKey) error {
	if r.Observer != nil {
		r.Observer.Forget(stage.Namespace, stage.Name) // a deleted Stage's series go with it
	}
	r.attestFailures.Delete(stage) // and its attestation backoff
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
