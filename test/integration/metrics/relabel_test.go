package metrics

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/metrics"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

// stageLines are the lines of /metrics about one Stage.
func stageLines(body, ns, stage string) []string {
	var out []string
	for _, line := range strings.Split(body, "\n") {
		if strings.Contains(line, `namespace="`+ns+`"`) && strings.Contains(line, `stage="`+stage+`"`) {
			out = append(out, line)
		}
	}
	return out
}

// TestSeriesFollowSpecService edits a Stage's spec.service twelve times, each edit followed by a
// Promotion that finishes (a Freeze or Unfreeze: at once), and scrapes /metrics after each: only
// the current service's series remain, never more than the per-Stage bound.
func TestSeriesFollowSpecService(t *testing.T) {
	g := NewWithT(t)
	ns := env.NewNamespace(t, "relabel")
	app := newApplication(t, ns, "prod")
	newStage(t, ns, "prod", testenv.PlaceholderUpstream)
	addr, _ := controllerWithMetrics(t)

	// A verified promote fills the event series: counters and histograms.
	newPromotion(t, ns, "prod-v1", "prod", 1)
	deploy(t, app, 1, "Succeeded", "Healthy")
	g.Eventually(func(g Gomega) {
		v, ok := sample(scrape(g, addr), metrics.DeploymentsTotal, "namespace", ns, "stage", "prod", "service", "payments")
		g.Expect(ok).To(BeTrue())
		g.Expect(v).To(Equal(1.0))
	}, timeout, interval).Should(Succeed())

	bound := metrics.MaxEventSeriesPerStage + metrics.MaxStateSeriesPerStage
	for i := 1; i <= 12; i++ {
		service := fmt.Sprintf("payments-%d", i)
		g.Eventually(func() error {
			s := &stagecoachv1.Stage{}
			if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "prod"}, s); err != nil {
				return err
			}
			s.Spec.Service = service
			return env.Client.Update(t.Context(), s)
		}, timeout, interval).Should(Succeed())
		action := stagecoachv1.ActionFreeze
		if i%2 == 0 {
			action = stagecoachv1.ActionUnfreeze
		}
		g.Expect(env.Client.Create(t.Context(), &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("control-%d", i)},
			Spec: stagecoachv1.PromotionSpec{Stage: "prod", Action: action, Reason: "relabel test"}})).To(Succeed())
		g.Eventually(func(g Gomega) {
			body := scrape(g, addr)
			v, ok := sample(body, metrics.PromotionsTotal, "namespace", ns, "stage", "prod", "service", service,
				"action", string(action), "result", "Succeeded")
			g.Expect(ok).To(BeTrue(), "no series of the %s Promotion under service %s", action, service)
			g.Expect(v).To(Equal(1.0))
			lines := stageLines(body, ns, "prod")
			for _, line := range lines {
				g.Expect(line).To(ContainSubstring(`service="`+service+`"`), "a series of an old service is left")
			}
			g.Expect(len(lines)).To(BeNumerically("<=", bound))
		}, timeout, interval).Should(Succeed())
	}
}
