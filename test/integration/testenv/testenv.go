// Package testenv starts a real kube-apiserver and etcd (built by test/envbin/build.sh) with
// Stagecoach's CRDs and, on request, the Argo CD and Flux CRDs kept under test/crds.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

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
)

// Start starts the API server with Stagecoach's CRDs plus those in extraCRDDirs.
func Start(extraCRDDirs ...string) (*Env, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, fmt.Errorf("KUBEBUILDER_ASSETS is not set: run 'make test', or export KUBEBUILDER_ASSETS=$(test/envbin/build.sh)")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     append([]string{filepath.Join(RepoRoot(), "manifests", "crds")}, extraCRDDirs...),
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
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
