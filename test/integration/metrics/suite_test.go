// Package metrics scrapes the controller's /metrics over HTTP, from a real manager against a real
// API server, while a fake Argo CD plays the engine (test/fakeargocd).
package metrics

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller"
	"github.com/stagecoach-dev/stagecoach/test/fakeargocd"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

const (
	timeout  = 20 * time.Second
	interval = 50 * time.Millisecond
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.SetLogger()
	var err error
	env, err = testenv.Start(testenv.ArgoCDCRDs)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "failed to stop the test API server:", err)
	}
	os.Exit(code)
}

// freeAddress finds a loopback port for the metrics server (the manager does not say which port
// ":0" got).
func freeAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// controllerWithMetrics starts the real manager serving /metrics; stop ends it (and the test's
// cleanup does, if the test did not).
func controllerWithMetrics(t *testing.T) (addr string, stop func()) {
	t.Helper()
	addr = freeAddress(t)
	stopManager, err := env.RunManager(context.WithoutCancel(t.Context()), func(o *controller.Options) {
		o.MetricsBindAddress = addr
		o.ApplierRetryInterval = 500 * time.Millisecond
		o.SkipNameValidation = true // one manager after another in one process
	})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			NewWithT(t).Expect(stopManager()).To(Succeed())
		}
	}
	t.Cleanup(stop)
	return addr, stop
}

// scrape reads /metrics over HTTP.
func scrape(g Gomega, addr string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	return string(body)
}

// sample finds the value of the series name{labels...} in an exposition; ok is false when there
// is none. labels are "key", "value" pairs and need not be all of the series' labels.
func sample(body, name string, labels ...string) (float64, bool) {
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			if !strings.Contains(line, labels[i]+`="`+labels[i+1]+`"`) {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		return v, err == nil
	}
	return 0, false
}

func digest(n int) string { return fmt.Sprintf("sha256:%064x", n) }

func tag(n int) string { return fmt.Sprintf("v%d.0.0", n) }

// newStage creates a Stage of service payments applied by the Application of its name.
func newStage(t *testing.T, ns, name, upstream string) {
	t.Helper()
	grace := metav1.Duration{Duration: time.Second}
	stage := &stagecoachv1.Stage{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: stagecoachv1.StageSpec{Service: "payments", Environment: name,
			ApplyRef:     stagecoachv1.ApplierReference{Kind: "Application", Name: name},
			Source:       stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: upstream}},
			Verification: &stagecoachv1.VerificationPolicy{Grace: &grace}},
	}
	if upstream == testenv.PlaceholderUpstream {
		env.CreatePlaceholderUpstream(t, ns)
	}

	NewWithT(t).Expect(env.Client.Create(t.Context(), stage)).To(Succeed())
}

func newApplication(t *testing.T, ns, name string) *fakeargocd.App {
	t.Helper()
	app, err := fakeargocd.Create(t.Context(), env.Client, ns, name, fakeargocd.OCISpec(ns))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return app
}

func newPromotion(t *testing.T, ns, name, stage string, n int) {
	t.Helper()
	p := &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: stagecoachv1.PromotionSpec{Stage: stage, Action: stagecoachv1.ActionPromote,
			Version: &stagecoachv1.VersionReference{Digest: digest(n), Tag: tag(n)}}}
	NewWithT(t).Expect(env.Client.Create(t.Context(), p)).To(Succeed())
}

// deploy waits for Stagecoach's write of the digest, then plays Argo CD's sync of it.
func deploy(t *testing.T, app *fakeargocd.App, n int, phase, health string) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		u, err := app.Get(t.Context())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(fakeargocd.Applied(u, digest(n))).To(BeTrue())
	}, timeout, interval).Should(Succeed(), "Stagecoach did not write %s to Application %s", digest(n), app.Key)
	g.Expect(app.Deploy(t.Context(), phase, health)).To(Succeed())
}
