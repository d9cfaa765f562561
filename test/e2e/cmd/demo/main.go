// Command demo is `make demo`: it builds what the local stack needs (once), starts a real
// kube-apiserver with Argo CD, Flux, an OCI registry, a git server and the stagecoach controller
// on 127.0.0.1, sets up a three-stage pipeline for a demo service (and a second service in prod,
// rendered from git by the Stagecoach plugin), and walks releases through it
// while printing each step. Then it prints `stagecoach plan -A` and, on a terminal, leaves the stack
// running until Ctrl-C; without a terminal it stops at once, so scripts can run it.
//
// With -argocd-ui (make demo ARGOCD_UI=1) it also starts argocd-server with Stagecoach's UI
// extension installed from the release tarball, pushes one more release that waits in prod for
// an approval, and prints the URL and login of the Promotion tab: the extension's harness page
// served by argocd-server (whose Go-module build has no UI of its own), talking to Stagecoach
// through Argo CD's real proxy extension.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/cli"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
	"github.com/stagecoach-dev/stagecoach/test/e2e/pipeline"
)

// stepTimeout bounds each step of the walk-through; every step takes seconds when things work.
const stepTimeout = 3 * time.Minute

func main() {
	argocdUI := flag.Bool("argocd-ui", false, "also run argocd-server with the UI extension (needs `make ui-release`) and print the Promotion tab's URL and login")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// Clients log through controller-runtime; their few lines are of no use here.
	ctrllog.SetLogger(logr.Discard())
	defer stop()
	if err := run(ctx, *argocdUI); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func say(format string, args ...any) {
	fmt.Printf("==> "+format+"\n", args...)
}

func run(ctx context.Context, argocdUI bool) (err error) {
	start := time.Now()
	say("building what the local stack needs (first run only: kube-apiserver ~4 min, Argo CD ~7 min, the Flux controllers ~7 min on 2 cores; later runs reuse them)")
	bin, err := localstack.Build(ctx, os.Stderr, localstack.GiteaNever)
	if err != nil {
		return err
	}
	say("binaries ready in %s; starting etcd, kube-apiserver, Argo CD, Flux, a registry, a git server and the stagecoach controller", time.Since(start).Round(time.Second))
	s, err := localstack.Start(ctx, bin, localstack.Options{})
	if err != nil {
		return err
	}
	defer func() {
		s.Stop()
		if err == nil {
			_ = os.RemoveAll(s.Dir) // a failed run keeps its logs
		}
	}()
	say("local stack up in %s (logs in %s)", time.Since(start).Round(time.Second), s.LogDir)

	// The controller signs promotion attestations with a key of its own (restarted with it).
	attestationKey, _, err := pipeline.EnableAttestations(ctx, s)
	if err != nil {
		return err
	}
	p, err := pipeline.Setup(ctx, s, "demo", pipeline.Options{Service: "payments", KeylessService: "ledger", AttestationKey: attestationKey})
	if err != nil {
		return err
	}
	say("pipeline for service payments in namespace demo:\n" +
		"    dev     Flux OCIRepository + Kustomization; takes the newest signed release >=1.0.0 from the registry\n" +
		"    staging Flux Kustomization from a git repository; follows dev\n" +
		"    prod    Argo CD Application (OCI source); follows staging once one person approves\n" +
		"pipeline for service checkout (its image) in the same namespace:\n" +
		"    prod    Argo CD Application on a git repository, rendered by the Stagecoach plugin in Argo CD's cmp-server,\n" +
		"            which pins the image to the promoted digest after checking its signature; takes the newest signed\n" +
		"            image >=1.0.0 from the registry once one person approves\n" +
		"pipeline for service ledger:\n" +
		"    dev     Flux OCIRepository; takes the newest release signed keyless by its release workflow (a CI identity,\n" +
		"            certified by a Sigstore running in this process), trusting no key file, whose SLSA provenance says it\n" +
		"            was built from the service's repository\n" +
		"    staging Flux OCIRepository; follows dev, and attaches a signed promotion attestation to what it verifies\n" +
		"    prod    Flux OCIRepository; follows staging, only with staging's attestation\n" +
		"delivery of the config repository of service settings (its commits are the releases):\n" +
		"    dev     Flux GitRepository + Kustomization; takes each commit of main that changes app/\n" +
		"    staging Argo CD Application on the Git source; follows dev, verified once a Job of the commit's\n" +
		"            integration tests completes (kube-controller-manager's Job controller; no node runs, a stand-in\n" +
		"            kubelet ends its Pod)\n" +
		"promotion by pull request (a Gitea built from the Go module proxy):\n" +
		"    gitops  Argo CD Application following branch env/prod of an environment repository on Gitea; takes what\n" +
		"            payments dev verified by opening a pull request that writes the digest into prod/configmap.yaml\n" +
		"            (its body: the version, the gates, the diff), which Stagecoach merges once the gates pass")
	config, err := pipeline.SetupConfig(ctx, s, "demo", "settings")
	if err != nil {
		return err
	}
	gitops, err := pipeline.SetupPullRequest(ctx, s, "demo", "payments", p.Stages[pipeline.Dev])
	if err != nil {
		return err
	}
	go s.RunPods(ctx, "demo", func(format string, args ...any) { say(format, args...) })

	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go p.Watch(watchCtx, 200*time.Millisecond, func(e pipeline.Event) { fmt.Println("    " + e.String()) })

	say("pushing v1.0.0, signed")
	v1, err := p.PushSigned(ctx, "v1.0.0", p.Manifests("v1.0.0"))
	if err != nil {
		return err
	}
	for _, env := range []string{pipeline.Dev, pipeline.Staging} {
		if err := waitVerified(ctx, p, env, v1); err != nil {
			return err
		}
	}
	if err := approveWhenAsked(ctx, p, pipeline.Prod, "v1.0.0", v1); err != nil {
		return err
	}
	say("v1.0.0 runs in dev, staging and prod")
	if err := waitVerified(ctx, gitops, pipeline.GitOpsLane, v1); err != nil {
		return err
	}
	pr, merged, err := gitops.PullRequestOf(ctx, v1)
	if err != nil {
		return err
	}
	say("v1.0.0 runs in gitops: pull request #%d (%s) merged by Stagecoach as commit %s on env/prod, which Argo CD synced", pr.Number, pr.URL, merged.SHA[:12])

	say("pushing the checkout image v1.0.0, signed")
	checkout, err := p.PushPluginImage(ctx, "v1.0.0", pipeline.SignedBundle)
	if err != nil {
		return err
	}
	if err := approveWhenAsked(ctx, p, pipeline.PluginProd, "checkout v1.0.0", checkout); err != nil {
		return err
	}
	say("checkout runs %s@%s in prod (kubectl get podtemplate checkout -n %s -o yaml)", p.PluginImage(), checkout, p.Targets[pipeline.PluginProd])

	say("pushing the ledger release v1.0.0, signed keyless by its release workflow, with the SLSA provenance it attached")
	ledger, err := p.PushKeyless(ctx, "v1.0.0", p.KeylessIdentity("v1.0.0"))
	if err != nil {
		return err
	}
	if err := waitVerified(ctx, p, pipeline.Keyless, ledger); err != nil {
		return err
	}
	say("ledger v1.0.0 runs in dev: its signature gate names the workflow that signed it, its attestations gate the provenance it required (stagecoach plan below)")
	if err := waitVerified(ctx, p, pipeline.KeylessProd, ledger); err != nil {
		return err
	}
	say("ledger v1.0.0 runs in prod: staging attached its promotion attestation to the image, and prod's attestations gate required it "+
		"(cosign verify-attestation --type %s finds it)", pipeline.PromotionPredicateType)

	say("pushing v1.1.0, unsigned")
	v11, err := p.Push(ctx, "v1.1.0", p.Manifests("v1.1.0"), pipeline.Unsigned)
	if err != nil {
		return err
	}
	skipped, err := waitSkipped(ctx, p, pipeline.Dev, v11)
	if err != nil {
		return err
	}
	say("dev skips it (status.candidate.skipped): %s: %s", skipped.Reason, skipped.Message)

	say("committing release one of the settings config repository to main")
	commit, err := config.Commit(ctx, "settings: release one", "one")
	if err != nil {
		return err
	}
	for _, env := range []string{pipeline.Dev, pipeline.Staging} {
		if err := waitVerified(ctx, config, env, commit); err != nil {
			return err
		}
	}
	say("settings %s runs in dev (Flux) and staging (Argo CD), where its integration Job passed (kubectl get jobs -n demo)", commit)
	var tab string
	if argocdUI {
		if tab, err = startArgoCDUI(ctx, s, p); err != nil {
			return err
		}
	}
	stopWatch()

	say("stagecoach plan -A")
	if err := cli.Plan(ctx, s.Client, cli.PlanOptions{AllNamespaces: true}, os.Stdout, time.Now()); err != nil {
		return err
	}
	say("demo finished in %s", time.Since(start).Round(time.Second))
	if !isTerminal(os.Stdin) {
		say("standard input is not a terminal: stopping everything")
		return nil
	}
	say("the stack keeps running; try:\n    export KUBECONFIG=%s\n    kubectl get stages,promotions -A\n    go run ./cmd/stagecoach plan -A   (from the repository root)%s\nCtrl-C stops everything", s.Kubeconfig, tab)
	<-ctx.Done()
	say("stopping")
	return nil
}

// startArgoCDUI runs argocd-server with the UI extension, lets its admin act on the demo's Stages,
// pushes v1.2.0 for prod to wait on, and returns the lines that say how to open the tab.
func startArgoCDUI(ctx context.Context, s *localstack.Stack, p *pipeline.Pipeline) (string, error) {
	say("starting argocd-server with the Stagecoach UI extension from the release tarball (make ui-release)")
	ui, err := s.StartArgoCDServer(ctx, localstack.ArgoCDUIOptions{})
	if err != nil {
		return "", err
	}
	// The API acts as the Argo CD user; Kubernetes RBAC for that name decides.
	if err := s.GrantStagecoach(ctx, p.Namespace, ui.User); err != nil {
		return "", err
	}
	say("pushing v1.2.0, signed, for the Promotion tab to approve in prod")
	v12, err := p.PushSigned(ctx, "v1.2.0", p.Manifests("v1.2.0"))
	if err != nil {
		return "", err
	}
	if _, err := waitBlocked(ctx, p, pipeline.Prod, v12, "approvals"); err != nil {
		return "", err
	}
	harness := ui.HarnessURL(p.Namespace, p.Stages[pipeline.Prod], "default", "light")
	tab := fmt.Sprintf("\n    the Promotion tab of Application %s/%s in argocd-server (Argo CD's proxy extension, user %s):\n"+
		"      open %s\n      log in as %s, password %s (theme=dark in the tab's URL for the dark theme)",
		p.Namespace, p.Stages[pipeline.Prod], ui.User, ui.LoginURL(harness), ui.User, ui.Password)
	say("v1.2.0 waits for an approval in prod; approve it in the Promotion tab:%s", tab)
	return tab, nil
}

// approveWhenAsked waits until lane's Stage holds digest for an approval, approves it as the
// admin, and waits until the Stage runs it, Verified.
func approveWhenAsked(ctx context.Context, p *pipeline.Pipeline, lane, what, digest string) error {
	block, err := waitBlocked(ctx, p, lane, digest, "approvals")
	if err != nil {
		return err
	}
	say("%s waits for an approval: %s", lane, block.Message)
	say("approving %s for %s as %s", what, lane, localstack.AdminUser)
	if _, err := p.Approve(ctx, p.Stack.Client, localstack.AdminUser, lane, digest, "demo: looks good"); err != nil {
		return err
	}
	return waitVerified(ctx, p, lane, digest)
}

// stages reads a delivery's Stage by environment (a Pipeline, a ConfigDelivery).
type stages interface {
	Stage(ctx context.Context, env string) (*stagecoachv1.Stage, error)
}

// waitVerified waits until env's Stage runs digest, Verified.
func waitVerified(ctx context.Context, p stages, env, digest string) error {
	return poll(ctx, fmt.Sprintf("%s to verify %s", env, digest), func() (bool, error) {
		st, err := p.Stage(ctx, env)
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(st.Status.Conditions, stagecoachv1.ConditionVerified)
		return c != nil && c.Status == metav1.ConditionTrue && st.Status.Current != nil && st.Status.Current.Digest == digest, nil
	})
}

// waitBlocked waits until env's candidate digest is held by gate, and returns the block.
func waitBlocked(ctx context.Context, p *pipeline.Pipeline, env, digest, gate string) (stagecoachv1.GateBlock, error) {
	var block stagecoachv1.GateBlock
	err := poll(ctx, fmt.Sprintf("%s to hold %s at the %s gate", env, digest, gate), func() (bool, error) {
		st, err := p.Stage(ctx, env)
		if err != nil {
			return false, err
		}
		var ok bool
		block, ok = pipeline.Blocked(st, digest, gate)
		return ok, nil
	})
	return block, err
}

// waitSkipped waits until env's Stage lists digest as a newer version it passes over, and
// returns why.
func waitSkipped(ctx context.Context, p *pipeline.Pipeline, env, digest string) (stagecoachv1.SkippedVersion, error) {
	var skipped stagecoachv1.SkippedVersion
	err := poll(ctx, fmt.Sprintf("%s to skip %s", env, digest), func() (bool, error) {
		st, err := p.Stage(ctx, env)
		if err != nil {
			return false, err
		}
		var ok bool
		skipped, ok = pipeline.Skipped(st, digest)
		return ok, nil
	})
	return skipped, err
}

func poll(ctx context.Context, what string, done func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	for {
		ok, err := done()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up waiting for %s: %w", what, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// isTerminal asks the terminal driver (a character device such as /dev/null is not a terminal).
func isTerminal(f *os.File) bool {
	return term.IsTerminal(int(f.Fd()))
}
