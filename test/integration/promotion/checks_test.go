package promotion

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

// buildExamplePlugin builds plugin/check/example into dir and returns its SHA-256.
func buildExamplePlugin(t *testing.T, dir string) string {
	t.Helper()
	g := NewWithT(t)
	out := filepath.Join(dir, "example")
	// -race, as the suites compile: its dependencies are built already.
	cmd := exec.CommandContext(t.Context(), "go", "build", "-race", "-o", out, "./plugin/check/example")
	cmd.Dir = testenv.RepoRoot()
	output, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(output))
	data, err := os.ReadFile(out)
	g.Expect(err).NotTo(HaveOccurred())
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Checks before apply keep a version from being applied; checks after landing (here a real
// go-plugin binary) fail the promote, which rolls back.
func TestChecksBeforeApplyAndAfterLanding(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	pluginDir := t.TempDir()
	sum := buildExamplePlugin(t, pluginDir)
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/v2.0.0") {
			http.Error(w, "change freeze for v2 in the ticket system", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(gate.Close)

	app := newApplication(t, ns, "web", ociSpec(ns))
	newStage(t, ns, "web", func(s *stagecoachv1.Stage) {
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Checks: []stagecoachv1.Check{
			{Name: "ticket", HTTP: &stagecoachv1.HTTPCheck{URL: gate.URL + "/allowed/{{.Version}}"}}}}
		s.Spec.Verification.Checks = []stagecoachv1.Check{{Name: "smoke", Plugin: &stagecoachv1.PluginCheck{
			Name: "example", SHA256: sum, Config: map[string]string{"deny": digest(3)}}}}
	})
	startControllerWith(t, nil, func(o *controller.Options) { o.CheckPluginDir = pluginDir })

	promoteAndLand(t, ns, "web", app, "web-v1", 1)
	v1 := getPromotion(g, t.Context(), ns, "web-v1")
	g.Expect(v1.Status.Gates).To(ContainElements(
		And(HaveField("Gate", "check/ticket"), HaveField("Passed", true)),
		And(HaveField("Gate", "check/smoke"), HaveField("Passed", true))))

	// v2: the ticket system says no; nothing is applied.
	newPromotion(t, ns, "web-v2", "web", stagecoachv1.ActionPromote, digest(2), "v2.0.0")
	failed := eventuallyPhase(t, ns, "web-v2", stagecoachv1.PhaseFailed)
	g.Expect(failed.Status.Message).To(And(HavePrefix("not applied: "), ContainSubstring(`check "ticket" failed`), ContainSubstring("503")))
	g.Expect(failed.Status.AppliedAt).To(BeNil())
	// The checks are the last gate of the chain: their verdicts stay on the refused Promotion.
	g.Expect(failed.Status.Gates).To(ContainElement(And(HaveField("Gate", "check/ticket"), HaveField("Passed", false),
		HaveField("Message", ContainSubstring("503")))))
	g.Expect(app.desiredRevision(app.get())).To(Equal(digest(1)))

	// v3 lands, but the plugin denies it: the promote fails and rolls back to v1.
	newPromotion(t, ns, "web-v3", "web", stagecoachv1.ActionPromote, digest(3), "v3.0.0")
	app.deploy(digest(3), false, "Succeeded", "Healthy")
	app.waitForRevision(digest(1), false)
	app.deploy(digest(1), false, "Succeeded", "Healthy")
	failed = eventuallyPhase(t, ns, "web-v3", stagecoachv1.PhaseRolledBack)
	g.Expect(failed.Status.Message).To(ContainSubstring(`landed, but check "smoke" failed: plugin "example"`))
	g.Expect(failed.Status.Gates).To(ContainElement(And(HaveField("Gate", "check/smoke"), HaveField("Passed", false),
		HaveField("Message", ContainSubstring(digest(3))))))
}

// Without --allow-internal-check-targets (the suite turns it on for its loopback check servers;
// this test turns it off for its own controller only), a check calling a private address is
// refused before any request, and a body match with a query or a modifier does not run: each
// refusal, naming the range and the flag or the path, is what the Promotion says.
func TestChecksRefusePrivateTargetsAndBodyQueries(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	app := newApplication(t, ns, "web", ociSpec(ns))
	newStage(t, ns, "web", func(s *stagecoachv1.Stage) {
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Checks: []stagecoachv1.Check{
			{Name: "verdict", HTTP: &stagecoachv1.HTTPCheck{URL: "http://[fd00::2]:8080/verdict/{{.Version}}"}},
			{Name: "token", HTTP: &stagecoachv1.HTTPCheck{URL: "https://tickets.example/ok",
				Body: &stagecoachv1.FieldMatch{Key: `token.@reverse`, Value: "x"}}},
		}}
	})
	startControllerWith(t, nil, func(o *controller.Options) { o.AllowInternalCheckTargets = false })

	newPromotion(t, ns, "web-v1", "web", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
	failed := eventuallyPhase(t, ns, "web-v1", stagecoachv1.PhaseFailed)
	g.Expect(failed.Status.Message).To(And(HavePrefix("not applied: "), ContainSubstring(`check "verdict" cannot run`),
		ContainSubstring("fd00::2"), ContainSubstring("unique-local address (fc00::/7)"), ContainSubstring("--allow-internal-check-targets")))
	g.Expect(failed.Status.Gates).To(ContainElements(
		And(HaveField("Gate", "check/verdict"), HaveField("Passed", false),
			HaveField("Message", ContainSubstring("fc00::/7"))),
		And(HaveField("Gate", "check/token"), HaveField("Passed", false),
			HaveField("Message", And(ContainSubstring(`body.key "token.@reverse" is not allowed: it has a modifier (@)`), ContainSubstring("use a plain path"))))))
	g.Expect(failed.Status.AppliedAt).To(BeNil())
	g.Expect(app.desiredRevision(app.get())).NotTo(Equal(digest(1)))
}
