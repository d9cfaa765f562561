package promotion

import (
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// stageReconciles is how many reconciles the Stage controller has made in this process.
func stageReconciles(t *testing.T) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if label(m, "controller") == "stage" {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestWavesReconcilesPerTarget rolls a version out over 200 Applications in three waves and
// prints how many Stage reconciles that took per target (no timing is asserted: the machine is
// shared). It is heavy, so it runs only with STAGECOACH_FLEET_BENCH=1:
//
//	STAGECOACH_FLEET_BENCH=1 go test -v -run TestWavesReconcilesPerTarget ./test/integration/promotion/
func TestWavesReconcilesPerTarget(t *testing.T) {
	if os.Getenv("STAGECOACH_FLEET_BENCH") == "" {
		t.Skip("set STAGECOACH_FLEET_BENCH=1 to roll out over 200 Applications")
	}
	const n = 200
	g := NewWithT(t)
	ns := newNamespace(t)
	var clusters []cluster
	regions := []string{"eu", "us", "ap", "sa"}
	for i := range n {
		clusters = append(clusters, cluster{name: fmt.Sprintf("c%03d", i), region: regions[i%len(regions)], byName: i%2 == 0})
	}
	newFleet(t, ns, "fleet", clusters)
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	newWavesStage(t, ns, "fleet", func(s *stagecoachv1.Stage) {
		s.Spec.Waves = []stagecoachv1.Wave{
			{Name: "canary", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}}, MaxTargets: intOr(1)},
			{Name: "ten percent", MaxTargets: pct("10%"), MaxParallel: pct("50%"), ShuffleKey: "region"},
			{Name: "the rest", MaxParallel: pct("25%")},
		}
	})
	startController(t, nil)
	startFleetArgoCD(t, ns, nil)
	eventuallyCondition(t, ns, "fleet", stagecoachv1.ConditionReady, metav1.ConditionTrue, stagecoachv1.ReasonApplierReady, "200 Applications")

	before := stageReconciles(t)
	start := time.Now()
	newPromotion(t, ns, "v1", "fleet", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
	g.Eventually(func(g Gomega) {
		p := getPromotion(g, t.Context(), ns, "v1")
		g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhaseSucceeded), p.Status.Message)
	}, 5*time.Minute, 200*time.Millisecond).Should(Succeed())
	reconciles := stageReconciles(t) - before
	g.Expect(reconciles).To(BeNumerically(">", 0))
	t.Logf("fleet rollout of %d Applications in 3 waves: %.0f Stage reconciles, %.2f per target, %s on this machine",
		n, reconciles, reconciles/n, time.Since(start).Round(100*time.Millisecond))
}
