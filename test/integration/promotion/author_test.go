package promotion

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// The controller may patch Widgets (the operator granted it), but writes one through a Stage only
// when the Stage's author may patch it too: a tenant's Stage must not lend her the controller's
// rights. Asked of the real API server's RBAC as a SubjectAccessReview.
func TestGenericApplierWritesOnlyWhatItsAuthorMay(t *testing.T) {
	startController(t, nil)
	for _, tc := range []struct {
		name        string
		author      *stagecoachv1.StageAuthor
		grant       bool // RBAC lets the author patch Widgets of the namespace
		wantReason  string
		wantMessage string
	}{
		{name: "no author", wantReason: stagecoachv1.ReasonAuthorMissing,
			wantMessage: "Stage 'w' names no spec.author, and the controller writes Widget '%s/w' only as whoever set the Stage's applyRef"},
		{name: "an author who may not patch the Widget", author: &stagecoachv1.StageAuthor{User: "tina"}, wantReason: stagecoachv1.ReasonAuthorForbidden,
			wantMessage: "the Stage's author tina may not patch Widget '%s/w' (widgets.example.dev): the controller writes through a Stage only what its author may write; grant tina patch on widgets.example.dev in namespace %[1]s"},
		{name: "an author whose group may not patch it either", author: &stagecoachv1.StageAuthor{User: "tina", Groups: []string{"developers"}},
			wantReason: stagecoachv1.ReasonAuthorForbidden, wantMessage: "the Stage's author tina (groups developers) may not patch Widget '%s/w'"},
		{name: "an author who may patch it", author: &stagecoachv1.StageAuthor{User: "tina"}, grant: true, wantReason: stagecoachv1.ReasonApplierReady},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			if tc.grant {
				grantWidgets(t, ns, "tina")
			}
			newWidget(t, ns, "w", "w")
			newStage(t, ns, "w", func(s *stagecoachv1.Stage) {
				widgetStage("w", imageSetting)(s)
				s.Spec.Author = tc.author
			})
			if tc.wantReason == stagecoachv1.ReasonApplierReady {
				eventuallyCondition(t, ns, "w", stagecoachv1.ConditionReady, metav1.ConditionTrue, tc.wantReason, "")
				newPromotion(t, ns, "w-1", "w", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
				g.Eventually(func(g Gomega) {
					g.Expect(containerImages(getWidget(g, t, ns, "w"))[0]).To(Equal("registry.example/shop@" + digest(1)))
				}, timeout, interval).Should(Succeed())
				return
			}
			eventuallyCondition(t, ns, "w", stagecoachv1.ConditionReady, metav1.ConditionFalse, tc.wantReason, fmt.Sprintf(tc.wantMessage, ns))
			// A person's Promotion does not get the write through either.
			newPromotion(t, ns, "w-1", "w", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
			g.Consistently(func(g Gomega) {
				g.Expect(containerImages(getWidget(g, t, ns, "w"))[0]).To(Equal("registry.example/shop:old"))
			}, 3*time.Second, 100*time.Millisecond).Should(Succeed())
		})
	}
}

// grantWidgets lets user patch Widgets in ns, for the test's lifetime (the namespace goes with it).
func grantWidgets(t *testing.T, ns, user string) {
	t.Helper()
	g := NewWithT(t)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "widget-patcher"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"example.dev"}, Resources: []string{"widgets"}, Verbs: []string{"get", "patch"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "widget-patcher"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	g.Expect(env.Client.Create(t.Context(), role)).To(Succeed())
	g.Expect(env.Client.Create(t.Context(), binding)).To(Succeed())
}

// A Stage's applier is an object of the Stage's namespace: a cluster-scoped kind is refused, its
// object is never written, and no event on it becomes a request without a namespace (which was
// taken for a deleted Stage "/web" and aborted another namespace's running Promotion of "web").
func TestClusterScopedApplierIsRefused(t *testing.T) {
	g := NewWithT(t)
	startController(t, nil)
	// Team A's Stage "web" runs a Promotion, waiting for its Widget to report completion.
	teamA := newNamespace(t)
	newWidget(t, teamA, "web", "web")
	newStage(t, teamA, "web", widgetStage("web", imageSetting))
	eventuallyCondition(t, teamA, "web", stagecoachv1.ConditionReady, metav1.ConditionTrue, stagecoachv1.ReasonApplierReady, "")
	newPromotion(t, teamA, "web-1", "web", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
	eventuallyPhase(t, teamA, "web-1", stagecoachv1.PhaseRunning)

	// The tenant's Stage "web" names a cluster-scoped object labelled with its name.
	tenant := newNamespace(t)
	widget := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": widgetAPIVersion, "kind": "ClusterWidget",
		"metadata": map[string]any{"name": "web-" + tenant, "labels": map[string]any{stagecoachv1.StageLabel: "web"}},
		"spec":     map[string]any{"image": "registry.example/platform:1"},
	}}
	g.Expect(env.Client.Create(t.Context(), widget)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(t.Context(), widget) })
	newStage(t, tenant, "web", func(s *stagecoachv1.Stage) {
		s.Spec.ApplyRef = stagecoachv1.ApplierReference{APIVersion: widgetAPIVersion, Kind: "ClusterWidget", Name: widget.GetName(),
			Set: []stagecoachv1.FieldSetting{{Path: "/spec/image", Value: "registry.example/evil@{{ .Digest }}"}}}
		s.Spec.Author = author.DeepCopy()
		s.Spec.Completion = &stagecoachv1.CompletionRules{ObservedMatches: []stagecoachv1.ObservedMatch{{Input: "spec.image", Output: "spec.image"}}}
	})
	eventuallyCondition(t, tenant, "web", stagecoachv1.ConditionReady, metav1.ConditionFalse, stagecoachv1.ReasonApplierClusterScoped,
		fmt.Sprintf("Stage 'web' names ClusterWidget '%s', which is cluster-scoped: a Stage applies only objects of its own namespace (%s)", widget.GetName(), tenant))
	newPromotion(t, tenant, "web-1", "web", stagecoachv1.ActionPromote, digest(9), "v9.0.0")

	// Changes to the cluster-scoped object (events, were it watched) touch neither namespace.
	for i := range 5 {
		g.Eventually(func() error {
			if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(widget), widget); err != nil {
				return err
			}
			widget.SetAnnotations(map[string]string{"touched": fmt.Sprint(i)})
			return env.Client.Update(t.Context(), widget)
		}, timeout, interval).Should(Succeed())
	}
	g.Consistently(func(g Gomega) {
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(widget), widget)).To(Succeed())
		image, _, _ := unstructured.NestedString(widget.Object, "spec", "image")
		g.Expect(image).To(Equal("registry.example/platform:1"))
		g.Expect(getPromotion(g, t.Context(), teamA, "web-1").Status.Phase).To(Equal(stagecoachv1.PhaseRunning))
	}, 3*time.Second, 100*time.Millisecond).Should(Succeed())
}
