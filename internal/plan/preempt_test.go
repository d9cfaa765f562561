package plan

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// A waiting Rollback preempts a running promote; nothing else preempts, and a running Rollback is
// never preempted (issue 53 item 1).
func TestQueuePreempts(t *testing.T) {
	p := func(name string, action stagecoachv1.PromotionAction, phase stagecoachv1.Phase, second int) stagecoachv1.Promotion {
		return stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.Unix(int64(1_800_000_000+second), 0)},
			Spec: stagecoachv1.PromotionSpec{Action: action}, Status: stagecoachv1.PromotionStatus{Phase: phase}}
	}
	rollbackOf := func(rb stagecoachv1.Promotion, failed string) stagecoachv1.Promotion {
		rb.Annotations = map[string]string{stagecoachv1.RollbackOfAnnotation: failed}
		return rb
	}
	for _, tc := range []struct {
		name       string
		promotions []stagecoachv1.Promotion
		want       string // the preempted Promotion's name; "" for none
		wantNext   string
	}{
		{name: "a Rollback behind a running promote", promotions: []stagecoachv1.Promotion{
			p("v2", stagecoachv1.ActionPromote, stagecoachv1.PhaseRunning, 1), p("rb", stagecoachv1.ActionRollback, "", 2)}, want: "v2", wantNext: "rb"},
		{name: "a promote behind a running promote waits", promotions: []stagecoachv1.Promotion{
			p("v2", stagecoachv1.ActionPromote, stagecoachv1.PhaseRunning, 1), p("v3", stagecoachv1.ActionPromote, "", 2)}, wantNext: "v3"},
		{name: "a Rollback behind a running Rollback waits", promotions: []stagecoachv1.Promotion{
			p("rb1", stagecoachv1.ActionRollback, stagecoachv1.PhaseRunning, 1), p("rb2", stagecoachv1.ActionRollback, "", 2)}, wantNext: "rb2"},
		{name: "the automatic Rollback of the running promote does not preempt it", promotions: []stagecoachv1.Promotion{
			p("v2", stagecoachv1.ActionPromote, stagecoachv1.PhaseRunning, 1), rollbackOf(p("v2-rollback", stagecoachv1.ActionRollback, "", 2), "v2")},
			wantNext: "v2-rollback"},
		{name: "a Rollback with nothing running starts", promotions: []stagecoachv1.Promotion{
			p("v2", stagecoachv1.ActionPromote, stagecoachv1.PhaseFailed, 1), p("rb", stagecoachv1.ActionRollback, "", 2)}, wantNext: "rb"},
		{name: "a Rollback ahead of a waiting promote preempts the running one", promotions: []stagecoachv1.Promotion{
			p("v2", stagecoachv1.ActionPromote, stagecoachv1.PhaseRunning, 1), p("v3", stagecoachv1.ActionPromote, "", 2),
			p("rb", stagecoachv1.ActionRollback, "", 3)}, want: "v2", wantNext: "rb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			q := Queue(tc.promotions)
			if tc.want == "" {
				g.Expect(q.Preempted).To(BeNil())
			} else {
				g.Expect(q.Preempted).NotTo(BeNil())
				g.Expect(q.Preempted.Name).To(Equal(tc.want))
			}
			g.Expect(q.Next).NotTo(BeNil())
			g.Expect(q.Next.Name).To(Equal(tc.wantNext))
		})
	}
}

// Which running promotes a newer Promotion replaces (spec.promotion.supersede).
func TestSupersedable(t *testing.T) {
	landed := metav1.Now()
	auto := func(p stagecoachv1.Promotion) stagecoachv1.Promotion {
		p.Labels = map[string]string{stagecoachv1.AutomaticLabel: "true"}
		return p
	}
	promote := stagecoachv1.Promotion{Spec: stagecoachv1.PromotionSpec{Action: stagecoachv1.ActionPromote}, Status: stagecoachv1.PromotionStatus{Phase: stagecoachv1.PhaseRunning}}
	landedPromote := promote
	landedPromote.Status.LandedAt = &landed
	rollback := stagecoachv1.Promotion{Spec: stagecoachv1.PromotionSpec{Action: stagecoachv1.ActionRollback}, Status: stagecoachv1.PromotionStatus{Phase: stagecoachv1.PhaseRunning}}
	for _, tc := range []struct {
		name    string
		policy  stagecoachv1.SupersedePolicy
		running stagecoachv1.Promotion
		want    bool
	}{
		{name: "automation's, by default", running: auto(promote), want: true},
		{name: "a person's, by default", running: promote},
		{name: "a person's, All", policy: stagecoachv1.SupersedeAll, running: promote, want: true},
		{name: "automation's, Never", policy: stagecoachv1.SupersedeNever, running: auto(promote)},
		{name: "landed, All", policy: stagecoachv1.SupersedeAll, running: auto(landedPromote)},
		{name: "a Rollback, All", policy: stagecoachv1.SupersedeAll, running: auto(rollback)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stage := &stagecoachv1.Stage{Spec: stagecoachv1.StageSpec{Promotion: &stagecoachv1.PromotionPolicy{Supersede: tc.policy}}}
			running := tc.running
			NewWithT(t).Expect(Supersedable(stage, &running)).To(Equal(tc.want))
		})
	}
}
