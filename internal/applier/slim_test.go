package applier

import (
	"testing"
	"unsafe"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
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
