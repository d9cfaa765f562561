package stack

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Versions of the engines the stack runs. Each is the newest that builds from the Go module proxy
// here (see test/localstack/build and shared/reference/local-stack.md §2).
const (
	ArgoCDVersion                 = "v3.6.1"
	SourceControllerVersion       = "v1.9.0"
	KustomizeControllerVersion    = "v1.9.6"
	NotificationControllerVersion = "v1.9.3"
	// goToolchain builds Argo CD v3.6.x (its go.mod says go 1.27.0) and Stagecoach (the Makefile's GOTOOLCHAIN).
	goToolchain = "go1.27.3"
)

// Binaries are the programs and CRD folders a stack runs, all built or copied from the Go module
// proxy into the cache (outside the checkout) by Build.
type Binaries struct {
	KubeAPIServer, Etcd, Kubectl string
	// ArgoCD is the multi-call binary; ArgoCDHack holds the helper scripts its repo-server execs.
	ArgoCD, ArgoCDHack                                            string
	SourceController, KustomizeController, NotificationController string
	// Stagecoach is bin/stagecoach built from this checkout.
	Stagecoach string
	// CRDs are folders of CustomResourceDefinitions: Stagecoach's, Argo CD's and Flux's.
	StagecoachCRDs, ArgoCDCRDs, FluxCRDs string
	// RepoRoot is the checkout the stack was built from.
	RepoRoot string
}

// RepoRoot is the checkout's top folder.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// CacheDir is where built binaries are kept between runs: $STAGECOACH_CACHE, or
// $XDG_CACHE_HOME/stagecoach, or ~/.cache/stagecoach (the same place test/envbin/build.sh uses).
func CacheDir() (string, error) {
	if d := os.Getenv("STAGECOACH_CACHE"); d != "" {
		return d, nil
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no cache folder: set STAGECOACH_CACHE or HOME: %w", err)
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "stagecoach"), nil
}

// Build makes sure every binary the stack runs exists, building what is missing from the Go module
// proxy one at a time (the machines have two cores) under nice, and reports progress to progress.
// A binary in the cache is reused: its name carries its version. A cold build takes about 15
// minutes; a warm one only rebuilds bin/stagecoach from the checkout (seconds).
func Build(ctx context.Context, progress io.Writer) (*Binaries, error) {
	root := RepoRoot()
	cache, err := CacheDir()
	if err != nil {
		return nil, err
	}
	binDir := filepath.Join(cache, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return nil, fmt.Errorf("failed to create the cache folder %s: %w", binDir, err)
	}
	b := &Binaries{RepoRoot: root, StagecoachCRDs: filepath.Join(root, "manifests", "crds")}

	// kube-apiserver, etcd and kubectl: test/envbin/build.sh, shared with the envtest suites.
	fmt.Fprintln(progress, "stack: kube-apiserver, etcd and kubectl (test/envbin/build.sh)")
	script := exec.CommandContext(ctx, filepath.Join(root, "test", "envbin", "build.sh"))
	script.Stderr = progress
	out, err := script.Output()
	if err != nil {
		return nil, fmt.Errorf("test/envbin/build.sh failed (kube-apiserver, etcd, kubectl): %w", err)
	}
	assets := strings.TrimSpace(string(out))
	b.KubeAPIServer = filepath.Join(assets, "kube-apiserver")
	b.Etcd = filepath.Join(assets, "etcd")
	b.Kubectl = filepath.Join(assets, "kubectl")

	wrappers := filepath.Join(root, "test", "localstack", "build")
	argocd := component{name: "argocd", version: ArgoCDVersion, module: "github.com/argoproj/argo-cd/v3",
		pkg: "github.com/argoproj/argo-cd/v3/cmd", dir: filepath.Join(wrappers, "argocd"), toolchain: goToolchain,
		estimate: "about 7 minutes",
		ldflags: "-X github.com/argoproj/argo-cd/v3/common.version=" + strings.TrimPrefix(ArgoCDVersion, "v") +
			" -X github.com/argoproj/argo-cd/v3/common.gitTag=" + ArgoCDVersion +
			" -X github.com/argoproj/argo-cd/v3/common.gitTreeState=clean"}
	flux := []component{
		{name: "source-controller", version: SourceControllerVersion, estimate: "about 3 minutes"},
		{name: "kustomize-controller", version: KustomizeControllerVersion, estimate: "about 2 minutes"},
		{name: "notification-controller", version: NotificationControllerVersion, estimate: "about 2 minutes"},
	}
	for i := range flux {
		c := &flux[i]
		c.module = "github.com/fluxcd/" + c.name
		c.pkg = c.module
		c.dir = filepath.Join(wrappers, "flux", c.name)
	}
	for _, c := range append([]component{argocd}, flux...) {
		if _, err := c.build(ctx, binDir, progress); err != nil {
			return nil, err
		}
	}
	b.ArgoCD = argocd.out(binDir)
	b.SourceController, b.KustomizeController, b.NotificationController = flux[0].out(binDir), flux[1].out(binDir), flux[2].out(binDir)

	// Files the binaries need from their modules: Argo CD's hack scripts and everyone's CRDs.
	argoDir, err := argocd.moduleDir(ctx)
	if err != nil {
		return nil, err
	}
	b.ArgoCDHack = filepath.Join(cache, "argocd-"+ArgoCDVersion+"-hack")
	if err := copyFiles(argoDir, "hack", b.ArgoCDHack, 0o755, "git-verify-wrapper.sh", "gpg-wrapper.sh", "git-ask-pass.sh"); err != nil {
		return nil, err
	}
	b.ArgoCDCRDs = filepath.Join(cache, "argocd-"+ArgoCDVersion+"-crds")
	if err := copyFiles(argoDir, filepath.Join("manifests", "crds"), b.ArgoCDCRDs, 0o644,
		"application-crd.yaml", "applicationset-crd.yaml", "appproject-crd.yaml"); err != nil {
		return nil, err
	}
	b.FluxCRDs = filepath.Join(cache, fmt.Sprintf("flux-crds-source-%s-kustomize-%s-notification-%s",
		SourceControllerVersion, KustomizeControllerVersion, NotificationControllerVersion))
	for _, c := range flux {
		dir, err := c.moduleDir(ctx)
		if err != nil {
			return nil, err
		}
		if err := copyFiles(dir, filepath.Join("config", "crd", "bases"), b.FluxCRDs, 0o644); err != nil {
			return nil, err
		}
	}

	// Stagecoach itself, from the checkout: always rebuilt (the Go build cache makes it quick).
	fmt.Fprintln(progress, "stack: building bin/stagecoach from the checkout")
	// One binary per checkout: worktrees running their suites at the same time must each run
	// their own code, not whichever build renamed its file last.
	checkout := sha256.Sum256([]byte(root))
	b.Stagecoach = filepath.Join(binDir, fmt.Sprintf("stagecoach-e2e-%x", checkout[:6]))
	tmp := fmt.Sprintf("%s.%d.tmp", b.Stagecoach, os.Getpid())
	gobuild := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", tmp, "./cmd/stagecoach")
	gobuild.Dir = root
	gobuild.Env = goEnv(goToolchain)
	gobuild.Stdout, gobuild.Stderr = progress, progress
	if err := gobuild.Run(); err != nil {
		return nil, fmt.Errorf("failed to build ./cmd/stagecoach in %s: %w", root, err)
	}
	if err := os.Rename(tmp, b.Stagecoach); err != nil {
		return nil, err
	}
	return b, nil
}

// component is one upstream program built from a wrapper module under test/localstack/build.
type component struct {
	name, version, module, pkg, dir, toolchain, ldflags, estimate string
}

func (c component) out(binDir string) string { return filepath.Join(binDir, c.name+"-"+c.version) }

// build compiles the component into the cache unless it is there already.
func (c component) build(ctx context.Context, binDir string, progress io.Writer) (string, error) {
	out := c.out(binDir)
	if fi, err := os.Stat(out); err == nil && fi.Mode()&0o111 != 0 {
		return out, nil
	}
	fmt.Fprintf(progress, "stack: building %s %s from the Go module proxy (first run only; %s on 2 cores)\n", c.name, c.version, c.estimate)
	start := time.Now()
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	args := []string{"go", "build", "-mod=readonly", "-trimpath", "-ldflags", strings.TrimSpace("-s -w " + c.ldflags), "-o", tmp, c.pkg}
	if nice, err := exec.LookPath("nice"); err == nil {
		// Builds share the machine with other work; stay out of its way.
		args = append([]string{nice, "-n", "15"}, args...)
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = c.dir
	cmd.Env = goEnv(c.toolchain)
	cmd.Stdout, cmd.Stderr = progress, progress
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(30 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(progress, "stack: still building %s (%s)\n", c.name, time.Since(start).Round(time.Second))
			}
		}
	}()
	err := cmd.Run()
	close(done)
	if err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("failed to build %s %s in %s (see the output above; versions that build are in shared/reference/local-stack.md §2): %w",
			c.name, c.version, c.dir, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	fmt.Fprintf(progress, "stack: built %s %s in %s -> %s\n", c.name, c.version, time.Since(start).Round(time.Second), out)
	return out, nil
}

// moduleDir downloads the component's module (already in the module cache after a build) and
// returns its folder.
func (c component) moduleDir(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", c.module+"@"+c.version)
	cmd.Dir = c.dir
	cmd.Env = goEnv(c.toolchain)
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s failed: %w", c.module, c.version, err)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s gave no folder (%s): %v", c.module, c.version, info.Error, err)
	}
	return info.Dir, nil
}

// goEnv is the environment of a go command: the wrapper's own go.mod decides, never the caller's GOFLAGS.
func goEnv(toolchain string) []string {
	env := []string{"GOFLAGS="}
	if toolchain != "" {
		env = append(env, "GOTOOLCHAIN="+toolchain)
	}
	return append(os.Environ(), env...)
}

// copyFiles copies files (all regular files when none are named) from moduleDir/sub into dst,
// which is rewritten only when a file is missing (module contents never change for a version).
func copyFiles(moduleDir, sub, dst string, mode os.FileMode, names ...string) error {
	src := filepath.Join(moduleDir, sub)
	if len(names) == 0 {
		entries, err := os.ReadDir(src)
		if err != nil {
			return fmt.Errorf("failed to list %s: %w", src, err)
		}
		for _, e := range entries {
			if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".yaml") {
				names = append(names, e.Name())
			}
		}
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, n := range names {
		to := filepath.Join(dst, n)
		if _, err := os.Stat(to); err == nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, n))
		if err != nil {
			return fmt.Errorf("failed to read %s from the module cache: %w", filepath.Join(src, n), err)
		}
		if err := os.WriteFile(to+".tmp", data, mode); err != nil {
			return err
		}
		if err := os.Rename(to+".tmp", to); err != nil {
			return err
		}
	}
	return nil
}
