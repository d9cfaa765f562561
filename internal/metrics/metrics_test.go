package metrics

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func at(min int) *metav1.Time {
	t := metav1.NewTime(t0.Add(time.Duration(min) * time.Minute))
	return &t
}

func newStage(name, env string, conds ...metav1.Condition) *stagecoachv1.Stage {
	return &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"},
		Spec:   stagecoachv1.StageSpec{Service: "payments", Environment: env},
		Status: stagecoachv1.StageStatus{Conditions: conds}}
}

// promotion builds a Promotion created at minute created, that went through the phases at the
// given minutes (-1: not reached).
func promotion(name, stage string, action stagecoachv1.PromotionAction, digest string, phase stagecoachv1.Phase,
	created, started, applied, landed, verified, finished int) stagecoachv1.Promotion {
	p := stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", UID: types.UID(name),
		CreationTimestamp: *at(created)},
		Spec:   stagecoachv1.PromotionSpec{Stage: stage, Action: action, Version: &stagecoachv1.VersionReference{Digest: digest}},
		Status: stagecoachv1.PromotionStatus{Phase: phase}}
	for _, ts := range []struct {
		min int
		to  **metav1.Time
	}{{started, &p.Status.StartedAt}, {applied, &p.Status.AppliedAt}, {landed, &p.Status.LandedAt},
		{verified, &p.Status.VerifiedAt}, {finished, &p.Status.FinishedAt}} {
		if ts.min >= 0 {
			*ts.to = at(ts.min)
		}
	}
	return p
}

func newScheme(t *testing.T) *runtime.Scheme {
	scheme := runtime.NewScheme()
	if err := stagecoachv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

func cond(t string, s metav1.ConditionStatus) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Reason: "Test", LastTransitionTime: *at(0)}
}

func TestStateCollector(t *testing.T) {
	blocked := newStage("prod", "prod", cond(stagecoachv1.ConditionReady, metav1.ConditionFalse), cond(stagecoachv1.ConditionStalled, metav1.ConditionTrue))
	blocked.Status.Candidate = &stagecoachv1.CandidateVersion{BlockedBy: []stagecoachv1.GateBlock{{Gate: "soak"}, {Gate: "approvals"}, {Gate: "soak", Reason: "Again"}}}
	tests := []struct {
		name       string
		objects    []client.Object
		want       string
		wantSeries int
	}{
		{name: "no Stages, no series", wantSeries: 0},
		{
			name: "conditions, blocking gates and unfinished Promotions per Stage; an orphan Promotion counts nowhere",
			objects: []client.Object{
				newStage("staging", "staging", cond(stagecoachv1.ConditionReady, metav1.ConditionTrue), cond(stagecoachv1.ConditionFrozen, metav1.ConditionTrue)),
				blocked,
				ptr(promotion("a", "staging", stagecoachv1.ActionPromote, "sha256:a", stagecoachv1.PhaseRunning, 0, 1, -1, -1, -1, -1)),
				ptr(promotion("b", "staging", stagecoachv1.ActionPromote, "sha256:b", stagecoachv1.PhasePending, 0, -1, -1, -1, -1, -1)),
				ptr(promotion("c", "staging", stagecoachv1.ActionPromote, "sha256:c", stagecoachv1.PhaseSucceeded, 0, 1, 2, 3, 4, 4)),
				ptr(promotion("d", "gone", stagecoachv1.ActionPromote, "sha256:d", stagecoachv1.PhasePending, 0, -1, -1, -1, -1, -1)),
			},
			want: `
# HELP stagecoach_stage_ready 1 when the Stage's Ready condition is True, else 0.
# TYPE stagecoach_stage_ready gauge
stagecoach_stage_ready{environment="prod",namespace="shop",service="payments",stage="prod"} 0
stagecoach_stage_ready{environment="staging",namespace="shop",service="payments",stage="staging"} 1
# HELP stagecoach_stage_stalled 1 when the Stage's Stalled condition is True, else 0.
# TYPE stagecoach_stage_stalled gauge
stagecoach_stage_stalled{environment="prod",namespace="shop",service="payments",stage="prod"} 1
stagecoach_stage_stalled{environment="staging",namespace="shop",service="payments",stage="staging"} 0
# HELP stagecoach_stage_frozen 1 when the Stage's Frozen condition is True, else 0.
# TYPE stagecoach_stage_frozen gauge
stagecoach_stage_frozen{environment="prod",namespace="shop",service="payments",stage="prod"} 0
stagecoach_stage_frozen{environment="staging",namespace="shop",service="payments",stage="staging"} 1
# HELP stagecoach_stage_candidate_blocked 1 for each gate that holds the Stage's candidate back (status.candidate.blockedBy).
# TYPE stagecoach_stage_candidate_blocked gauge
stagecoach_stage_candidate_blocked{environment="prod",gate="approvals",namespace="shop",service="payments",stage="prod"} 1
stagecoach_stage_candidate_blocked{environment="prod",gate="soak",namespace="shop",service="payments",stage="prod"} 1
# HELP stagecoach_promotions_unfinished Promotions of the Stage not yet finished, by phase (Pending, Running).
# TYPE stagecoach_promotions_unfinished gauge
stagecoach_promotions_unfinished{environment="prod",namespace="shop",phase="Pending",service="payments",stage="prod"} 0
stagecoach_promotions_unfinished{environment="prod",namespace="shop",phase="Running",service="payments",stage="prod"} 0
stagecoach_promotions_unfinished{environment="staging",namespace="shop",phase="Pending",service="payments",stage="staging"} 1
stagecoach_promotions_unfinished{environment="staging",namespace="shop",phase="Running",service="payments",stage="staging"} 1
`,
			wantSeries: 12,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c := &StateCollector{Reader: fake.NewClientBuilder().WithScheme(newScheme(t)).WithObjects(tt.objects...).Build(), Context: t.Context()}
			names := []string{StageReady, StageStalled, StageFrozen, StageCandidateBlocked, PromotionsUnfinished}
			g.Expect(testutil.CollectAndCount(c, names...)).To(Equal(tt.wantSeries))
			if tt.want != "" {
				g.Expect(testutil.CollectAndCompare(c, strings.NewReader(tt.want), names...)).To(Succeed())
			}
			g.Expect(testutil.CollectAndCompare(c, strings.NewReader(`
# HELP stagecoach_metrics_scrape_errors 1 when the last scrape could not read Stages or Promotions from the cache.
# TYPE stagecoach_metrics_scrape_errors gauge
stagecoach_metrics_scrape_errors 0
`), "stagecoach_metrics_scrape_errors")).To(Succeed())
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestPhaseDurations(t *testing.T) {
	withChecks := func(grace time.Duration) *stagecoachv1.Stage {
		s := newStage("prod", "prod")
		s.Spec.Verification = &stagecoachv1.VerificationPolicy{Grace: &metav1.Duration{Duration: grace},
			Checks: []stagecoachv1.Check{{Name: "smoke"}}}
		return s
	}
	noChecks := newStage("prod", "prod")
	noChecks.Spec.Verification = &stagecoachv1.VerificationPolicy{Grace: &metav1.Duration{Duration: 2 * time.Minute}}
	previous := promotion("prev", "prod", stagecoachv1.ActionPromote, "sha256:p", stagecoachv1.PhaseSucceeded, 0, 0, 1, 2, 3, 5)
	verified := promotion("p", "prod", stagecoachv1.ActionPromote, "sha256:a", stagecoachv1.PhaseSucceeded, 1, 8, 9, 12, 20, 20)
	tests := []struct {
		name  string
		stage *stagecoachv1.Stage
		p     stagecoachv1.Promotion
		want  map[string]time.Duration
	}{
		{name: "never started: nothing", stage: withChecks(2 * time.Minute),
			p:    promotion("p", "prod", stagecoachv1.ActionPromote, "sha256:a", stagecoachv1.PhaseAborted, 1, -1, -1, -1, -1, 9),
			want: map[string]time.Duration{}},
		{name: "queued behind the previous Promotion, then gates, then every phase; checks after the grace", stage: withChecks(2 * time.Minute),
			p: verified,
			want: map[string]time.Duration{PhaseQueued: 4 * time.Minute, PhaseGates: 3 * time.Minute, PhaseApplying: time.Minute,
				PhaseLanding: 3 * time.Minute, PhaseGrace: 2 * time.Minute, PhaseVerification: 6 * time.Minute}},
		{name: "no verification checks: landed → verified is all grace, and no verification series", stage: noChecks,
			p: verified,
			want: map[string]time.Duration{PhaseQueued: 4 * time.Minute, PhaseGates: 3 * time.Minute, PhaseApplying: time.Minute,
				PhaseLanding: 3 * time.Minute, PhaseGrace: 8 * time.Minute}},
		{name: "no grace: landed → verified is all checks, and no grace series", stage: withChecks(0),
			p: verified,
			want: map[string]time.Duration{PhaseQueued: 4 * time.Minute, PhaseGates: 3 * time.Minute, PhaseApplying: time.Minute,
				PhaseLanding: 3 * time.Minute, PhaseVerification: 8 * time.Minute}},
		{name: "created after the previous ended: no queue; failed before landing", stage: withChecks(2 * time.Minute),
			p:    promotion("p", "prod", stagecoachv1.ActionPromote, "sha256:a", stagecoachv1.PhaseFailed, 6, 7, 7, -1, -1, 17),
			want: map[string]time.Duration{PhaseQueued: 0, PhaseGates: time.Minute, PhaseApplying: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(PhaseDurations(tt.stage, []stagecoachv1.Promotion{previous, tt.p}, &tt.p)).To(Equal(tt.want))
		})
	}
}

func TestEngineSignalAt(t *testing.T) {
	tests := []struct {
		name   string
		status map[string]any
		want   time.Time
		ok     bool
	}{
		{name: "Argo CD: reconciledAt", status: map[string]any{"reconciledAt": "2026-11-30T10:00:05Z"}, want: t0.Add(5 * time.Second), ok: true},
		{name: "Flux: Ready's transition", ok: true, want: t0.Add(7 * time.Second), status: map[string]any{"conditions": []any{
			map[string]any{"type": "Reconciling", "status": "True", "lastTransitionTime": "2026-11-30T10:00:01Z"},
			map[string]any{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-30T10:00:07Z"}}}},
		{name: "not Ready: no signal", status: map[string]any{"conditions": []any{
			map[string]any{"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-30T10:00:07Z"}}}},
		{name: "no status", status: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := &unstructured.Unstructured{Object: map[string]any{}}
			if tt.status != nil {
				obj.Object["status"] = tt.status
			}
			got, ok := EngineSignalAt(obj)
			g.Expect(ok).To(Equal(tt.ok))
			g.Expect(got.Equal(tt.want)).To(BeTrue(), "got %s", got)
		})
	}
}

// TestObserver follows one Stage through a verified promote, a failure with its rollback and a
// restore, and checks every event series; Forget then removes them all.
func TestObserver(t *testing.T) {
	g := NewWithT(t)
	staging := newStage("staging", "staging")
	staging.Spec.Source.Registry = &stagecoachv1.RegistrySource{Repository: "registry.example/payments"}
	prod := newStage("prod", "prod")
	prod.Spec.Source.Upstream = &stagecoachv1.UpstreamSource{Stage: "staging"}
	prod.Status.Applier = &stagecoachv1.ObjectReference{APIVersion: "argoproj.io/v1alpha1", Kind: "Application", Name: "payments-prod"}
	app := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "payments-prod", "namespace": "shop"}, "status": map[string]any{"reconciledAt": "2026-11-30T10:20:00Z"}}}
	history := []stagecoachv1.Promotion{
		// v1 first seen in staging at 0, verified in prod at 30: lead time 30 min.
		promotion("stg-v1", "staging", stagecoachv1.ActionPromote, "sha256:1", stagecoachv1.PhaseSucceeded, 0, 0, 1, 2, 3, 3),
		promotion("prod-v1", "prod", stagecoachv1.ActionPromote, "sha256:1", stagecoachv1.PhaseSucceeded, 20, 20, 21, 25, 30, 30),
		// v2 fails at 60 and is rolled back; v1 restored at 70: restore 10 min.
		promotion("prod-v2", "prod", stagecoachv1.ActionPromote, "sha256:2", stagecoachv1.PhaseFailed, 40, 40, 41, -1, -1, 60),
		promotion("prod-v2-rollback", "prod", stagecoachv1.ActionRollback, "sha256:1", stagecoachv1.PhaseSucceeded, 60, 60, 61, 65, 70, 70),
	}
	objects := []client.Object{staging, prod}
	for i := range history {
		objects = append(objects, &history[i])
	}
	reader := fake.NewClientBuilder().WithScheme(newScheme(t)).WithObjects(objects...).Build()
	obs := &Observer{Reader: reader, APIReader: fake.NewClientBuilder().WithObjects(app).Build(), Vectors: NewVectors()}
	var list stagecoachv1.PromotionList
	g.Expect(reader.List(t.Context(), &list)).To(Succeed())
	g.Expect(list.Items).To(HaveLen(4))
	g.Expect(list.Items[0].CreationTimestamp.IsZero()).To(BeFalse(), "the fake keeps creation times")
	for i := range history {
		g.Expect(obs.Finished(t.Context(), &history[i])).To(Succeed())
	}
	g.Expect(obs.Landed(t.Context(), &history[1], t0.Add(20*time.Minute+1500*time.Millisecond))).To(Succeed())

	prodLabels := prometheus.Labels{labelNamespace: "shop", labelStage: "prod", labelService: "payments", labelEnvironment: "prod"}
	v := obs.Vectors
	g.Expect(testutil.ToFloat64(v.Promotions.With(with(prodLabels, labelAction, "Promote", labelResult, "Succeeded")))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(v.Promotions.With(with(prodLabels, labelAction, "Promote", labelResult, "Failed")))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(v.Promotions.With(with(prodLabels, labelAction, "Rollback", labelResult, "Succeeded")))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(v.Deployments.With(prodLabels))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(v.Changes.With(prodLabels))).To(Equal(2.0))
	g.Expect(testutil.ToFloat64(v.ChangeFailures.With(prodLabels))).To(Equal(1.0))
	g.Expect(histogram(t, v.LeadTime, prodLabels)).To(Equal([2]float64{1, 30 * 60}))
	g.Expect(histogram(t, v.TimeToRestore, prodLabels)).To(Equal([2]float64{1, 10 * 60}))
	g.Expect(histogram(t, v.EngineReaction, prodLabels)).To(Equal([2]float64{1, 1.5}))
	g.Expect(histogram(t, v.PhaseDuration, with(prodLabels, labelPhase, PhaseLanding))).To(Equal([2]float64{2, (4 + 4) * 60}))

	obs.Forget("shop", "prod")
	for _, c := range v.collectors() {
		n := testutil.CollectAndCount(c)
		if c == v.Promotions || c == v.PhaseDuration || c == v.Deployments || c == v.Changes || c == v.LeadTime {
			continue // staging's series stay
		}
		g.Expect(n).To(BeZero(), "a series of the deleted Stage is left")
	}
	g.Expect(testutil.CollectAndCount(v.Promotions)).To(Equal(1), "only staging's promote is left")
	g.Expect(testutil.CollectAndCount(v.LeadTime)).To(Equal(1), "only staging's lead time is left")
}

// histogram returns a histogram series' sample count and sum.
func histogram(t *testing.T, vec *prometheus.HistogramVec, l prometheus.Labels) [2]float64 {
	t.Helper()
	h, err := vec.GetMetricWith(l)
	if err != nil {
		t.Fatal(err)
	}
	m := &dto.Metric{}
	if err := h.(prometheus.Metric).Write(m); err != nil {
		t.Fatal(err)
	}
	return [2]float64{float64(m.GetHistogram().GetSampleCount()), m.GetHistogram().GetSampleSum()}
}

// A second manager in the same process (tests) does not fail on the first one's collector, and a
// stopped manager's collector leaves the registry.
func TestStateCollectorStart(t *testing.T) {
	g := NewWithT(t)
	reg := prometheus.NewRegistry()
	reader := fake.NewClientBuilder().WithScheme(newScheme(t)).WithObjects(newStage("prod", "prod")).Build()
	first, second := &StateCollector{Reader: reader}, &StateCollector{Reader: reader}
	ctx1, stop1 := context.WithCancel(t.Context())
	ctx2, stop2 := context.WithCancel(t.Context())
	done1, done2 := make(chan error, 1), make(chan error, 1)
	go func() { done1 <- first.Start(ctx1, reg) }()
	g.Eventually(func() int { n, _ := testutil.GatherAndCount(reg, StageReady); return n }).Should(Equal(1))
	go func() { done2 <- second.Start(ctx2, reg) }()
	g.Consistently(done2, 200*time.Millisecond).ShouldNot(Receive(), "the second must wait, not fail")
	stop1()
	g.Eventually(done1).Should(Receive(BeNil()))
	g.Expect(testutil.GatherAndCount(reg, StageReady)).To(BeZero(), "the stopped manager's Stages are still reported")
	stop2()
	g.Eventually(done2).Should(Receive(BeNil()))
}
