// Package testenv starts a real kube-apiserver and etcd (built by test/envbin/build.sh) with
// Stagecoach's CRDs and, on request, the Argo CD and Flux CRDs kept under test/crds.
package testenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller"
)

// Env is a running API server and a live (uncached) client to assert with.
type Env struct {
	*envtest.Environment
	Config *rest.Config
	Client client.Client
}

// RepoRoot is the checkout's top folder.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// CRDs of the engines, by folder under test/crds.
var (
	ArgoCDCRDs = filepath.Join(RepoRoot(), "test", "crds", "argocd")
	FluxCRDs   = filepath.Join(RepoRoot(), "test", "crds", "flux")
	// StandInCRDs are kinds of no engine (Widget), for the generic applier.
	StandInCRDs = filepath.Join(RepoRoot(), "test", "crds", "standin")
)

// Start starts the API server with Stagecoach's CRDs plus those in extraCRDDirs.
func Start(extraCRDDirs ...string) (*Env, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, fmt.Errorf("KUBEBUILDER_ASSETS is not set: run 'make test', or export KUBEBUILDER_ASSETS=$(test/envbin/build.sh)")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     append([]string{filepath.Join(RepoRoot(), "manifests", "crds")}, extraCRDDirs...),
		ErrorIfCRDPathMissing: true,
		// The default 10 s is too short on a loaded 2-core machine (several suites start their API
		// servers at once): the CRDs are served, just later.
		CRDInstallOptions: envtest.CRDInstallOptions{MaxTime: time.Minute},
	}
	// MutatingAdmissionPolicy is beta in Kubernetes 1.35 and off by default: on, so that the
	// admission suite can install manifests/policies/optional/stage-author-stamp.yaml (no other policy
	// mutates; a cluster without it keeps working as before).
	env.ControlPlane.GetAPIServer().Configure().
		Append("feature-gates", "MutatingAdmissionPolicy=true").
		Append("runtime-config", "admissionregistration.k8s.io/v1beta1=true")
	cfg, err := env.Start()
	if err != nil {
		// Start leaves etcd and the API server running when installing the CRDs fails.
		_ = env.Stop()
		return nil, fmt.Errorf("failed to start kube-apiserver and etcd from %s: %w", os.Getenv("KUBEBUILDER_ASSETS"), err)
	}
	scheme, err := controller.NewScheme()
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("failed to create a client: %w", err)
	}
	return &Env{Environment: env, Config: cfg, Client: c}, nil
}

// SetLogger sends controller logs to stderr when DEBUG_TEST is set, and nowhere otherwise.
func SetLogger() {
	logs := io.Discard
	if os.Getenv("DEBUG_TEST") != "" {
		logs = os.Stderr
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(logs), zap.UseDevMode(true)))
}

// RunManager starts Stagecoach's manager against the API server with no metrics or probe
// listeners and the options mutate sets. stop cancels it and returns how it ended.
func (e *Env) RunManager(ctx context.Context, mutate func(*controller.Options)) (stop func() error, err error) {
	return e.RunManagerAs(ctx, e.Config, mutate)
}

// RunManagerAs is RunManager with the controller authenticating through cfg (a user with the
// install's RBAC, say) instead of as an admin.
func (e *Env) RunManagerAs(ctx context.Context, cfg *rest.Config, mutate func(*controller.Options)) (stop func() error, err error) {
	opts := controller.DefaultOptions()
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	// The tests' check endpoints listen on loopback.
	opts.AllowInternalCheckTargets = true
	if mutate != nil {
		mutate(&opts)
	}
	ctx, cancel := context.WithCancel(ctx)
	mgr, err := controller.NewManager(ctx, cfg, opts)
	if err != nil {
		cancel()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() error {
		cancel()
		return <-done
	}, nil
}

// NewNamespace gives one test a namespace of its own, so tests need no cleanup order.
func (e *Env) NewNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := e.Client.Create(t.Context(), ns); err != nil {
		t.Fatalf("failed to create a namespace: %v", err)
	}
	return ns.Name
}

// Kubectl runs the kubectl built beside the API server (test/envbin) as an admin and returns its
// combined output.
func (e *Env) Kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	user, err := e.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return "", err
	}
	bin := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	out, err := exec.CommandContext(t.Context(), bin, append([]string{"--kubeconfig", path}, args...)...).CombinedOutput()
	return string(out), err
}

// PlaceholderUpstream is the upstream Stage the suites' Stages promoted by hand name.
const PlaceholderUpstream = "none"

// CreatePlaceholderUpstream creates, once per namespace, the upstream Stage "none" that Stages
// promoted by hand follow: it must exist (a missing upstream makes a Stage not Ready), and it
// never offers anything, since its applier does not exist.
func (e *Env) CreatePlaceholderUpstream(t *testing.T, ns string) {
	t.Helper()
	placeholder := &stagecoachv1.Stage{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: PlaceholderUpstream},
		Spec: stagecoachv1.StageSpec{
			Service: "placeholder", Environment: PlaceholderUpstream,
			ApplyRef: stagecoachv1.ApplierReference{Kind: "Application", Name: PlaceholderUpstream},
			Source:   stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: PlaceholderUpstream}},
		},
	}
	if err := e.Client.Create(t.Context(), placeholder); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("failed to create the placeholder upstream Stage in %s: %v", ns, err)
	}
}

// Author is the suites' admin (the identity of Client) as a Stage's spec.author: its user name
// and its groups (system:masters among them, which is where its rights come from).
func (e *Env) Author(ctx context.Context) (*stagecoachv1.StageAuthor, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := e.Client.Create(ctx, review); err != nil {
		return nil, fmt.Errorf("failed to ask the API server who the suites' admin is: %w", err)
	}
	author := &stagecoachv1.StageAuthor{User: review.Status.UserInfo.Username}
	for _, g := range review.Status.UserInfo.Groups {
		if g != "system:authenticated" {
			author.Groups = append(author.Groups, g)
		}
	}
	return author, nil
}

// ClientAs returns a live client acting as user in groups (and system:authenticated, which
// impersonation does not add by itself), so that RBAC and the admission policies see that user.
func (e *Env) ClientAs(t *testing.T, user string, groups ...string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	scheme, err := controller.NewScheme()
	if err != nil {
		t.Fatalf("failed to build the scheme: %v", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("failed to build a client acting as %s: %v", user, err)
	}
	return c
}
