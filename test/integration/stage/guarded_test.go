package stage

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// A Stage says whether the admission policies it relies on are installed and bound to deny, and
// notices when they are, read from the API server.
func TestGuardedSaysWhetherPoliciesAreInstalled(t *testing.T) {
	ns := newNamespace(t)
	g := NewWithT(t)
	g.Expect(env.Client.Create(t.Context(), kustomization(ns, "app", stageLabel("app")))).To(Succeed())
	newStage(t, ns, "app", "Kustomization", "app")

	guarded := func(status metav1.ConditionStatus, reason, want string) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			// Each look asks for a reconcile: the condition is re-read only then.
			stage := &stagecoachv1.Stage{}
			g.Expect(env.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "app"}, stage)).To(Succeed())
			c := meta.FindStatusCondition(stage.Status.Conditions, stagecoachv1.ConditionGuarded)
			if c == nil || c.Status != status || c.Reason != reason || !strings.Contains(c.Message, want) {
				stage.Annotations = map[string]string{stagecoachv1.ReconcileRequestAnnotation: time.Now().Format(time.RFC3339Nano)}
				_ = env.Client.Update(t.Context(), stage)
			}
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(status))
			g.Expect(c.Reason).To(Equal(reason))
			g.Expect(c.Message).To(ContainSubstring(want))
		}, timeout, interval).Should(Succeed())
	}
	guarded(metav1.ConditionFalse, stagecoachv1.ReasonPoliciesMissing, fmt.Sprintf(
		"admission policies flux-kustomization-guard.stagecoach.dev, promotion-requester-guard.stagecoach.dev, stage-status-guard.stagecoach.dev, promotion-status-guard.stagecoach.dev are not installed and bound to deny: "+
			"anyone who may edit Kustomization '%s/app' can change what it runs", ns))

	// Stand-ins with the guards' names that match nothing, so the suite's other tests may write freely.
	warn, deny := []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn}, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}
	for name, actions := range map[string][]admissionregistrationv1.ValidationAction{
		"flux-kustomization-guard.stagecoach.dev": warn, "promotion-requester-guard.stagecoach.dev": deny,
		"stage-status-guard.stagecoach.dev": deny, "promotion-status-guard.stagecoach.dev": deny} {
		vap := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule: admissionregistrationv1.Rule{APIGroups: []string{"nothing.stagecoach.dev"}, APIVersions: []string{"v1"}, Resources: []string{"nothings"}}}}}},
				Validations: []admissionregistrationv1.Validation{{Expression: "true"}}}}
		binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: actions}}
		g.Expect(env.Client.Create(t.Context(), vap)).To(Succeed())
		g.Expect(env.Client.Create(t.Context(), binding)).To(Succeed())
		t.Cleanup(func() {
			// t.Context() is done by the time cleanups run.
			ctx := context.WithoutCancel(t.Context())
			g.Expect(env.Client.Delete(ctx, binding)).To(Succeed())
			g.Expect(env.Client.Delete(ctx, vap)).To(Succeed())
		})
	}
	// Bound only to warn, the guard is not enforced.
	guarded(metav1.ConditionFalse, stagecoachv1.ReasonPoliciesMissing, "admission policy flux-kustomization-guard.stagecoach.dev is not installed")

	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	g.Expect(env.Client.Get(t.Context(), types.NamespacedName{Name: "flux-kustomization-guard.stagecoach.dev"}, binding)).To(Succeed())
	binding.Spec.ValidationActions = deny
	g.Expect(env.Client.Update(t.Context(), binding)).To(Succeed())
	guarded(metav1.ConditionTrue, stagecoachv1.ReasonPoliciesInstalled,
		"admission policies flux-kustomization-guard.stagecoach.dev, promotion-requester-guard.stagecoach.dev, stage-status-guard.stagecoach.dev, promotion-status-guard.stagecoach.dev deny what they guard")
}
