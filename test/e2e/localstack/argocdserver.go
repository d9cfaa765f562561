package localstack

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/bcrypt"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ArgoCDServer is argocd-server's component (and log) name. It is optional: only tests and the
// demo that call StartArgoCDServer run it.
const ArgoCDServer = "argocd-server"

// ExtensionsDir is where argocd-server reads UI extensions from. It is hard-coded
// (server/server.go serveExtensions), so every argocd-server on a host shares it: StartArgoCDServer
// holds ExtensionsLock while its argocd-server runs and removes what it installed when it stops.
const (
	ExtensionsDir  = "/tmp/extensions"
	ExtensionsLock = "/tmp/extensions.lock"
)

// HarnessPath and LoginPath are where argocd-server serves the UI extension's harness page and
// its stand-in login page from its static assets directory (see StartArgoCDServer).
const (
	HarnessPath = "/stagecoach-harness/test/harness.html"
	LoginPath   = "/stagecoach-harness/test/login.html"
)

// WebUILoginPath is where argocd-server serves Argo CD's own web UI, when it is built, to a browser
// that enters it (see StartArgoCDServer): its login page.
const WebUILoginPath = "/login"

// ArgoCDUI is a running argocd-server with Stagecoach's UI extension: the bundle installed from
// the release tarball, the proxy extension to the controller's API, and a local admin account.
type ArgoCDUI struct {
	// URL is argocd-server's base URL (plain HTTP on loopback).
	URL string
	// User and Password are the local admin account's login.
	User, Password string
	Process        *Process

	// WebUI is Argo CD's own web UI that argocd-server serves, nil when it is not built (then only
	// the harness and login pages are there).
	WebUI *ArgoCDWebUI

	lock      *os.File
	installed []string // what the tarball put into ExtensionsDir, removed on release
}

// ArgoCDWebUI is Argo CD's own web UI as build/argocd-ui/build.sh caches it.
type ArgoCDWebUI struct {
	// Dir holds index.html and the bundles webpack wrote.
	Dir string
	// ArgoUICommit is the argo-ui commit it was built with (recorded beside Dir).
	ArgoUICommit string
}

// CachedArgoCDWebUI returns Argo CD's own web UI when build/argocd-ui/build.sh has built it into
// the cache, or an error saying why it is not there and how to build it. Its build needs an argo-ui
// from GitHub (npm has only the old React 16 line), so a machine without one has none.
func CachedArgoCDWebUI() (*ArgoCDWebUI, error) {
	cache, err := CacheDir()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cache, "argocd-ui-"+ArgoCDVersion)
	if _, err := os.Stat(filepath.Join(dir, "index.html")); err != nil {
		return nil, fmt.Errorf("Argo CD %s's own web UI is not built (no %s): it needs argo-ui at a GitHub commit, which npm does not serve. "+
			"With a checkout (or bare git directory) of github.com/argoproj/argo-ui from after its React 19 upgrade, run "+
			"`make argocd-ui ARGO_UI_SRC=<path>` (test/e2e/localstack/build/argocd-ui/build.sh <path>: about 2 minutes, 2.5 GB of memory), then run this again",
			ArgoCDVersion, filepath.Join(dir, "index.html"))
	}
	web := &ArgoCDWebUI{Dir: dir, ArgoUICommit: "unknown"}
	if record, err := os.ReadFile(dir + ".argo-ui"); err == nil {
		for _, line := range strings.Split(string(record), "\n") {
			if c, ok := strings.CutPrefix(line, "commit="); ok && c != "" {
				web.ArgoUICommit = c
			}
		}
	}
	return web, nil
}

// HarnessURL is the harness page rendering the Promotion tab for an Application, in a theme
// (light, dark or system).
func (u *ArgoCDUI) HarnessURL(namespace, app, project, theme string) string {
	q := url.Values{"namespace": {namespace}, "app": {app}, "project": {project}, "theme": {theme}}
	return u.URL + HarnessPath + "?" + q.Encode()
}

// LoginURL is the stand-in login page (ui-extension/test/argocd-login.html): it logs in through
// /api/v1/session and then opens next, a URL on this server (the harness when empty).
func (u *ArgoCDUI) LoginURL(next string) string {
	if next == "" {
		return u.URL + LoginPath
	}
	return u.URL + LoginPath + "?" + url.Values{"next": {strings.TrimPrefix(next, u.URL)}}.Encode()
}

// ArgoCDUIOptions shape StartArgoCDServer; zero values take the defaults.
type ArgoCDUIOptions struct {
	// Tarball is the UI extension's release archive with its .sha256 beside it (default: the
	// checkout's dist/ui/stagecoach-ui-extension.tar.gz, which `make ui-release` writes).
	Tarball string
	// LockTimeout is how long to wait for another stack's argocd-server to release
	// ExtensionsDir (default 3m).
	LockTimeout time.Duration
}

// controllerAPIArgs are the flags that serve the controller's HTTP API for the proxy extension.
// The address and token are chosen once per stack, so argocd-cm stays right across controller
// restarts.
func (s *Stack) controllerAPIArgs() ([]string, error) {
	file := filepath.Join(s.Dir, "stagecoach-api-token")
	if s.ControllerAPI == "" {
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		s.ControllerAPI = fmt.Sprintf("127.0.0.1:%d", ports[0])
		s.apiToken = token()
		if err := os.WriteFile(file, []byte(s.apiToken+"\n"), 0o600); err != nil {
			return nil, err
		}
	}
	return []string{"--api-bind-address=" + s.ControllerAPI, "--api-proxy-token-file=" + file}, nil
}

// StartArgoCDServer configures Argo CD as manifests/argocd/extension says (the proxy extension to
// the controller's API with the shared token, the RBAC line, proxy extensions enabled), sets the
// local admin's password, installs the UI bundle from the release tarball into ExtensionsDir as
// argocd-extension-installer does, and runs argocd-server with the extension's harness page in
// its static assets directory, beside Argo CD's own web UI when it is built (CachedArgoCDWebUI).
// It returns once admin can log in and /extensions.js serves the bundle. A second call returns the
// running one. Stop ends it and releases ExtensionsDir.
func (s *Stack) StartArgoCDServer(ctx context.Context, opts ArgoCDUIOptions) (*ArgoCDUI, error) {
	if s.argoUI != nil {
		if ended, _ := s.argoUI.Process.Exited(); !ended {
			return s.argoUI, nil
		}
		s.releaseExtensions()
	}
	if opts.Tarball == "" {
		opts.Tarball = filepath.Join(s.Bin.RepoRoot, "dist", "ui", "stagecoach-ui-extension.tar.gz")
	}
	if opts.LockTimeout == 0 {
		opts.LockTimeout = 3 * time.Minute
	}
	start := time.Now()
	ui := &ArgoCDUI{User: "admin", Password: token()[:20]}
	proxyEnabled, err := s.configureArgoCDServer(ctx, ui.Password)
	if err != nil {
		return nil, err
	}
	static, err := s.harnessAssets()
	if err != nil {
		return nil, err
	}
	if web, err := CachedArgoCDWebUI(); err == nil {
		if err := linkTree(web.Dir, static); err != nil {
			return nil, fmt.Errorf("failed to put Argo CD's web UI from %s into %s: %w", web.Dir, static, err)
		}
		// argocd-server answers a page of the UI (a path that is no file) with the index.html
		// embedded in its binary, and a Go-module build embeds none ("open dist/app/index.html:
		// file does not exist"). The login page is where a browser enters the UI: as a file of
		// that name, argocd-server serves it from here, and the UI routes in the browser from there.
		if err := linkFile(filepath.Join(web.Dir, "index.html"), filepath.Join(static, WebUILoginPath)); err != nil {
			return nil, fmt.Errorf("failed to put Argo CD's web UI from %s into %s: %w", web.Dir, static, err)
		}
		ui.WebUI = web
	}
	if ui.lock, err = lockExtensions(ctx, opts.LockTimeout); err != nil {
		return nil, err
	}
	s.argoUI = ui // from here on Stop releases the lock
	if ui.installed, err = installExtension(opts.Tarball, ExtensionsDir); err != nil {
		s.releaseExtensions()
		return nil, err
	}

	link := filepath.Join(s.binDir, ArgoCDServer)
	if _, err := os.Lstat(link); err != nil {
		if err := os.Symlink(s.Bin.ArgoCD, link); err != nil {
			return nil, err
		}
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	ui.URL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	// As the Deployment does: argocd-cmd-params-cm's server.enable.proxy.extension becomes this
	// variable (a process reads no ConfigMap for its flags).
	env := append(slices.Clone(s.argoEnv), "ARGOCD_SERVER_ENABLE_PROXY_EXTENSION="+proxyEnabled)
	ui.Process, err = s.start(processSpec{name: ArgoCDServer, path: link, env: env, args: []string{
		"--insecure", "--address", "127.0.0.1", "--port", fmt.Sprint(ports[0]),
		"--metrics-address", "127.0.0.1", "--metrics-port", fmt.Sprint(ports[1]),
		"--repo-server", s.repoServer, "--repo-server-plaintext", "--redis", s.redis,
		"--namespace", ArgoCDNamespace, "--application-namespaces", "*",
		"--staticassets", static, "--logformat", "text", "--loglevel", "info"}})
	if err != nil {
		return nil, err
	}
	if err := ui.Process.waitReady(ctx, 60*time.Second, "GET /healthz", httpOK(nil, ui.URL+"/healthz")); err != nil {
		return nil, err
	}
	if err := ui.Process.waitReady(ctx, 30*time.Second, "admin login and the bundle in /extensions.js", ui.check); err != nil {
		return nil, err
	}
	webUI := "no web UI (not built)"
	if ui.WebUI != nil {
		webUI = "Argo CD's web UI (argo-ui " + ui.WebUI.ArgoUICommit + ")"
	}
	s.step("started %s (pid %d) at %s with the UI extension from %s and %s in %s", ArgoCDServer, ui.Process.Pid(), ui.URL,
		opts.Tarball, webUI, time.Since(start).Round(time.Millisecond))
	return ui, nil
}

// check succeeds when the admin password works and argocd-server serves the installed bundle.
func (u *ArgoCDUI) check(ctx context.Context) error {
	if _, err := u.Login(ctx); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.URL+"/extensions.js", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("extension-stagecoach.js")) {
		return fmt.Errorf("/extensions.js answered %d without extension-stagecoach.js (%d bytes)", resp.StatusCode, len(body))
	}
	return nil
}

// Login creates a session as the admin through /api/v1/session and returns its token, which is
// what the argocd.token cookie carries.
func (u *ArgoCDUI) Login(ctx context.Context) (string, error) {
	body, _ := json.Marshal(map[string]string{"username": u.User, "password": u.Password})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.URL+"/api/v1/session", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Token string `json:"token"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &out) != nil || out.Token == "" {
		return "", fmt.Errorf("logging in as %s answered %d: %s", u.User, resp.StatusCode, strings.TrimSpace(string(raw)))
	}
	return out.Token, nil
}

// argocdFieldOwner applies the server's settings beside the bootstrap's keys: under the stack's
// own field manager an apply would drop the keys the bootstrap set (server.secretkey, ...).
const argocdFieldOwner = client.FieldOwner("stagecoach-e2e-argocd-server")

// configureArgoCDServer applies manifests/argocd/extension/argocd (the installer's Deployment
// patch aside: the stack installs the bundle itself) with the stack's addresses and secrets, and
// the admin's password. It returns server.enable.proxy.extension's value.
func (s *Stack) configureArgoCDServer(ctx context.Context, password string) (string, error) {
	if s.ControllerAPI == "" {
		return "", errors.New("the stagecoach controller runs without its API: start it with StartController first")
	}
	dir := filepath.Join(s.Bin.RepoRoot, "manifests", "argocd", "extension", "argocd")
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return "", err
	}
	edits := map[string]func(data map[string]any) error{
		"argocd-cm.yaml": func(data map[string]any) error {
			return replaceIn(data, "extension.config.stagecoach", "http://stagecoach-api.stagecoach-system.svc:8083", "http://"+s.ControllerAPI)
		},
		"argocd-secret.yaml": func(data map[string]any) error {
			data["admin.password"] = string(hash)
			data["admin.passwordMtime"] = time.Now().UTC().Format(time.RFC3339)
			return replaceIn(data, "stagecoach.proxy.token", "Bearer CHANGE-ME", "Bearer "+s.apiToken)
		},
		"argocd-rbac-cm.yaml":       func(map[string]any) error { return nil },
		"argocd-cmd-params-cm.yaml": func(map[string]any) error { return nil },
	}
	var proxyEnabled string
	for name, edit := range edits {
		path := filepath.Join(dir, name)
		raw, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		objs, err := decodeYAML(raw)
		if err != nil || len(objs) != 1 {
			return "", fmt.Errorf("%s must hold one object (%v)", path, err)
		}
		o := objs[0]
		field := "data"
		if o.GetKind() == "Secret" {
			field = "stringData"
		}
		data, _, _ := unstructured.NestedMap(o.Object, field)
		if data == nil {
			return "", fmt.Errorf("%s has no %s", path, field)
		}
		if err := edit(data); err != nil {
			return "", fmt.Errorf("%s: %w: update configureArgoCDServer to the new manifest", path, err)
		}
		if v, ok := data["server.enable.proxy.extension"].(string); ok {
			proxyEnabled = v
		}
		if err := unstructured.SetNestedMap(o.Object, data, field); err != nil {
			return "", err
		}
		// Argo CD's settings informers select on this label.
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels["app.kubernetes.io/part-of"] = "argocd"
		o.SetLabels(labels)
		if err := s.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), argocdFieldOwner, client.ForceOwnership); err != nil {
			return "", fmt.Errorf("failed to apply %s from %s: %w", o.GetName(), path, err)
		}
	}
	if proxyEnabled != "true" {
		return "", fmt.Errorf("%s no longer sets server.enable.proxy.extension to \"true\"", filepath.Join(dir, "argocd-cmd-params-cm.yaml"))
	}
	return proxyEnabled, nil
}

// replaceIn replaces old in data[key] with new, and fails when the key does not hold old.
func replaceIn(data map[string]any, key, old, new string) error {
	v, _ := data[key].(string)
	if !strings.Contains(v, old) {
		return fmt.Errorf("%s does not contain %q", key, old)
	}
	data[key] = strings.Replace(v, old, new, 1)
	return nil
}

// harnessAssets fills argocd-server's static assets directory with the UI extension's harness
// page (ui-extension/test/harness.html, its harness.js and the React globals `make ui` builds),
// the page's bundle script pointed at argocd-server's /extensions.js, and the stand-in login page. The files are copied: Argo
// CD opens the directory with os.OpenRoot, which refuses symlinks out of it.
func (s *Stack) harnessAssets() (string, error) {
	ui := filepath.Join(s.Bin.RepoRoot, "ui-extension")
	static := filepath.Join(s.Dir, "argocd", "static")
	base := filepath.Join(static, filepath.Dir(filepath.Dir(HarnessPath)))
	const bundleSrc = `src="../dist/resources/extension-stagecoach.js/extension-stagecoach.js"`
	for _, f := range []struct {
		from, to string
		edit     func([]byte) ([]byte, error)
	}{
		{"test/harness.html", "test/harness.html", func(b []byte) ([]byte, error) {
			if !bytes.Contains(b, []byte(bundleSrc)) {
				return nil, fmt.Errorf("ui-extension/test/harness.html no longer loads the bundle with %s: update harnessAssets", bundleSrc)
			}
			return bytes.Replace(b, []byte(bundleSrc), []byte(`src="/extensions.js"`), 1), nil
		}},
		{"test/harness.js", "test/harness.js", nil},
		{"test/argocd-login.html", "test/login.html", nil},
		{"dist/harness/globals.js", "dist/harness/globals.js", nil},
	} {
		b, err := os.ReadFile(filepath.Join(ui, f.from))
		if err != nil {
			return "", fmt.Errorf("%w: run `make ui` first (it builds the harness's React globals)", err)
		}
		if f.edit != nil {
			if b, err = f.edit(b); err != nil {
				return "", err
			}
		}
		to := filepath.Join(base, f.to)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			return "", err
		}
	}
	return static, nil
}

// linkTree puts every file under from at the same place under to, hard-linked when both are on one
// file system and copied otherwise (Argo CD's os.OpenRoot refuses symlinks out of its folder).
func linkTree(from, to string) error {
	return filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", path)
		}
		return linkFile(path, dst)
	})
}

// linkFile replaces dst with a hard link to src, or a copy of it across file systems.
func linkFile(src, dst string) error {
	if err := os.Remove(dst); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if os.Link(src, dst) == nil {
		return nil
	}
	body, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, body, 0o644)
}

// lockExtensions takes ExtensionsLock, waiting up to timeout for another holder (whose pid the
// file names). The lock is the file's flock, so it dies with its process.
func lockExtensions(ctx context.Context, timeout time.Duration) (*os.File, error) {
	if err := os.MkdirAll(ExtensionsDir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(ExtensionsLock, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			holder, _ := os.ReadFile(ExtensionsLock)
			f.Close()
			return nil, fmt.Errorf("%s is in use by another argocd-server of the local stack (pid %s; %s is shared per host): stop it, or wait: %w",
				ExtensionsDir, strings.TrimSpace(string(holder)), ExtensionsLock, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// installExtension does what argocd-extension-installer does with a release: check the archive
// against its .sha256, require a top-level resources/ and copy it to <dir>/resources/. It returns
// the top-level entries it wrote under resources/ (replaced if a crashed run left them).
func installExtension(tarball, dir string) ([]string, error) {
	raw, err := os.ReadFile(tarball)
	if err != nil {
		return nil, fmt.Errorf("%w: run `make ui-release` first", err)
	}
	sums, err := os.ReadFile(tarball + ".sha256")
	if err != nil {
		return nil, fmt.Errorf("%w: run `make ui-release` first", err)
	}
	sum := sha256.Sum256(raw)
	fields := strings.Fields(string(sums))
	if len(fields) < 2 || fields[0] != hex.EncodeToString(sum[:]) || fields[1] != filepath.Base(tarball) {
		return nil, fmt.Errorf("%s does not match %s.sha256: run `make ui-release` again", tarball, tarball)
	}
	gz, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tarball, err)
	}
	tr := tar.NewReader(gz)
	var installed []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return installed, fmt.Errorf("%s: %w", tarball, err)
		}
		name := filepath.Clean(h.Name)
		rel, ok := strings.CutPrefix(name, "resources"+string(filepath.Separator))
		if name == "resources" {
			continue
		}
		if !ok || !filepath.IsLocal(rel) {
			return installed, fmt.Errorf("%s holds %q outside a top-level resources/: argocd-extension-installer would refuse it", tarball, h.Name)
		}
		top := filepath.Join(dir, "resources", strings.SplitN(rel, string(filepath.Separator), 2)[0])
		if !slices.Contains(installed, top) {
			if err := os.RemoveAll(top); err != nil {
				return installed, err
			}
			installed = append(installed, top)
		}
		to := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(to, 0o755); err != nil {
				return installed, err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
				return installed, err
			}
			body, err := io.ReadAll(tr)
			if err != nil {
				return installed, err
			}
			if err := os.WriteFile(to, body, 0o644); err != nil {
				return installed, err
			}
		default:
			return installed, fmt.Errorf("%s holds %q of type %c: only files and folders belong in it", tarball, h.Name, h.Typeflag)
		}
	}
	if len(installed) == 0 {
		return nil, fmt.Errorf("%s has nothing under resources/", tarball)
	}
	return installed, nil
}

// releaseExtensions removes what StartArgoCDServer installed and releases ExtensionsDir; Stop
// calls it after argocd-server has stopped.
func (s *Stack) releaseExtensions() {
	ui := s.argoUI
	if ui == nil {
		return
	}
	s.argoUI = nil
	if ui.Process != nil {
		ui.Process.Stop()
	}
	for _, p := range ui.installed {
		_ = os.RemoveAll(p)
	}
	if ui.lock != nil {
		_ = ui.lock.Truncate(0)
		_ = ui.lock.Close() // closing the last descriptor releases the flock
	}
}

// GrantStagecoach lets an Argo CD user act on Stagecoach's objects in namespace through the API:
// read them, promote, approve and freeze. The API impersonates the user as Argo CD names it
// (Argocd-Username, here with no groups: a local account has none), so Kubernetes RBAC for that
// name decides, as it would in a cluster.
func (s *Stack) GrantStagecoach(ctx context.Context, namespace, user string) error {
	name := "stagecoach-ui-" + strings.NewReplacer(":", "-", "@", "-").Replace(user)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"stagecoach.dev"}, Resources: []string{"stages", "promotions", "approvals", "freezes"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"stagecoach.dev"}, Resources: []string{"promotions", "approvals"}, Verbs: []string{"create"}},
		{APIGroups: []string{"stagecoach.dev"}, Resources: []string{"freezes"}, Verbs: []string{"create", "update", "patch", "delete"}},
	}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		if err := s.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("failed to let %s use Stagecoach in namespace %s (%T %s): %w", user, namespace, o, name, err)
		}
	}
	return nil
}
