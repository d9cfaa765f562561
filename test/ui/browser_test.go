// Package ui loads the built Argo CD UI extension (ui-extension/) into headless Chromium, on a
// harness page that plays Argo CD's UI (React 19 globals, window.extensionsAPI), against the real
// Stagecoach API (internal/api) with a real kube-apiserver behind it, reached through a stand-in
// for Argo CD's proxy extension. It is its own module so that chromedp never reaches go.mod.
//
// Needs `make ui` first (the bundle and the harness globals in ui-extension/dist), Debian's
// chromium (or CHROMIUM=/path) and KUBEBUILDER_ASSETS="$(test/envbin/build.sh)".
package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller"
	"github.com/stagecoach-dev/stagecoach/internal/api"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

const token = "browser-test-proxy-token"

var (
	env     *testenv.Env
	chrome  context.Context // the browser; each test opens its own tab
	site    *httptest.Server
	proxy   = &argoProxy{}
	uiDir   = filepath.Join(testenv.RepoRoot(), "ui-extension")
	outDir  = filepath.Join(testenv.RepoRoot(), "test", "ui", "out")
	bundle  = filepath.Join(uiDir, "dist", "resources", "extension-stagecoach.js", "extension-stagecoach.js")
	globals = filepath.Join(uiDir, "dist", "harness", "globals.js")
)

func TestMain(m *testing.M) {
	for _, f := range []string{bundle, globals} {
		if _, err := os.Stat(f); err != nil {
			fmt.Fprintf(os.Stderr, "%s is missing: run `make ui` first (it builds the bundle and the harness globals)\n", f)
			os.Exit(1)
		}
	}
	testenv.SetLogger()
	var err error
	env, err = testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		scheme, err := controller.NewScheme()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		// The harness plays an Argo CD whose every session has groups (SSO), where the API may
		// take them (--api-trust-argocd-groups; test/integration/api tries the default).
		srv, err := api.New(api.Options{Reader: env.Client, Config: env.Config, Scheme: scheme, ProxyToken: token,
			Log: ctrl.Log.WithName("api"), TrustGroupsHeader: true})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		proxy.api = srv.Handler()
		mux := http.NewServeMux()
		mux.Handle("/extensions/stagecoach/", proxy)
		mux.Handle("/", http.FileServer(http.Dir(uiDir)))
		site = httptest.NewServer(mux)
		defer site.Close()
		var stop func()
		if chrome, stop, err = startChromium(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer stop()
		return m.Run()
	}()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "failed to stop the test API server:", err)
	}
	os.Exit(code)
}

// argoProxy does what argocd-server's proxy extension does on the way to Stagecoach
// (server/extension/extension.go): it requires the two Argocd-* headers, drops the browser's
// Authorization and cookies, sets the configured token and the logged-in user's headers, and
// strips /extensions/stagecoach. Who is logged in is set by the test.
type argoProxy struct {
	api http.Handler

	mu     sync.Mutex
	user   string
	groups string
	seen   []http.Header // the browser's request headers, for the tests to check
}

func (p *argoProxy) login(user, groups string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.user, p.groups = user, groups
}

func (p *argoProxy) requests() []http.Header {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]http.Header(nil), p.seen...)
}

func (p *argoProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.seen = append(p.seen, r.Header.Clone())
	user, groups := p.user, p.groups
	p.mu.Unlock()
	if r.Header.Get("Argocd-Application-Name") == "" || r.Header.Get("Argocd-Project-Name") == "" {
		http.Error(w, "Invalid headers: Argocd-Application-Name and Argocd-Project-Name are required", http.StatusBadRequest)
		return
	}
	out := r.Clone(r.Context())
	out.URL.Path = strings.TrimPrefix(r.URL.Path, "/extensions/stagecoach")
	out.RequestURI = ""
	out.Header.Del("Cookie")
	out.Header.Set("Authorization", "Bearer "+token)
	out.Header.Del("Argocd-Username")
	out.Header.Del("Argocd-User-Id")
	out.Header.Del("Argocd-User-Groups")
	if user != "" {
		// A local account's id is its name.
		out.Header.Set("Argocd-Username", user)
		out.Header.Set("Argocd-User-Id", user)
		out.Header.Set("Argocd-User-Groups", groups)
	}
	p.api.ServeHTTP(w, out)
}

var (
	current   = "sha256:" + strings.Repeat("1", 64)
	candidate = "sha256:" + strings.Repeat("2", 64)
)

type pipeline struct{ service, stagingNS, prodNS string }

// approvers is the group whose approval prod needs.
func (p pipeline) approvers() string { return p.service + "-approvers" }

// newPipeline creates staging and prod, each applied by an Application of its name, with the
// status a reconcile would have written: both run v1.2.0, prod's candidate v1.3.0 waits for one
// approval from the service's approvers group, and staging has a succeeded promotion and a rollback behind it.
func newPipeline(t *testing.T, service string) pipeline {
	t.Helper()
	g := NewWithT(t)
	p := pipeline{service: service, stagingNS: env.NewNamespace(t, service+"-staging"), prodNS: env.NewNamespace(t, service+"-prod")}
	stage := func(ns, envName string, source stagecoachv1.StageSource, policy *stagecoachv1.PromotionPolicy) *stagecoachv1.Stage {
		return &stagecoachv1.Stage{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: envName, Labels: map[string]string{"app": service, "env": envName}},
			Spec: stagecoachv1.StageSpec{Service: service, Environment: envName,
				ApplyRef: stagecoachv1.ApplierReference{Kind: "Application", Name: service + "-" + envName}, Source: source, Promotion: policy},
		}
	}
	since := metav1.NewTime(time.Now().Add(-26 * time.Hour).Truncate(time.Second))
	staging := stage(p.stagingNS, "staging", stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: "registry.example/deploy/" + service}}, nil)
	prod := stage(p.prodNS, "prod", stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "staging", Namespace: p.stagingNS}},
		&stagecoachv1.PromotionPolicy{Approvals: &stagecoachv1.ApprovalPolicy{Required: 1, Groups: []string{p.approvers()}}})
	for _, s := range []*stagecoachv1.Stage{staging, prod} {
		g.Expect(env.Client.Create(t.Context(), s)).To(Succeed())
		s.Status.ObservedGeneration = s.Generation
		meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: stagecoachv1.ConditionReady, Status: metav1.ConditionTrue,
			Reason: "Verified", Message: "runs v1.2.0", ObservedGeneration: s.Generation})
		s.Status.Current = &stagecoachv1.CurrentVersion{Version: "v1.2.0", Digest: current, PromotedAt: &since, VerifiedAt: &since}
		g.Expect(env.Client.Status().Update(t.Context(), s)).To(Succeed())
	}
	prod.Status.Candidate = &stagecoachv1.CandidateVersion{Version: "v1.3.0", Digest: candidate, BlockedBy: []stagecoachv1.GateBlock{
		{Gate: stagecoachv1.GateApprovals, Reason: "ApprovalRequired", Message: "0 of 1 approvals from " + p.approvers()}}}
	g.Expect(env.Client.Status().Update(t.Context(), prod)).To(Succeed())
	for i, h := range []struct {
		action stagecoachv1.PromotionAction
		by     string
		reason string
		phase  stagecoachv1.Phase
		ago    time.Duration
	}{
		{stagecoachv1.ActionPromote, "alice", "weekly release", stagecoachv1.Phase("Succeeded"), 30 * time.Hour},
		{stagecoachv1.ActionRollback, "bob", "error rate above 2%", stagecoachv1.Phase("Succeeded"), 26 * time.Hour},
	} {
		pr := &stagecoachv1.Promotion{
			ObjectMeta: metav1.ObjectMeta{Namespace: p.stagingNS, Name: fmt.Sprintf("staging-%d", i)},
			Spec: stagecoachv1.PromotionSpec{Stage: "staging", Action: h.action, Reason: h.reason, RequestedBy: h.by,
				Version: &stagecoachv1.VersionReference{Digest: current, Tag: "v1.2.0"}},
		}
		g.Expect(env.Client.Create(t.Context(), pr)).To(Succeed())
		started := metav1.NewTime(time.Now().Add(-h.ago).Truncate(time.Second))
		pr.Status.Phase = h.phase
		pr.Status.StartedAt = &started
		pr.Status.FinishedAt = &started
		g.Expect(env.Client.Status().Update(t.Context(), pr)).To(Succeed())
	}
	return p
}

// grant binds a ClusterRole with the rules to a group, for the test's lifetime.
func grant(t *testing.T, name, group string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	g := NewWithT(t)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: group}}}
	for _, obj := range []client.Object{role, binding} {
		if err := env.Client.Create(t.Context(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
			g.Expect(err).NotTo(HaveOccurred())
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.WithoutCancel(t.Context()), obj) })
	}
}

var readStages = rbacv1.PolicyRule{APIGroups: []string{stagecoachv1.GroupVersion.Group}, Resources: []string{"stages", "promotions", "approvals", "freezes"},
	Verbs: []string{"get", "list", "watch"}}

// startChromium starts Debian's chromium (or $CHROMIUM) headless, once for the suite.
func startChromium() (context.Context, func(), error) {
	exe := os.Getenv("CHROMIUM")
	if exe == "" {
		var err error
		if exe, err = exec.LookPath("chromium"); err != nil {
			return nil, nil, errors.New("no chromium on PATH: install Debian's (apt-get install -y chromium) or set CHROMIUM=/path/to/chrome")
		}
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 820))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		cancel()
		cancelAlloc()
		return nil, nil, fmt.Errorf("failed to start %s: %w", exe, err)
	}
	return ctx, func() { cancel(); cancelAlloc() }, nil
}

// browser opens a tab for one test, closed when it ends.
func browser(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(chrome)
	t.Cleanup(cancel)
	// Bounds every action of the test; the tab, not the browser, ends with it.
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancelTimeout)
	return ctx
}

func harnessURL(p pipeline, theme string) string {
	q := url.Values{"namespace": {p.prodNS}, "app": {p.service + "-prod"}, "project": {"default"}, "theme": {theme}}
	return site.URL + "/test/harness.html?" + q.Encode()
}

// stageButton is an XPath to a button of a Stage's card.
func stageButton(stage, label string) string {
	return fmt.Sprintf(`//section[@aria-label="Stage %s"]//button[normalize-space()="%s"]`, stage, label)
}

func text(ctx context.Context, sel string) (string, error) {
	return chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
}

// Promote through the tab: the confirmation says what will happen, the request carries Argo CD's
// headers, a Promotion exists afterwards and the view shows it.
func TestPromoteFromTheTab(t *testing.T) {
	g := NewWithT(t)
	p := newPipeline(t, "shop")
	grant(t, "ui-shop-releasers", p.approvers(), readStages,
		rbacv1.PolicyRule{APIGroups: []string{stagecoachv1.GroupVersion.Group}, Resources: []string{"promotions", "approvals", "freezes"}, Verbs: []string{"create"}})
	proxy.login("alice", p.approvers())
	ctx := browser(t)

	g.Expect(chromedp.Do(ctx,
		chromedp.Navigate(harnessURL(p, "light")),
		chromedp.WaitVisible(chromedp.CSS(`section[aria-label="Stage prod"]`)),
	)).To(Succeed())
	g.Expect(text(ctx, `section[aria-label="Stage prod"]`)).To(And(ContainSubstring("v1.2.0"), ContainSubstring("Healthy"),
		ContainSubstring("Candidate v1.3.0"), ContainSubstring("approvals"), ContainSubstring("ApprovalRequired"),
		ContainSubstring("0 of 1 approvals from shop-approvers")))
	g.Expect(chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('.sc-pipeline section')].map(s => s.getAttribute('aria-label'))`))).
		To(Equal([]string{"Stage staging", "Stage prod"}))
	g.Expect(text(ctx, `.sc-history`)).To(And(ContainSubstring("Rollback"), ContainSubstring("error rate above 2%")))

	g.Expect(chromedp.Do(ctx,
		chromedp.Click(stageButton("prod", "Promote")),
		chromedp.WaitVisible(chromedp.CSS(`[role=dialog]`)),
	)).To(Succeed())
	g.Expect(text(ctx, `[role=dialog]`)).To(ContainSubstring(
		"Creates a Promotion as alice that moves shop in prod (Stage " + p.prodNS + "/prod) to v1.3.0 (sha256:222222222222)"))
	g.Expect(promotions(t, p.prodNS)).To(BeEmpty(), "nothing may be created before confirming")

	g.Expect(chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`[role=dialog] input[name=reason]`), "ship it"),
		chromedp.Click(chromedp.CSS(`[role=dialog] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`.sc-banner--ok`)),
		chromedp.WaitNotPresent(chromedp.CSS(`[role=dialog]`)),
	)).To(Succeed())
	notice, err := text(ctx, `.sc-banner--ok`)
	g.Expect(err).NotTo(HaveOccurred())

	list := promotions(t, p.prodNS)
	g.Expect(list).To(HaveLen(1))
	created := list[0]
	g.Expect(created.Spec.Stage).To(Equal("prod"))
	g.Expect(created.Spec.Version).To(Equal(&stagecoachv1.VersionReference{Digest: candidate, Tag: "v1.3.0"}))
	g.Expect(created.Spec.Reason).To(Equal("ship it"))
	g.Expect(created.Spec.RequestedBy).To(Equal("alice"))
	g.Expect(notice).To(ContainSubstring("Promotion " + p.prodNS + "/" + created.Name + " created"))

	// The view reloads after the action: the new Promotion heads the history, as prod's.
	g.Eventually(func() (string, error) { return text(ctx, `.sc-history tbody tr`) }).WithTimeout(10 * time.Second).
		Should(And(ContainSubstring("prod"), ContainSubstring("Promote"), ContainSubstring("v1.3.0"), ContainSubstring("alice")))

	// Every request the tab sent carried the two headers argocd-server requires.
	reqs := proxy.requests()
	g.Expect(reqs).NotTo(BeEmpty())
	for _, h := range reqs {
		g.Expect(h.Get("Argocd-Application-Name")).To(Equal(p.prodNS + ":shop-prod"))
		g.Expect(h.Get("Argocd-Project-Name")).To(Equal("default"))
	}
	g.Expect(errorsOnPage(ctx)).To(BeEmpty())

	screenshots(t, ctx, p)
}

// A refused Approve shows the API server's reason in the dialog; Escape closes it and gives focus
// back to the button; nothing was created. Eve is in the approvers group, so Stagecoach lets the
// request through, but Kubernetes RBAC gives her no right to create Approvals.
func TestRefusedApproveShowsTheReason(t *testing.T) {
	g := NewWithT(t)
	p := newPipeline(t, "cart")
	grant(t, "ui-cart-approvers-read-only", p.approvers(), readStages)
	proxy.login("eve", p.approvers())
	ctx := browser(t)

	g.Expect(chromedp.Do(ctx,
		chromedp.Navigate(harnessURL(p, "light")),
		chromedp.WaitVisible(chromedp.CSS(`section[aria-label="Stage prod"]`)),
		chromedp.Click(stageButton("prod", "Approve")),
		chromedp.WaitVisible(chromedp.CSS(`[role=dialog]`)),
		chromedp.Click(chromedp.CSS(`[role=dialog] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[role=dialog] [role=alert]`)),
	)).To(Succeed())
	alert, err := text(ctx, `[role=dialog] [role=alert]`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(alert).To(HavePrefix("Refused (403):"))
	g.Expect(alert).To(ContainSubstring(`User "eve" cannot create resource "approvals" in API group "stagecoach.dev" in the namespace "` + p.prodNS + `"`))
	g.Expect(errorsOnPage(ctx)).To(BeEmpty())

	g.Expect(chromedp.Do(ctx,
		chromedp.KeyEvent(kb.Escape),
		chromedp.WaitNotPresent(chromedp.CSS(`[role=dialog]`)),
	)).To(Succeed())
	g.Expect(chromedp.Run(ctx, chromedp.Evaluate[string](
		`document.activeElement.closest('section').getAttribute('aria-label') + ' / ' + document.activeElement.textContent`))).
		To(Equal("Stage prod / Approve"))

	var approvals stagecoachv1.ApprovalList
	g.Expect(env.Client.List(t.Context(), &approvals, client.InNamespace(p.prodNS))).To(Succeed())
	g.Expect(approvals.Items).To(BeEmpty())
}

// Without an Argo CD user the API is read-only and the tab says so instead of offering buttons;
// the status-panel item works for them too.
func TestAnonymousViewerCannotAct(t *testing.T) {
	g := NewWithT(t)
	p := newPipeline(t, "docs")
	// An install that lets anonymous users read Stages: the pipeline shows what they may list.
	grant(t, "ui-anonymous-read", "system:unauthenticated", readStages)
	proxy.login("", "")
	ctx := browser(t)
	g.Expect(chromedp.Do(ctx,
		chromedp.Navigate(harnessURL(p, "light")),
		chromedp.WaitVisible(chromedp.CSS(`section[aria-label="Stage prod"]`)),
	)).To(Succeed())
	disabled, err := chromedp.Run(ctx, chromedp.Evaluate[[]bool](`[...document.querySelectorAll('.sc-actions button')].map(b => b.disabled)`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(disabled).To(HaveLen(8))
	g.Expect(disabled).To(HaveEach(BeTrue()))
	g.Expect(text(ctx, `[role=note]`)).To(ContainSubstring("Read-only: Stagecoach sees you as anonymous"))

	// The status-panel line sums up this Application's Stage and opens the tab in the flyout.
	g.Expect(text(ctx, `.sc-panel .sc-link`)).To(Equal("prod v1.2.0 ← v1.3.0 (approvals)"))
	g.Expect(chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`.sc-panel .sc-link`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=flyout] section[aria-label="Stage prod"]`)),
	)).To(Succeed())
	g.Expect(errorsOnPage(ctx)).To(BeEmpty())
}

// Argo CD's theme class wins over the system preference; without one the preference decides.
func TestThemes(t *testing.T) {
	p := newPipeline(t, "theme")
	grant(t, "ui-theme-read", p.approvers(), readStages)
	proxy.login("alice", p.approvers())
	for _, tc := range []struct {
		theme, system, wantBG string
	}{
		{theme: "light", system: "dark", wantBG: "rgb(255, 255, 255)"},
		{theme: "dark", system: "light", wantBG: "rgb(15, 20, 25)"},
		{theme: "system", system: "dark", wantBG: "rgb(15, 20, 25)"},
		{theme: "system", system: "light", wantBG: "rgb(255, 255, 255)"},
	} {
		t.Run(tc.theme+" on a "+tc.system+" system", func(t *testing.T) {
			g := NewWithT(t)
			ctx := browser(t)
			_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia,
				emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: tc.system}}})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(chromedp.Do(ctx,
				chromedp.Navigate(harnessURL(p, tc.theme)),
				chromedp.WaitVisible(chromedp.CSS(`section[aria-label="Stage prod"]`)),
			)).To(Succeed())
			g.Expect(chromedp.Run(ctx, chromedp.Evaluate[string](
				`getComputedStyle(document.querySelector('[data-testid=stagecoach-tab]')).backgroundColor`))).To(Equal(tc.wantBG))
		})
	}
}

func promotions(t *testing.T, ns string) []stagecoachv1.Promotion {
	t.Helper()
	var list stagecoachv1.PromotionList
	NewWithT(t).Expect(env.Client.List(t.Context(), &list, client.InNamespace(ns))).To(Succeed())
	return list.Items
}

// screenshots writes the tab in both themes to test/ui/out (ignored by git).
func screenshots(t *testing.T, ctx context.Context, p pipeline) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(os.MkdirAll(outDir, 0o755)).To(Succeed())
	for _, theme := range []string{"light", "dark"} {
		g.Expect(chromedp.Do(ctx,
			chromedp.Navigate(harnessURL(p, theme)),
			chromedp.WaitVisible(chromedp.CSS(`.sc-history tbody tr`)),
		)).To(Succeed())
		png, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(`.harness-frame`)))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(os.WriteFile(filepath.Join(outDir, "tab-"+theme+".png"), png, 0o644)).To(Succeed())
	}
}

// errorsOnPage is what the harness caught from the page's 'error' events (a bundle that fails to
// load says so only there).
func errorsOnPage(ctx context.Context) ([]string, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.harness ? window.harness.errors : ['no harness on the page']`))
}

// The history stays inside the tab at 1280 px however long a Promotion's reason, message or
// actor: a long message wraps in its column (an unbroken token, such as a digest or a service
// account, breaks anywhere) instead of widening the table past the page.
func TestHistoryFitsAt1280(t *testing.T) {
	g := NewWithT(t)
	p := newPipeline(t, "wide")
	grant(t, "ui-wide-read", p.approvers(), readStages)
	proxy.login("alice", p.approvers())
	long := "verification failed: " + strings.Repeat("the canary's error rate stayed above the threshold for the whole window; ", 4) +
		"registry.example/deploy/wide@" + candidate + "?" + strings.Repeat("x", 120)
	pr := &stagecoachv1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.stagingNS, Name: "staging-long"},
		Spec: stagecoachv1.PromotionSpec{Stage: "staging", Action: stagecoachv1.ActionRollback, Reason: "automatic rollback: " + strings.Repeat("y", 80),
			RequestedBy: "system:serviceaccount:stagecoach-system:stagecoach-controller-manager-with-a-long-name",
			Version:     &stagecoachv1.VersionReference{Digest: current, Tag: "v1.2.0"}},
	}
	g.Expect(env.Client.Create(t.Context(), pr)).To(Succeed())
	started := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	pr.Status.Phase = stagecoachv1.Phase("Failed")
	pr.Status.Message = long
	pr.Status.StartedAt = &started
	g.Expect(env.Client.Status().Update(t.Context(), pr)).To(Succeed())

	ctx := browser(t)
	g.Expect(chromedp.Do(ctx,
		chromedp.Navigate(harnessURL(p, "light")),
		chromedp.WaitVisible(chromedp.CSS(`.sc-history tbody tr`)),
	)).To(Succeed())
	g.Expect(text(ctx, `.sc-history tbody tr:first-child`)).To(ContainSubstring("verification failed"))
	type box struct {
		Table, Section, Page, Window, Cell int
		Clamped                            bool
	}
	b, err := chromedp.Run(ctx, chromedp.Evaluate[box](`(() => {
		const s = document.querySelector('.sc-history'), t = s.querySelector('table');
		const c = t.querySelector('tbody tr:first-child td:last-child');
		return {Table: Math.ceil(t.getBoundingClientRect().right), Section: Math.ceil(s.getBoundingClientRect().right),
			Page: document.documentElement.scrollWidth, Window: window.innerWidth, Cell: Math.ceil(c.getBoundingClientRect().width),
			Clamped: c.querySelector('.sc-clamp').scrollHeight > c.querySelector('.sc-clamp').clientHeight};
	})()`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Window).To(Equal(1280), "startChromium's window size")
	g.Expect(b.Page).To(BeNumerically("<=", b.Window), "the page scrolls sideways: %+v", b)
	g.Expect(b.Table).To(BeNumerically("<=", b.Section), "the history table is wider than its section: %+v", b)
	g.Expect(b.Cell).To(BeNumerically(">=", 200), "the message column is squeezed: %+v", b)
	g.Expect(b.Clamped).To(BeTrue(), "the long message is not cut to a few lines: %+v", b)
	g.Expect(chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('.sc-history tbody tr:first-child .sc-clamp').title`))).
		To(ContainSubstring(candidate), "the full message is not on hover")
	// The short columns keep their words whole ("Rollback", not "Rollbac k").
	// Lines are counted from the text's own boxes (a version's bordered box starts a pixel above
	// its text), tops within 4 px of each other being one line.
	g.Expect(chromedp.Run(ctx, chromedp.Evaluate[[]int](`[...document.querySelectorAll('.sc-history tbody tr:first-child td')].slice(0, 5).map(td => {
		const tops = [], w = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
		for (let n = w.nextNode(); n; n = w.nextNode()) {
			const r = document.createRange(); r.selectNodeContents(n);
			for (const x of r.getClientRects()) if (x.width > 0) tops.push(x.top);
		}
		tops.sort((a, b) => a - b);
		return tops.filter((t, i) => i === 0 || t - tops[i - 1] > 4).length;
	})`))).To(Equal([]int{1, 1, 1, 1, 1}), "lines in When, Stage, Action, Version and Phase")
	g.Expect(os.MkdirAll(outDir, 0o755)).To(Succeed())
	png, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(`.sc-history`)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(outDir, "history-1280.png"), png, 0o644)).To(Succeed())
	g.Expect(errorsOnPage(ctx)).To(BeEmpty())
}
