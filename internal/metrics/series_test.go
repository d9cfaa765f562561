package metrics

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// cacheReader is a cache holding Stages as the test last set them, and fixed Promotions.
type cacheReader struct {
	listReader
	byName map[string]*stagecoachv1.Stage
}

func newCacheReader(promotions []stagecoachv1.Promotion, stages ...*stagecoachv1.Stage) *cacheReader {
	r := &cacheReader{listReader: listReader{promotions: promotions}, byName: map[string]*stagecoachv1.Stage{}}
	for _, s := range stages {
		r.set(s)
	}
	return r
}

func (r *cacheReader) set(s *stagecoachv1.Stage) { r.byName[s.Namespace+"/"+s.Name] = s.DeepCopy() }

func (r *cacheReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	s, ok := r.byName[key.Namespace+"/"+key.Name]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Group: "stagecoach.dev", Resource: "stages"}, key.Name)
	}
	s.DeepCopyInto(obj.(*stagecoachv1.Stage))
	return nil
}

// scrapeLines serves the vectors on /metrics, as the controller does, and returns the lines of
// the Stage's series.
func scrapeLines(t *testing.T, v *Vectors, namespace, stage string) []string {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := v.Register(reg); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	var lines []string
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if strings.Contains(line, `namespace="`+namespace+`"`) && strings.Contains(line, `stage="`+stage+`"`) {
			lines = append(lines, line)
		}
	}
	return lines
}

var serviceLabel, environmentLabel = regexp.MustCompile(`service="([^"]*)"`), regexp.MustCompile(`environment="([^"]*)"`)

// labelValues are the distinct service/environment pairs of the lines.
func labelValues(lines []string) []string {
	var out []string
	for _, l := range lines {
		pair := serviceLabel.FindStringSubmatch(l)[1] + "/" + environmentLabel.FindStringSubmatch(l)[1]
		if !slices.Contains(out, pair) {
			out = append(out, pair)
		}
	}
	slices.Sort(out)
	return out
}

func edited(s *stagecoachv1.Stage, service, environment string) *stagecoachv1.Stage {
	s = s.DeepCopy()
	s.Generation++
	s.Spec.Service, s.Spec.Environment = service, environment
	return s
}

// A Stage's event series carry its current service and environment: an edit drops the series of
// the old values, on the reconcile that sees it (Follow) or on the next observation, whichever
// comes first; a read of the Stage older than the last one never brings the old values back.
func TestSeriesFollowTheStageSpec(t *testing.T) {
	base := newStage("prod", "prod")
	base.UID, base.Generation = "uid-1", 1
	other := newStage("staging", "staging")
	finished := func(name string, phase stagecoachv1.Phase) stagecoachv1.Promotion {
		return promotion(name, "prod", stagecoachv1.ActionPromote, "sha256:1", phase, 0, 0, 1, 2, 3, 3)
	}
	type step struct {
		stage   *stagecoachv1.Stage // what the cache holds now
		follow  bool                // the Stage is reconciled (Follow)
		observe bool                // a Promotion of it finishes (read from the cache)
	}
	twelve := []step{{stage: base, observe: true}}
	for i := 1; i <= 12; i++ {
		twelve = append(twelve, step{stage: edited(twelve[i-1].stage, fmt.Sprintf("payments-%d", i), "prod"), follow: i%2 == 0, observe: true})
	}
	tests := []struct {
		name  string
		steps []step
		want  []string // service/environment pairs of the Stage's series at the end
	}{
		{name: "twelve edits of spec.service, each followed by a Promotion: only the current labels remain",
			steps: twelve, want: []string{"payments-12/prod"}},
		{name: "an edit with no Promotion after it: the reconcile drops the old series",
			steps: []step{{stage: base, observe: true}, {stage: edited(base, "billing", "prod"), follow: true}}, want: nil},
		{name: "an edit of spec.environment too",
			steps: []step{{stage: base, observe: true}, {stage: edited(base, "payments", "production"), follow: true, observe: true}},
			want:  []string{"payments/production"}},
		{name: "an older read of the Stage observes under the newer labels",
			steps: []step{{stage: base, observe: true}, {stage: edited(base, "billing", "prod"), follow: true, observe: true},
				{stage: base, follow: true, observe: true}},
			want: []string{"billing/prod"}},
		{name: "a Stage created anew under the name (another uid, generation 1) takes its own labels",
			steps: []step{{stage: edited(edited(base, "billing", "prod"), "billing", "prod"), observe: true},
				{stage: func() *stagecoachv1.Stage { s := base.DeepCopy(); s.UID = "uid-2"; return s }(), follow: true, observe: true}},
			want: []string{"payments/prod"}},
		{name: "following a Stage with no series records nothing and deletes nothing",
			steps: []step{{stage: base, follow: true}, {stage: edited(base, "billing", "prod"), follow: true}}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			reader := newCacheReader(nil, other)
			obs := &Observer{Reader: reader, Vectors: NewVectors()}
			otherDone := promotion("stg", "staging", stagecoachv1.ActionPromote, "sha256:1", stagecoachv1.PhaseSucceeded, 0, 0, 1, 2, 3, 3)
			g.Expect(obs.Finished(t.Context(), &otherDone)).To(Succeed())
			otherLines := scrapeLines(t, obs.Vectors, "shop", "staging")
			g.Expect(otherLines).NotTo(BeEmpty())
			for i, s := range tt.steps {
				reader.set(s.stage)
				if s.follow {
					obs.Follow(s.stage)
				}
				if s.observe {
					p := finished(fmt.Sprintf("p-%d", i), stagecoachv1.PhaseSucceeded)
					g.Expect(obs.Finished(t.Context(), &p)).To(Succeed())
				}
				g.Expect(len(scrapeLines(t, obs.Vectors, "shop", "prod"))).To(BeNumerically("<=", MaxEventSeriesPerStage))
			}
			lines := scrapeLines(t, obs.Vectors, "shop", "prod")
			g.Expect(labelValues(lines)).To(Equal(tt.want), strings.Join(lines, "\n"))
			g.Expect(scrapeLines(t, obs.Vectors, "shop", "staging")).To(Equal(otherLines), "another Stage's series are left alone")
		})
	}
}

// One Stage's event series are bounded by MaxEventSeriesPerStage, and the bound is tight: a Stage
// that went through every action and result, every phase, a deployment with its lead time, a
// failure, a restore and an engine reaction has exactly that many; Promotions in a phase that is
// not final, or of an action the CRD does not know, add none.
func TestSeriesPerStageBound(t *testing.T) {
	g := NewWithT(t)
	g.Expect(MaxEventSeriesPerStage).To(Equal(104))
	g.Expect(MaxStateSeriesPerStage).To(Equal(20))

	prod := newStage("prod", "prod")
	prod.Spec.Verification = &stagecoachv1.VerificationPolicy{Grace: &metav1.Duration{Duration: 2 * time.Minute},
		Checks: []stagecoachv1.Check{{Name: "smoke"}}}
	prod.Status.Applier = &stagecoachv1.ObjectReference{APIVersion: "argoproj.io/v1alpha1", Kind: "Application", Name: "payments-prod"}
	app := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "payments-prod", "namespace": "shop"}, "status": map[string]any{"reconciledAt": "2026-11-30T10:20:00Z"}}}
	failed := promotion("v1", "prod", stagecoachv1.ActionPromote, "sha256:1", stagecoachv1.PhaseFailed, 0, 0, 1, -1, -1, 10)
	// Queued behind v1, then every phase: queued, gates, applying, landing, grace, verification.
	verified := promotion("v2", "prod", stagecoachv1.ActionPromote, "sha256:2", stagecoachv1.PhaseSucceeded, 5, 12, 13, 15, 25, 25)
	reader := newCacheReader([]stagecoachv1.Promotion{failed, verified}, prod)
	obs := &Observer{Reader: reader, APIReader: fake.NewClientBuilder().WithObjects(app).Build(), Vectors: NewVectors()}

	g.Expect(obs.Finished(t.Context(), &failed)).To(Succeed())
	g.Expect(obs.Finished(t.Context(), &verified)).To(Succeed())
	g.Expect(obs.Landed(t.Context(), &verified, t0.Add(20*time.Minute+time.Second))).To(Succeed())
	for _, action := range observedActions {
		for _, result := range observedResults {
			p := promotion(fmt.Sprintf("%s-%s", action, result), "prod", action, "sha256:3", result, 30, -1, -1, -1, -1, 31)
			g.Expect(obs.Finished(t.Context(), &p)).To(Succeed())
		}
	}
	for _, p := range []stagecoachv1.Promotion{
		promotion("running", "prod", stagecoachv1.ActionPromote, "sha256:4", stagecoachv1.PhaseRunning, 30, -1, -1, -1, -1, -1),
		promotion("unknown", "prod", stagecoachv1.PromotionAction("Teleport"), "sha256:4", stagecoachv1.PhaseSucceeded, 30, -1, -1, -1, -1, 31),
	} {
		g.Expect(obs.Finished(t.Context(), &p)).To(Succeed())
	}

	lines := scrapeLines(t, obs.Vectors, "shop", "prod")
	g.Expect(lines).To(HaveLen(MaxEventSeriesPerStage), strings.Join(lines, "\n"))
	g.Expect(strings.Join(lines, "\n")).NotTo(Or(ContainSubstring("Teleport"), ContainSubstring(`result="Running"`)))

	// After an edit, the same history under the new labels is bounded the same way.
	obs.Follow(edited(prod, "billing", "prod"))
	g.Expect(scrapeLines(t, obs.Vectors, "shop", "prod")).To(BeEmpty())
	reader.set(edited(prod, "billing", "prod"))
	g.Expect(obs.Finished(t.Context(), &verified)).To(Succeed())
	lines = scrapeLines(t, obs.Vectors, "shop", "prod")
	g.Expect(labelValues(lines)).To(Equal([]string{"billing/prod"}))
	g.Expect(len(lines)).To(BeNumerically("<=", MaxEventSeriesPerStage))

	// Forget drops the Stage and what was recorded of it.
	obs.Forget("shop", "prod")
	g.Expect(scrapeLines(t, obs.Vectors, "shop", "prod")).To(BeEmpty())
	g.Expect(obs.Vectors.labels).NotTo(HaveKey(types.NamespacedName{Namespace: "shop", Name: "prod"}))
}

// Observations and edits of one Stage at once (the status writer and the reconciler of another
// manager in the same process) leave only the newest labels.
func TestSeriesFollowUnderConcurrency(t *testing.T) {
	g := NewWithT(t)
	base := newStage("prod", "prod")
	base.UID = "uid-1"
	v := NewVectors()
	done := make(chan struct{})
	const edits = 50
	go func() {
		defer close(done)
		for i := 1; i <= edits; i++ {
			s := base.DeepCopy()
			s.Generation, s.Spec.Service = int64(i), fmt.Sprintf("svc-%d", i)
			v.Follow(s)
			v.observe(s, func(l prometheus.Labels) { v.Deployments.With(l).Inc() })
		}
	}()
	for i := 0; i < 500; i++ {
		s := base.DeepCopy() // a stale read: generation 0 loses to every edit once one is recorded
		v.observe(s, func(l prometheus.Labels) { v.Changes.With(l).Inc() })
	}
	<-done
	g.Expect(labelValues(scrapeLines(t, v, "shop", "prod"))).To(Equal([]string{fmt.Sprintf("svc-%d/prod", edits)}))
}
