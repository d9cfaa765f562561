package stage

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

// applier builds an engine object with a spec its CRD accepts.
func applier(apiVersion, kind, ns, name string, labels map[string]string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(labels)
	return u
}

func kustomization(ns, name string, labels map[string]string) *unstructured.Unstructured {
	return applier("kustomize.toolkit.fluxcd.io/v1", "Kustomization", ns, name, labels, map[string]any{
		"interval": "10m", "prune": true, "sourceRef": map[string]any{"kind": "OCIRepository", "name": name},
	})
}

func ociRepository(ns, name string, labels map[string]string) *unstructured.Unstructured {
	return applier("source.toolkit.fluxcd.io/v1", "OCIRepository", ns, name, labels, map[string]any{
		"interval": "1m", "url": "oci://registry.example/deploy/" + name,
	})
}

func application(ns, name string, labels map[string]string) *unstructured.Unstructured {
	return applier("argoproj.io/v1alpha1", "Application", ns, name, labels, map[string]any{
		"project":     "default",
		"source":      map[string]any{"repoURL": "oci://registry.example/deploy/" + name, "path": "."},
		"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": ns},
		"syncPolicy":  map[string]any{"automated": map[string]any{}},
	})
}

func stageLabel(stage string) map[string]string {
	return map[string]string{stagecoachv1.StageLabel: stage}
}

// A missing applier, then an unlabelled one, then a mislabelled one, then the right label: each
// fix shows on the Stage while the controller keeps running, and each change of Ready is an event.
func TestApplierMissingUnlabelledThenReady(t *testing.T) {
	ns := newNamespace(t)
	g := NewWithT(t)
	newStage(t, ns, "app", "Kustomization", "app")

	eventuallyReady(t, ns, "app", metav1.ConditionFalse, stagecoachv1.ReasonApplierUnreadable,
		fmt.Sprintf("Kustomization '%s/app' is missing: create it in the Stage's namespace or fix spec.applyRef.name", ns))

	k := kustomization(ns, "app", nil)
	g.Expect(env.Client.Create(t.Context(), k)).To(Succeed())
	eventuallyReady(t, ns, "app", metav1.ConditionFalse, stagecoachv1.ReasonApplierUnlabelled,
		fmt.Sprintf("Kustomization '%s/app' lacks the label stagecoach.dev/stage=app: add it", ns))

	k.SetLabels(stageLabel("billing"))
	g.Expect(env.Client.Update(t.Context(), k)).To(Succeed())
	eventuallyReady(t, ns, "app", metav1.ConditionFalse, stagecoachv1.ReasonApplierUnlabelled,
		fmt.Sprintf("Kustomization '%s/app' is labelled stagecoach.dev/stage=billing, not app", ns))

	k.SetLabels(stageLabel("app"))
	g.Expect(env.Client.Update(t.Context(), k)).To(Succeed())
	stage := eventuallyReady(t, ns, "app", metav1.ConditionTrue, stagecoachv1.ReasonApplierReady,
		fmt.Sprintf("Kustomization '%s/app' is readable and labelled for this Stage", ns))
	g.Expect(stage.Status.Applier).To(Equal(&stagecoachv1.ObjectReference{
		APIVersion: "kustomize.toolkit.fluxcd.io/v1", Kind: "Kustomization", Name: "app", Namespace: ns}))

	// Deleting the applier takes the Stage out of Ready again, through the watch.
	g.Expect(env.Client.Delete(t.Context(), k)).To(Succeed())
	eventuallyReady(t, ns, "app", metav1.ConditionFalse, stagecoachv1.ReasonApplierUnreadable, "is missing")

	g.Eventually(func(g Gomega) {
		var events eventsv1.EventList
		g.Expect(env.Client.List(t.Context(), &events, client.InNamespace(ns))).To(Succeed())
		var reasons []string
		for _, e := range events.Items {
			if e.Regarding.Kind == stagecoachv1.StageKind && e.Regarding.Name == "app" {
				reasons = append(reasons, e.Type+"/"+e.Reason)
			}
		}
		g.Expect(reasons).To(ContainElements("Warning/ApplierUnreadable", "Warning/ApplierUnlabelled", "Normal/ApplierReady"))
	}, timeout, interval).Should(Succeed())
}

// Argo CD's CRDs are not installed when the test starts: the Stage says so, and installing them
// (as an operator would) is picked up without restarting the controller.
func TestApplierCRDInstalledLater(t *testing.T) {
	ns := newNamespace(t)
	g := NewWithT(t)
	newStage(t, ns, "payments", "Application", "payments")

	eventuallyReady(t, ns, "payments", metav1.ConditionFalse, stagecoachv1.ReasonApplierUnreadable,
		fmt.Sprintf("Application '%s/payments' cannot be read: the CRD for kind Application in argoproj.io/v1alpha1 is not installed in this cluster", ns))

	_, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{testenv.ArgoCDCRDs}, ErrorIfPathMissing: true, MaxTime: time.Minute})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() error {
		return env.Client.Create(t.Context(), application(ns, "payments", stageLabel("payments")))
	}, timeout, interval).Should(Succeed())

	eventuallyReady(t, ns, "payments", metav1.ConditionTrue, stagecoachv1.ReasonApplierReady,
		fmt.Sprintf("Application '%s/payments' is readable and labelled for this Stage", ns))
}

// Two Stages naming one applier: the older keeps it, the newer says who holds it, and takes it
// over when the older one is deleted.
func TestApplierClaimedByOlderStage(t *testing.T) {
	ns := newNamespace(t)
	g := NewWithT(t)
	g.Expect(env.Client.Create(t.Context(), ociRepository(ns, "shared", stageLabel("newer")))).To(Succeed())

	// The label names the newer Stage, so the older one is not Ready, but it holds the claim.
	older := newStage(t, ns, "older", "OCIRepository", "shared")
	eventuallyReady(t, ns, "older", metav1.ConditionFalse, stagecoachv1.ReasonApplierUnlabelled, "not older")

	// Creation times have one-second resolution: make sure the second Stage is strictly newer,
	// so that age, not the name, decides.
	g.Eventually(func() bool {
		return time.Now().Truncate(time.Second).After(older.CreationTimestamp.Time)
	}, 2*time.Second, 50*time.Millisecond).Should(BeTrue())
	newStage(t, ns, "newer", "OCIRepository", "shared")
	eventuallyReady(t, ns, "newer", metav1.ConditionFalse, stagecoachv1.ReasonApplierClaimed,
		fmt.Sprintf("OCIRepository '%s/shared' is already claimed by Stage 'older', which is older: point spec.applyRef at another object or delete one of the two Stages", ns))
	// The older Stage's verdict did not change because of the newcomer.
	eventuallyReady(t, ns, "older", metav1.ConditionFalse, stagecoachv1.ReasonApplierUnlabelled, "not older")

	g.Expect(env.Client.Delete(t.Context(), older)).To(Succeed())
	eventuallyReady(t, ns, "newer", metav1.ConditionTrue, stagecoachv1.ReasonApplierReady,
		fmt.Sprintf("OCIRepository '%s/shared' is readable and labelled for this Stage", ns))
}

// Changing a Stage's applyRef to a free applier ends the claim conflict.
func TestApplierClaimEndsWhenApplyRefChanges(t *testing.T) {
	ns := newNamespace(t)
	g := NewWithT(t)
	g.Expect(env.Client.Create(t.Context(), kustomization(ns, "first", stageLabel("a")))).To(Succeed())
	g.Expect(env.Client.Create(t.Context(), kustomization(ns, "second", stageLabel("b")))).To(Succeed())
	newStage(t, ns, "a", "Kustomization", "first")
	eventuallyReady(t, ns, "a", metav1.ConditionTrue, stagecoachv1.ReasonApplierReady, "")
	b := newStage(t, ns, "b", "Kustomization", "first")
	eventuallyReady(t, ns, "b", metav1.ConditionFalse, stagecoachv1.ReasonApplierClaimed, "claimed by Stage 'a'")

	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(b), b)).To(Succeed())
	b.Spec.ApplyRef.Name = "second"
	g.Expect(env.Client.Update(t.Context(), b)).To(Succeed())
	eventuallyReady(t, ns, "b", metav1.ConditionTrue, stagecoachv1.ReasonApplierReady, fmt.Sprintf("Kustomization '%s/second'", ns))
	eventuallyReady(t, ns, "a", metav1.ConditionTrue, stagecoachv1.ReasonApplierReady, fmt.Sprintf("Kustomization '%s/first'", ns))
}
