package metrics

import (
	"bytes"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/cli"
	"github.com/stagecoach-dev/stagecoach/internal/metrics"
)

// waiting runs `promote --wait`'s follower in the background; result returns what it printed
// and how it ended.
func waiting(t *testing.T, ns, name string) (result func() (string, error)) {
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := cli.WaitForPromotion(t.Context(), env.Client, ns, name, cli.WaitOptions{Timeout: timeout, Interval: 100 * time.Millisecond}, &out)
		done <- err
	}()
	return func() (string, error) {
		err := <-done
		return out.String(), err
	}
}

// TestMetricsOverHTTP scrapes /metrics as Prometheus would, through a promote, a failure with its
// automatic rollback, and a restore by hand; then deletes a Stage and restarts the controller.
// The `promote --wait` follower runs beside the first two.
func TestMetricsOverHTTP(t *testing.T) {
	g := NewWithT(t)
	ns := env.NewNamespace(t, "metrics")
	stagingApp, prodApp := newApplication(t, ns, "staging"), newApplication(t, ns, "prod")
	newStage(t, ns, "staging", "none")
	newStage(t, ns, "prod", "staging")
	addr, stop := controllerWithMetrics(t)
	prod := []string{"namespace", ns, "stage", "prod", "service", "payments", "environment", "prod"}
	staging := []string{"namespace", ns, "stage", "staging", "service", "payments", "environment", "staging"}
	with := func(base []string, kv ...string) []string { return append(append([]string{}, base...), kv...) }
	expect := func(name string, labels []string, want float64) func(Gomega, string) {
		return func(g Gomega, body string) {
			v, ok := sample(body, name, labels...)
			g.Expect(ok).To(BeTrue(), "no series %s%v", name, labels)
			g.Expect(v).To(Equal(want), "%s%v", name, labels)
		}
	}
	eventually := func(checks ...func(Gomega, string)) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			body := scrape(g, addr)
			for _, check := range checks {
				check(g, body)
			}
		}, timeout, interval).Should(Succeed())
	}

	t.Log("a promote: v1 in staging, then in prod, followed by promote --wait")
	newPromotion(t, ns, "staging-v1", "staging", 1)
	deploy(t, stagingApp, 1, "Succeeded", "Healthy")
	newPromotion(t, ns, "prod-v1", "prod", 1)
	wait := waiting(t, ns, "prod-v1")
	deploy(t, prodApp, 1, "Succeeded", "Healthy")
	out, err := wait()
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("gates: "))
	g.Expect(out).To(ContainSubstring("applied: v1.0.0 (" + digest(1) + ")"))
	g.Expect(out).To(MatchRegexp(`(?m)^landed: .*Synced at ` + digest(1) + `, Healthy`))
	g.Expect(out).To(MatchRegexp(`(?m)^verified: `))
	eventually(
		expect(metrics.PromotionsTotal, with(prod, "action", "Promote", "result", "Succeeded"), 1),
		expect(metrics.DeploymentsTotal, prod, 1),
		expect(metrics.ChangesTotal, prod, 1),
		expect(metrics.LeadTime+"_count", prod, 1),
		expect(metrics.EngineReaction+"_count", prod, 1),
		expect(metrics.PromotionPhaseDuration+"_count", with(prod, "phase", metrics.PhaseLanding), 1),
		expect(metrics.StageReady, prod, 1),
		expect(metrics.StageStalled, prod, 0),
		expect(metrics.PromotionsUnfinished, with(prod, "phase", "Running"), 0),
		expect(metrics.DeploymentsTotal, staging, 1),
	)
	body := scrape(g, addr)
	_, ok := sample(body, metrics.ChangeFailuresTotal, prod...)
	g.Expect(ok).To(BeFalse(), "no failure yet: no failure series")
	// Lead time runs from staging's Promotion of v1: at least as long as prod's own.
	staged, _ := sample(body, metrics.LeadTime+"_sum", staging...)
	led, _ := sample(body, metrics.LeadTime+"_sum", prod...)
	g.Expect(led).To(BeNumerically(">=", staged))

	t.Log("a failure with its automatic rollback: v2 fails in prod, v1 is restored")
	newPromotion(t, ns, "prod-v2", "prod", 2)
	wait = waiting(t, ns, "prod-v2")
	deploy(t, prodApp, 2, "Failed", "")
	out, err = wait()
	g.Expect(err).To(MatchError(ContainSubstring("not verified: Promotion " + ns + "/prod-v2 failed")))
	g.Expect(out).To(MatchRegexp(`(?m)^failed: .*the sync of ` + digest(2) + ` ended Failed`))
	deploy(t, prodApp, 1, "Succeeded", "Healthy") // the rollback's write of v1
	eventually(
		expect(metrics.PromotionsTotal, with(prod, "action", "Promote", "result", "Failed"), 1),
		expect(metrics.PromotionsTotal, with(prod, "action", "Rollback", "result", "Succeeded"), 1),
		expect(metrics.ChangesTotal, prod, 2),
		expect(metrics.ChangeFailuresTotal, prod, 1),
		expect(metrics.DeploymentsTotal, prod, 1),
		expect(metrics.TimeToRestore+"_count", prod, 1),
		expect(metrics.StageStalled, prod, 1), // automation holds after the failure
	)

	t.Log("a restore by hand: v3 promoted and verified ends the hold")
	newPromotion(t, ns, "prod-v3", "prod", 3)
	deploy(t, prodApp, 3, "Succeeded", "Healthy")
	eventually(
		expect(metrics.PromotionsTotal, with(prod, "action", "Promote", "result", "Succeeded"), 2),
		expect(metrics.DeploymentsTotal, prod, 2),
		expect(metrics.ChangesTotal, prod, 3),
		expect(metrics.ChangeFailuresTotal, prod, 1),
		expect(metrics.LeadTime+"_count", prod, 2),
		expect(metrics.TimeToRestore+"_count", prod, 1), // restored already by the rollback
		expect(metrics.StageStalled, prod, 0),
		expect(metrics.StageReady, prod, 1),
	)

	t.Log("the Stage is deleted: its series are gone, staging's stay")
	g.Expect(env.Client.Delete(t.Context(), &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		body := scrape(g, addr)
		for _, line := range strings.Split(body, "\n") {
			g.Expect(line).NotTo(ContainSubstring(`stage="prod"`))
		}
		_, ok := sample(body, metrics.StageReady, staging...)
		g.Expect(ok).To(BeTrue())
	}, timeout, interval).Should(Succeed())

	t.Log("the controller restarts: the Stages' state comes back from the objects")
	stop()
	addr, _ = controllerWithMetrics(t)
	eventually(
		expect(metrics.StageReady, staging, 1),
		expect(metrics.StageStalled, staging, 0),
		expect(metrics.PromotionsUnfinished, with(staging, "phase", "Pending"), 0),
	)
}
