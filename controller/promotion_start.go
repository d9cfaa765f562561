package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
	plugincheck "github.com/stagecoach-dev/stagecoach/plugin/check"
)

// start admits the next waiting Promotion (plan.Admit), runs the gate chain and the checks
// before apply for a promote, and marks it Running; otherwise it says in its status why it waits,
// or finishes it when it cannot run at all.
func (run *promotionRun) start(ctx context.Context, p *stagecoachv1.Promotion) (bool, error) {
	stage := run.stage
	admission := plan.Admit(stage, p, run.freezes)
	switch {
	case admission.Wait != "":
		return false, run.status.markWaiting(ctx, p, admission.Wait)
	case admission.Fail != "":
		return false, run.status.finish(ctx, p, stagecoachv1.PhaseFailed, admission.Fail)
	}

	var gates []stagecoachv1.GateResult
	if admission.RunGates {
		blocks, results, refused, err := run.applyGates(ctx, p.Spec.Version.Digest, p.Spec.BreakGlass)
		switch {
		case err != nil:
			return false, err
		case refused != "":
			return false, run.status.finish(ctx, p, stagecoachv1.PhaseFailed, "not applied: "+refused)
		}
		if len(blocks) > 0 {
			run.gateEnds = plan.BlocksEnd(blocks, run.now)
			return false, run.status.markWaiting(ctx, p, plan.WaitingForGates(blocks))
		}
		gates = results
		if checks := stage.GetPreApplyChecks(); len(checks) > 0 {
			results, failed, done := run.runChecks(p, checks, plugincheck.PhasePreApply)
			if !done {
				return false, run.status.markWaiting(ctx, p, "waiting: running the checks before apply ("+checkNames(checks)+")")
			}
			run.r.checks.forget(p, plugincheck.PhasePreApply)
			gates = append(gates, results...)
			if failed != "" {
				run.event(p, corev1.EventTypeWarning, stagecoachv1.EventCheckFailed, "Promotion %s not applied: %s", p.Name, failed)
				p.Status.Gates = gates
				return false, run.status.finish(ctx, p, stagecoachv1.PhaseFailed, "not applied: "+failed)
			}
		}
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
	return true, run.status.markRunning(ctx, p, admission.Version, gates, message)
}
