package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
)

// A pipeline step runs `stagecoach promote --wait` as a user of its own: the real binary, a
// kubeconfig of that user, the real engines. A good release exits 0 once Verified, printing each
// step as it happens; a release the engine cannot apply exits non-zero with the engine's reason.
func TestCLIPromoteWait(t *testing.T) {
	sc := env.Scenario(t)
	repo, target := sc.NS+"/payments", sc.TargetNamespace("dev")
	good := sc.Push(repo, "v1.0.0", map[string]string{"configmap.yaml": localstack.ConfigMap("payments", "v1.0.0")})
	// Of a kind no API server serves: kustomize-controller's apply fails with ReconciliationFailed.
	broken := sc.Push(repo, "v2.0.0", map[string]string{"broken.yaml": "apiVersion: e2e.stagecoach.dev/v1\nkind: NoSuchKind\nmetadata: {name: broken}\n"})
	sc.FluxOCISource("payments-dev", repo, "v1.0.0", "dev", target)
	sc.Stage("dev", "payments", "dev",
		stagecoachv1.ApplierReference{Kind: "OCIRepository", Name: "payments-dev", Kustomization: "payments-dev-apply"},
		stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "none"}},
		// The deadline only backs the engine's own verdict up: the broken release fails sooner.
		func(s *stagecoachv1.Stage) {
			s.Spec.Verification.ProgressDeadline = &metav1.Duration{Duration: time.Minute}
		})

	const user = "release-bot"
	kubeconfig := userKubeconfig(t, user)
	stagecoach := func(args ...string) (stdout, stderr string, err error) {
		ctx, cancel := context.WithTimeout(sc.Ctx(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, env.Bin.Stagecoach, append(args, "--kubeconfig", kubeconfig, "-n", sc.NS)...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err = cmd.Run()
		t.Logf("stagecoach %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), out.String(), errOut.String())
		return out.String(), errOut.String(), err
	}

	t.Run("verified: exit 0 and every step", func(t *testing.T) {
		g := NewWithT(t)
		started := time.Now()
		stdout, _, err := stagecoach("promote", "dev", "--digest", good, "--reason", "e2e: release v1", "--wait", "--timeout", "2m")
		g.Expect(err).NotTo(HaveOccurred())
		steps := stepLines(stdout)
		// queued shows only when the CLI reads the Promotion before the controller starts it.
		for strings.HasPrefix(steps, "queued\n") {
			steps = strings.TrimPrefix(steps, "queued\n")
		}
		g.Expect(steps).To(Equal("gates\napplied\nlanded\nverified\n"), stdout)
		g.Expect(stdout).To(MatchRegexp(`(?m)^applied: ` + regexp.QuoteMeta(good) + ` at `))
		// The engine's evidence, the Kustomization Ready at the generation that applied the digest,
		// on the landed line or, when Flux was checking again as it landed (the landed line says
		// so), on the verified line.
		evidence := `Kustomization '` + sc.NS + `/payments-dev-apply' is Ready at generation \d+: applied ` + good
		g.Expect(stdout).To(MatchRegexp(`(?m)^landed: .*(` + evidence + `|checking it again)`))
		g.Expect(stdout).To(MatchRegexp(`(?m)^verified: .*` + evidence))
		stage := sc.GetStage(g, "dev")
		g.Expect(stage.Status.Current).NotTo(BeNil())
		g.Expect(stage.Status.Current.Digest).To(Equal(good))
		g.Expect(sc.ConfigMapData(g, target, "payments")).To(HaveKeyWithValue("version", "v1.0.0"))
		report("%-8s promote --wait exited 0 after %s (created → Verified, as %s)", "cli", time.Since(started).Round(10*time.Millisecond), user)
	})

	t.Run("failed: exit non-zero with the reason", func(t *testing.T) {
		g := NewWithT(t)
		started := time.Now()
		stdout, stderr, err := stagecoach("promote", "dev", "--digest", broken, "--wait", "--timeout", "2m", "-o", "json")
		var exit *exec.ExitError
		g.Expect(errors.As(err, &exit)).To(BeTrue(), "stagecoach exited 0 on a failed release")
		g.Expect(exit.ExitCode()).NotTo(BeZero())
		// The reason on stderr, in the last line, naming the engine's verdict.
		g.Expect(stderr).To(MatchRegexp(`(?m)^Error: not verified: Promotion ` + sc.NS + `/dev-\S+ failed: .*ReconciliationFailed.*`))
		g.Expect(stderr).To(MatchRegexp(`(?m)^applied: ` + regexp.QuoteMeta(broken) + ` at `))
		g.Expect(stderr).To(MatchRegexp(`(?m)^failed: .*ReconciliationFailed`), "the step as it happened, on stderr beside -o json")
		// -o json: stdout is the Promotion as it ended, nothing else.
		var ended stagecoachv1.Promotion
		g.Expect(json.Unmarshal([]byte(stdout), &ended)).To(Succeed(), stdout)
		g.Expect(ended.Status.Phase).To(Equal(stagecoachv1.PhaseFailed))
		g.Expect(ended.Spec.RequestedBy).To(Equal(user))
		g.Expect(ended.Spec.Version.Digest).To(Equal(broken))
		report("%-8s promote --wait exited %d after %s on a failed release", "cli", exit.ExitCode(), time.Since(started).Round(10*time.Millisecond))
	})
}

// userKubeconfig writes a kubeconfig that acts as user: the admin's credentials impersonating
// user, who may do everything (system:masters) but is not the admin, so Promotions name user.
func userKubeconfig(t *testing.T, user string) string {
	t.Helper()
	g := NewWithT(t)
	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate, auth.ImpersonateGroups = user, []string{"system:masters"}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(clientcmd.WriteToFile(*cfg, path)).To(Succeed())
	return path
}

// stepLines is the step name of each line that names one ("gates: …" → "gates"), one a line.
func stepLines(out string) string {
	var b strings.Builder
	for line := range strings.Lines(out) {
		name, _, ok := strings.Cut(line, ":")
		switch name {
		case "queued", "gates", "applied", "landed", "verified", "failed":
			if ok {
				b.WriteString(name + "\n")
			}
		}
	}
	return b.String()
}
