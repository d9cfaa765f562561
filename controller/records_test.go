package controller

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/records"
)

func TestPromotionSteps(t *testing.T) {
	at := func(min int) *metav1.Time {
		t := metav1.NewTime(stepNow.Add(time.Duration(min) * time.Minute))
		return &t
	}
	stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "payments"},
		Spec: stagecoachv1.StageSpec{Service: "payments", Environment: "prod"}}
	v1 := &stagecoachv1.VersionReference{Digest: digestV1, Tag: "v1"}
	v2 := &stagecoachv1.VersionReference{Digest: digestV2, Tag: "v2"}
	promote := func(status stagecoachv1.PromotionStatus) *stagecoachv1.Promotion {
		return &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: "p2"},
			Spec: stagecoachv1.PromotionSpec{Action: stagecoachv1.ActionPromote, Version: v2, RequestedBy: "alice"}, Status: status}
	}
	failed := promote(stagecoachv1.PromotionStatus{Phase: stagecoachv1.PhaseFailed, Version: v2, AppliedAt: at(0), FinishedAt: at(11)})
	type want struct {
		action  records.Action
		verdict records.Verdict
		version string
	}
	cases := []struct {
		name string
		p    *stagecoachv1.Promotion
		want []want
		// check looks at the records further.
		check func(g *WithT, steps []recordStep)
	}{
		{name: "a promote not applied owes nothing",
			p: promote(stagecoachv1.PromotionStatus{Phase: stagecoachv1.PhaseRunning, Version: v2, StartedAt: at(0)})},
		{name: "an applied promote owes its promote record",
			p:    promote(stagecoachv1.PromotionStatus{Phase: stagecoachv1.PhaseRunning, Version: v2, StartedAt: at(0), AppliedAt: at(1)}),
			want: []want{{records.ActionPromote, records.VerdictSucceeded, digestV2}},
			check: func(g *WithT, steps []recordStep) {
				g.Expect(steps[0].record.Actor).To(Equal("alice"))
				g.Expect(steps[0].record.BreakGlass).To(BeNil())
			}},
		{name: "a verified promote owes promote and verdict",
			p: promote(stagecoachv1.PromotionStatus{Phase: stagecoachv1.PhaseSucceeded, Version: v2, AppliedAt: at(1), LandedAt: at(2), FinishedAt: at(3),
				Gates: []stagecoachv1.GateResult{{Gate: "published", Passed: true, Message: "upstreamSeq=4"}}}),
			want: []want{{records.ActionPromote, records.VerdictSucceeded, digestV2}, {records.ActionVerify, records.VerdictVerified, digestV2}},
			check: func(g *WithT, steps []recordStep) {
				g.Expect(steps[0].record.Gates).To(Equal([]records.Gate{{Name: "published", Evidence: "upstreamSeq=4"}}))
			}},
		{name: "a promote that never landed within the deadline", p: failed,
			want: []want{{records.ActionPromote, records.VerdictSucceeded, digestV2}, {records.ActionVerify, records.VerdictDeadlineExceeded, digestV2}}},
		{name: "a promote that landed and failed",
			p:    promote(stagecoachv1.PromotionStatus{Phase: stagecoachv1.PhaseRolledBack, Version: v2, AppliedAt: at(0), LandedAt: at(1), FinishedAt: at(2)}),
			want: []want{{records.ActionPromote, records.VerdictSucceeded, digestV2}, {records.ActionVerify, records.VerdictFailed, digestV2}}},
		{name: "a break-glass promote carries its actor and reason",
			p: &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: "bg"},
				Spec:   stagecoachv1.PromotionSpec{Version: v2, RequestedBy: "bob", BreakGlass: true, Reason: "hotfix for INC-7"},
				Status: stagecoachv1.PromotionStatus{Phase: stagecoachv1.PhaseRunning, Version: v2, AppliedAt: at(0)}},
			want: []want{{records.ActionPromote, records.VerdictSucceeded, digestV2}},
			check: func(g *WithT, steps []recordStep) {
				g.Expect(steps[0].record.Actor).To(Equal("bob"))
				g.Expect(steps[0].record.BreakGlass).To(Equal(&records.BreakGlass{Reason: "hotfix for INC-7"}))
			}},
		{name: "an automatic rollback names the failed version and the restored one",
			p: &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: "p2-rollback", Annotations: map[string]string{stagecoachv1.RollbackOfAnnotation: "p2"}},
				Spec:   stagecoachv1.PromotionSpec{Action: stagecoachv1.ActionRollback, Version: v1, RequestedBy: "stagecoach"},
				Status: stagecoachv1.PromotionStatus{Phase: stagecoachv1.PhaseSucceeded, Version: v1, AppliedAt: at(12), FinishedAt: at(13)}},
			want: []want{{records.ActionRollback, records.VerdictRolledBack, digestV2}},
			check: func(g *WithT, steps []recordStep) {
				g.Expect(steps[0].record.Restored).To(Equal(&records.Version{Digest: digestV1, Tag: "v1"}))
			}},
		{name: "a freeze naming a version",
			p: &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: "f"}, Spec: stagecoachv1.PromotionSpec{Action: stagecoachv1.ActionFreeze, Version: v2},
				Status: stagecoachv1.PromotionStatus{Phase: stagecoachv1.PhaseSucceeded, FinishedAt: at(0)}},
			want: []want{{records.ActionFreeze, "", digestV2}}},
		{name: "an unfreeze",
			p: &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: "u"}, Spec: stagecoachv1.PromotionSpec{Action: stagecoachv1.ActionUnfreeze},
				Status: stagecoachv1.PromotionStatus{Phase: stagecoachv1.PhaseSucceeded, FinishedAt: at(0)}},
			want: []want{{records.ActionUnfreeze, "", ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			byName := map[string]*stagecoachv1.Promotion{"p2": failed, tc.p.Name: tc.p}
			steps := promotionSteps(stage, tc.p, byName, "0123456789ab/prod/payments")
			var got []want
			for i, s := range steps {
				r := s.record
				r.Seq, r.Prev = int64(i+1), ""
				if i > 0 {
					r.Prev = digestV1 // any digest: the record must be valid as it would be written
				}
				_, err := records.Encode(&r)
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
	at := func(min int) *metav1.Time {
		t := metav1.NewTime(stepNow.Add(time.Duration(min) * time.Minute))
		return &t
	}
	stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "payments"},
		Spec: stagecoachv1.StageSpec{Service: "payments", Environment: "prod"}}
	v2 := &stagecoachv1.VersionReference{Digest: digestV2}
	v1 := &stagecoachv1.VersionReference{Digest: digestV1}
	p2 := &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: "p2"}, Spec: stagecoachv1.PromotionSpec{Version: v2},
		Status: stagecoachv1.PromotionStatus{Phase: stagecoachv1.PhaseFailed, Version: v2, AppliedAt: at(0), LandedAt: at(1), FinishedAt: at(2)}}
	rb := &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: "a-rollback", Annotations: map[string]string{stagecoachv1.RollbackOfAnnotation: "p2"}},
		Spec:   stagecoachv1.PromotionSpec{Action: stagecoachv1.ActionRollback, Version: v1},
		Status: stagecoachv1.PromotionStatus{Phase: stagecoachv1.PhaseSucceeded, Version: v1, AppliedAt: at(3), FinishedAt: at(4)}}
	cases := []struct {
		name     string
		recorded *stagecoachv1.RecordReference
		want     []string
	}{
		{name: "nothing recorded: in the order they happened", want: []string{"p2/Promote", "p2/Verify", "a-rollback/Rollback"}},
		{name: "the promote recorded", recorded: &stagecoachv1.RecordReference{Seq: 1, Action: "Promote"}, want: []string{"p2/Verify", "a-rollback/Rollback"}},
		{name: "both recorded", recorded: &stagecoachv1.RecordReference{Seq: 2, Action: "Verify"}, want: []string{"a-rollback/Rollback"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := p2.DeepCopy()
			p.Status.Record = tc.recorded
			var got []string
			for _, s := range owedSteps(stage, []*stagecoachv1.Promotion{rb, p}, "0123456789ab/prod/payments") {
				got = append(got, s.p.Name+"/"+string(s.record.Action))
			}
			g.Expect(got).To(Equal(tc.want))
		})
	}
}
