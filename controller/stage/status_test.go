package stage

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// The applier check clears Stalled on every reconcile and the status writer's summaries restore
// what still holds (a hold, an unreadable source) with its old transition time: a reconcile that
// changes nothing changes no status.
func TestStatusSummariesWriteNothingNew(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	hold := &stagecoachv1.AutomationHold{Reason: stagecoachv1.ReasonPromotionFailed, Message: "held: promote by hand"}
	unreachable := &stagecoachv1.CandidateVersion{BlockedBy: []stagecoachv1.GateBlock{{Gate: stagecoachv1.GateSource,
		Reason: stagecoachv1.ReasonRegistryUnreachable, Message: "cannot reach registry"}}}
	for _, tc := range []struct {
		name       string
		status     stagecoachv1.StageStatus
		wantReady  string
		wantStalls bool
	}{
		{name: "held", status: stagecoachv1.StageStatus{Hold: hold}, wantReady: stagecoachv1.ReasonApplierReady, wantStalls: true},
		{name: "source unreadable", status: stagecoachv1.StageStatus{Candidate: unreachable}, wantReady: stagecoachv1.ReasonRegistryUnreachable},
		{name: "neither", wantReady: stagecoachv1.ReasonApplierReady},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Name: "prod", Generation: 1}, Status: tc.status}
			reconcileOnce := func(before *stagecoachv1.Stage) *stagecoachv1.Stage {
				s := before.DeepCopy()
				applierVerdict{ready: true, reason: stagecoachv1.ReasonApplierReady, message: "readable"}.apply(s)
				summarizeHold(s)
				summarizeSource(s)
				keepTransitionTimes(s, before)
				return s
			}
			first := reconcileOnce(stage)
			for i := range first.Status.Conditions {
				first.Status.Conditions[i].LastTransitionTime = then // as stored a while ago
			}
			g.Expect(meta.FindStatusCondition(first.Status.Conditions, stagecoachv1.ConditionReady).Reason).To(Equal(tc.wantReady))
			g.Expect(meta.IsStatusConditionTrue(first.Status.Conditions, stagecoachv1.ConditionStalled)).To(Equal(tc.wantStalls))
			second := reconcileOnce(first)
			g.Expect(equality.Semantic.DeepEqual(first.Status, second.Status)).To(BeTrue(), "a second reconcile changed the status: %v", second.Status.Conditions)
		})
	}
}

// A Stage ready at its first reconcile writes its status once and says nothing; a problem, or a
// change of Ready afterwards, is an Event.
func TestReadyEventsOnlyForNews(t *testing.T) {
	ready := metav1.Condition{Type: stagecoachv1.ConditionReady, Status: metav1.ConditionTrue, Reason: stagecoachv1.ReasonApplierReady, Message: "readable"}
	unlabelled := metav1.Condition{Type: stagecoachv1.ConditionReady, Status: metav1.ConditionFalse, Reason: stagecoachv1.ReasonApplierUnlabelled, Message: "add the label"}
	for _, tc := range []struct {
		name       string
		before     []metav1.Condition
		after      metav1.Condition
		wantEvents int
	}{
		{name: "ready at the first reconcile", after: ready, wantEvents: 0},
		{name: "a problem at the first reconcile", after: unlabelled, wantEvents: 1},
		{name: "ready after a problem", before: []metav1.Condition{unlabelled}, after: ready, wantEvents: 1},
		{name: "a problem after ready", before: []metav1.Condition{ready}, after: unlabelled, wantEvents: 1},
		{name: "still ready", before: []metav1.Condition{ready}, after: ready, wantEvents: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			scheme := runtime.NewScheme()
			g.Expect(stagecoachv1.AddToScheme(scheme)).To(Succeed())
			stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Name: "payments", Namespace: "prod", Generation: 1}}
			for _, c := range tc.before {
				c.ObservedGeneration = stage.Generation
				meta.SetStatusCondition(&stage.Status.Conditions, c)
			}
			stage.Status.ObservedGeneration = stage.Generation
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(stage).WithStatusSubresource(&stagecoachv1.Stage{}).Build()
			recorder := events.NewFakeRecorder(10)
			r := &Reconciler{Client: c, Events: recorder}
			g.Expect(c.Get(t.Context(), client.ObjectKeyFromObject(stage), stage)).To(Succeed())
			w := &stageStatusWriter{r: r, stage: stage, before: stage.DeepCopy()}
			setCondition(stage, tc.after.Type, tc.after.Status, tc.after.Reason, tc.after.Message)
			g.Expect(w.commit(t.Context())).To(Succeed())
			g.Expect(recorder.Events).To(HaveLen(tc.wantEvents))
		})
	}
}
