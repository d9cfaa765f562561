package promotion

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

// The stand-in kind of test/crds/standin, whose status the tests write the way its controller would.
const widgetAPIVersion = "example.dev/v1"

const reconcileSucceeded = `status.conditions.#(type=="ReconcileSucceeded").status`

func newWidget(t *testing.T, ns, name, stage string) {
	t.Helper()
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": widgetAPIVersion, "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{stagecoachv1.StageLabel: stage}},
		"spec": map[string]any{"containers": []any{
			map[string]any{"name": "app", "image": "registry.example/shop:old"},
			map[string]any{"name": "sidecar", "image": "registry.example/proxy:1"},
		}},
	}}
	NewWithT(t).Expect(env.Client.Create(t.Context(), w)).To(Succeed())
}

func getWidget(g Gomega, t *testing.T, ns, name string) *unstructured.Unstructured {
	w := &unstructured.Unstructured{}
	w.SetAPIVersion(widgetAPIVersion)
	w.SetKind("Widget")
	g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, w)).To(Succeed())
	return w
}

func containerImages(w *unstructured.Unstructured) []string {
	containers, _, _ := unstructured.NestedSlice(w.Object, "spec", "containers")
	var images []string
	for _, c := range containers {
		images = append(images, c.(map[string]any)["image"].(string))
	}
	return images
}

// writeWidgetStatus plays the Widget's controller: it reports a generation as observed (or none
// when observed < 0) with its ReconcileSucceeded condition.
func writeWidgetStatus(t *testing.T, ns, name string, observed int64, succeeded string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		w := getWidget(g, t, ns, name)
		status := map[string]any{"conditions": []any{map[string]any{"type": "ReconcileSucceeded", "status": succeeded}}}
		if observed >= 0 {
			status["observedGeneration"] = observed
		}
		w.Object["status"] = status
		g.Expect(env.Client.Status().Update(t.Context(), w)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

func widgetStage(name string, set []stagecoachv1.FieldSetting) func(*stagecoachv1.Stage) {
	return func(s *stagecoachv1.Stage) {
		s.Spec.ApplyRef = stagecoachv1.ApplierReference{APIVersion: widgetAPIVersion, Kind: "Widget", Name: name, Set: set}
		s.Spec.Author = author.DeepCopy()
		s.Spec.Completion = &stagecoachv1.CompletionRules{ObservedCompletion: &stagecoachv1.ObservedCompletion{
			Succeeded: &stagecoachv1.FieldMatch{Key: reconcileSucceeded, Value: "True"},
			Failed:    &stagecoachv1.FieldMatch{Key: reconcileSucceeded, Value: "False"},
		}}
	}
}

var imageSetting = []stagecoachv1.FieldSetting{{Path: "/spec/containers/0/image", Value: "registry.example/shop@{{ .Digest }}"}}

// A kind Stagecoach has no applier for is promoted through spec.applyRef.set (server-side apply of
// exactly that field, owned by Stagecoach's field manager) and lands by its completion rules:
// waiting says ConditionNotMet until its generation is observed, success verifies it, a failed
// rule fails the Promotion and rolls back.
func TestGenericApplierPromotesByCompletionRules(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	newWidget(t, ns, "deployer", "deployer")
	newStage(t, ns, "deployer", widgetStage("deployer", imageSetting))
	startController(t, nil)
	eventuallyCondition(t, ns, "deployer", stagecoachv1.ConditionReady, metav1.ConditionTrue, stagecoachv1.ReasonApplierReady,
		"spec.applyRef.set applies to it")

	newPromotion(t, ns, "deployer-1", "deployer", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
	var generation int64
	g.Eventually(func(g Gomega) {
		w := getWidget(g, t, ns, "deployer")
		// The sidecar is not Stagecoach's: it is left as it was.
		g.Expect(containerImages(w)).To(Equal([]string{"registry.example/shop@" + digest(1), "registry.example/proxy:1"}))
		var managers []string
		for _, f := range w.GetManagedFields() {
			if f.Operation == metav1.ManagedFieldsOperationApply {
				managers = append(managers, f.Manager)
			}
		}
		g.Expect(managers).To(ConsistOf(controller.FieldManager))
		generation = w.GetGeneration()
	}, timeout, interval).Should(Succeed())

	// The Widget has not observed the new generation: not met, whatever its condition says.
	writeWidgetStatus(t, ns, "deployer", generation-1, "True")
	eventuallyCondition(t, ns, "deployer", stagecoachv1.ConditionPromoting, metav1.ConditionUnknown, stagecoachv1.ReasonConditionNotMet,
		"Resource 'deployer' is waiting for the specified condition of observedCompletion.")
	g.Expect(getPromotion(g, t.Context(), ns, "deployer-1").Status.Phase).To(Equal(stagecoachv1.PhaseRunning))

	writeWidgetStatus(t, ns, "deployer", generation, "True")
	eventuallyPhase(t, ns, "deployer-1", stagecoachv1.PhaseSucceeded)
	eventuallyCondition(t, ns, "deployer", stagecoachv1.ConditionVerified, metav1.ConditionTrue, stagecoachv1.ReasonVerified, "")

	// A failed rule at the observed generation fails the Promotion, and the Stage rolls back.
	newPromotion(t, ns, "deployer-2", "deployer", stagecoachv1.ActionPromote, digest(2), "v2.0.0")
	g.Eventually(func(g Gomega) {
		w := getWidget(g, t, ns, "deployer")
		g.Expect(containerImages(w)[0]).To(Equal("registry.example/shop@" + digest(2)))
		generation = w.GetGeneration()
	}, timeout, interval).Should(Succeed())
	writeWidgetStatus(t, ns, "deployer", generation, "False")
	failed := eventuallyPhase(t, ns, "deployer-2", stagecoachv1.PhaseFailed)
	g.Expect(failed.Status.Message).To(ContainSubstring("Resource 'deployer' failed"))
	g.Expect(failed.Status.Message).NotTo(ContainSubstring("waiting"))
	g.Eventually(func(g Gomega) {
		g.Expect(containerImages(getWidget(g, t, ns, "deployer"))[0]).To(Equal("registry.example/shop@" + digest(1)))
	}, timeout, interval).Should(Succeed())
}

// A Stage that cannot do its job is never Ready: each cause has its reason and says what to do.
func TestGenericApplierNotReady(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutate  func(*stagecoachv1.Stage)
		status  func(t *testing.T, ns string)
		reason  string
		message string
	}{
		{name: "status without observedGeneration", mutate: widgetStage("w", imageSetting),
			status:  func(t *testing.T, ns string) { writeWidgetStatus(t, ns, "w", -1, "True") },
			reason:  stagecoachv1.ReasonTemplateStampFailure,
			message: "Resource 'w' cannot satisfy observedCompletion without observedGeneration in object status"},
		{name: "a path the kind's schema lacks", mutate: widgetStage("w", []stagecoachv1.FieldSetting{{Path: "/spec/nosuch", Value: "{{ .Digest }}"}}),
			reason: stagecoachv1.ReasonApplierSetInvalid, message: "the API server refuses it"},
		{name: "a template that does not render", mutate: widgetStage("w", []stagecoachv1.FieldSetting{{Path: "/spec/image", Value: "{{ .Tag }}"}}),
			reason: stagecoachv1.ReasonApplierSetInvalid, message: "does not render"},
		{name: "an ApplicationSet without waves", mutate: func(s *stagecoachv1.Stage) {
			s.Spec.ApplyRef = stagecoachv1.ApplierReference{Kind: "ApplicationSet", Name: "w"}
		}, reason: stagecoachv1.ReasonApplierNotSupported, message: "is promoted in waves only: add spec.waves"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			newWidget(t, ns, "w", "w")
			if tc.status != nil {
				tc.status(t, ns)
			}
			if tc.reason == stagecoachv1.ReasonApplierNotSupported {
				newApplicationSet(t, ns, "w")
			}
			newStage(t, ns, "w", tc.mutate)
			startController(t, nil)
			s := eventuallyCondition(t, ns, "w", stagecoachv1.ConditionReady, metav1.ConditionFalse, tc.reason, tc.message)
			// kubectl wait for Ready does not pass on a Stage that can do nothing.
			out, err := env.Kubectl(t, "wait", "--for=condition=Ready", "stage/w", "-n", ns, "--timeout=2s")
			NewWithT(t).Expect(err).To(HaveOccurred(), out)
			NewWithT(t).Expect(out).To(ContainSubstring("timed out waiting for the condition"))
			// Only a change of spec helps: kstatus sees Stalled.
			stalled := meta.FindStatusCondition(s.Status.Conditions, stagecoachv1.ConditionStalled)
			if tc.reason != stagecoachv1.ReasonTemplateStampFailure {
				NewWithT(t).Expect(stalled).NotTo(BeNil())
				NewWithT(t).Expect(stalled.Reason).To(Equal(tc.reason))
			}
		})
	}
}

func newApplicationSet(t *testing.T, ns, name string) {
	t.Helper()
	set := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{stagecoachv1.StageLabel: name}},
		"spec": map[string]any{"generators": []any{}, "template": map[string]any{
			"metadata": map[string]any{"name": "x"},
			"spec": map[string]any{"project": "default", "destination": map[string]any{"server": "https://kubernetes.default.svc"},
				"source": map[string]any{"repoURL": "oci://registry.example/shop", "targetRevision": "v1"}}}},
	}}
	NewWithT(t).Expect(env.Client.Create(t.Context(), set)).To(Succeed())
}

// The install grants the built-in kinds only: a Stage whose applier is another kind the
// controller may not list and watch says so (it asks before watching, so the cache never waits
// on a refused watch), and turns Ready once an operator grants it.
func TestGenericKindTheControllerMayNotWatch(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	user := "system:serviceaccount:stagecoach-system:restricted-" + ns
	out, err := env.Kubectl(t, "apply", "-f", filepath.Join(testenv.RepoRoot(), "manifests", "rbac", "role.yaml"))
	g.Expect(err).NotTo(HaveOccurred(), out)
	out, err = env.Kubectl(t, "create", "clusterrolebinding", "restricted-"+ns, "--clusterrole=stagecoach-controller", "--user="+user)
	g.Expect(err).NotTo(HaveOccurred(), out)
	restricted, err := env.AddUser(envtest.User{Name: user, Groups: []string{"system:authenticated"}}, nil)
	g.Expect(err).NotTo(HaveOccurred())

	newWidget(t, ns, "w", "w")
	newStage(t, ns, "w", widgetStage("w", imageSetting))
	stop, err := env.RunManagerAs(context.Background(), restricted.Config(), func(o *controller.Options) {
		o.ApplierRetryInterval = 500 * time.Millisecond
		o.SkipNameValidation = true
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { NewWithT(t).Expect(stop()).To(Succeed()) })
	eventuallyCondition(t, ns, "w", stagecoachv1.ConditionReady, metav1.ConditionFalse, stagecoachv1.ReasonApplierUnreadable,
		"Widget '"+ns+"/w' cannot be watched: the controller may not list (cluster-wide) widgets.example.dev; grant its service account get, list and watch on widgets.example.dev")

	out, err = env.Kubectl(t, "create", "clusterrole", "widgets-"+ns, "--verb=get,list,watch,patch", "--resource=widgets.example.dev")
	g.Expect(err).NotTo(HaveOccurred(), out)
	out, err = env.Kubectl(t, "create", "clusterrolebinding", "widgets-"+ns, "--clusterrole=widgets-"+ns, "--user="+user)
	g.Expect(err).NotTo(HaveOccurred(), out)
	eventuallyCondition(t, ns, "w", stagecoachv1.ConditionReady, metav1.ConditionTrue, stagecoachv1.ReasonApplierReady, "spec.applyRef.set applies to it")
}

// Issue 50 item 2: a Stage renders into its applier only a repository its own spec names. A
// person who may edit only dev points dev's source at her own repository; prod, which takes dev's
// versions, never writes her repository into its applier: without spec.source.upstream.repository
// {{ .Image }} does not render, and a repository prod names that is not dev's holds it too.
func TestDownstreamRendersOnlyItsOwnRepository(t *testing.T) {
	imageOfTheRepository := []stagecoachv1.FieldSetting{{Path: "/spec/containers/0/image", Value: "{{ .Image }}"}}
	for _, tc := range []struct {
		name       string
		devRepo    string
		prodRepo   string // spec.source.upstream.repository
		reason     string
		message    string
		wantStatus metav1.ConditionStatus
	}{
		{name: "no repository of its own", devRepo: "127.0.0.1:1/mallory/app", wantStatus: metav1.ConditionFalse,
			reason: stagecoachv1.ReasonApplierSetInvalid, message: "uses the repository, but the Stage's own source names none"},
		{name: "its own repository, not the upstream's", devRepo: "127.0.0.1:1/mallory/app", prodRepo: "registry.example/shop", wantStatus: metav1.ConditionFalse,
			reason:  stagecoachv1.ReasonUpstreamRepositoryMismatch,
			message: "Stage 'prod' renders registry.example/shop (spec.source.upstream.repository), but the head of its upstream chain, Stage '%s/dev', offers versions of 127.0.0.1:1/mallory/app"},
		{name: "its own repository, the upstream's", devRepo: "127.0.0.1:1/shop/app", prodRepo: "127.0.0.1:1/shop/app", wantStatus: metav1.ConditionTrue,
			reason: stagecoachv1.ReasonApplierReady, message: "spec.applyRef.set applies to it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			newWidget(t, ns, "prod", "prod")
			newStage(t, ns, "dev", func(s *stagecoachv1.Stage) {
				s.Spec.Source = stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: tc.devRepo, Semver: ">=1.0.0"}}
			})
			newStage(t, ns, "prod", func(s *stagecoachv1.Stage) {
				widgetStage("prod", imageOfTheRepository)(s)
				s.Spec.Source = stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "dev", Repository: tc.prodRepo}}
			})
			startController(t, nil)
			message := tc.message
			if strings.Contains(message, "%s") {
				message = fmt.Sprintf(message, ns)
			}
			eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionReady, tc.wantStatus, tc.reason, message)
		})
	}
}
