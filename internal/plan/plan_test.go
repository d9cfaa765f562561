package plan

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/applier"
)

const (
	d1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	d2 = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func promo(name string, second int, phase stagecoachv1.Phase, action stagecoachv1.PromotionAction, auto bool) stagecoachv1.Promotion {
	p := stagecoachv1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(second) * time.Second))},
		Spec:       stagecoachv1.PromotionSpec{Action: action, Version: &stagecoachv1.VersionReference{Digest: d1}},
		Status:     stagecoachv1.PromotionStatus{Phase: phase},
	}
	if auto {
		p.Labels = map[string]string{stagecoachv1.AutomaticLabel: "true"}
	}
	return p
}

func glass(p stagecoachv1.Promotion) stagecoachv1.Promotion {
	p.Spec.BreakGlass = true
	return p
}

func stamped(p stagecoachv1.Promotion, ms int) stagecoachv1.Promotion {
	p.Annotations = map[string]string{stagecoachv1.CreatedAtAnnotation: p.CreationTimestamp.Add(time.Duration(ms) * time.Millisecond).Format(time.RFC3339Nano)}
	return p
}

func names(ps []*stagecoachv1.Promotion) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

func name(p *stagecoachv1.Promotion) string {
	if p == nil {
		return ""
	}
	return p.Name
}

func TestQueue(t *testing.T) {
	const (
		promote  = stagecoachv1.ActionPromote
		rollback = stagecoachv1.ActionRollback
	)
	cases := []struct {
		name           string
		promotions     []stagecoachv1.Promotion
		wantRunning    string
		wantNext       string
		wantSuperseded []string
		wantControls   []string
	}{
		{name: "nothing"},
		{name: "oldest waiting starts first", promotions: []stagecoachv1.Promotion{
			promo("b", 2, "", promote, false), promo("a", 1, stagecoachv1.PhasePending, promote, false)},
			wantNext: "a"},
		{name: "same second: name orders", promotions: []stagecoachv1.Promotion{
			promo("b", 1, "", promote, false), promo("a", 1, "", promote, false)},
			wantNext: "a"},
		{name: "one runs, the rest wait", promotions: []stagecoachv1.Promotion{
			promo("run", 5, stagecoachv1.PhaseRunning, promote, false), promo("a", 1, "", promote, false)},
			wantRunning: "run", wantNext: "a"},
		{name: "finished ones are ignored", promotions: []stagecoachv1.Promotion{
			promo("done", 1, stagecoachv1.PhaseSucceeded, promote, false), promo("failed", 2, stagecoachv1.PhaseFailed, promote, false),
			promo("gone", 3, stagecoachv1.PhaseAborted, promote, true)}},
		{name: "a newer automatic one supersedes waiting automatic ones, not a person's", promotions: []stagecoachv1.Promotion{
			promo("auto1", 1, "", promote, true), promo("manual", 2, "", promote, false),
			promo("auto2", 3, stagecoachv1.PhasePending, promote, true), promo("auto3", 4, "", promote, true)},
			wantNext: "manual", wantSuperseded: []string{"auto1", "auto2"}},
		{name: "a running automatic one is never superseded", promotions: []stagecoachv1.Promotion{
			promo("auto1", 1, stagecoachv1.PhaseRunning, promote, true), promo("auto2", 3, "", promote, true)},
			wantRunning: "auto1", wantNext: "auto2"},
		{name: "a rollback goes first", promotions: []stagecoachv1.Promotion{
			promo("auto", 1, "", promote, true), promo("rb", 9, "", rollback, false)},
			wantNext: "rb"},
		{name: "break-glass passes the others, not a rollback", promotions: []stagecoachv1.Promotion{
			promo("old", 1, stagecoachv1.PhasePending, promote, false), glass(promo("glass", 5, "", promote, false)), promo("rb", 9, "", rollback, false)},
			wantNext: "rb"},
		{name: "break-glass passes waiting ones", promotions: []stagecoachv1.Promotion{
			promo("old", 1, stagecoachv1.PhasePending, promote, false), glass(promo("glass", 5, "", promote, false))},
			wantNext: "glass"},
		{name: "same second: the exact time automation stamped orders", promotions: []stagecoachv1.Promotion{
			stamped(promo("auto-new", 1, "", promote, true), 900), stamped(promo("auto-old", 1, "", promote, true), 100)},
			wantNext: "auto-new", wantSuperseded: []string{"auto-old"}},
		{name: "freeze and unfreeze do not queue", promotions: []stagecoachv1.Promotion{
			promo("run", 1, stagecoachv1.PhaseRunning, promote, false), promo("wait", 2, "", promote, false),
			promo("unfreeze", 4, "", stagecoachv1.ActionUnfreeze, false), promo("freeze", 3, "", stagecoachv1.ActionFreeze, false),
			promo("done", 0, stagecoachv1.PhaseSucceeded, stagecoachv1.ActionFreeze, false)},
			wantRunning: "run", wantNext: "wait", wantControls: []string{"freeze", "unfreeze"}},
		{name: "abort does not queue behind what it cancels", promotions: []stagecoachv1.Promotion{
			promo("run", 1, stagecoachv1.PhaseRunning, promote, false), promo("abort", 2, "", stagecoachv1.ActionAbort, false),
			promo("aborted-before", 0, stagecoachv1.PhaseSucceeded, stagecoachv1.ActionAbort, false)},
			wantRunning: "run", wantControls: []string{"abort"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			q := Queue(tc.promotions)
			g.Expect(name(q.Running)).To(Equal(tc.wantRunning))
			g.Expect(name(q.Next)).To(Equal(tc.wantNext))
			if tc.wantSuperseded == nil {
				tc.wantSuperseded = []string{}
			}
			g.Expect(names(q.Superseded)).To(Equal(tc.wantSuperseded))
			if tc.wantControls == nil {
				tc.wantControls = []string{}
			}
			g.Expect(names(q.Controls)).To(Equal(tc.wantControls))
		})
	}
}

func TestProgress(t *testing.T) {
	at := func(s int) *metav1.Time { m := metav1.NewTime(t0.Add(time.Duration(s) * time.Second)); return &m }
	landed := applier.Observation{Phase: applier.Landed, Reason: "Landed", Message: "proof"}
	waiting := applier.Observation{Phase: applier.Progressing, Reason: "WaitingForSync", Message: "waiting"}
	failed := applier.Observation{Phase: applier.Failed, Reason: "SyncFailed", Message: "boom"}
	rechecking := applier.Observation{Phase: applier.Rechecking, Reason: "Rechecking", Message: "reconciling again"}
	const grace, deadline = 10 * time.Second, 60 * time.Second
	cases := []struct {
		name        string
		status      stagecoachv1.PromotionStatus
		obs         applier.Observation
		now         int
		grace       *time.Duration // 10s when nil
		wantStep    Step
		wantReason  string
		wantRequeue time.Duration
	}{
		{name: "not applied yet", obs: waiting, wantStep: StepApply},
		{name: "applied, engine busy", status: stagecoachv1.PromotionStatus{AppliedAt: at(0)}, obs: waiting, now: 20,
			wantStep: StepWait, wantRequeue: 40 * time.Second},
		{name: "applied, engine failed", status: stagecoachv1.PromotionStatus{AppliedAt: at(0)}, obs: failed, now: 5,
			wantStep: StepFail, wantReason: "SyncFailed"},
		{name: "first landed", status: stagecoachv1.PromotionStatus{AppliedAt: at(0)}, obs: landed, now: 5,
			wantStep: StepLanded, wantRequeue: grace + time.Second},
		// landedAt keeps whole seconds: landed at 5 may mean 5.999, so the grace counts from 6.
		{name: "landed, grace not over", status: stagecoachv1.PromotionStatus{AppliedAt: at(0), LandedAt: at(5)}, obs: landed, now: 12,
			wantStep: StepWait, wantRequeue: 4 * time.Second},
		{name: "landed, grace not over in the rounded second", status: stagecoachv1.PromotionStatus{AppliedAt: at(0), LandedAt: at(5)}, obs: landed, now: 15,
			wantStep: StepWait, wantRequeue: time.Second},
		{name: "landed, reconciled again within landedAt's second", status: stagecoachv1.PromotionStatus{AppliedAt: at(0), LandedAt: at(5)}, obs: landed, now: 5,
			wantStep: StepWait, wantRequeue: grace + time.Second},
		// Without a grace there is nothing to hold: landed is verified at once.
		{name: "no grace, reconciled again within landedAt's second", status: stagecoachv1.PromotionStatus{AppliedAt: at(0), LandedAt: at(5)}, obs: landed, now: 5,
			grace: new(time.Duration(0)), wantStep: StepVerify, wantReason: stagecoachv1.ReasonVerified},
		{name: "no grace, first landed verifies at once", status: stagecoachv1.PromotionStatus{AppliedAt: at(0)}, obs: landed, now: 5,
			grace: new(time.Duration(0)), wantStep: StepVerify, wantReason: stagecoachv1.ReasonVerified},
		{name: "no grace, after landedAt's second", status: stagecoachv1.PromotionStatus{AppliedAt: at(0), LandedAt: at(5)}, obs: landed, now: 6,
			grace: new(time.Duration(0)), wantStep: StepVerify, wantReason: stagecoachv1.ReasonVerified},
		{name: "landed through the grace period", status: stagecoachv1.PromotionStatus{AppliedAt: at(0), LandedAt: at(5)}, obs: landed, now: 16,
			wantStep: StepVerify, wantReason: stagecoachv1.ReasonVerified},
		{name: "landed, then flapped", status: stagecoachv1.PromotionStatus{AppliedAt: at(0), LandedAt: at(5)}, obs: waiting, now: 8,
			wantStep: StepUnlanded, wantRequeue: 52 * time.Second},
		// A Flux interval run during the grace neither restarts the clock nor verifies: landed at 5
		// (counted from 6), the engine may take until 6+10+60 to say Ready again.
		{name: "landed, engine checking again within the grace", status: stagecoachv1.PromotionStatus{AppliedAt: at(0), LandedAt: at(5)}, obs: rechecking, now: 8,
			wantStep: StepWait, wantReason: stagecoachv1.ReasonLanded, wantRequeue: 68 * time.Second},
		{name: "landed, engine checking again after the grace", status: stagecoachv1.PromotionStatus{AppliedAt: at(0), LandedAt: at(5)}, obs: rechecking, now: 30,
			wantStep: StepWait, wantReason: stagecoachv1.ReasonLanded, wantRequeue: 46 * time.Second},
		{name: "landed, engine stuck checking again", status: stagecoachv1.PromotionStatus{AppliedAt: at(0), LandedAt: at(5)}, obs: rechecking, now: 76,
			wantStep: StepFail, wantReason: stagecoachv1.ReasonDeadlineExceeded},
		{name: "not landed yet, engine checking again is still waiting", status: stagecoachv1.PromotionStatus{AppliedAt: at(0)}, obs: rechecking, now: 20,
			wantStep: StepWait, wantReason: "WaitingForReady", wantRequeue: 40 * time.Second},
		{name: "deadline passed", status: stagecoachv1.PromotionStatus{AppliedAt: at(0)}, obs: waiting, now: 60,
			wantStep: StepFail, wantReason: stagecoachv1.ReasonDeadlineExceeded},
		{name: "a failure after landing still fails", status: stagecoachv1.PromotionStatus{AppliedAt: at(0), LandedAt: at(5)}, obs: failed, now: 8,
			wantStep: StepFail, wantReason: "SyncFailed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := &stagecoachv1.Promotion{Status: tc.status}
			caseGrace := grace
			if tc.grace != nil {
				caseGrace = *tc.grace
			}
			d := Progress(p, tc.obs, t0.Add(time.Duration(tc.now)*time.Second), caseGrace, deadline)
			g.Expect(d.Step).To(Equal(tc.wantStep))
			if tc.wantReason != "" {
				g.Expect(d.Reason).To(Equal(tc.wantReason))
			}
			g.Expect(d.RequeueAfter).To(Equal(tc.wantRequeue))
		})
	}
}

func TestAutoPromote(t *testing.T) {
	verified := metav1.NewTime(t0.Add(-time.Hour))
	soakStart := metav1.NewTime(t0.Add(-10 * time.Minute))
	candidate := &Candidate{Digest: d2, Tag: "v2", VerifiedAt: &verified}
	auto := &stagecoachv1.PromotionPolicy{Auto: true}
	frozen := metav1.Condition{Type: stagecoachv1.ConditionFrozen, Status: metav1.ConditionTrue, Reason: "ForeignWrite", Message: "someone wrote"}
	cases := []struct {
		name       string
		spec       stagecoachv1.StageSpec
		status     stagecoachv1.StageStatus
		promotions []stagecoachv1.Promotion
		candidate  *Candidate
		want       bool
		wantGates  []string
	}{
		{name: "no candidate", spec: stagecoachv1.StageSpec{Promotion: auto}, wantGates: []string{}},
		{name: "new candidate, auto on", spec: stagecoachv1.StageSpec{Promotion: auto}, candidate: candidate, want: true, wantGates: []string{}},
		{name: "already running it", spec: stagecoachv1.StageSpec{Promotion: auto}, candidate: candidate,
			status: stagecoachv1.StageStatus{Current: &stagecoachv1.CurrentVersion{Digest: d2}}, wantGates: []string{}},
		{name: "tried before (any phase)", spec: stagecoachv1.StageSpec{Promotion: auto}, candidate: candidate,
			promotions: []stagecoachv1.Promotion{func() stagecoachv1.Promotion {
				p := promo("x", 1, stagecoachv1.PhaseAborted, stagecoachv1.ActionPromote, true)
				p.Spec.Version.Digest = d2
				return p
			}()}, wantGates: []string{}},
		{name: "auto off", candidate: candidate, wantGates: []string{stagecoachv1.GateAuto}},
		{name: "still soaking", candidate: &Candidate{Digest: d2, VerifiedAt: &soakStart},
			spec:      stagecoachv1.StageSpec{Promotion: &stagecoachv1.PromotionPolicy{Auto: true, Soak: &metav1.Duration{Duration: 30 * time.Minute}}},
			wantGates: []string{stagecoachv1.GateSoak}},
		{name: "first seen in the registry too recently", candidate: &Candidate{Digest: d2, FirstSeen: &soakStart},
			spec:      stagecoachv1.StageSpec{Promotion: &stagecoachv1.PromotionPolicy{Auto: true, Soak: &metav1.Duration{Duration: 30 * time.Minute}}},
			wantGates: []string{stagecoachv1.GateSoak}},
		{name: "first seen in the registry long enough ago", candidate: &Candidate{Digest: d2, FirstSeen: &verified}, want: true, wantGates: []string{},
			spec: stagecoachv1.StageSpec{Promotion: &stagecoachv1.PromotionPolicy{Auto: true, Soak: &metav1.Duration{Duration: 30 * time.Minute}}}},
		{name: "soaked long enough", candidate: candidate, want: true, wantGates: []string{},
			spec: stagecoachv1.StageSpec{Promotion: &stagecoachv1.PromotionPolicy{Auto: true, Soak: &metav1.Duration{Duration: 30 * time.Minute}}}},
		{name: "not mediated: automation waits, a person may promote", spec: stagecoachv1.StageSpec{Promotion: auto}, candidate: candidate,
			status: stagecoachv1.StageStatus{Conditions: []metav1.Condition{{Type: stagecoachv1.ConditionMediated, Status: metav1.ConditionFalse,
				Reason: stagecoachv1.ReasonNotMediated, Message: "Application 'prod/payments' sets spec.sourceHydrator"}}},
			wantGates: []string{stagecoachv1.GateMediated}},
		{name: "mediated", spec: stagecoachv1.StageSpec{Promotion: auto}, candidate: candidate, want: true, wantGates: []string{},
			status: stagecoachv1.StageStatus{Conditions: []metav1.Condition{{Type: stagecoachv1.ConditionMediated, Status: metav1.ConditionTrue, Reason: stagecoachv1.ReasonMediated}}}},
		{name: "failed before, held, frozen and suspended: every gate is listed", candidate: candidate,
			spec: stagecoachv1.StageSpec{Promotion: auto, Suspend: true},
			status: stagecoachv1.StageStatus{FailedDigests: []string{d2}, Conditions: []metav1.Condition{frozen},
				Hold: &stagecoachv1.AutomationHold{Reason: stagecoachv1.ReasonPromotionFailed, Message: "held"}},
			wantGates: []string{stagecoachv1.GateHistory, stagecoachv1.GateSuspend, stagecoachv1.GateFreeze, stagecoachv1.GateHold}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			stage := &stagecoachv1.Stage{Spec: tc.spec, Status: tc.status}
			got, blocks := autoPromote(stage, tc.candidate, tc.promotions, t0)
			g.Expect(got).To(Equal(tc.want))
			gates := []string{}
			for _, b := range blocks {
				gates = append(gates, b.Gate)
				g.Expect(b.Message).NotTo(BeEmpty())
			}
			g.Expect(gates).To(Equal(tc.wantGates))
		})
	}
}

func TestBlocksEnd(t *testing.T) {
	in := func(d time.Duration) *metav1.Time { m := metav1.NewTime(t0.Add(d)); return &m }
	g := NewWithT(t)
	g.Expect(BlocksEnd(nil, t0)).To(BeZero())
	g.Expect(BlocksEnd([]stagecoachv1.GateBlock{{Gate: "hold"}, {Gate: "soak", Until: in(20 * time.Minute)}, {Gate: "freeze", Until: in(5 * time.Minute)},
		{Gate: "old", Until: in(-time.Minute)}}, t0)).To(Equal(5 * time.Minute))
}

func TestQueuedMessage(t *testing.T) {
	stageOf := func(p stagecoachv1.Promotion) stagecoachv1.Promotion { p.Spec.Stage = "prod"; return p }
	running := stageOf(promo("running", 0, stagecoachv1.PhaseRunning, stagecoachv1.ActionPromote, false))
	first := stageOf(promo("first", 1, "", stagecoachv1.ActionPromote, false))
	second := stageOf(promo("second", 2, stagecoachv1.PhasePending, stagecoachv1.ActionPromote, false))
	for _, tc := range []struct {
		name       string
		promotions []stagecoachv1.Promotion
		want       map[string]string
	}{
		{name: "behind a running one, each with its place", promotions: []stagecoachv1.Promotion{running, first, second}, want: map[string]string{
			"first":  "queued: Promotion running runs on Stage prod; this is 1 of 2 waiting",
			"second": "queued: Promotion running runs on Stage prod; this is 2 of 2 waiting"}},
		{name: "nothing runs: the first's turn has come, the next waits for it", promotions: []stagecoachv1.Promotion{first, second}, want: map[string]string{
			"first":  "",
			"second": "queued: Promotion first starts first on Stage prod; this is 2 of 2 waiting"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			q := Queue(tc.promotions)
			got := map[string]string{}
			for _, p := range q.Waiting {
				got[p.Name] = q.QueuedMessage(p)
			}
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestOrphaned(t *testing.T) {
	stage := types.NamespacedName{Namespace: "prod", Name: "payments"}
	missing := "waiting: Stage prod/payments does not exist: create it, or delete this Promotion and create one naming an existing Stage in spec.stage"
	withStatus := func(phase stagecoachv1.Phase, message string) *stagecoachv1.Promotion {
		return &stagecoachv1.Promotion{Status: stagecoachv1.PromotionStatus{Phase: phase, Message: message}}
	}
	for _, tc := range []struct {
		name      string
		p         *stagecoachv1.Promotion
		wantPhase stagecoachv1.Phase
		wantMsg   string
		wantWrite bool
	}{
		{name: "new, for a Stage that does not exist: waits, saying so", p: withStatus("", ""),
			wantPhase: stagecoachv1.PhasePending, wantMsg: missing, wantWrite: true},
		{name: "already says so: nothing to write", p: withStatus(stagecoachv1.PhasePending, missing)},
		{name: "running when its Stage was deleted: aborted", p: withStatus(stagecoachv1.PhaseRunning, "applied"),
			wantPhase: stagecoachv1.PhaseAborted, wantMsg: "aborted: Stage prod/payments was deleted while this Promotion was running", wantWrite: true},
		{name: "queued when its Stage was deleted: aborted", p: withStatus(stagecoachv1.PhasePending, "queued: Promotion x runs on Stage payments; this is 1 of 1 waiting"),
			wantPhase: stagecoachv1.PhaseAborted, wantMsg: "was deleted while this Promotion was pending", wantWrite: true},
		{name: "finished: left alone", p: withStatus(stagecoachv1.PhaseSucceeded, "verified")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			phase, msg, write := Orphaned(tc.p, stage)
			g.Expect(write).To(Equal(tc.wantWrite))
			g.Expect(phase).To(Equal(tc.wantPhase))
			g.Expect(msg).To(ContainSubstring(tc.wantMsg))
		})
	}
}
