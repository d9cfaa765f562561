package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	. "github.com/onsi/gomega"
	"golang.org/x/crypto/bcrypt"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
	"github.com/stagecoach-dev/stagecoach/test/e2e/pipeline"
)

// The Promotion tab inside Argo CD's own web UI (v3.6.1, built by
// localstack/build/argocd-ui/build.sh from an argo-ui checkout and served by the stack's
// argocd-server with --staticassets), in headless Chromium at 1280 px.
//
// Two local Argo CD accounts log in through Argo CD's login page: eve, read-only in Argo CD and
// allowed only to read Stagecoach's objects in Kubernetes, and admin, whom Kubernetes RBAC lets
// approve. Each opens an Application of the pipeline, clicks its node to open Argo CD's resource
// panel and the Promotion tab in it, and sees the pipeline; eve's Approve is refused with the
// Kubernetes API server's message, admin's is accepted and the tab shows prod Verified on its own
// (it polls), with no reload; so does Stagecoach's line in the Application's status panel (the
// header), which names prod's version and what its candidate waits for. The tab is checked in
// Argo CD's light and dark themes (the theme class Argo CD sets, the colours against the panel
// around it, no text cut off or pushed out of the panel at 1280 px), and the page has no console
// errors and no failed requests besides eve's refused one. Each step in the page has a minute
// (argoTab.do), so a page that never comes fails saying which step, with a screenshot.
//
// Without the built UI (a machine without an argo-ui checkout) the test says so and how to build
// it, and skips: TestPromotionTabInArgoCD still covers the tab in argocd-server on the extension's
// harness page. Screenshots go to out/argocd-webui-*.png; STAGECOACH_DOCS_SCREENSHOTS=1 also
// writes the ones docs/ui.md shows to docs/ui-*.png.
func TestPromotionTabInArgoCDWebUI(t *testing.T) {
	web, err := localstack.CachedArgoCDWebUI()
	if err != nil {
		t.Skip("the Promotion tab in Argo CD's own web UI was not tested: " + err.Error())
	}
	started := time.Now()
	sc := env.Scenario(t)
	ctx, g := sc.Ctx(), sc.G
	p, err := pipeline.Setup(ctx, sc.Stack, sc.NS, pipeline.Options{Service: "catalog", PluginService: "search"})
	g.Expect(err).NotTo(HaveOccurred())
	watchPipeline(t, p)

	// prod waits for a person's approval of v1.
	pushed := time.Now()
	v1, err := p.PushSigned(ctx, "v1.0.0", p.Manifests("v1.0.0"))
	g.Expect(err).NotTo(HaveOccurred())
	dev := sc.WaitVerified(p.Stages[pipeline.Dev], v1, pushed)
	sc.WaitVerified(p.Stages[pipeline.Staging], v1, dev.Verified)
	waitBlocked(sc, p, pipeline.Prod, v1, "approvals")

	ui, err := env.StartArgoCDServer(ctx, localstack.ArgoCDUIOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ui.WebUI).NotTo(BeNil(), "argocd-server runs without the web UI that is in %s", web.Dir)
	g.Expect(env.GrantStagecoach(ctx, sc.NS, ui.User)).To(Succeed())
	evePassword := readOnlyArgoCDUser(t, sc, "eve")

	app := p.Stages[pipeline.Prod] // the Application is named as its Stage
	prod := `section[aria-label="Stage prod"]`
	approve := `//section[@aria-label="Stage prod"]//button[normalize-space()="Approve"]`
	panel := `.application-status-panel .sc-panel .sc-link`
	b := webBrowser(t)

	// eve: Argo CD lets her see the Application and call the proxy; Kubernetes lets her read the
	// pipeline but not approve, and the tab shows the API server's refusal.
	eve := b.user(t, "eve")
	g.Expect(eve.login(ui, "eve", evePassword)).To(Succeed())
	g.Expect(eve.openTab(sc.NS, app)).To(Succeed())
	g.Expect(chromedp.Run(eve.ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('[data-testid=stagecoach-tab] .sc-pipeline section')].map(s => s.getAttribute('aria-label'))`))).
		To(Equal([]string{"Stage dev", "Stage staging", "Stage prod"}))
	g.Expect(eve.text(prod)).To(And(ContainSubstring("Candidate v1.0.0"), ContainSubstring("approvals"), ContainSubstring("this Application")))
	g.Expect(eve.do("opening Approve for prod", chromedp.Click(approve), chromedp.WaitVisible(chromedp.CSS(`[role=dialog]`)))).To(Succeed())
	g.Expect(eve.text(`[role=dialog]`)).To(ContainSubstring("Creates an Approval as eve of v1.0.0"))
	g.Expect(eve.do("approving",
		chromedp.Click(chromedp.CSS(`[role=dialog] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[role=dialog] [role=alert]`)),
	)).To(Succeed())
	g.Expect(eve.text(`[role=dialog] [role=alert]`)).To(And(HavePrefix("Refused (403):"),
		ContainSubstring(`User "eve" cannot create resource "approvals" in API group "stagecoach.dev" in the namespace "`+sc.NS+`"`)))
	eve.screenshot(t, "refused", "ui-refused.png")
	var approvals stagecoachv1.ApprovalList
	g.Expect(sc.Client.List(ctx, &approvals, client.InNamespace(sc.NS))).To(Succeed())
	g.Expect(approvals.Items).To(BeEmpty())
	approveURL := "/extensions/stagecoach/api/v1/stages/" + sc.NS + "/" + app + "/approve"
	g.Expect(eve.failedRequests()).To(ConsistOf(HavePrefix("403 POST " + approveURL)))
	g.Expect(eve.consoleErrors()).To(BeEmpty())

	// admin: the status panel in the Application's header names what prod waits for; the tab
	// approves, and then shows prod Verified without a reload.
	admin := b.user(t, "admin")
	g.Expect(admin.login(ui, ui.User, ui.Password)).To(Succeed())
	g.Expect(admin.openTab(sc.NS, app)).To(Succeed())
	g.Eventually(func() (string, error) { return admin.text(panel) }).WithTimeout(time.Minute).WithPolling(time.Second).
		Should(Equal("prod – ← v1.0.0 (approvals)"))
	g.Expect(admin.checkLook(t, "light")).To(Succeed())
	admin.screenshot(t, "tab", "ui-tab.png")
	g.Expect(admin.closePanel()).To(Succeed())
	admin.screenshot(t, "status-panel", "ui-status-panel.png", `.application-status-panel`)
	g.Expect(admin.setTheme(sc.NS, app, "dark")).To(Succeed())
	g.Expect(admin.checkLook(t, "dark")).To(Succeed())
	admin.screenshot(t, "tab-dark", "ui-tab-dark.png")

	navigations := admin.navigations()
	g.Expect(admin.do("approving v1.0.0 for prod",
		chromedp.Click(approve),
		chromedp.WaitVisible(chromedp.CSS(`[role=dialog]`)),
		chromedp.SendKeys(chromedp.CSS(`[role=dialog] input[name=comment]`), "approved in Argo CD's UI"),
		chromedp.Click(chromedp.CSS(`[role=dialog] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`.sc-banner--ok`)),
	)).To(Succeed())
	approved := time.Now()
	g.Expect(sc.Client.List(ctx, &approvals, client.InNamespace(sc.NS))).To(Succeed())
	g.Expect(approvals.Items).To(HaveLen(1))
	g.Expect(approvals.Items[0].Spec.Approver).To(Equal(ui.User))
	g.Expect(approvals.Items[0].Spec.Digest).To(Equal(v1))
	g.Expect(approvals.Items[0].Spec.Comment).To(Equal("approved in Argo CD's UI"))
	g.Expect(admin.text(`.sc-banner--ok`)).To(ContainSubstring("Approval " + sc.NS + "/" + approvals.Items[0].Name + " created"))

	// The page stays as it is: the tab's own polling brings prod's new state, and the status
	// panel's.
	tl := sc.WaitVerified(p.Stages[pipeline.Prod], v1, approved)
	g.Eventually(func() (string, error) { return admin.text(prod) }).WithTimeout(time.Minute).WithPolling(time.Second).
		Should(And(ContainSubstring("v1.0.0"), ContainSubstring("Healthy"), ContainSubstring("No candidate")))
	g.Eventually(func() (string, error) { return admin.text(`.sc-history tbody tr`) }).WithTimeout(time.Minute).WithPolling(time.Second).
		Should(And(ContainSubstring("prod"), ContainSubstring("Promote"), ContainSubstring("v1.0.0"), ContainSubstring("Succeeded"), ContainSubstring("verified:")))
	g.Eventually(func() (string, error) { return admin.text(panel) }).WithTimeout(time.Minute).WithPolling(time.Second).
		Should(Equal("prod v1.0.0"))
	g.Expect(admin.navigations()).To(Equal(navigations), "the page was reloaded")
	report("Argo CD web UI: prod Verified %s after the approval in the tab, shown without a reload", tl.Verified.Sub(approved).Round(time.Millisecond))
	g.Expect(admin.checkLook(t, "dark")).To(Succeed())
	g.Expect(admin.setTheme(sc.NS, app, "light")).To(Succeed())
	g.Expect(admin.checkLook(t, "light")).To(Succeed())
	g.Expect(admin.do("scrolling to the history", chromedp.ScrollIntoView(chromedp.CSS(`.sc-history`)), settled)).To(Succeed())
	admin.screenshot(t, "history", "ui-history.png")

	g.Expect(admin.failedRequests()).To(BeEmpty())
	g.Expect(admin.consoleErrors()).To(BeEmpty())
	report("Argo CD web UI (argo-ui %s): the tab tested as eve and admin in %s", web.ArgoUICommit, time.Since(started).Round(time.Second))
}

// readOnlyArgoCDUser adds a local Argo CD account that may log in and has Argo CD's
// role:readonly (which manifests/argocd/extension lets call the proxy), and lets the same name
// read Stagecoach's objects in the scenario's namespace, nothing more. It returns the password.
func readOnlyArgoCDUser(t *testing.T, sc *localstack.Scenario, name string) string {
	t.Helper()
	g := NewWithT(t)
	ctx := sc.Ctx()
	password := strings.ReplaceAll(sc.NS, "-", "")[:8] + "-Pw-" + fmt.Sprint(time.Now().UnixNano()%1e6)
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	g.Expect(err).NotTo(HaveOccurred())
	// Beside the keys the stack and StartArgoCDServer own, under a field manager of its own.
	owner := client.FieldOwner("stagecoach-e2e-webui-" + name)
	for _, o := range []struct{ kind, name, field string }{
		{"ConfigMap", "argocd-cm", "data"}, {"ConfigMap", "argocd-rbac-cm", "data"}, {"Secret", "argocd-secret", "stringData"},
	} {
		data := map[string]any{}
		switch o.name {
		case "argocd-cm":
			data["accounts."+name] = "login"
		case "argocd-rbac-cm":
			data["policy.e2e-"+name+".csv"] = "g, " + name + ", role:readonly\n"
		case "argocd-secret":
			data["accounts."+name+".password"] = string(hash)
			data["accounts."+name+".passwordMtime"] = time.Now().UTC().Format(time.RFC3339)
		}
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": o.kind,
			"metadata": map[string]any{"namespace": localstack.ArgoCDNamespace, "name": o.name,
				"labels": map[string]any{"app.kubernetes.io/part-of": "argocd"}},
			o.field: data}}
		g.Expect(sc.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), owner, client.ForceOwnership)).To(Succeed())
	}

	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: sc.NS, Name: "stagecoach-read-" + name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"stagecoach.dev"}, Resources: []string{"stages", "promotions", "approvals", "freezes"}, Verbs: []string{"get", "list", "watch"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: sc.NS, Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}}
	g.Expect(sc.Client.Create(ctx, role)).To(Succeed())
	g.Expect(sc.Client.Create(ctx, binding)).To(Succeed())
	return password
}

// webSession is one Chromium for the whole test; each user gets a browser context of its own
// (cookies, local storage), as two people at two machines.
type webSession struct{ ctx context.Context }

// webBrowserTimeout bounds the test's browser in all: the releases it waits for included.
const webBrowserTimeout = 10 * time.Minute

// webStepTimeout bounds one step in the page (see argoTab.do).
const webStepTimeout = time.Minute

// webBrowser starts Debian's chromium (or $CHROMIUM) headless, as browser does, with room for
// the whole test rather than browser's 3 minutes.
func webBrowser(t *testing.T) *webSession {
	t.Helper()
	return &webSession{ctx: startBrowser(t, webBrowserTimeout)}
}

// argoTab is one user's page, with what its console said and which requests failed.
type argoTab struct {
	ctx  context.Context
	name string

	mu       sync.Mutex
	console  []string
	failed   []string
	requests map[network.RequestID]string // method and URL, to name a failure
	navs     int                          // top-level navigations
}

func (s *webSession) user(t *testing.T, name string) *argoTab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(s.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	tab := &argoTab{ctx: ctx, name: name, requests: map[network.RequestID]string{}}
	g := NewWithT(t)
	g.Expect(chromedp.Listen(ctx, tab.record)).To(Succeed())
	// A new browser context opens a window of its own: 1280 px wide, as the checks expect.
	g.Expect(chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900))).To(Succeed())
	return tab
}

// record runs in chromedp's reading loop: it only files events away.
func (a *argoTab) record(ev any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch e := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, arg := range e.Args {
				if len(arg.Value) > 0 {
					args = append(args, string(arg.Value))
				} else {
					args = append(args, arg.Description)
				}
			}
			a.console = append(a.console, "console."+string(e.Type)+": "+strings.Join(args, " "))
		}
	case *runtime.EventExceptionThrown:
		msg := e.ExceptionDetails.Text
		if e.ExceptionDetails.Exception != nil {
			msg += " " + e.ExceptionDetails.Exception.Description
		}
		a.console = append(a.console, "exception: "+msg)
	case *log.EventEntryAdded:
		// A failed request is also a network entry of the browser log; failedRequests has those.
		if e.Entry.Level == log.EntryLevelError && e.Entry.Source != log.EntrySourceNetwork {
			a.console = append(a.console, "log: "+e.Entry.Text+" "+e.Entry.URL)
		}
	case *network.EventRequestWillBeSent:
		a.requests[e.RequestID] = e.Request.Method + " " + strings.TrimPrefix(e.Request.URL, originOf(e.Request.URL))
		if e.Type == network.ResourceTypeDocument && e.FrameID != "" && string(e.LoaderID) == string(e.RequestID) {
			a.navs++
		}
	case *network.EventResponseReceived:
		if e.Response.Status >= 400 {
			a.failed = append(a.failed, fmt.Sprintf("%d %s", e.Response.Status, a.requests[e.RequestID]))
		}
	case *network.EventLoadingFailed:
		// Navigating away cancels what the page still streams (Argo CD's watch of the
		// Application); that is the test's doing, not a failure.
		if !e.Canceled {
			a.failed = append(a.failed, fmt.Sprintf("%s %s (%s)", e.ErrorText, a.requests[e.RequestID], e.BlockedReason))
		}
	}
}

func originOf(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		if j := strings.IndexByte(u[i+3:], '/'); j >= 0 {
			return u[:i+3+j]
		}
	}
	return u
}

func (a *argoTab) failedRequests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.failed)
}

func (a *argoTab) consoleErrors() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.console)
}

func (a *argoTab) navigations() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.navs
}

func (a *argoTab) text(sel string) (string, error) {
	ctx, cancel := context.WithTimeout(a.ctx, webStepTimeout)
	defer cancel()
	return text(ctx, sel)
}

// do runs actions in the page one after the other, each within webStepTimeout, so that a page
// that never comes fails the test in a minute and says which step: what, the step's number, the
// page's address, and a screenshot of it in out/.
func (a *argoTab) do(what string, actions ...chromedp.Action[chromedp.Void]) error {
	for i, act := range actions {
		ctx, cancel := context.WithTimeout(a.ctx, webStepTimeout)
		err := chromedp.Do(ctx, act)
		cancel()
		if err != nil {
			return a.failure(fmt.Sprintf("%s (step %d of %d)", what, i+1, len(actions)), err)
		}
	}
	return nil
}

// failure names where the page was when step failed, with a screenshot of it.
func (a *argoTab) failure(step string, err error) error {
	ctx, cancel := context.WithTimeout(a.ctx, 10*time.Second)
	defer cancel()
	url, _ := chromedp.Run(ctx, chromedp.Location())
	shot := filepath.Join(screenshotDir, "argocd-webui-failed-"+a.name+".png")
	if png, serr := chromedp.Run(ctx, chromedp.CaptureScreenshot()); serr == nil && os.MkdirAll(screenshotDir, 0o755) == nil {
		if os.WriteFile(shot, png, 0o644) != nil {
			shot = "none"
		}
	} else {
		shot = "none"
	}
	return fmt.Errorf("%s as %s: %w (page at %s; screenshot %s)", step, a.name, err, url, shot)
}

// settled waits until no CSS transition runs in the page. Argo CD's resource panel slides in, and
// after it closes its backdrop still covers the page for half a second: a click before then lands
// on the backdrop, or beside what it aims at, and nothing happens.
var settled = chromedp.Evaluate[chromedp.Void](`new Promise(done => {
	const busy = () => document.getAnimations().some(a => a instanceof CSSTransition && a.playState === 'running');
	const tick = () => busy() ? setTimeout(tick, 50) : done();
	tick();
})`, chromedp.EvalAwaitPromise)

// login signs in on Argo CD's login page, as a person would.
func (a *argoTab) login(ui *localstack.ArgoCDUI, user, password string) error {
	err := a.do("logging in to Argo CD",
		chromedp.Navigate(ui.URL+localstack.WebUILoginPath),
		chromedp.WaitVisible(chromedp.CSS(`input[name=username]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=username]`), user),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), password),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		// Argo CD opens its list of Applications once the session is there.
		chromedp.WaitVisible(chromedp.CSS(`.applications-list`)),
	)
	if err != nil {
		ctx, cancel := context.WithTimeout(a.ctx, 10*time.Second)
		defer cancel()
		msg, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector('.argo-form-row__error-msg') || {}).textContent || ''`))
		return fmt.Errorf("%w (the login page says %q)", err, msg)
	}
	return nil
}

// openTab opens the Application from Argo CD's list of Applications, clicks the Application's own
// node in the resource tree and then the Promotion tab of the panel that opens, and waits for the
// pipeline in it. It clicks its way there as a person does: argocd-server serves a page of the UI
// only at the login path (see localstack.WebUILoginPath), and the UI routes in the browser.
func (a *argoTab) openTab(namespace, app string) error {
	return a.do(fmt.Sprintf("opening the Promotion tab of %s/%s", namespace, app),
		settled,
		chromedp.Click(`//a[contains(@class,"sidebar__nav-item") and normalize-space()="Applications"]`),
		chromedp.WaitVisible(chromedp.CSS(`.applications-list`)),
		chromedp.Click(fmt.Sprintf(`//span[contains(@class,"applications-list__title") and normalize-space()="%s/%s"]`, namespace, app)),
		chromedp.WaitVisible(chromedp.CSS(`.application-resource-tree__node--application`)),
		settled,
		chromedp.Click(chromedp.CSS(`.application-resource-tree__node--application`)),
		chromedp.WaitVisible(`//div[contains(@class,"tabs__nav")]//a[normalize-space()="Promotion"]`),
		settled,
		chromedp.Click(`//div[contains(@class,"tabs__nav")]//a[normalize-space()="Promotion"]`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=stagecoach-tab] section[aria-label="Stage prod"]`)),
	)
}

// setTheme picks a theme in Argo CD's Settings → Appearance, as a person does, and opens the tab
// again. Argo CD switches the theme in place (no reload).
func (a *argoTab) setTheme(namespace, app, theme string) error {
	title := strings.ToUpper(theme[:1]) + theme[1:]
	// The open resource panel covers the sidebar.
	if err := a.closePanel(); err != nil {
		return err
	}
	err := a.do("choosing the "+theme+" theme in Settings, Appearance",
		chromedp.Click(`//a[contains(@class,"sidebar__nav-item") and normalize-space()="Settings"]`),
		chromedp.Click(`//div[contains(@class,"settings-overview__redirect-panel__title") and normalize-space()="Appearance"]`),
		chromedp.Click(chromedp.CSS(`.appearance-list .select__value`)),
		chromedp.WaitVisible(chromedp.CSS(`.appearance-list .select__options.opened`)),
		settled,
		chromedp.Click(fmt.Sprintf(`//div[contains(@class,"appearance-list")]//div[contains(@class,"select__option") and normalize-space()=%q]`, title)),
		chromedp.WaitReady(chromedp.CSS(`.theme-`+theme+` .appearance-list`)),
	)
	if err != nil {
		return err
	}
	return a.openTab(namespace, app)
}

// closePanel closes Argo CD's resource panel, when one is open, with its ×, and waits until its
// backdrop is gone.
func (a *argoTab) closePanel() error {
	return a.do("closing Argo CD's resource panel",
		chromedp.Evaluate[chromedp.Void](`document.querySelectorAll('button.sliding-panel__close').forEach(b => b.offsetParent && b.click())`),
		chromedp.WaitNotPresent(chromedp.CSS(`[data-testid=stagecoach-tab]`)),
		settled,
		chromedp.Evaluate[chromedp.Void](`new Promise(done => {
			const open = () => [...document.querySelectorAll('.sliding-panel')].some(p => getComputedStyle(p).visibility !== 'hidden');
			const tick = () => open() ? setTimeout(tick, 50) : done();
			tick();
		})`, chromedp.EvalAwaitPromise),
	)
}

// look is what checkLook measures in the page.
type look struct {
	Theme                   string   // Argo CD's theme class around the tab
	TabBackground, PanelBG  string   // the tab's background, and that of Argo CD's panel around it
	TabLuminance, PanelLum  float64  // their relative luminance (0 black, 1 white)
	LowContrast             []string // text below 4.5:1 against its background
	Clipped                 []string // elements whose text is cut off or sticks out of the panel
	WindowWidth, PageScroll int
}

// checkLook checks the tab against Argo CD's own styles in theme: Argo CD's theme class is set
// around it, its background is on the same side (dark or light) as Argo CD's panel, every text
// reads at 4.5:1 or better, nothing is cut off or sticks out of the panel at 1280 px, and the
// page does not scroll sideways.
func (a *argoTab) checkLook(t *testing.T, theme string) error {
	t.Helper()
	l, err := chromedp.Run(a.ctx, chromedp.Evaluate[look](`(() => {
		const tab = document.querySelector('[data-testid=stagecoach-tab]');
		const themed = tab.closest('.theme-light, .theme-dark');
		const rgba = s => (s.match(/[\d.]+/g) || []).map(Number);
		const lum = ([r, g, b]) => {
			const f = c => { c /= 255; return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4); };
			return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
		};
		const bgOf = el => {
			for (let e = el; e; e = e.parentElement) {
				const c = rgba(getComputedStyle(e).backgroundColor);
				if (c.length >= 3 && (c.length < 4 || c[3] > 0.5)) return {el: e, c};
			}
			return {el: null, c: [255, 255, 255]};
		};
		const name = el => el.tagName.toLowerCase() + (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\s+/).join('.') : '') +
			' "' + (el.textContent || '').trim().slice(0, 40) + '"';
		const panel = bgOf(tab.parentElement);
		const panelBox = tab.closest('.sliding-panel__body, .sliding-panel__wrapper') || tab.parentElement;
		const right = panelBox.getBoundingClientRect().right;
		const low = [], clipped = [];
		for (const el of tab.querySelectorAll('*')) {
			const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
			const cs = getComputedStyle(el);
			if (!own || cs.visibility === 'hidden' || cs.display === 'none' || el.closest('[disabled]')) continue;
			const fg = rgba(cs.color), bg = bgOf(el).c;
			const [hi, lo] = [lum(fg), lum(bg)].sort((x, y) => y - x);
			const ratio = (hi + 0.05) / (lo + 0.05);
			if (ratio < 4.5) low.push(name(el) + ' ' + ratio.toFixed(2) + ':1');
			const r = el.getBoundingClientRect();
			if (r.right > right + 1) clipped.push(name(el) + ' ends at ' + Math.round(r.right) + ' px, the panel at ' + Math.round(right));
			// .sc-clamp cuts long messages to three lines on purpose (the rest is on hover).
			if (!el.closest('.sc-clamp') && cs.overflowX !== 'visible' && el.scrollWidth > el.clientWidth + 1) clipped.push(name(el) + ' is cut off sideways');
			if (!el.closest('.sc-clamp') && cs.overflowY !== 'visible' && el.scrollHeight > el.clientHeight + 1 && cs.overflowY !== 'auto') clipped.push(name(el) + ' is cut off below');
		}
		const pipe = tab.querySelector('.sc-pipeline');
		if (pipe && pipe.scrollWidth > pipe.clientWidth + 1) clipped.push('the pipeline scrolls sideways: ' + pipe.scrollWidth + ' px in ' + pipe.clientWidth);
		const tb = bgOf(tab);
		return {Theme: themed ? themed.className : '', TabBackground: getComputedStyle(tb.el || tab).backgroundColor,
			PanelBG: panel.el ? getComputedStyle(panel.el).backgroundColor : 'none', TabLuminance: lum(tb.c), PanelLum: lum(panel.c),
			LowContrast: low, Clipped: clipped, WindowWidth: window.innerWidth, PageScroll: document.documentElement.scrollWidth};
	})()`))
	if err != nil {
		return err
	}
	t.Logf("%s, %s theme: %+v", a.name, theme, l)
	var problems []string
	if l.Theme != "theme-"+theme {
		problems = append(problems, fmt.Sprintf("Argo CD's theme around the tab is %q", l.Theme))
	}
	if (l.TabLuminance > 0.5) != (theme == "light") || (l.PanelLum > 0.5) != (theme == "light") {
		problems = append(problems, fmt.Sprintf("in the %s theme the tab's background is %s (luminance %.2f) in Argo CD's %s (%.2f)",
			theme, l.TabBackground, l.TabLuminance, l.PanelBG, l.PanelLum))
	}
	if l.WindowWidth != 1280 {
		problems = append(problems, fmt.Sprintf("the window is %d px wide, not 1280", l.WindowWidth))
	}
	if l.PageScroll > l.WindowWidth {
		problems = append(problems, fmt.Sprintf("the page scrolls sideways (%d px)", l.PageScroll))
	}
	for _, c := range l.LowContrast {
		problems = append(problems, "low contrast: "+c)
	}
	problems = append(problems, l.Clipped...)
	if len(problems) > 0 {
		return fmt.Errorf("the tab in Argo CD's %s theme: %s", theme, strings.Join(problems, "; "))
	}
	return nil
}

// screenshot writes the viewport (or the first element sel names) to out/argocd-webui-<name>.png,
// and to docs/<doc> when STAGECOACH_DOCS_SCREENSHOTS=1 and doc is set.
func (a *argoTab) screenshot(t *testing.T, name, doc string, sel ...string) {
	t.Helper()
	g := NewWithT(t)
	var png []byte
	var err error
	if len(sel) > 0 {
		png, err = chromedp.Run(a.ctx, chromedp.Screenshot(chromedp.CSS(sel[0])))
	} else {
		png, err = chromedp.Run(a.ctx, chromedp.CaptureScreenshot())
	}
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.MkdirAll(screenshotDir, 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(screenshotDir, "argocd-webui-"+name+".png"), png, 0o644)).To(Succeed())
	if doc != "" && os.Getenv("STAGECOACH_DOCS_SCREENSHOTS") == "1" {
		g.Expect(os.WriteFile(filepath.Join(localstack.RepoRoot(), "docs", doc), png, 0o644)).To(Succeed())
	}
}
