package promotion

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// Completion rules on a built-in kind read the Application as the API server has it, not as the
// cache of appliers keeps it: status.summary is a field the built-in observer never reads (so the
// cache drops it), and a rule on it holds once Argo CD writes it (issue 30).
func TestCompletionRulesReadStatusTheCacheDrops(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	app := newApplication(t, ns, "payments", ociSpec(ns))
	newStage(t, ns, "payments", func(s *stagecoachv1.Stage) {
		s.Spec.Completion = &stagecoachv1.CompletionRules{ObservedMatches: []stagecoachv1.ObservedMatch{
			{Input: "spec.source.targetRevision", Output: "status.summary.images.0"}}}
	})
	startController(t, nil)

	newPromotion(t, ns, "v1", "payments", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
	app.deploy(digest(1), false, "Succeeded", "Healthy")
	// Argo CD's proof holds; the rule waits for the summary, and says so.
	eventuallyCondition(t, ns, "payments", stagecoachv1.ConditionPromoting, metav1.ConditionUnknown, stagecoachv1.ReasonConditionNotMet,
		`status.summary.images.0 ("")`)
	g.Expect(getPromotion(g, t.Context(), ns, "v1").Status.Phase).To(Equal(stagecoachv1.PhaseRunning))

	// Argo CD writes the summary with its next comparison: an update of the whole object.
	app.update(func(u *unstructured.Unstructured) {
		g.Expect(unstructured.SetNestedStringSlice(u.Object, []string{digest(1)}, "status", "summary", "images")).To(Succeed())
	})
	p := eventuallyPhase(t, ns, "v1", stagecoachv1.PhaseSucceeded)
	g.Expect(p.Status.Message).To(ContainSubstring("all 1 observedMatches hold"))
	eventuallyCondition(t, ns, "payments", stagecoachv1.ConditionVerified, metav1.ConditionTrue, stagecoachv1.ReasonVerified, "v1.0.0@"+digest(1))
}
