package localstack

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// HookDelivery is one notification an engine sent to the controller's hooks, as the recorder saw it.
type HookDelivery struct {
	// At is when the request arrived at the recorder (just before it reached the controller).
	At   time.Time
	Path string
	Body []byte
	// Status and Answer are the controller's response (Status 0: the controller was unreachable).
	Status int
	Answer string
}

// HookRecorder stands between the engines' notifiers and the controller's hooks: it forwards
// every request to the controller listening now (the controller's port changes on restart)
// and records when it came. Engines are pointed at URL instead of the controller.
type HookRecorder struct {
	*server
	target func() string

	mu         sync.Mutex
	deliveries []HookDelivery
}

// StartHookRecorder starts a recorder forwarding to the stack's controller. The controller must
// not be restarted while a hook is being forwarded (StartController changes the address it reads).
func (s *Stack) StartHookRecorder() (*HookRecorder, error) {
	h := &HookRecorder{target: func() string { return s.Hooks }}
	var err error
	h.server, err = serve(h, s.fixtureLog)
	if err != nil {
		return nil, err
	}
	return h, nil
}

// URL is the base URL engines post to (the hook paths are appended).
func (h *HookRecorder) URL() string { return "http://" + h.Addr }

// Close stops the recorder.
func (h *HookRecorder) Close() { h.close() }

// Deliveries returns what was recorded so far, oldest first.
func (h *HookRecorder) Deliveries() []HookDelivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]HookDelivery(nil), h.deliveries...)
}

func (h *HookRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d := HookDelivery{At: time.Now(), Path: r.URL.Path}
	defer func() {
		h.mu.Lock()
		h.deliveries = append(h.deliveries, d)
		h.mu.Unlock()
	}()
	var err error
	if d.Body, err = io.ReadAll(io.LimitReader(r.Body, 4<<20)); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+h.target()+r.URL.RequestURI(), bytes.NewReader(d.Body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(out)
	if err != nil {
		http.Error(w, "stagecoach controller unreachable: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	d.Status, d.Answer = resp.StatusCode, string(answer)
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// StartArgoCDNotifications configures Argo CD notifications with Stagecoach's wiring
// (manifests/argocd/notifications: the stagecoach webhook service posting to hooksURL with the
// stack's HookToken, its template and triggers) and starts argocd-notifications if it does not
// run yet. Applications subscribe with annotations such as
// notifications.argoproj.io/subscribe.on-stagecoach-deployed.stagecoach: "".
func (s *Stack) StartArgoCDNotifications(ctx context.Context, hooksURL string) error {
	path := filepath.Join(s.Bin.RepoRoot, "manifests", "argocd", "notifications", "argocd-notifications-cm.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	const inCluster, placeholder = "url: http://stagecoach-hooks.stagecoach-system.svc.cluster.local.", "REPLACE-WITH-A-LONG-RANDOM-TOKEN"
	text := string(raw)
	if !strings.Contains(text, inCluster) || !strings.Contains(text, placeholder) {
		return fmt.Errorf("%s no longer has %q and %q: update StartArgoCDNotifications to the new wiring", path, inCluster, placeholder)
	}
	text = strings.Replace(text, inCluster, "url: "+hooksURL, 1)
	text = strings.Replace(text, placeholder, s.HookToken, 1)
	if err := ApplyYAML(ctx, s.Client, []byte(text)); err != nil {
		return fmt.Errorf("failed to apply %s: %w", path, err)
	}
	for _, p := range s.procs {
		if ended, _ := p.Exited(); p.Name == ArgoCDNotifications && !ended {
			return nil // it reads the ConfigMap through an informer
		}
	}
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	p, err := s.start(processSpec{name: ArgoCDNotifications, path: filepath.Join(s.binDir, ArgoCDNotifications), env: s.argoEnv, args: []string{
		"--namespace", ArgoCDNamespace, "--application-namespaces", "*", "--argocd-repo-server", s.repoServer,
		"--argocd-repo-server-plaintext", "--metrics-port", fmt.Sprint(ports[0]), "--loglevel", "debug", "--logformat", "text"}})
	if err != nil {
		return err
	}
	s.step("started %s (pid %d), posting to %s", ArgoCDNotifications, p.Pid(), hooksURL)
	return p.waitReady(ctx, 60*time.Second, "GET /metrics", httpOK(nil, fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[0])))
}

// HookRecorder starts a HookRecorder that the test closes when it ends.
func (sc *Scenario) HookRecorder() *HookRecorder {
	sc.T.Helper()
	h, err := sc.StartHookRecorder()
	sc.G.Expect(err).NotTo(HaveOccurred())
	sc.T.Cleanup(h.Close)
	return h
}

// FluxHookAlert applies, in the scenario's namespace, Stagecoach's Flux wiring
// (manifests/flux): a generic-hmac Provider posting to hooksURL/hooks/flux with the stack's
// HookToken, and an Alert named stagecoach sending the info events of every Kustomization and
// OCIRepository of the namespace to it.
func (sc *Scenario) FluxHookAlert(hooksURL string) {
	sc.T.Helper()
	sc.Apply(fmt.Sprintf(`
apiVersion: v1
kind: Secret
metadata: {name: stagecoach-hooks}
stringData: {token: %[2]s}
---
apiVersion: notification.toolkit.fluxcd.io/v1beta3
kind: Provider
metadata: {name: stagecoach}
spec:
  type: generic-hmac
  address: %[1]s/hooks/flux
  secretRef: {name: stagecoach-hooks}
---
apiVersion: notification.toolkit.fluxcd.io/v1beta3
kind: Alert
metadata: {name: stagecoach}
spec:
  providerRef: {name: stagecoach}
  eventSeverity: info
  eventSources:
  - {kind: OCIRepository, name: '*'}
  - {kind: Kustomization, name: '*'}
`, hooksURL, sc.HookToken))
}

// MergePatch applies a JSON merge patch to an object of the scenario's namespace (for example
// to remove an annotation: {"metadata":{"annotations":{"a":null}}}).
func (sc *Scenario) MergePatch(apiVersion, kind, name, patch string) {
	sc.T.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(sc.NS)
	u.SetName(name)
	sc.G.Expect(sc.Client.Patch(sc.Ctx(), u, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed(),
		"merge patch of %s %s/%s", kind, sc.NS, name)
}
