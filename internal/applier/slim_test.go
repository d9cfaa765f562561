package applier

import (
	"testing"
	"unsafe"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

func object(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatalf("bad fixture: %v", err)
	}
	return u
}

// A real Argo CD Application carries much more status than Stagecoach reads.
const argoApplication = `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: payments
  namespace: prod
  labels: {stagecoach.dev/stage: prod}
  annotations:
    stagecoach.dev/phase: Running
    kubectl.kubernetes.io/last-applied-configuration: '{"apiVersion":"argoproj.io/v1alpha1","kind":"Application"}'
  managedFields: [{manager: argocd-application-controller, operation: Update}]
spec:
  project: default
  source: {repoURL: oci://r/p, targetRevision: "` + d2 + `"}
  destination: {server: https://kubernetes.default.svc, namespace: prod}
  syncPolicy: {automated: {prune: true}}
status:
  sync:
    status: Synced
    revision: "` + d2 + `"
    comparedTo: {source: {repoURL: oci://r/p, targetRevision: "` + d2 + `"}, destination: {server: https://kubernetes.default.svc}}
  health: {status: Healthy, lastTransitionTime: "2026-11-30T10:00:01Z"}
  reconciledAt: "2026-11-30T10:00:02Z"
  resources: [{kind: ConfigMap, name: payments, status: Synced, health: {status: Healthy}}]
  history: [{id: 1, revision: "` + d1 + `", deployedAt: "2026-11-29T10:00:00Z"}]
  summary: {images: [r/p@` + d2 + `]}
  conditions: [{type: SyncError, message: old}]
  operationState:
    phase: Succeeded
    message: successfully synced
    startedAt: "2026-11-30T09:59:58Z"
    finishedAt: "2026-11-30T10:00:00Z"
    operation: {sync: {revision: "` + d2 + `"}, initiatedBy: {automated: true}}
    syncResult: {revision: "` + d2 + `", source: {repoURL: oci://r/p}, resources: [{kind: ConfigMap, name: payments, message: configured}]}
`

func TestSlim(t *testing.T) {
	cases := []struct {
		name   string
		in     any
		expect func(g Gomega, out any)
	}{
		{name: "an Application keeps its spec and the status Observe reads, nothing else", in: object(t, argoApplication),
			expect: func(g Gomega, out any) {
				u := out.(*unstructured.Unstructured)
				want := object(t, argoApplication)
				g.Expect(u.Object["spec"]).To(Equal(want.Object["spec"]))
				g.Expect(u.GetLabels()).To(Equal(want.GetLabels()))
				g.Expect(u.GetAnnotations()).To(Equal(map[string]string{"stagecoach.dev/phase": "Running"}))
				g.Expect(u.GetManagedFields()).To(BeEmpty())
				g.Expect(u.Object["status"]).To(Equal(object(t, `status:
  sync: {status: Synced, revision: "`+d2+`"}
  health: {status: Healthy}
  reconciledAt: "2026-11-30T10:00:02Z"
  operationState:
    phase: Succeeded
    message: successfully synced
    startedAt: "2026-11-30T09:59:58Z"
    finishedAt: "2026-11-30T10:00:00Z"
    operation: {sync: {revision: "`+d2+`"}}
    syncResult: {revision: "`+d2+`"}
`).Object["status"]))
				g.Expect(ArgoCDApplication{}.Observe(u, d2)).To(Equal(ArgoCDApplication{}.Observe(want, d2)))
			}},
		{name: "another engine's object keeps its status whole", in: object(t, `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: payments, namespace: prod, annotations: {kubectl.kubernetes.io/last-applied-configuration: "{}"}}
status: {history: [{digest: "`+d1+`"}], conditions: [{type: Ready, status: "True"}]}
`), expect: func(g Gomega, out any) {
			u := out.(*unstructured.Unstructured)
			g.Expect(u.GetAnnotations()).To(BeEmpty())
			g.Expect(u.Object["status"]).To(Equal(map[string]any{"history": []any{map[string]any{"digest": d1}},
				"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}))
		}},
		{name: "typed objects pass through", in: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}},
			expect: func(g Gomega, out any) {
				g.Expect(out).To(Equal(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}))
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			out, err := Slim(tc.in)
			g.Expect(err).NotTo(HaveOccurred())
			tc.expect(g, out)
		})
	}
}

// Two cached objects share one copy of each key and string value.
func TestSlimInterns(t *testing.T) {
	g := NewWithT(t)
	a, err := Slim(object(t, argoApplication))
	g.Expect(err).NotTo(HaveOccurred())
	b, err := Slim(object(t, argoApplication))
	g.Expect(err).NotTo(HaveOccurred())
	revision := func(o any) string {
		s, _, _ := unstructured.NestedString(o.(*unstructured.Unstructured).Object, "status", "sync", "revision")
		return s
	}
	key := func(o any) string {
		for k := range o.(*unstructured.Unstructured).Object["spec"].(map[string]any) {
			if k == "destination" {
				return k
			}
		}
		return ""
	}
	g.Expect(revision(a)).To(Equal(d2))
	g.Expect(unsafe.StringData(revision(a))).To(Equal(unsafe.StringData(revision(b))), "the digest is held once")
	g.Expect(unsafe.StringData(key(a))).To(Equal(unsafe.StringData(key(b))), "the key is held once")
}

// withUnread is obj as the API server would hold it beside what Stagecoach reads: given its
// built-in kind's group (when it has one), with managedFields, kubectl's copy and, for an
// Application, the status Argo CD writes and no built-in observer reads. obj is not changed.
func withUnread(t *testing.T, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	u := obj.DeepCopy()
	if b, ok := stagecoachv1.LookupBuiltinApplier(u.GetKind()); ok {
		u.SetAPIVersion(b.GroupVersion().String())
	}
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}})
	annotations := u.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[lastAppliedAnnotation] = `{"kind":"` + u.GetKind() + `"}`
	u.SetAnnotations(annotations)
	if u.GroupVersionKind().GroupKind() == applicationGroupKind {
		for field, v := range map[string]any{
			"resources":  []any{map[string]any{"kind": "ConfigMap", "name": "payments", "status": "Synced"}},
			"history":    []any{map[string]any{"id": int64(1), "revision": d1}},
			"conditions": []any{map[string]any{"type": "SyncError", "message": "old"}},
			"summary":    map[string]any{"images": []any{"r/p@" + d1}},
		} {
			if _, set, _ := unstructured.NestedFieldNoCopy(u.Object, "status", field); !set {
				if err := unstructured.SetNestedField(u.Object, v, "status", field); err != nil {
					t.Fatalf("bad fixture: %v", err)
				}
			}
		}
	}
	return u
}

// cached is obj as the cache of appliers holds it: withUnread, through Slim, with obj's own
// apiVersion back (which no reader reads), so that readers' answers compare with obj's.
func cached(t *testing.T, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	out, err := Slim(withUnread(t, obj))
	if err != nil {
		t.Fatalf("Slim: %v", err)
	}
	u := out.(*unstructured.Unstructured)
	u.SetAPIVersion(obj.GetAPIVersion())
	return u
}

// expectSameWrite expects change, made to obj as the cache holds it, to send the patch the
// controller would send had it made change to obj as the API server holds it (client.MergeFrom,
// as the controller writes): a field the slim drops is one no write touches.
func expectSameWrite(t *testing.T, g Gomega, obj *unstructured.Unstructured, change func(*unstructured.Unstructured) error) {
	t.Helper()
	patch := func(u *unstructured.Unstructured) string {
		before := u.DeepCopy()
		g.Expect(change(u)).To(Succeed())
		data, err := client.MergeFrom(before).Data(u)
		g.Expect(err).NotTo(HaveOccurred())
		return string(data)
	}
	live := withUnread(t, obj)
	live.SetAPIVersion(obj.GetAPIVersion())
	g.Expect(patch(cached(t, obj))).To(Equal(patch(live)))
}

func TestSlimKeeps(t *testing.T) {
	app := schema.GroupKind{Group: "argoproj.io", Kind: "Application"}
	kustomization := schema.GroupKind{Group: "kustomize.toolkit.fluxcd.io", Kind: "Kustomization"}
	widget := schema.GroupKind{Group: "example.dev", Kind: "Widget"}
	matches := func(paths ...string) *stagecoachv1.CompletionRules {
		r := &stagecoachv1.CompletionRules{}
		for _, p := range paths {
			r.ObservedMatches = append(r.ObservedMatches, stagecoachv1.ObservedMatch{Input: "spec.image", Output: p})
		}
		return r
	}
	for _, tc := range []struct {
		name  string
		gk    schema.GroupKind
		rules *stagecoachv1.CompletionRules
		want  bool
	}{
		{name: "no rules", gk: app, want: true},
		{name: "an Application's summary is cut", gk: app, rules: matches("status.summary.images.0")},
		{name: "an Application's health is kept", gk: app, rules: matches("status.health.status", "status.sync.revision"), want: true},
		{name: "an Application's plugin env is kept whole", gk: app, rules: matches("status.sync.comparedTo.source.plugin.env.0.value"), want: true},
		{name: "an Application's cut map read whole", gk: app, rules: matches("status.operationState.syncResult")},
		{name: "an Application's whole status", gk: app, rules: matches("status")},
		{name: "one rule of two reads what is cut", gk: app, rules: matches("status.health.status", "status.conditions.0.type")},
		{name: "observedCompletion reads status.observedGeneration, which an Application's slim cuts", gk: app,
			rules: &stagecoachv1.CompletionRules{ObservedCompletion: &stagecoachv1.ObservedCompletion{
				Succeeded: &stagecoachv1.FieldMatch{Key: "status.health.status", Value: "Healthy"}}}},
		{name: "observedCompletion on a Kustomization", gk: kustomization, want: true,
			rules: &stagecoachv1.CompletionRules{ObservedCompletion: &stagecoachv1.ObservedCompletion{
				Succeeded: &stagecoachv1.FieldMatch{Key: "status.lastAppliedRevision", Value: "x"}}}},
		{name: "another kind's status is whole", gk: widget, rules: matches("status.summary.images.0", "status"), want: true},
		{name: "a query reads within the list it names", gk: widget, rules: matches(succeededKey), want: true},
		{name: "a query on an Application's list the slim cuts", gk: app, rules: matches(succeededKey)},
		{name: "a query on an Application's list the slim keeps", gk: app, want: true,
			rules: matches(`status.sync.comparedTo.source.plugin.env.#(name=="STAGECOACH_DIGEST").value`)},
		{name: "a wildcard within another kind's status", gk: widget, rules: matches("status.*"), want: true},
		{name: "a wildcard within an Application's status", gk: app, rules: matches("status.*")},
		{name: "a wildcard over the object", gk: widget, rules: matches("sta*.x")},
		{name: "a modifier over the object", gk: widget, rules: matches("@this")},
		{name: "a multipath over the object", gk: widget, rules: matches("{status.x,spec.y}")},
		{name: "an escaped key may be kubectl's copy", gk: widget, rules: matches(`metadata.annotations.kubectl\.kubernetes\.io/last-applied-configuration`)},
		{name: "managedFields are cut", gk: widget, rules: matches("metadata.managedFields.0.manager")},
		{name: "the annotations read whole", gk: widget, rules: matches("metadata.annotations")},
		{name: "one annotation", gk: widget, rules: matches("metadata.annotations.digest", "metadata.labels.app", "metadata.generation"), want: true},
		{name: "an empty path", gk: widget, rules: matches("")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(SlimKeeps(tc.gk, tc.rules)).To(Equal(tc.want))
		})
	}
}

// Every TestObserveCompletion case, on every kind, read as the controller reads it for its
// rules: from the cache (through Slim) when SlimKeeps says the rules read only what the slim
// keeps, live otherwise. The rules must say what they say of the whole object.
func TestObserveCompletionThroughTheCache(t *testing.T) {
	kinds := []schema.GroupVersionKind{{Group: "example.dev", Version: "v1", Kind: "Widget"}}
	for _, b := range stagecoachv1.BuiltinAppliers() {
		kinds = append(kinds, b.GroupVersionKind)
	}
	for _, tc := range completionCases() {
		for _, gvk := range kinds {
			t.Run(tc.name+"/"+gvk.Kind, func(t *testing.T) {
				g := NewWithT(t)
				obj := tc.obj.DeepCopy()
				obj.SetGroupVersionKind(gvk)
				live := withUnread(t, obj)
				want := ObserveCompletion("deployer", tc.rules, live)
				read := live
				if SlimKeeps(gvk.GroupKind(), tc.rules) {
					read = cached(t, obj)
				}
				g.Expect(ObserveCompletion("deployer", tc.rules, read)).To(Equal(want))
			})
		}
	}
}
