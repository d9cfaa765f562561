package promotion

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

func TestStartStep(t *testing.T) {
	frozen := func(s *stagecoachv1.Stage) {
		s.Status.Conditions = []metav1.Condition{{Type: stagecoachv1.ConditionFrozen, Status: metav1.ConditionTrue,
			Reason: stagecoachv1.ReasonForeignWrite, Message: "someone wrote", LastTransitionTime: metav1.NewTime(stepNow)}}
	}
	approvalsRequired := func(s *stagecoachv1.Stage) {
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Approvals: &stagecoachv1.ApprovalPolicy{Required: 1}}
	}
	verifiedV1 := func(s *stagecoachv1.Stage) {
		at := metav1.NewTime(stepNow.Add(-time.Hour))
		s.Status.Current = &stagecoachv1.CurrentVersion{Version: "v1.0.0", Digest: digestV1, VerifiedAt: &at}
		s.Status.LastAppliedDigest = digestV1
	}
	freeze := &stagecoachv1.Freeze{ObjectMeta: metav1.ObjectMeta{Name: "holidays", Namespace: "prod"},
		Spec: stagecoachv1.FreezeSpec{Reason: "holidays"}}
	for _, tc := range []struct {
		name        string
		fixture     stepFixture
		promotion   string
		wantStarted bool
		wantPhase   stagecoachv1.Phase
		wantMessage string
		wantEvent   string
	}{
		{name: "a promote with every gate open starts",
			fixture:   stepFixture{stage: stepStage(nil), promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, nil)}},
			promotion: "p", wantStarted: true, wantPhase: stagecoachv1.PhaseRunning, wantMessage: "started"},
		{name: "a frozen Stage holds it, saying why",
			fixture:   stepFixture{stage: stepStage(frozen), promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, nil)}},
			promotion: "p", wantPhase: stagecoachv1.PhasePending, wantMessage: "is frozen (someone wrote)"},
		{name: "a missing approval holds it, naming the gate",
			fixture:   stepFixture{stage: stepStage(approvalsRequired), promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, nil)}},
			promotion: "p", wantPhase: stagecoachv1.PhasePending, wantMessage: "waiting: approvals: 0 of 1 approvals for " + digestV2},
		{name: "an approval by someone else lets it start",
			fixture: stepFixture{stage: stepStage(approvalsRequired), promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, nil)},
				approvals: []*stagecoachv1.Approval{{ObjectMeta: metav1.ObjectMeta{Name: "bob", Namespace: "prod"},
					Spec: stagecoachv1.ApprovalSpec{Stage: "payments", Digest: digestV2, Approver: "bob"}}}},
			promotion: "p", wantStarted: true, wantPhase: stagecoachv1.PhaseRunning, wantMessage: "started"},
		{name: "the promoter's own approval does not count",
			fixture: stepFixture{stage: stepStage(approvalsRequired), promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, nil)},
				approvals: []*stagecoachv1.Approval{{ObjectMeta: metav1.ObjectMeta{Name: "alice", Namespace: "prod"},
					Spec: stagecoachv1.ApprovalSpec{Stage: "payments", Digest: digestV2, Approver: "alice"}}}},
			promotion: "p", wantPhase: stagecoachv1.PhasePending, wantMessage: "alice promoted this version by hand in prod/payments and cannot approve it"},
		{name: "a Freeze holds a plain promote",
			fixture:   stepFixture{stage: stepStage(nil), freezes: []*stagecoachv1.Freeze{freeze}, promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, nil)}},
			promotion: "p", wantPhase: stagecoachv1.PhasePending, wantMessage: "Freeze prod/holidays (holidays) holds it"},
		{name: "break-glass passes a Freeze and says so",
			fixture: stepFixture{stage: stepStage(nil), freezes: []*stagecoachv1.Freeze{freeze}, promotions: []*stagecoachv1.Promotion{
				stepPromotion("p", stagecoachv1.ActionPromote, digestV2, func(p *stagecoachv1.Promotion) { p.Spec.BreakGlass = true })}},
			promotion: "p", wantStarted: true, wantPhase: stagecoachv1.PhaseRunning, wantMessage: "started with break-glass although Freeze prod/holidays",
			wantEvent: stagecoachv1.EventBreakGlass},
		{name: "a labelled Promotion is still its requester's: her own approval does not count",
			fixture: stepFixture{stage: stepStage(approvalsRequired), promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2,
				func(p *stagecoachv1.Promotion) { p.Labels = map[string]string{stagecoachv1.AutomaticLabel: "true"} })},
				approvals: []*stagecoachv1.Approval{{ObjectMeta: metav1.ObjectMeta{Name: "alice", Namespace: "prod"},
					Spec: stagecoachv1.ApprovalSpec{Stage: "payments", Digest: digestV2, Approver: "alice"}}}},
			promotion: "p", wantPhase: stagecoachv1.PhasePending, wantMessage: "alice promoted this version by hand in prod/payments and cannot approve it"},
		{name: "a rollback to a digest never verified here is refused, gates or not",
			fixture: stepFixture{stage: stepStage(func(s *stagecoachv1.Stage) { approvalsRequired(s); verifiedV1(s) }),
				promotions: []*stagecoachv1.Promotion{stepPromotion("rb", stagecoachv1.ActionRollback, digestV2, nil)}},
			promotion: "rb", wantPhase: stagecoachv1.PhaseFailed, wantMessage: "was never verified in Stage payments"},
		{name: "a rollback to the last verified version starts without gates",
			fixture: stepFixture{stage: stepStage(func(s *stagecoachv1.Stage) { approvalsRequired(s); verifiedV1(s) }),
				promotions: []*stagecoachv1.Promotion{stepPromotion("rb", stagecoachv1.ActionRollback, digestV1, nil)}},
			promotion: "rb", wantStarted: true, wantPhase: stagecoachv1.PhaseRunning, wantMessage: "started"},
		{name: "a Freeze does not hold a rollback",
			fixture: stepFixture{stage: stepStage(verifiedV1), freezes: []*stagecoachv1.Freeze{freeze},
				promotions: []*stagecoachv1.Promotion{stepPromotion("rb", stagecoachv1.ActionRollback, "", nil)}},
			promotion: "rb", wantStarted: true, wantPhase: stagecoachv1.PhaseRunning, wantMessage: "started"},
		{name: "a cluster-wide Freeze from another namespace than the controller's holds nothing",
			fixture: stepFixture{stage: stepStage(nil), freezes: []*stagecoachv1.Freeze{{ObjectMeta: metav1.ObjectMeta{Name: "everything", Namespace: "team-b"},
				Spec: stagecoachv1.FreezeSpec{Reason: "mine", NamespaceSelector: &metav1.LabelSelector{}}}},
				promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, nil)}},
			promotion: "p", wantStarted: true, wantPhase: stagecoachv1.PhaseRunning, wantMessage: "started"},
		{name: "a cluster-wide Freeze from the controller's namespace holds every namespace",
			fixture: stepFixture{stage: stepStage(nil), freezes: []*stagecoachv1.Freeze{{ObjectMeta: metav1.ObjectMeta{Name: "everything", Namespace: "stagecoach-system"},
				Spec: stagecoachv1.FreezeSpec{Reason: "quarter end", NamespaceSelector: &metav1.LabelSelector{}}}},
				promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, nil)}},
			promotion: "p", wantPhase: stagecoachv1.PhasePending, wantMessage: "Freeze stagecoach-system/everything (quarter end) holds it"},
		{name: "a rollback with nothing verified fails at once",
			fixture:   stepFixture{stage: stepStage(nil), promotions: []*stagecoachv1.Promotion{stepPromotion("rb", stagecoachv1.ActionRollback, "", nil)}},
			promotion: "rb", wantPhase: stagecoachv1.PhaseFailed, wantMessage: "nothing to roll back to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			env := newStepEnv(t, tc.fixture)
			var p *stagecoachv1.Promotion
			for i := range env.run.promotions {
				if env.run.promotions[i].Name == tc.promotion {
					p = &env.run.promotions[i]
				}
			}
			started, _, err := env.run.start(t.Context(), p)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(started).To(Equal(tc.wantStarted))
			got := env.promotion(t, tc.promotion)
			g.Expect(got.Status.Phase).To(Equal(tc.wantPhase))
			g.Expect(got.Status.Message).To(ContainSubstring(tc.wantMessage))
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
			if tc.wantStarted {
				g.Expect(got.Status.StartedAt.Time).To(BeTemporally("==", stepNow))
				g.Expect(got.Status.Version).NotTo(BeNil())
				if got.Spec.Version != nil {
					g.Expect(got.Status.Version).To(Equal(got.Spec.Version))
				}
			}
			if tc.wantEvent != "" {
				g.Expect(env.eventReasons()).To(ContainElement(ContainSubstring(tc.wantEvent)))
			}
			if p.Spec.BreakGlass && tc.wantStarted {
				// Kept on the Promotion for good, whatever its message says later.
				c := meta.FindStatusCondition(got.Status.Conditions, stagecoachv1.PromotionConditionBreakGlass)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Reason).To(Equal(stagecoachv1.ReasonPassedByBreakGlass))
				g.Expect(c.Message).To(ContainSubstring("alice started with break-glass although Freeze prod/holidays"))
			}
			g.Expect(env.targetRevision(t)).To(BeEmpty(), "starting never applies")
		})
	}
}

// Promotions behind the running one say so, with their place, and are written once.
func TestQueueStepSaysWhatWaits(t *testing.T) {
	g := NewWithT(t)
	appliedAt := stepNow.Add(-time.Minute)
	env := newStepEnv(t, stepFixture{stage: stepStage(nil), appRevision: digestV2, promotions: []*stagecoachv1.Promotion{
		stepPromotion("running", stagecoachv1.ActionPromote, digestV2, running(&appliedAt, nil)),
		stepPromotion("next", stagecoachv1.ActionPromote, digestV1, func(p *stagecoachv1.Promotion) { p.CreationTimestamp = metav1.NewTime(stepNow) }),
	}})
	run, next, err := env.run.queue(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(run.Name).To(Equal("running"))
	g.Expect(next.Name).To(Equal("next"))
	got := env.promotion(t, "next")
	g.Expect(got.Status.Phase).To(Equal(stagecoachv1.PhasePending))
	g.Expect(got.Status.Message).To(Equal("queued: Promotion running runs on Stage payments; this is 1 of 1 waiting"))
	rv := got.ResourceVersion
	// Nothing changed: nothing is written.
	env2 := newStepEnv(t, stepFixture{stage: stepStage(nil), appRevision: digestV2, promotions: []*stagecoachv1.Promotion{
		stepPromotion("running", stagecoachv1.ActionPromote, digestV2, running(&appliedAt, nil)), got}})
	_, _, err = env2.run.queue(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env2.promotion(t, "next").ResourceVersion).To(Equal(rv))
}
