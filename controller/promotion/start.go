package promotion

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
)

// start admits the next waiting Promotion (plan.Admit), runs the gate chain for a promote (the
// checks before apply are its last gate), and marks it Running; otherwise it says in its status
// why it waits, or finishes it when it cannot run at all. opensIn, when it waits on a gate that
// opens by itself (soak, a window), is how soon that gate opens (0: none will).
func (run *Run) start(ctx context.Context, p *stagecoachv1.Promotion) (started bool, opensIn time.Duration, err error) {
	stage := run.stage
	admission := plan.Admit(stage, p, run.freezes)
	switch {
	case admission.Wait != "":
		return false, 0, run.status.markWaiting(ctx, p, admission.Wait)
	case admission.Fail != "":
		return false, 0, run.status.finish(ctx, p, stagecoachv1.PhaseFailed, admission.Fail)
	}

	var gates []stagecoachv1.GateResult
	if admission.RunGates {
		blocks, results, refused, err := run.applyGates(ctx, p)
		switch {
		case err != nil:
			return false, 0, err
		case refused != "":
			if slices.ContainsFunc(results, failedCheck) {
				run.event(p, corev1.EventTypeWarning, stagecoachv1.EventCheckFailed, "Promotion %s not applied: %s", p.Name, refused)
			}
			p.Status.Gates = results
			return false, 0, run.status.finish(ctx, p, stagecoachv1.PhaseFailed, "not applied: "+refused)
		case len(blocks) > 0:
			return false, plan.BlocksEnd(blocks, run.now), run.status.markWaiting(ctx, p, plan.WaitingForGates(blocks))
		}
		gates = results
	}

	if admission.Resumes {
		stage.Status.Hold = nil
		stage.Status.AutomaticRollbacks = 0
	}
	message := "started"
	if admission.BreakGlass != "" {
		message = admission.BreakGlass
		// Said once, when it starts (not while other gates still hold it), and kept on the
		// Promotion for good: the message moves on, the condition stays.
		run.event(stage, corev1.EventTypeWarning, stagecoachv1.EventBreakGlass, "Promotion %s %s", p.Name, admission.BreakGlass)
		meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: stagecoachv1.PromotionConditionBreakGlass,
			Status: metav1.ConditionTrue, Reason: stagecoachv1.ReasonPassedByBreakGlass, ObservedGeneration: p.Generation,
			Message: fmt.Sprintf("%s %s (reason: %s)", p.Spec.RequestedBy, admission.BreakGlass, p.Spec.Reason)})
	}
	return true, 0, run.status.markRunning(ctx, p, admission.Version, gates, message)
}

// failedCheck: a check's verdict that failed.
func failedCheck(r stagecoachv1.GateResult) bool {
	return !r.Passed && strings.HasPrefix(r.Gate, stagecoachv1.GateCheckPrefix)
}
