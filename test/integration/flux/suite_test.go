// Package flux runs the Stage reconciler against a real API server with Flux's CRDs, and plays
// source-, kustomize- and helm-controller's status writes the way they make them: through the
// status subresource, with per-condition observedGeneration, Reconciling and Ready=Unknown while
// they work, and Flux's revision formats.
package flux

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

const (
	timeout  = 20 * time.Second
	interval = 50 * time.Millisecond
)

var (
	env *testenv.Env
	// notificationController stands in for notification-controller's events endpoint.
	notificationController = &eventSink{}
)

// fluxEvent is the payload Flux's event recorder posts (fluxcd/pkg/apis/event/v1.Event).
type fluxEvent struct {
	InvolvedObject struct {
		APIVersion, Kind, Namespace, Name string
	} `json:"involvedObject"`
	Severity            string            `json:"severity"`
	Reason              string            `json:"reason"`
	Message             string            `json:"message"`
	Metadata            map[string]string `json:"metadata"`
	ReportingController string            `json:"reportingController"`
}

type eventSink struct {
	mu     sync.Mutex
	events []fluxEvent
}

func (s *eventSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var e fluxEvent
	if err := json.NewDecoder(r.Body).Decode(&e); err != nil || r.Method != http.MethodPost {
		http.Error(w, "bad event", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.events = append(s.events, e)
	s.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

// about returns the events received about one object.
func (s *eventSink) about(kind, ns, name string) []fluxEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []fluxEvent
	for _, e := range s.events {
		if e.InvolvedObject.Kind == kind && e.InvolvedObject.Namespace == ns && e.InvolvedObject.Name == name {
			out = append(out, e)
		}
	}
	return out
}

func TestMain(m *testing.M) {
	testenv.SetLogger()
	var err error
	env, err = testenv.Start(testenv.FluxCRDs)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sink := httptest.NewServer(notificationController)
	stop, err := env.RunManager(context.Background(), func(o *controller.Options) { o.EventsAddr = sink.URL + "/" })
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := stop(); err != nil {
		fmt.Fprintln(os.Stderr, "manager stopped with an error:", err)
		code = 1
	}
	sink.Close()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "failed to stop the test API server:", err)
	}
	os.Exit(code)
}

func newNamespace(t *testing.T) string { return env.NewNamespace(t, "flux") }

func digest(n int) string { return fmt.Sprintf("sha256:%064x", n) }

// fluxObject is one Flux object whose controller the test plays.
type fluxObject struct {
	t   *testing.T
	gvk [3]string // apiVersion, kind
	key client.ObjectKey
}

func createFlux(t *testing.T, apiVersion, kind, ns, name string, spec map[string]any) *fluxObject {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(map[string]string{stagecoachv1.StageLabel: name})
	NewWithT(t).Expect(env.Client.Create(t.Context(), u)).To(Succeed())
	return &fluxObject{t: t, gvk: [3]string{apiVersion, kind}, key: client.ObjectKeyFromObject(u)}
}

func (f *fluxObject) get() *unstructured.Unstructured {
	f.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(f.gvk[0])
	u.SetKind(f.gvk[1])
	NewWithT(f.t).Expect(env.Client.Get(f.t.Context(), f.key, u)).To(Succeed())
	return u
}

// writeStatus updates the status subresource, as Flux controllers do.
func (f *fluxObject) writeStatus(mutate func(u *unstructured.Unstructured, gen int64)) {
	f.t.Helper()
	NewWithT(f.t).Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u := f.get()
		mutate(u, u.GetGeneration())
		return env.Client.Status().Update(f.t.Context(), u)
	})).To(Succeed())
}

func condition(condType, status, reason, message string, gen int64) map[string]any {
	return map[string]any{"type": condType, "status": status, "reason": reason, "message": message,
		"observedGeneration": gen, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
}

// progressing: the controller picked up the generation and works on it (status.observedGeneration
// still names the last one it finished).
func (f *fluxObject) progressing() {
	f.writeStatus(func(u *unstructured.Unstructured, gen int64) {
		_ = unstructured.SetNestedSlice(u.Object, []any{
			condition("Reconciling", "True", "Progressing", "reconciliation in progress", gen),
			condition("Ready", "Unknown", "Progressing", "reconciliation in progress", gen),
		}, "status", "conditions")
	})
}

// succeeded: Ready=True for the generation, with the kind's own record of what it applied.
func (f *fluxObject) succeeded(reason string, record func(u *unstructured.Unstructured)) {
	f.writeStatus(func(u *unstructured.Unstructured, gen int64) {
		_ = unstructured.SetNestedSlice(u.Object, []any{condition("Ready", "True", reason, "applied", gen)}, "status", "conditions")
		_ = unstructured.SetNestedField(u.Object, gen, "status", "observedGeneration")
		if record != nil {
			record(u)
		}
	})
}

// failed: Ready=False with a failure reason for the generation.
func (f *fluxObject) failed(reason, message string) {
	f.writeStatus(func(u *unstructured.Unstructured, gen int64) {
		_ = unstructured.SetNestedSlice(u.Object, []any{condition("Ready", "False", reason, message, gen)}, "status", "conditions")
	})
}

// failedAttempt: Ready=False for the generation after trying revision (kustomize-controller
// records every revision it tries in status.lastAttemptedRevision, whatever the outcome).
func (f *fluxObject) failedAttempt(reason, message, revision string) {
	f.writeStatus(func(u *unstructured.Unstructured, gen int64) {
		_ = unstructured.SetNestedSlice(u.Object, []any{condition("Ready", "False", reason, message, gen)}, "status", "conditions")
		_ = unstructured.SetNestedField(u.Object, revision, "status", "lastAttemptedRevision")
	})
}

// waitForNudge waits until Stagecoach wrote something and asked for a reconcile.
func (f *fluxObject) waitFor(written func(u *unstructured.Unstructured) bool) {
	f.t.Helper()
	NewWithT(f.t).Eventually(func() bool {
		u := f.get()
		_, nudged := u.GetAnnotations()["reconcile.fluxcd.io/requestedAt"]
		return nudged && written(u)
	}, timeout, interval).Should(BeTrue(), "Stagecoach did not write to %s %s", f.gvk[1], f.key)
}

func newStage(t *testing.T, ns, name, kind string, mutate func(*stagecoachv1.Stage)) {
	t.Helper()
	grace := metav1.Duration{Duration: 500 * time.Millisecond}
	s := &stagecoachv1.Stage{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: stagecoachv1.StageSpec{Service: "payments", Environment: name,
			ApplyRef:     stagecoachv1.ApplierReference{Kind: kind, Name: name},
			Source:       stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: testenv.PlaceholderUpstream}},
			Verification: &stagecoachv1.VerificationPolicy{Grace: &grace}},
	}
	if mutate != nil {
		mutate(s)
	}
	if up := s.Spec.Source.Upstream; up != nil && up.Stage == testenv.PlaceholderUpstream && up.Namespace == "" {
		env.CreatePlaceholderUpstream(t, ns)
	}
	NewWithT(t).Expect(env.Client.Create(t.Context(), s)).To(Succeed())
}

func promote(t *testing.T, ns, name, stage string, n int) {
	t.Helper()
	NewWithT(t).Expect(env.Client.Create(t.Context(), &stagecoachv1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: stagecoachv1.PromotionSpec{Stage: stage,
			Version: &stagecoachv1.VersionReference{Digest: digest(n), Tag: fmt.Sprintf("v%d.0.0", n)}},
	})).To(Succeed())
}

func promotion(g Gomega, t *testing.T, ns, name string) *stagecoachv1.Promotion {
	p := &stagecoachv1.Promotion{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
	return p
}

func eventuallyPhase(t *testing.T, ns, name string, phase stagecoachv1.Phase) *stagecoachv1.Promotion {
	t.Helper()
	var p *stagecoachv1.Promotion
	NewWithT(t).Eventually(func(g Gomega) {
		p = promotion(g, t, ns, name)
		g.Expect(p.Status.Phase).To(Equal(phase), p.Status.Message)
	}, timeout, interval).Should(Succeed())
	return p
}

func eventuallyReady(t *testing.T, ns, name string, status metav1.ConditionStatus, reason, msg string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		s := &stagecoachv1.Stage{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
		c := meta.FindStatusCondition(s.Status.Conditions, stagecoachv1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(status), c.Message)
		g.Expect(c.Reason).To(Equal(reason), c.Message)
		g.Expect(c.Message).To(ContainSubstring(msg))
	}, timeout, interval).Should(Succeed())
}

func clientKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }
