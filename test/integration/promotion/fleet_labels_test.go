package promotion

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// setAppLabels sets the labels of an Application, as the applicationset-controller does when its
// template's labels change.
func setAppLabels(t *testing.T, ns, name string, labels map[string]string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		app := &unstructured.Unstructured{}
		app.SetAPIVersion("argoproj.io/v1alpha1")
		app.SetKind("Application")
		g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, app)).To(Succeed())
		app.SetLabels(labels)
		g.Expect(env.Client.Update(t.Context(), app)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

// The Application guard selects Applications by the Stage label: a fleet whose ApplicationSet
// generates Applications without it is not mediated (anyone who may edit those can change what
// they run), and automation does not promote it, until every target carries the label.
func TestFleetTargetsUnlabelled(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	newApplication(t, ns, "staging", ociSpec(ns))
	newStage(t, ns, "staging", nil)
	apps := newFleet(t, ns, "fleet", fiveClusters[:3])
	// The template had no label when the applicationset-controller generated two of them.
	for _, name := range apps[1:] {
		setAppLabels(t, ns, name, nil)
	}
	newWavesStage(t, ns, "fleet", func(s *stagecoachv1.Stage) {
		s.Spec.Source.Upstream = &stagecoachv1.UpstreamSource{Stage: "staging"}
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true}
		s.Spec.Waves = []stagecoachv1.Wave{{Name: "all"}}
	})
	startController(t, nil)
	startFleetArgoCD(t, ns, nil) // plays Argo CD for staging and the fleet alike

	s := eventuallyCondition(t, ns, "fleet", stagecoachv1.ConditionMediated, metav1.ConditionFalse, stagecoachv1.ReasonTargetsUnlabelled,
		"2 of the 3 Applications of ApplicationSet '"+ns+"/fleet' lack the label stagecoach.dev/stage=fleet ("+apps[1]+", "+apps[2]+")")
	g.Expect(meta.FindStatusCondition(s.Status.Conditions, stagecoachv1.ConditionMediated).Message).To(
		ContainSubstring("add stagecoach.dev/stage: fleet to the ApplicationSet's spec.template.metadata.labels"))
	g.Expect(meta.IsStatusConditionTrue(s.Status.Conditions, stagecoachv1.ConditionReady)).To(BeTrue(), "the fleet itself is promotable by a person")

	// A version verified upstream waits at the mediated gate: automation does not promote it.
	newPromotion(t, ns, "staging-v1", "staging", stagecoachv1.ActionPromote, digest(1), tag(1))
	eventuallyPhase(t, ns, "staging-v1", stagecoachv1.PhaseSucceeded)
	g.Eventually(func(g Gomega) {
		c := getStage(g, t.Context(), ns, "fleet").Status.Candidate
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Digest).To(Equal(digest(1)))
		g.Expect(c.BlockedBy).To(ContainElement(And(HaveField("Gate", stagecoachv1.GateMediated),
			HaveField("Reason", stagecoachv1.ReasonTargetsUnlabelled), HaveField("Message", ContainSubstring(apps[1])))))
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(promotionsOf(g, t, ns, "fleet")).To(BeEmpty())
	}, 2*time.Second, interval).Should(Succeed())

	t.Run("a target labelled for another Stage is named with its label", func(t *testing.T) {
		setAppLabels(t, ns, apps[1], map[string]string{stagecoachv1.StageLabel: "other"})
		eventuallyCondition(t, ns, "fleet", stagecoachv1.ConditionMediated, metav1.ConditionFalse, stagecoachv1.ReasonTargetsUnlabelled,
			"("+apps[1]+` (labelled for Stage "other"), `+apps[2]+")")
	})

	t.Run("every target labelled: mediated, and automation promotes", func(t *testing.T) {
		g := NewWithT(t)
		for _, name := range apps[1:] {
			setAppLabels(t, ns, name, map[string]string{stagecoachv1.StageLabel: "fleet"})
		}
		eventuallyCondition(t, ns, "fleet", stagecoachv1.ConditionMediated, metav1.ConditionTrue, stagecoachv1.ReasonMediated, "only the promoted digest decides")
		s := eventuallyCondition(t, ns, "fleet", stagecoachv1.ConditionVerified, metav1.ConditionTrue, stagecoachv1.ReasonVerified, digest(1))
		g.Expect(s.Status.Current.Digest).To(Equal(digest(1)))
		g.Expect(promotionsOf(g, t, ns, "fleet")).To(HaveLen(1))
	})
}
