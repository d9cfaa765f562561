package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
	"github.com/stagecoach-dev/stagecoach/test/e2e/pipeline"
)

// The Promotion tab in a real argocd-server (v3.6.1, the stack's own build), approving a release
// for an Argo CD Application of a real pipeline.
//
// What is real: argocd-server with Stagecoach's settings from manifests/argocd/extension (the
// extension.config.stagecoach proxy to the controller's API with the shared token from
// argocd-secret, the RBAC line, proxy extensions on), the local admin account, the session and
// its argocd.token cookie from /api/v1/session, the UI bundle installed from the release tarball
// (`make ui-release`) into /tmp/extensions and served by argocd-server's /extensions.js, Argo
// CD's proxy extension with its RBAC checks and the Argocd-Username header it adds, the
// controller's API impersonating that user, the admission policy on the Approval, and the
// controller promoting to prod once approved.
//
// What is not: Argo CD's own UI. The argocd-server built from the Go module proxy serves no UI
// (the module's ui/dist/app holds only .gitkeep files: the UI is built with pnpm and webpack in
// Argo CD's release process), and it cannot be built from the npm registry alone: v3.6.1's ui/
// needs argo-ui at a GitHub commit (f941b0a3), and the only argo-ui on npm (1.0.0) is the old
// React 16 line, without argo-ui/v2, src/styles/theme.scss, src/components/form/compat.tsx or the
// Form/Text/ReactForm exports (its production build stops at 46 webpack errors; see
// localstack/build/argocd-ui/build.sh). With an argo-ui checkout, `make argocd-ui` builds it and
// TestPromotionTabInArgoCDWebUI (argocd_webui_test.go) drives the tab there; this test needs
// neither and always runs. So the page is
// the extension's harness (ui-extension/test/harness.html: React 19 globals as Argo CD provides
// them and a minimal window.extensionsAPI), served same-origin by argocd-server from its
// --staticassets directory, with the bundle loaded from /extensions.js. The harness renders the
// tab for the Application named in its query, as Argo CD's Application view would.
//
// Needs `make ui-release` (the tarball and the harness's React globals) and Debian's chromium
// (or CHROMIUM=/path).
func TestPromotionTabInArgoCD(t *testing.T) {
	sc := env.Scenario(t)
	ctx, g := sc.Ctx(), sc.G
	p, err := pipeline.Setup(ctx, sc.Stack, sc.NS, pipeline.Options{Service: "storefront", PluginService: "basket"})
	g.Expect(err).NotTo(HaveOccurred())
	watchPipeline(t, p)

	// prod waits for a person's approval of v1.
	pushed := time.Now()
	v1, err := p.PushSigned(ctx, "v1.0.0", p.Manifests("v1.0.0"))
	g.Expect(err).NotTo(HaveOccurred())
	dev := sc.WaitVerified(p.Stages[pipeline.Dev], v1, pushed)
	sc.WaitVerified(p.Stages[pipeline.Staging], v1, dev.Verified)
	waitBlocked(sc, p, pipeline.Prod, v1, "approvals")

	started := time.Now()
	ui, err := env.StartArgoCDServer(ctx, localstack.ArgoCDUIOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	report("argocd-server with the UI extension ready in %s", time.Since(started).Round(time.Millisecond))
	// Argo CD passes its local admin as user "admin" (no groups); Kubernetes RBAC for that name
	// decides what the API may do as it.
	g.Expect(env.GrantStagecoach(ctx, sc.NS, ui.User)).To(Succeed())

	app := p.Stages[pipeline.Prod] // the Application is named as its Stage
	page := ui.HarnessURL(sc.NS, app, "default", "light")
	whoami := fmt.Sprintf(`fetch('/extensions/stagecoach/api/v1/whoami', {headers: {
		'Argocd-Application-Name': %q, 'Argocd-Project-Name': 'default'}}).then(async r => r.status + ' ' + await r.text())`, sc.NS+":"+app)
	b := browser(t)

	// Not logged in: argocd-server refuses (v3.6.1: a plain-text "400 Auth cookie not found")
	// before the request reaches Stagecoach, whose own refusal would be a JSON 401 naming the proxy
	// token. The tab says to log in to Argo CD again, as it does when a session expires while it is
	// open (argocd-server's 401 "Invalid token"), and not that the proxy token is wrong.
	g.Expect(chromedp.Do(b, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(`[role=alert] h2`)))).To(Succeed())
	g.Expect(text(b, `[role=alert] h2`)).To(Equal("Log in to Argo CD again"))
	g.Expect(text(b, `[role=alert]`)).To(And(ContainSubstring("Argo CD answered 400: Auth cookie not found"), Not(ContainSubstring("proxy token"))))
	g.Expect(chromedp.Do(b, chromedp.Navigate(ui.LoginURL(page)), chromedp.WaitVisible(chromedp.CSS(`#login`)))).To(Succeed())
	g.Expect(chromedp.Run(b, chromedp.Evaluate[string](whoami, chromedp.EvalAwaitPromise))).
		To(And(HavePrefix("400 Auth cookie not found"), Not(ContainSubstring("proxy token"))))

	// A wrong password is Argo CD's to refuse; the right one opens the tab with the session in
	// the argocd.token cookie.
	prod := `section[aria-label="Stage prod"]`
	g.Expect(chromedp.Do(b,
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), "wrong"),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#error:not(:empty)`)),
	)).To(Succeed())
	g.Expect(text(b, `#error`)).To(HavePrefix("Login failed (401)"))
	g.Expect(chromedp.Do(b,
		chromedp.Evaluate[chromedp.Void](`document.querySelector('input[name=password]').value = ''`),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), ui.Password),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(prod)),
	)).To(Succeed())
	cookies, err := chromedp.Call(b, network.GetCookies, network.GetCookiesParams{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(slices.ContainsFunc(cookies.Cookies, func(c *network.Cookie) bool { return c.Name == "argocd.token" && c.HTTPOnly })).
		To(BeTrue(), "no argocd.token cookie after logging in")
	// Through the proxy, Stagecoach sees the user Argo CD names.
	g.Expect(chromedp.Run(b, chromedp.Evaluate[string](whoami, chromedp.EvalAwaitPromise))).
		To(And(HavePrefix("200 "), ContainSubstring(`"user":"admin"`), ContainSubstring(`"readOnly":false`)))

	g.Expect(chromedp.Run(b, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('.sc-pipeline section')].map(s => s.getAttribute('aria-label'))`))).
		To(Equal([]string{"Stage dev", "Stage staging", "Stage prod"}))
	g.Expect(text(b, prod)).To(And(ContainSubstring("Candidate v1.0.0"), ContainSubstring("approvals"), ContainSubstring("this Application")))
	g.Expect(text(b, `section[aria-label="Stage staging"]`)).To(ContainSubstring("v1.0.0"))
	screenshot(t, b, ui.HarnessURL(sc.NS, app, "default", "dark"), "argocd-tab-waiting-dark.png")
	g.Expect(chromedp.Do(b, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(prod)))).To(Succeed())

	g.Expect(chromedp.Do(b,
		chromedp.Click(`//section[@aria-label="Stage prod"]//button[normalize-space()="Approve"]`),
		chromedp.WaitVisible(chromedp.CSS(`[role=dialog]`)),
	)).To(Succeed())
	g.Expect(text(b, `[role=dialog]`)).To(ContainSubstring("Creates an Approval as admin of v1.0.0"))
	approved := time.Now()
	g.Expect(chromedp.Do(b,
		chromedp.SendKeys(chromedp.CSS(`[role=dialog] input[name=comment]`), "approved in Argo CD"),
		chromedp.Click(chromedp.CSS(`[role=dialog] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`.sc-banner--ok`)),
	)).To(Succeed())

	var approvals stagecoachv1.ApprovalList
	g.Expect(sc.Client.List(ctx, &approvals, client.InNamespace(sc.NS))).To(Succeed())
	g.Expect(approvals.Items).To(HaveLen(1))
	a := approvals.Items[0]
	g.Expect(a.Spec.Stage).To(Equal(p.Stages[pipeline.Prod]))
	g.Expect(a.Spec.Digest).To(Equal(v1))
	g.Expect(a.Spec.Approver).To(Equal("admin"))
	g.Expect(a.Spec.Comment).To(Equal("approved in Argo CD"))
	g.Expect(text(b, `.sc-banner--ok`)).To(ContainSubstring("Approval " + sc.NS + "/" + a.Name + " created"))

	// The approval is what prod waited for: it runs v1, Verified, and the tab shows it.
	sc.WaitVerified(p.Stages[pipeline.Prod], v1, approved)
	g.Expect(chromedp.Do(b, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(prod)))).To(Succeed())
	g.Expect(text(b, prod)).To(And(ContainSubstring("v1.0.0"), ContainSubstring("No candidate")))
	g.Expect(text(b, `.sc-history tbody tr`)).To(And(ContainSubstring("prod"), ContainSubstring("Promote"), ContainSubstring("v1.0.0")))
	g.Expect(pageErrors(b)).To(BeEmpty())
	for _, theme := range []string{"light", "dark"} {
		screenshot(t, b, ui.HarnessURL(sc.NS, app, "default", theme), "argocd-tab-"+theme+".png")
	}

	// argocd-server logs each call it proxied, with the user it named to Stagecoach.
	log, err := os.ReadFile(ui.Process.LogPath)
	g.Expect(err).NotTo(HaveOccurred())
	var proxied []string
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "sending proxy extension request") && strings.Contains(line, "/api/v1/stages/"+sc.NS+"/"+p.Stages[pipeline.Prod]+"/approve") {
			proxied = append(proxied, line)
		}
	}
	g.Expect(proxied).To(ConsistOf(ContainSubstring("Argocd-Username=admin")))
}

// screenshotDir holds the screenshots of the tab in argocd-server (ignored by git).
var screenshotDir = filepath.Join(localstack.RepoRoot(), "test", "e2e", "out")

func screenshot(t *testing.T, b context.Context, url, name string) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(os.MkdirAll(screenshotDir, 0o755)).To(Succeed())
	b, cancel := context.WithTimeout(b, 30*time.Second)
	defer cancel()
	g.Expect(chromedp.Do(b, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`section[aria-label="Stage prod"]`)))).To(Succeed())
	png, err := chromedp.Run(b, chromedp.Screenshot(chromedp.CSS(`.harness-frame`)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(screenshotDir, name), png, 0o644)).To(Succeed())
}

// browser starts Debian's chromium (or $CHROMIUM) headless for one test, its actions bounded to
// 3 minutes in all.
func browser(t *testing.T) context.Context {
	t.Helper()
	return startBrowser(t, 3*time.Minute)
}

// startBrowser starts Debian's chromium (or $CHROMIUM) headless at 1280×900; every action of the
// context it returns ends within timeout of the start.
func startBrowser(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	exe := os.Getenv("CHROMIUM")
	if exe == "" {
		var err error
		if exe, err = exec.LookPath("chromium"); err != nil {
			t.Fatal("no chromium on PATH: install Debian's (apt-get install -y chromium) or set CHROMIUM=/path/to/chrome")
		}
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.WithoutCancel(t.Context()), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("failed to start %s: %v", exe, err)
	}
	// Bounds every action of the test, not the browser's start.
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(cancelTimeout)
	return ctx
}

func text(ctx context.Context, sel string) (string, error) {
	return chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
}

// pageErrors is what the harness caught from the page's 'error' events (a bundle that fails to
// load in /extensions.js says so only there, or in Argo CD's try/catch wrapper on the console).
func pageErrors(ctx context.Context) ([]string, error) {
	errs, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.harness ? window.harness.errors : ['no harness on the page']`))
	if err == nil && len(errs) == 0 {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.harness.registrations.resource.some(r => r.tabTitle === 'Promotion')`))
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errors.New("the bundle from /extensions.js registered no Promotion tab")
		}
	}
	return errs, err
}
