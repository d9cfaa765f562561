package promotion

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// A Rollback passes no gates because it returns to what the Stage verified. A version the
// Stage's history holds as Failed (promoted, never verified) is not that: a Rollback naming it
// is refused, and the Application keeps the verified version, although prod now asks for
// approvals that a Rollback would skip.
func TestRollbackToAFailedVersionIsRefused(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	app := newApplication(t, ns, "prod", ociSpec(ns))
	newStage(t, ns, "prod", nil)
	ctl := startController(t, nil)

	promoteAndLand(t, ns, "prod", app, "v1", 1)
	// v2's sync fails, and the automatic rollback restores v1.
	newPromotion(t, ns, "v2", "prod", stagecoachv1.ActionPromote, digest(2), "v2.0.0")
	app.deploy(digest(2), false, "Failed", "")
	eventuallyPhase(t, ns, "v2", stagecoachv1.PhaseFailed)
	eventuallyPhase(t, ns, "v2-rollback", stagecoachv1.PhaseRunning)
	app.deploy(digest(1), false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, "v2-rollback", stagecoachv1.PhaseSucceeded)
	s := eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionVerified, metav1.ConditionTrue, stagecoachv1.ReasonRolledBack, digest(1))
	g.Expect(s.Status.History).To(ContainElement(And(HaveField("Digest", digest(2)), HaveField("Phase", stagecoachv1.PhaseFailed))))
	g.Expect(s.Status.History).NotTo(ContainElement(And(HaveField("Digest", digest(2)), HaveField("Phase", stagecoachv1.PhaseSucceeded))))

	// From now on, two approvals are required: a promote of v2 would wait for them.
	g.Eventually(func() error {
		s := &stagecoachv1.Stage{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "prod"}, s); err != nil {
			return err
		}
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Approvals: &stagecoachv1.ApprovalPolicy{Required: 2}}
		return env.Client.Update(t.Context(), s)
	}, timeout, interval).Should(Succeed())
	writes := ctl.revisionPatches.Load()

	newPromotion(t, ns, "back-to-v2", "prod", stagecoachv1.ActionRollback, digest(2), "v2.0.0")
	p := eventuallyPhase(t, ns, "back-to-v2", stagecoachv1.PhaseFailed)
	g.Expect(p.Status.Message).To(ContainSubstring("not rolled back: " + digest(2) + " was never verified in Stage prod"))
	g.Expect(p.Status.AppliedAt).To(BeNil())
	g.Consistently(func(g Gomega) {
		g.Expect(app.desiredRevision(app.get())).To(Equal(digest(1)), "the Application still runs the verified version")
		g.Expect(ctl.revisionPatches.Load()).To(Equal(writes), "nothing was written to the Application")
	}, time.Second, interval).Should(Succeed())
}

// A digest that another of the Stage's Promotions carried but never applied (it was aborted
// before apply) is not Stagecoach's write: when the Application runs it, someone else put it
// there, and the next promote freezes the Stage instead of writing over it.
func TestDigestOfAPromotionAbortedBeforeApplyIsAForeignWrite(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	app := newApplication(t, ns, "payments", ociSpec(ns))
	newStage(t, ns, "payments", nil)
	ctl := startController(t, nil)
	g.Eventually(func(g Gomega) {
		g.Expect(getStage(g, t.Context(), ns, "payments").Status.Adopted).NotTo(BeNil())
	}, timeout, interval).Should(Succeed())
	setRevision := func(revision string) {
		app.update(func(u *unstructured.Unstructured) {
			g.Expect(unstructured.SetNestedField(u.Object, revision, "spec", "source", "targetRevision")).To(Succeed())
		})
	}

	// Someone writes v7.7.7: v1's Promotion starts (it carries digest 1) and is aborted before
	// it applies anything.
	setRevision("v7.7.7")
	newPromotion(t, ns, "v1", "payments", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
	aborted := eventuallyPhase(t, ns, "v1", stagecoachv1.PhaseAborted)
	g.Expect(aborted.Status.Version).NotTo(BeNil())
	g.Expect(aborted.Status.Version.Digest).To(Equal(digest(1)))
	g.Expect(aborted.Status.AppliedAt).To(BeNil())
	eventuallyCondition(t, ns, "payments", stagecoachv1.ConditionFrozen, metav1.ConditionTrue, stagecoachv1.ReasonForeignWrite, "v7.7.7")
	// A person accepts v7.7.7.
	newPromotion(t, ns, "unfreeze", "payments", stagecoachv1.ActionUnfreeze, "", "")
	eventuallyPhase(t, ns, "unfreeze", stagecoachv1.PhaseSucceeded)
	eventuallyCondition(t, ns, "payments", stagecoachv1.ConditionFrozen, metav1.ConditionFalse, stagecoachv1.ReasonUnfrozen, "unfrozen by Promotion unfreeze")

	// Someone writes digest 1, which v1 carried and never applied: not Stagecoach's write.
	setRevision(digest(1))
	newPromotion(t, ns, "v2", "payments", stagecoachv1.ActionPromote, digest(2), "v2.0.0")
	p := eventuallyPhase(t, ns, "v2", stagecoachv1.PhaseAborted)
	g.Expect(p.Status.Message).To(ContainSubstring(`runs "` + digest(1) + `", which Stagecoach did not write: someone else changed it`))
	eventuallyCondition(t, ns, "payments", stagecoachv1.ConditionFrozen, metav1.ConditionTrue, stagecoachv1.ReasonForeignWrite, digest(1))
	g.Expect(app.desiredRevision(app.get())).To(Equal(digest(1)))
	g.Expect(ctl.revisionPatches.Load()).To(BeZero(), "Stagecoach wrote nothing to the Application")
}
