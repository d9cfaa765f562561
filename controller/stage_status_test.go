package controller

import (
	"testing"
	"time"

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
