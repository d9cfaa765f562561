package metrics

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// listReader serves fixed lists, as the cache does with UnsafeDisableDeepCopy (no copies).
type listReader struct {
	client.Reader
	stages     []stagecoachv1.Stage
	promotions []stagecoachv1.Promotion
}

func (r *listReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	switch l := list.(type) {
	case *stagecoachv1.StageList:
		l.Items = r.stages
	case *stagecoachv1.PromotionList:
		l.Items = r.promotions
	default:
		return fmt.Errorf("unexpected list %T", list)
	}
	return nil
}

// fleet is n Stages (services of 3 environments each), every candidate blocked by two gates,
// one Promotion running and one pending per ten Stages, and each Stage's event series filled as
// after a verified promote, a failure and its rollback.
func fleet(n int) (*listReader, *Vectors) {
	r := &listReader{}
	v := NewVectors()
	envs := []string{"dev", "staging", "prod"}
	for i := range n {
		s := *newStage(fmt.Sprintf("svc-%04d-%s", i/3, envs[i%3]), envs[i%3],
			cond(stagecoachv1.ConditionReady, metav1.ConditionTrue), cond(stagecoachv1.ConditionStalled, metav1.ConditionFalse))
		s.Namespace = fmt.Sprintf("team-%02d", i%50)
		s.Spec.Service = fmt.Sprintf("svc-%04d", i/3)
		s.Status.Candidate = &stagecoachv1.CandidateVersion{BlockedBy: []stagecoachv1.GateBlock{{Gate: "soak"}, {Gate: "approvals"}}}
		r.stages = append(r.stages, s)
		if i%10 == 0 {
			for _, phase := range []stagecoachv1.Phase{stagecoachv1.PhaseRunning, stagecoachv1.PhasePending} {
				p := promotion(fmt.Sprintf("%s-%s", s.Name, phase), s.Name, stagecoachv1.ActionPromote, "sha256:1", phase, 0, 1, -1, -1, -1, -1)
				p.Namespace = s.Namespace
				r.promotions = append(r.promotions, p)
			}
		}
		l := labelsOf(&s)
		v.Promotions.With(with(l, labelAction, "Promote", labelResult, "Succeeded")).Inc()
		v.Promotions.With(with(l, labelAction, "Promote", labelResult, "Failed")).Inc()
		v.Promotions.With(with(l, labelAction, "Rollback", labelResult, "Succeeded")).Inc()
		for _, phase := range []string{PhaseQueued, PhaseGates, PhaseApplying, PhaseLanding, PhaseGrace, PhaseVerification} {
			v.PhaseDuration.With(with(l, labelPhase, phase)).Observe(30)
		}
		v.EngineReaction.With(l).Observe(1)
		v.LeadTime.With(l).Observe(3600)
		v.Deployments.With(l).Inc()
		v.Changes.With(l).Add(2)
		v.ChangeFailures.With(l).Inc()
		v.TimeToRestore.With(l).Observe(600)
	}
	return r, v
}

// BenchmarkScrape serves /metrics for 5,000 Stages over HTTP (text format, as Prometheus asks
// without protobuf) and reports the response size and series per Stage; the state benchmark
// alone is what each scrape costs beyond serving counters.
func BenchmarkScrape(b *testing.B) {
	const stages = 5000
	for _, tc := range []struct {
		name   string
		events bool
	}{{"state", false}, {"state+events", true}} {
		b.Run(tc.name, func(b *testing.B) {
			reader, vectors := fleet(stages)
			reg := prometheus.NewRegistry()
			if err := reg.Register(&StateCollector{Reader: reader, Context: b.Context(), Timeout: 10 * time.Second}); err != nil {
				b.Fatal(err)
			}
			if tc.events {
				if err := vectors.Register(reg); err != nil {
					b.Fatal(err)
				}
			}
			handler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
			var size int
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
				if rec.Code != http.StatusOK {
					b.Fatalf("scrape answered %d", rec.Code)
				}
				size = rec.Body.Len()
			}
			families, err := reg.Gather()
			if err != nil {
				b.Fatal(err)
			}
			series := 0
			for _, f := range families {
				for _, m := range f.GetMetric() {
					series++
					if h := m.GetHistogram(); h != nil {
						series += len(h.GetBucket()) + 2 // buckets (+Inf included in text) and _sum, _count
					}
				}
			}
			b.ReportMetric(float64(size), "bytes/scrape")
			b.ReportMetric(float64(series)/stages, "series/stage")
		})
	}
}

// labelsOf is the label set of a Stage's event series.
func labelsOf(s *stagecoachv1.Stage) prometheus.Labels {
	return prometheus.Labels{labelNamespace: s.Namespace, labelStage: s.Name, labelService: s.Spec.Service,
		labelEnvironment: s.Spec.Environment}
}
