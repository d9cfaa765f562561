package localstack

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
)

// Versions of the engines the stack runs. Each is the newest that builds from the Go module proxy
// here (see build/ beside this file and shared/reference/local-stack.md §2).
const (
	ArgoCDVersion                 = "v3.6.1"
	SourceControllerVersion       = "v1.9.0"
	KustomizeControllerVersion    = "v1.9.6"
	NotificationControllerVersion = "v1.9.3"
	// HelmVersion is the helm command Argo CD v3.6.1 ships (its hack/tool-versions.sh): the
	// repo-server execs it to pull and render Helm charts.
	HelmVersion = "v4.3.1"
	// goToolchain builds Argo CD v3.6.x (its go.mod says go 1.27.0) and Stagecoach (the Makefile's GOTOOLCHAIN).
	goToolchain = "go1.27.3"
)

// Binaries are the programs and CRD folders a stack runs, all built or copied from the Go module
// proxy into the cache (outside the checkout) by Build.
type Binaries struct {
	KubeAPIServer, Etcd, Kubectl string
	// KubeControllerManager is built from the same Kubernetes module as KubeAPIServer (test/envbin);
	// the stack runs only its deployment and replicaset controllers. Empty: not run.
	KubeControllerManager string
	// ArgoCD is the multi-call binary; ArgoCDHack holds the helper scripts its repo-server execs.
	ArgoCD, ArgoCDHack                                            string
	SourceController, KustomizeController, NotificationController string
	// Helm is the helm command the repo-server finds on its PATH (build/helm).
	Helm string
	// Gitea is the forge's server (gitea.go), built from its own module folder; GiteaAssets is
	// that folder, whose options/ (locales, licences, templates) it reads without bindata. Both
	// empty: built without Gitea (GiteaNever).
	Gitea, GiteaAssets string
	// giteaPending, when not nil, is Gitea's build still running beside the suite (GiteaLater):
	// StartGitea waits for it.
	giteaPending *pendingBuild
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

// GiteaBuild says when Build builds Gitea, which only the forge's scenarios run (StartGitea).
type GiteaBuild int

const (
	// GiteaNow builds it with the rest: Build returns when it is in the cache.
	GiteaNow GiteaBuild = iota
	// GiteaLater starts its build (niced) and returns without waiting: on a cold cache it compiles
	// while the first scenarios run, which mostly wait, and StartGitea waits for it. Cancelling
	// Build's ctx stops it; the packages it compiled stay in Go's build cache for the next run.
	GiteaLater
	// GiteaNever does not build it (`make demo`, `localstack up`): StartGitea then fails.
	GiteaNever
)

// Build makes sure every binary the stack runs exists, building what is missing from the Go module
// proxy under nice, and reports progress to progress. Two builds run at a time: one `go build`
// keeps both cores busy while it compiles, but not while it downloads modules or links, and two
// lanes fill those gaps: kube-apiserver, etcd, kubectl and kube-controller-manager then
// bin/stagecoach, helm (which the repo-server runs for Helm charts) and Gitea (see GiteaBuild),
// beside the engines (Argo CD and the Flux controllers, one go command over one dependency graph,
// so that what they share compiles once). A binary in the cache is reused: its name carries its
// version and, for the engines and helm, a digest of their module's go.sum. A cold build of all
// of it costs about 68 CPU-minutes (docs/testing.md); a warm one only rebuilds bin/stagecoach from
// the checkout (seconds).
func Build(ctx context.Context, progress io.Writer, gitea GiteaBuild) (*Binaries, error) {
	root := RepoRoot()
	cache, err := CacheDir()
	if err != nil {
		return nil, err
	}
	binDir := filepath.Join(cache, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return nil, fmt.Errorf("failed to create the cache folder %s: %w", binDir, err)
	}
	progress = &lockedWriter{w: progress}
	b := &Binaries{RepoRoot: root, StagecoachCRDs: filepath.Join(root, "manifests", "crds")}

	enginesDir := enginesModuleDir(root)
	// The engines' binaries are named by their versions and by the dependency graph they were
	// built from: a changed go.sum builds them again instead of reusing the old ones.
	graph, err := fileDigest(filepath.Join(enginesDir, "go.sum"))
	if err != nil {
		return nil, err
	}
	engineFile := func(name, version string) string {
		return filepath.Join(binDir, name+"-"+version+"-"+graph)
	}
	// The -X flags name Argo CD's version variables; the Flux binaries link none of those
	// packages, and the linker ignores them there.
	engines := goBuild{what: "Argo CD " + ArgoCDVersion + " and the Flux controllers", dir: enginesDir, estimate: "about 25 minutes beside the other builds",
		ldflags: "-X github.com/argoproj/argo-cd/v3/common.version=" + strings.TrimPrefix(ArgoCDVersion, "v") +
			" -X github.com/argoproj/argo-cd/v3/common.gitTag=" + ArgoCDVersion +
			" -X github.com/argoproj/argo-cd/v3/common.gitTreeState=clean"}
	b.ArgoCD = engineFile("argocd", ArgoCDVersion)
	engines.outputs = append(engines.outputs, output{pkg: "github.com/argoproj/argo-cd/v3/cmd", file: b.ArgoCD})
	fluxControllers := []struct {
		module, version string
		file            *string
	}{
		{"github.com/fluxcd/source-controller", SourceControllerVersion, &b.SourceController},
		{"github.com/fluxcd/kustomize-controller", KustomizeControllerVersion, &b.KustomizeController},
		{"github.com/fluxcd/notification-controller", NotificationControllerVersion, &b.NotificationController},
	}
	for _, c := range fluxControllers {
		*c.file = engineFile(path.Base(c.module), c.version)
		engines.outputs = append(engines.outputs, output{pkg: c.module, file: *c.file})
	}
	// One binary per checkout: worktrees running their suites at the same time must each run
	// their own code, not whichever build renamed its file last.
	rootHash := sha256.Sum256([]byte(root))
	b.Stagecoach = filepath.Join(binDir, fmt.Sprintf("stagecoach-e2e-%x", rootHash[:6]))
	// Stagecoach itself, from the checkout.
	stagecoach := goBuild{what: "bin/stagecoach from the checkout", dir: root, checkout: true,
		outputs: []output{{pkg: "./cmd/stagecoach", file: b.Stagecoach}}}

	// helm, from its own module (build/helm): adding it to the engines' graph would rebuild them all.
	helmDir := filepath.Join(root, "test", "e2e", "localstack", "build", "helm")
	helmGraph, err := fileDigest(filepath.Join(helmDir, "go.sum"))
	if err != nil {
		return nil, err
	}
	b.Helm = filepath.Join(binDir, "helm-"+HelmVersion+"-"+helmGraph)
	helm := goBuild{what: "helm " + HelmVersion, dir: helmDir, estimate: "about 6 minutes",
		ldflags: "-X helm.sh/helm/v4/internal/version.version=" + HelmVersion,
		outputs: []output{{pkg: "helm.sh/helm/v4/cmd/helm", file: b.Helm}}}

	// A lane's failure cancels the other's build (laneCtx); laneCtx ends with Wait.
	lanes, laneCtx := errgroup.WithContext(ctx)
	lanes.Go(func() error {
		// kube-apiserver, etcd, kubectl and kube-controller-manager: test/envbin/build.sh, shared
		// with the envtest suites (which need no controller manager), one module for all four.
		fmt.Fprintln(progress, "stack: kube-apiserver, etcd, kubectl and kube-controller-manager (test/envbin/build.sh)")
		script := buildCommand(laneCtx, filepath.Join(root, "test", "envbin", "build.sh"), "kube-controller-manager")
		script.Stderr = progress
		out, err := script.Output()
		if err != nil {
			return fmt.Errorf("test/envbin/build.sh failed (kube-apiserver, etcd, kubectl, kube-controller-manager): %w", err)
		}
		assets := strings.TrimSpace(string(out))
		b.KubeAPIServer = filepath.Join(assets, "kube-apiserver")
		b.Etcd = filepath.Join(assets, "etcd")
		b.Kubectl = filepath.Join(assets, "kubectl")
		b.KubeControllerManager = filepath.Join(assets, "kube-controller-manager")
		if err := stagecoach.run(laneCtx, progress); err != nil {
			return err
		}
		// In this lane, which finishes well before the engines' on a cold build: helm compiles beside
		// them, filling the gaps of their downloads and links, instead of after them.
		if err := helm.run(laneCtx, progress); err != nil {
			return err
		}
		if gitea != GiteaNow {
			return nil
		}
		// Gitea last: it is the biggest graph of this lane, and only the forge's scenarios need it.
		build, err := b.giteaBuild(laneCtx, binDir)
		if err != nil {
			return err
		}
		return build.run(laneCtx, progress)
	})
	lanes.Go(func() error { return engines.run(laneCtx, progress) })
	if err := lanes.Wait(); err != nil {
		return nil, err
	}
	if gitea == GiteaLater {
		build, err := b.giteaBuild(ctx, binDir)
		if err != nil {
			return nil, err
		}
		build.quiet = true
		b.giteaPending = startBuild(ctx, build, progress)
	}

	// Files the binaries need from their modules: Argo CD's hack scripts and everyone's CRDs.
	argoDir, err := moduleDir(ctx, enginesDir, "github.com/argoproj/argo-cd/v3", ArgoCDVersion)
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
	for _, c := range fluxControllers {
		dir, err := moduleDir(ctx, enginesDir, c.module, c.version)
		if err != nil {
			return nil, err
		}
		if err := copyFiles(dir, filepath.Join("config", "crd", "bases"), b.FluxCRDs, 0o644); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// giteaBuild is Gitea's build into binDir, from its module folder (downloaded if missing), whose
// path it records in b.
func (b *Binaries) giteaBuild(ctx context.Context, binDir string) (goBuild, error) {
	giteaDir, err := moduleDir(ctx, os.TempDir(), giteaModule, GiteaVersion)
	if err != nil {
		return goBuild{}, err
	}
	b.Gitea, b.GiteaAssets = filepath.Join(binDir, "gitea-"+GiteaVersion), giteaDir
	return goBuild{what: "Gitea " + GiteaVersion, dir: giteaDir, estimate: "about 5 minutes",
		ldflags: "-X main.Version=" + strings.TrimPrefix(GiteaVersion, "v"),
		outputs: []output{{pkg: "gitea.dev", file: b.Gitea}}}, nil
}

// pendingBuild is a build running in the background; wait returns its outcome.
type pendingBuild struct {
	done chan struct{}
	err  error
}

// startBuild runs g in the background until it ends or ctx is cancelled.
func startBuild(ctx context.Context, g goBuild, progress io.Writer) *pendingBuild {
	p := &pendingBuild{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.err = g.run(ctx, progress)
	}()
	return p
}

// wait blocks until the build ended (its error) or ctx is done.
func (p *pendingBuild) wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WaitBuilds waits until the builds Build left running (GiteaLater) have ended: after its ctx was
// cancelled, that is the moment their processes were killed and their temporary files removed.
func (b *Binaries) WaitBuilds() {
	if b.giteaPending != nil {
		<-b.giteaPending.done
	}
}

// fileDigest is the first 12 hex digits of a file's sha256: enough to tell its versions apart in
// a file name.
func fileDigest(file string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %w", file, err)
	}
	sum := sha256.Sum256(data)
	return fmt.Sprintf("%x", sum[:6]), nil
}

// enginesModuleDir holds the module that builds Argo CD and the Flux controllers (build/engines
// beside this package).
func enginesModuleDir(root string) string {
	return filepath.Join(root, "test", "e2e", "localstack", "build", "engines")
}

// goBuild is one `go build` of one or more main packages of a module (a wrapper module under
// test/e2e/localstack/build, or the checkout) into files in the cache.
type goBuild struct {
	what, dir, ldflags, estimate string
	outputs                      []output
	// checkout marks Stagecoach's own code: rebuilt every run even when the file exists (the code
	// changes between runs; the build cache makes it quick), not niced and without progress ticks.
	// It is built as the release image builds it (hack/image: static, -trimpath), so that the
	// suite runs what ships and `make test`'s image test reuses these compiled packages: a cold
	// run compiles Stagecoach's dependencies twice (this way and -race, which `make vet` does),
	// not three times.
	checkout bool
	// quiet: no "still building" every 30 s (a build running beside the scenarios, whose output
	// is the suite's).
	quiet bool
}

// output is a main package and the file its binary is kept in.
type output struct{ pkg, file string }

// run builds the outputs that are missing (all of them for the checkout) in one go command, so that
// packages they share compile once, and renames each into place only when the build succeeded.
func (g goBuild) run(ctx context.Context, progress io.Writer) error {
	var missing []output
	for _, o := range g.outputs {
		if fi, err := os.Stat(o.file); g.checkout || err != nil || fi.Mode()&0o111 == 0 {
			missing = append(missing, o)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if g.estimate != "" {
		fmt.Fprintf(progress, "stack: building %s from the Go module proxy (first run only; %s on 2 cores)\n", g.what, g.estimate)
	} else {
		fmt.Fprintf(progress, "stack: building %s\n", g.what)
	}
	start := time.Now()
	// go build -o DIR writes each main package as DIR/<last element of its path>.
	tmp, err := os.MkdirTemp(filepath.Dir(missing[0].file), ".build-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	args := []string{"go", "build", "-o", tmp + string(filepath.Separator)}
	env := goEnv()
	if g.checkout {
		args = append(args, "-trimpath")
		env = append(env, "CGO_ENABLED=0")
	} else {
		// No DWARF: the linker strips it (-s -w), and the compiler need not write it (about 8 %
		// of a cold build). The Makefile's CMPSERVER_TEST passes the same -gcflags, so that it
		// reuses these compiled packages.
		args = append(args, "-mod=readonly", "-trimpath", "-gcflags=all=-dwarf=false", "-ldflags", strings.TrimSpace("-s -w "+g.ldflags))
		if nice, err := exec.LookPath("nice"); err == nil {
			// Cold builds share the machine with other work; stay out of its way.
			args = append([]string{nice, "-n", "15"}, args...)
		}
	}
	for _, o := range missing {
		args = append(args, o.pkg)
	}
	cmd := buildCommand(ctx, args[0], args[1:]...)
	cmd.Dir = g.dir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = progress, progress
	done := make(chan struct{})
	if !g.checkout && !g.quiet {
		go func() {
			t := time.NewTicker(30 * time.Second)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					fmt.Fprintf(progress, "stack: still building %s (%s)\n", g.what, time.Since(start).Round(time.Second))
				}
			}
		}()
	}
	err = cmd.Run()
	close(done)
	if err != nil {
		return fmt.Errorf("failed to build %s in %s (see the output above; versions that build are in shared/reference/local-stack.md §2): %w",
			g.what, g.dir, err)
	}
	for _, o := range missing {
		if err := os.Rename(filepath.Join(tmp, binaryName(o.pkg)), o.file); err != nil {
			return fmt.Errorf("go build of %s wrote no %s: %w", g.what, binaryName(o.pkg), err)
		}
	}
	// CPU time too (the go command's and every compiler's and linker's it waited for): on a machine
	// shared with other builds, wall time alone does not say what a build costs.
	fmt.Fprintf(progress, "stack: built %s in %s (%s CPU)\n", g.what, time.Since(start).Round(time.Second),
		(cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Round(time.Second))
	return nil
}

// buildCommand runs a build in its own process group, and cancelling ctx kills the whole group:
// killing only the go command (or build.sh's bash) would leave its compilers running, holding the
// output pipes open for minutes.
func buildCommand(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// binaryName is the file name go build -o DIR/ gives a main package: the last element of its
// path, or the one before it when the last is a major-version suffix (v2, v3, ...: not v0, v1 or
// a leading zero), as the go command decides.
func binaryName(pkg string) string {
	elems := strings.Split(strings.TrimSuffix(pkg, "/"), "/")
	last := elems[len(elems)-1]
	if len(elems) > 1 && isMajorVersionSuffix(last) {
		last = elems[len(elems)-2]
	}
	return last
}

func isMajorVersionSuffix(s string) bool {
	if len(s) < 2 || s[0] != 'v' || s[1] < '1' || s[1] > '9' || s == "v1" {
		return false
	}
	return strings.Trim(s[1:], "0123456789") == ""
}

// lockedWriter serialises the progress lines of builds running side by side.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// moduleDir downloads a module (already in the module cache after a build) through the wrapper
// module in dir and returns its folder.
func moduleDir(ctx context.Context, dir, module, version string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = dir
	cmd.Env = goEnv()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s failed: %w", module, version, err)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s gave no folder (%s): %v", module, version, info.Error, err)
	}
	return info.Dir, nil
}

// goEnv is the environment of a go command: the module's own go.mod decides, never the caller's
// GOFLAGS, and the toolchain is the one that builds Argo CD and Stagecoach.
func goEnv() []string {
	return append(os.Environ(), "GOFLAGS=", "GOTOOLCHAIN="+goToolchain)
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
