package records

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

const stepStream = "0123456789ab/prod/payments"

// stepAt is t0 plus some minutes, as a Promotion's status holds it.
func stepAt(min int) *metav1.Time {
	t := metav1.NewTime(t0.Add(time.Duration(min) * time.Minute))
	return &t
}

func stepStage() *stagecoachv1.Stage {
	return &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "payments"},
		Spec: stagecoachv1.StageSpec{Service: "payments", Environment: "prod"}}
}

func TestPromotionSteps(t *testing.T) {
	v1 := &stagecoachv1.VersionReference{Digest: digestA, Tag: "v1"}
	v2 := &stagecoachv1.VersionReference{Digest: digestB, Tag: "v2"}
	promote := func(status stagecoachv1.PromotionStatus) *stagecoachv1.Promotion {
		return &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: "p2"},
			Spec: stagecoachv1.PromotionSpec{Action: stagecoachv1.ActionPromote, Version: v2, RequestedBy: "alice"}, Status: status}
	}
	failed := promote(stagecoachv1.PromotionStatus{Phase: stagecoachv1.PhaseFailed, Version: v2, AppliedAt: stepAt(0), FinishedAt: stepAt(11)})
	type want struct {
		action  Action
		verdict Verdict
		version string
	}
	cases := []struct {
		name string
		p    *stagecoachv1.Promotion
		want []want
		// check looks at the records further.
		check func(g *WithT, steps []Step)
	}{
		{name: "a promote not applied owes nothing",
			p: promote(stagecoachv1.PromotionStatus{Phase: stagecoachv1.PhaseRunning, Version: v2, StartedAt: stepAt(0)})},
		{name: "an applied promote owes its promote record",
			p:    promote(stagecoachv1.PromotionStatus{Phase: stagecoachv1.PhaseRunning, Version: v2, StartedAt: stepAt(0), AppliedAt: stepAt(1)}),
			want: []want{{ActionPromote, VerdictSucceeded, digestB}},
			check: func(g *WithT, steps []Step) {
				g.Expect(steps[0].Record.Actor).To(Equal("alice"))
				g.Expect(steps[0].Record.BreakGlass).To(BeNil())
				g.Expect(steps[0].Promotion.Name).To(Equal("p2"))
				g.Expect(steps[0].At).To(Equal(stepAt(1).Time))
			}},
		{name: "a verified promote owes promote and verdict",
			p: promote(stagecoachv1.PromotionStatus{Phase: stagecoachv1.PhaseSucceeded, Version: v2, AppliedAt: stepAt(1), LandedAt: stepAt(2), FinishedAt: stepAt(3),
				Gates: []stagecoachv1.GateResult{{Gate: stagecoachv1.GatePublished, Passed: true, Message: "upstreamSeq=4"}}}),
			want: []want{{ActionPromote, VerdictSucceeded, digestB}, {ActionVerify, VerdictVerified, digestB}},
			check: func(g *WithT, steps []Step) {
				g.Expect(steps[0].Record.Gates).To(Equal([]Gate{{Name: stagecoachv1.GatePublished, Evidence: "upstreamSeq=4"}}))
				g.Expect([]int{steps[0].Index, steps[1].Index}).To(Equal([]int{0, 1}))
			}},
		{name: "a promote that never landed within the deadline", p: failed,
			want: []want{{ActionPromote, VerdictSucceeded, digestB}, {ActionVerify, verdictDeadlineExceeded, digestB}}},
		{name: "a promote that landed and failed",
			p:    promote(stagecoachv1.PromotionStatus{Phase: stagecoachv1.PhaseRolledBack, Version: v2, AppliedAt: stepAt(0), LandedAt: stepAt(1), FinishedAt: stepAt(2)}),
			want: []want{{ActionPromote, VerdictSucceeded, digestB}, {ActionVerify, VerdictFailed, digestB}}},
		{name: "a break-glass promote carries its actor and reason",
			p: &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: "bg"},
				Spec:   stagecoachv1.PromotionSpec{Version: v2, RequestedBy: "bob", BreakGlass: true, Reason: "hotfix for INC-7"},
				Status: stagecoachv1.PromotionStatus{Phase: stagecoachv1.PhaseRunning, Version: v2, AppliedAt: stepAt(0)}},
			want: []want{{ActionPromote, VerdictSucceeded, digestB}},
			check: func(g *WithT, steps []Step) {
				g.Expect(steps[0].Record.Actor).To(Equal("bob"))
				g.Expect(steps[0].Record.BreakGlass).To(Equal(&BreakGlass{Reason: "hotfix for INC-7"}))
			}},
		{name: "an automatic rollback names the failed version and the restored one",
			p: &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: "p2-rollback", Annotations: map[string]string{stagecoachv1.RollbackOfAnnotation: "p2"}},
				Spec:   stagecoachv1.PromotionSpec{Action: stagecoachv1.ActionRollback, Version: v1, RequestedBy: "stagecoach"},
				Status: stagecoachv1.PromotionStatus{Phase: stagecoachv1.PhaseSucceeded, Version: v1, AppliedAt: stepAt(12), FinishedAt: stepAt(13)}},
			want: []want{{actionRollback, verdictRolledBack, digestB}},
			check: func(g *WithT, steps []Step) {
				g.Expect(steps[0].Record.Restored).To(Equal(&Version{Digest: digestA, Tag: "v1"}))
			}},
		{name: "a freeze naming a version",
			p: &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: "f"}, Spec: stagecoachv1.PromotionSpec{Action: stagecoachv1.ActionFreeze, Version: v2},
				Status: stagecoachv1.PromotionStatus{Phase: stagecoachv1.PhaseSucceeded, FinishedAt: stepAt(0)}},
			want: []want{{ActionFreeze, "", digestB}}},
		{name: "an unfreeze",
			p: &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: "u"}, Spec: stagecoachv1.PromotionSpec{Action: stagecoachv1.ActionUnfreeze},
				Status: stagecoachv1.PromotionStatus{Phase: stagecoachv1.PhaseSucceeded, FinishedAt: stepAt(0)}},
			want: []want{{actionUnfreeze, "", ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			byName := map[string]*stagecoachv1.Promotion{"p2": failed, tc.p.Name: tc.p}
			steps := promotionSteps(stepStage(), tc.p, byName, stepStream)
			var got []want
			for i, s := range steps {
				r := s.Record
				r.Seq, r.Prev = int64(i+1), ""
				if i > 0 {
					r.Prev = digestA // any digest: the record must be valid as it would be written
				}
				_, err := Encode(&r)
				g.Expect(err).NotTo(HaveOccurred())
				w := want{action: r.Action, verdict: r.Verdict}
				if r.Version != nil {
					w.version = r.Version.Digest
				}
				got = append(got, w)
			}
			g.Expect(got).To(Equal(tc.want))
			if tc.check != nil {
				tc.check(g, steps)
			}
		})
	}
}

func TestOwedSteps(t *testing.T) {
	v2 := &stagecoachv1.VersionReference{Digest: digestB}
	v1 := &stagecoachv1.VersionReference{Digest: digestA}
	p2 := &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: "p2"}, Spec: stagecoachv1.PromotionSpec{Version: v2},
		Status: stagecoachv1.PromotionStatus{Phase: stagecoachv1.PhaseFailed, Version: v2, AppliedAt: stepAt(0), LandedAt: stepAt(1), FinishedAt: stepAt(2)}}
	rb := &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: "a-rollback", Annotations: map[string]string{stagecoachv1.RollbackOfAnnotation: "p2"}},
		Spec:   stagecoachv1.PromotionSpec{Action: stagecoachv1.ActionRollback, Version: v1},
		Status: stagecoachv1.PromotionStatus{Phase: stagecoachv1.PhaseSucceeded, Version: v1, AppliedAt: stepAt(3), FinishedAt: stepAt(4)}}
	cases := []struct {
		name     string
		recorded *stagecoachv1.RecordReference
		want     []string
	}{
		{name: "nothing recorded: in the order they happened", want: []string{"p2/Promote", "p2/Verify", "a-rollback/Rollback"}},
		{name: "the promote recorded", recorded: &stagecoachv1.RecordReference{Seq: 1, Action: "Promote"}, want: []string{"p2/Verify", "a-rollback/Rollback"}},
		{name: "both recorded", recorded: &stagecoachv1.RecordReference{Seq: 2, Action: "Verify"}, want: []string{"a-rollback/Rollback"}},
		{name: "a record naming none of its steps leaves them all owed", recorded: &stagecoachv1.RecordReference{Seq: 2, Action: "Freeze"},
			want: []string{"p2/Promote", "p2/Verify", "a-rollback/Rollback"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := p2.DeepCopy()
			p.Status.Record = tc.recorded
			var got []string
			for _, s := range OwedSteps(stepStage(), []*stagecoachv1.Promotion{rb, p}, stepStream) {
				got = append(got, s.Promotion.Name+"/"+string(s.Record.Action))
			}
			g.Expect(got).To(Equal(tc.want))
		})
	}
}
