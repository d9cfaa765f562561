package metrics

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/dora"
)

// TestDoraAgreesWithMetrics observes a recorded history Promotion by Promotion, as the controller
// would (each sees only what existed when it finished), and checks that `stagecoach dora` over the
// same objects gives the same four keys as the series.
func TestDoraAgreesWithMetrics(t *testing.T) {
	g := NewWithT(t)
	dev, prod := newStage("dev", "dev"), newStage("prod", "prod")
	prod.Spec.Source.Upstream = &stagecoachv1.UpstreamSource{Stage: "dev"}
	const (
		promote, rollback                 = stagecoachv1.ActionPromote, stagecoachv1.ActionRollback
		ok, failed, rolledBack, abortedPh = stagecoachv1.PhaseSucceeded, stagecoachv1.PhaseFailed, stagecoachv1.PhaseRolledBack, stagecoachv1.PhaseAborted
	)
	// In the order they finished.
	history := []stagecoachv1.Promotion{
		promotion("dev-1", "dev", promote, "sha256:1", ok, 0, 0, 1, 2, 3, 3),
		promotion("prod-1", "prod", promote, "sha256:1", ok, 10, 10, 11, 12, 14, 14),
		promotion("dev-2", "dev", promote, "sha256:2", ok, 20, 20, 21, 22, 23, 23),
		promotion("prod-2", "prod", promote, "sha256:2", rolledBack, 30, 30, 31, -1, -1, 40),
		promotion("prod-2-rb", "prod", rollback, "sha256:1", ok, 40, 40, 41, 42, 45, 45),
		promotion("dev-3", "dev", promote, "sha256:3", failed, 50, 50, 51, -1, -1, 55),
		promotion("dev-4", "dev", promote, "sha256:4", failed, 56, 56, 57, -1, -1, 60),
		firstSeen(promotion("dev-5", "dev", promote, "sha256:5", ok, 61, 61, 62, 63, 70, 70), 58),
		promotion("prod-5", "prod", promote, "sha256:5", ok, 80, 80, 81, 85, 95, 95),
		promotion("prod-6", "prod", promote, "sha256:6", abortedPh, 96, -1, -1, -1, -1, 97),
	}
	obs := &Observer{Vectors: NewVectors()}
	for i := range history {
		objects := []client.Object{dev.DeepCopy(), prod.DeepCopy()}
		for j := 0; j <= i; j++ {
			objects = append(objects, history[j].DeepCopy())
		}
		obs.Reader = fake.NewClientBuilder().WithScheme(newScheme(t)).WithObjects(objects...).Build()
		g.Expect(obs.Finished(t.Context(), &history[i])).To(Succeed())
	}

	keys := dora.Compute([]stagecoachv1.Stage{*dev, *prod}, history, t0.Add(-time.Hour), t0.Add(24*time.Hour))
	g.Expect(keys).To(HaveLen(2))
	for _, k := range keys {
		t.Run(k.Stage, func(t *testing.T) {
			g := NewWithT(t)
			l := prometheus.Labels{labelNamespace: k.Namespace, labelStage: k.Stage, labelService: k.Service, labelEnvironment: k.Environment}
			g.Expect(testutil.ToFloat64(obs.Vectors.Deployments.With(l))).To(Equal(float64(k.Deployments)))
			g.Expect(testutil.ToFloat64(obs.Vectors.Changes.With(l))).To(Equal(float64(k.Changes)))
			g.Expect(testutil.ToFloat64(obs.Vectors.ChangeFailures.With(l))).To(Equal(float64(k.Failures)))
			g.Expect(histogram(t, obs.Vectors.LeadTime, l)).To(Equal([2]float64{float64(k.LeadTime.Count), k.LeadTime.SumSeconds}))
			g.Expect(histogram(t, obs.Vectors.TimeToRestore, l)).To(Equal([2]float64{float64(k.TimeToRestore.Count), k.TimeToRestore.SumSeconds}))
		})
	}
	// The history is not trivial: each key has something to agree on.
	g.Expect(keys[0].TimeToRestore.Count).To(Equal(1), "dev restored once, 15 min after dev-3 failed")
	g.Expect(keys[0].TimeToRestore.Sum).To(Equal(15 * time.Minute))
	g.Expect(keys[1].LeadTime.Sum).To(Equal((14+95-58)*time.Minute), "v5's lead time runs from dev's registry firstSeen")
	g.Expect(keys[1].Failures).To(Equal(1))
}

// firstSeen stamps when the registry first offered p's version, as automation does.
func firstSeen(p stagecoachv1.Promotion, min int) stagecoachv1.Promotion {
	p.Annotations = map[string]string{stagecoachv1.FirstSeenAnnotation: at(min).UTC().Format(time.RFC3339)}
	return p
}
