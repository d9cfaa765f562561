package promotion

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// fakeArgoCD plays argocd-application-controller for one Application, writing status the way it
// does: the Application CRD has no status subresource, so every write is an UPDATE of the whole
// object; times have one-second resolution (RFC 3339); a refresh compares the desired revision and
// removes the refresh annotation; an automated, OutOfSync app gets a sync operation that runs
// (Running, then Succeeded/Failed/Error with syncResult and finishedAt); health is assessed after,
// with reconciledAt.
type fakeArgoCD struct {
	t   *testing.T
	key client.ObjectKey
}

func newApplication(t *testing.T, ns, name string, spec map[string]any) *fakeArgoCD {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion("argoproj.io/v1alpha1")
	u.SetKind("Application")
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(map[string]string{stagecoachv1.StageLabel: name})
	NewWithT(t).Expect(env.Client.Create(t.Context(), u)).To(Succeed())
	return &fakeArgoCD{t: t, key: client.ObjectKeyFromObject(u)}
}

// ociSpec is an automated Application with one OCI source.
func ociSpec(ns string) map[string]any {
	return map[string]any{
		"project":     "default",
		"source":      map[string]any{"repoURL": "oci://registry.example/deploy/payments", "path": ".", "targetRevision": ""},
		"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": ns},
		"syncPolicy":  map[string]any{"automated": map[string]any{"prune": true}},
	}
}

func (f *fakeArgoCD) get() *unstructured.Unstructured {
	f.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("argoproj.io/v1alpha1")
	u.SetKind("Application")
	NewWithT(f.t).Expect(env.Client.Get(f.t.Context(), f.key, u)).To(Succeed())
	return u
}

// update writes the whole object, as the application-controller does (no status subresource).
func (f *fakeArgoCD) update(mutate func(app *unstructured.Unstructured)) {
	f.t.Helper()
	NewWithT(f.t).Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		app := f.get()
		mutate(app)
		return env.Client.Update(f.t.Context(), app)
	})).To(Succeed())
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func (f *fakeArgoCD) desiredRevision(app *unstructured.Unstructured) string {
	rev, _, _ := unstructured.NestedString(app.Object, "spec", "source", "targetRevision")
	return rev
}

// waitForRevision waits until Stagecoach has written the digest and asked for a refresh.
func (f *fakeArgoCD) waitForRevision(digest string, plugin bool) {
	f.t.Helper()
	NewWithT(f.t).Eventually(func(g Gomega) {
		app := f.get()
		if plugin {
			env, _, _ := unstructured.NestedSlice(app.Object, "spec", "source", "plugin", "env")
			g.Expect(env).To(ContainElement(map[string]any{"name": "STAGECOACH_DIGEST", "value": digest}))
		} else {
			g.Expect(f.desiredRevision(app)).To(Equal(digest))
		}
		g.Expect(app.GetAnnotations()).To(HaveKeyWithValue("argocd.argoproj.io/refresh", "normal"))
	}, timeout, interval).Should(Succeed())
}

// refresh compares: sync.revision moves to the desired revision at once (while the old version
// still runs), sync is OutOfSync, health stays what it was, the annotation is removed.
func (f *fakeArgoCD) refresh(now time.Time) {
	f.update(func(app *unstructured.Unstructured) {
		a := app.GetAnnotations()
		delete(a, "argocd.argoproj.io/refresh")
		app.SetAnnotations(a)
		source, _, _ := unstructured.NestedMap(app.Object, "spec", "source")
		_ = unstructured.SetNestedMap(app.Object, map[string]any{
			"status": "OutOfSync", "revision": f.desiredRevision(app), "comparedTo": comparedTo(app, source),
		}, "status", "sync")
		_ = unstructured.SetNestedField(app.Object, stamp(now), "status", "reconciledAt")
	})
}

// sync runs the automated sync operation of the desired revision and ends it in phase.
func (f *fakeArgoCD) sync(phase, message string, started, finished time.Time) {
	app := f.get()
	rev := f.desiredRevision(app)
	source, _, _ := unstructured.NestedMap(app.Object, "spec", "source")
	operation := map[string]any{"sync": map[string]any{"revision": rev}, "initiatedBy": map[string]any{"automated": true}}
	f.update(func(app *unstructured.Unstructured) {
		_ = unstructured.SetNestedMap(app.Object, map[string]any{
			"phase": "Running", "message": "syncing", "startedAt": stamp(started), "operation": operation,
		}, "status", "operationState")
	})
	f.update(func(app *unstructured.Unstructured) {
		_ = unstructured.SetNestedMap(app.Object, map[string]any{
			"phase": phase, "message": message, "startedAt": stamp(started), "finishedAt": stamp(finished), "operation": operation,
			"syncResult": map[string]any{"revision": rev, "source": source},
		}, "status", "operationState")
	})
}

// assess reports health after a comparison at reconciledAt; Synced at the desired revision.
func (f *fakeArgoCD) assess(health string, reconciledAt time.Time) {
	f.update(func(app *unstructured.Unstructured) {
		old, _, _ := unstructured.NestedString(app.Object, "status", "health", "status")
		transition, _, _ := unstructured.NestedString(app.Object, "status", "health", "lastTransitionTime")
		if old != health {
			transition = stamp(reconciledAt)
		}
		_ = unstructured.SetNestedMap(app.Object, map[string]any{"status": health, "lastTransitionTime": transition, "message": "assessed " + health},
			"status", "health")
		source, _, _ := unstructured.NestedMap(app.Object, "spec", "source")
		_ = unstructured.SetNestedMap(app.Object, map[string]any{
			"status": "Synced", "revision": f.desiredRevision(app), "comparedTo": comparedTo(app, source),
		}, "status", "sync")
		_ = unstructured.SetNestedField(app.Object, stamp(reconciledAt), "status", "reconciledAt")
	})
}

// deploy plays a whole automated sync of the digest Stagecoach wrote, ending in phase and health.
func (f *fakeArgoCD) deploy(digest string, plugin bool, phase, health string) {
	f.t.Helper()
	f.waitForRevision(digest, plugin)
	now := time.Now()
	f.refresh(now)
	f.sync(phase, "sync "+phase, now, now)
	if phase == "Succeeded" {
		f.assess(health, now)
	}
}

// comparedTo is what Argo CD records it compared against: the source and the destination.
func comparedTo(app *unstructured.Unstructured, source map[string]any) map[string]any {
	destination, _, _ := unstructured.NestedMap(app.Object, "spec", "destination")
	return map[string]any{"source": source, "destination": destination}
}
