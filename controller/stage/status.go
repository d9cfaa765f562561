package stage

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
)

// stageStatusWriter is the Stage's one status writer: commit stamps what the reconcile handled,
// patches the status when it changed, and emits an event when Ready changed.
type stageStatusWriter struct {
	r      *Reconciler
	stage  *stagecoachv1.Stage
	before *stagecoachv1.Stage
}

func (w *stageStatusWriter) commit(ctx context.Context) error {
	stage, before := w.stage, w.before
	stage.Status.ObservedGeneration = stage.Generation
	summarizeHold(stage)
	summarizeSource(stage)
	keepTransitionTimes(stage, before)
	if v, ok := stage.Annotations[stagecoachv1.ReconcileRequestAnnotation]; ok {
		stage.Status.LastHandledReconcileAt = v
	}
	if equality.Semantic.DeepEqual(before.Status, stage.Status) {
		return nil
	}
	if err := w.r.Status().Patch(ctx, stage, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("failed to patch the status of Stage %q: %w", stage.Name, err)
	}
	w.before = stage.DeepCopy()
	old := meta.FindStatusCondition(before.Status.Conditions, stagecoachv1.ConditionReady)
	now := meta.FindStatusCondition(stage.Status.Conditions, stagecoachv1.ConditionReady)
	// A Stage found ready at its first reconcile is not news (its status says so): 5,000 Stages
	// would make 5,000 Events at every new install. A problem found then is.
	firstReady := old == nil && now != nil && now.Status == metav1.ConditionTrue
	if now != nil && !firstReady && (old == nil || old.Status != now.Status || old.Reason != now.Reason) {
		eventType := corev1.EventTypeNormal
		if now.Status != metav1.ConditionTrue {
			eventType = corev1.EventTypeWarning
		}
		w.r.Events.Eventf(stage, nil, eventType, now.Reason, stagecoachv1.EventActionReconcile, "%s", now.Message)
	}
	return nil
}

// setCondition sets one condition of the Stage for its current generation.
func setCondition(stage *stagecoachv1.Stage, condType string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&stage.Status.Conditions, metav1.Condition{
		Type: condType, Status: status, Reason: reason, Message: message, ObservedGeneration: stage.Generation,
	})
}

// summarizeHold keeps Stalled=True (reason Held) while automation holds after a failure, so that
// kstatus and people see a Stage that will not move by itself; a Stalled the applier check set
// (a spec a person must fix) comes first.
func summarizeHold(stage *stagecoachv1.Stage) {
	stalled := meta.FindStatusCondition(stage.Status.Conditions, stagecoachv1.ConditionStalled)
	switch h := stage.Status.Hold; {
	case stalled != nil && stalled.Reason != stagecoachv1.ReasonHeld:
	case h != nil:
		setCondition(stage, stagecoachv1.ConditionStalled, metav1.ConditionTrue, stagecoachv1.ReasonHeld, h.Message)
	default:
		meta.RemoveStatusCondition(&stage.Status.Conditions, stagecoachv1.ConditionStalled)
	}
}

// summarizeSource turns Ready False while the Stage's source cannot be read: a Stage that cannot
// learn of new versions is not ready, whatever its applier says.
func summarizeSource(stage *stagecoachv1.Stage) {
	ready := meta.FindStatusCondition(stage.Status.Conditions, stagecoachv1.ConditionReady)
	b := plan.SourceUnreadable(stage.Status.Candidate)
	if ready == nil || ready.Status != metav1.ConditionTrue || b == nil {
		return
	}
	what := "read its source"
	switch b.Gate {
	case stagecoachv1.GateSignature:
		what = "verify signatures"
	case stagecoachv1.GateAttestations:
		what = "verify attestations"
	}
	setCondition(stage, stagecoachv1.ConditionReady, metav1.ConditionFalse, b.Reason,
		fmt.Sprintf("Stage %s cannot %s: %s", stage.Name, what, b.Message))
}

// keepTransitionTimes keeps each condition's lastTransitionTime when its status is what it was
// at the start of the reconcile: steps that set a condition one way and a later summary the other
// way must not make a transition (and a status write) of every reconcile.
func keepTransitionTimes(stage, before *stagecoachv1.Stage) {
	for i := range stage.Status.Conditions {
		c := &stage.Status.Conditions[i]
		if old := meta.FindStatusCondition(before.Status.Conditions, c.Type); old != nil && old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
	}
}
