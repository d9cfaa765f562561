package promotion

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// While something besides the digest decides what the applier runs (Mediated=False), automation
// does not promote; a person may, and the Promotion's gates say what else decides.
func TestUnmediatedApplierHoldsAutomation(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	stagingApp, prodApp := newPipeline(t, ns, &stagecoachv1.PromotionPolicy{Auto: true}, nil)
	prodApp.update(func(app *unstructured.Unstructured) {
		_ = unstructured.SetNestedMap(app.Object, map[string]any{
			"drySource":  map[string]any{"repoURL": "https://git.example/payments.git", "targetRevision": "main", "path": "app"},
			"syncSource": map[string]any{"targetBranch": "env/prod", "path": "app"}}, "spec", "sourceHydrator")
	})
	startController(t, nil)

	promoteAndLand(t, ns, "staging", stagingApp, "staging-v1", 1)
	g.Eventually(func(g Gomega) {
		s := getStage(g, t.Context(), ns, "prod")
		m := meta.FindStatusCondition(s.Status.Conditions, stagecoachv1.ConditionMediated)
		g.Expect(m).NotTo(BeNil())
		g.Expect(m.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(s.Status.Candidate).NotTo(BeNil())
		g.Expect(s.Status.Candidate.Digest).To(Equal(digest(1)))
		g.Expect(s.Status.Candidate.BlockedBy).To(ContainElement(And(HaveField("Gate", stagecoachv1.GateMediated),
			HaveField("Message", And(ContainSubstring("sets spec.sourceHydrator (Argo CD renders it instead of spec.source)"),
				ContainSubstring("automation does not promote until only the digest decides what runs (a person may still promote)"))))))
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(promotionsOf(g, t, ns, "prod")).To(BeEmpty())
	}, 2*time.Second, interval).Should(Succeed())

	newPromotion(t, ns, "by-hand", "prod", stagecoachv1.ActionPromote, digest(1), tag(1))
	prodApp.deploy(digest(1), false, "Succeeded", "Healthy")
	p := eventuallyPhase(t, ns, "by-hand", stagecoachv1.PhaseSucceeded)
	g.Expect(p.Status.Gates).To(ContainElement(And(HaveField("Gate", stagecoachv1.GateMediated), HaveField("Passed", true),
		HaveField("Message", ContainSubstring("this Promotion runs, but the digest alone does not decide what runs")))))
}
