package promotion

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// Issue 53 item 1: a Rollback preempts a running promote at once. v2 never turns Healthy (the
// engine never syncs it) and its deadline is ten minutes away; a person's Rollback aborts it
// with reason Preempted naming the Rollback, writes the verified v1 back to the Application in
// the same reconcile, and the Stage's history and events say what happened. v2 is never recorded
// verified. A Rollback already running is not preempted by another.
func TestRollbackPreemptsAStuckPromotion(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	app := newApplication(t, ns, "prod", ociSpec(ns))
	newStage(t, ns, "prod", func(s *stagecoachv1.Stage) {
		s.Spec.Verification.ProgressDeadline = &metav1.Duration{Duration: 10 * time.Minute}
	})
	startController(t, nil)
	promoteAndLand(t, ns, "prod", app, "prod-v1", 1)
	eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionVerified, metav1.ConditionTrue, stagecoachv1.ReasonVerified, digest(1))

	// v2 is written and never lands.
	newPromotion(t, ns, "prod-v2", "prod", stagecoachv1.ActionPromote, digest(2), "v2.0.0")
	app.waitForRevision(digest(2), false)
	g.Expect(getPromotion(g, t.Context(), ns, "prod-v2").Status.Phase).To(Equal(stagecoachv1.PhaseRunning))

	requested := time.Now()
	g.Expect(env.Client.Create(t.Context(), &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod-rollback"},
		Spec: stagecoachv1.PromotionSpec{Stage: "prod", Action: stagecoachv1.ActionRollback, RequestedBy: "alice", Reason: "v2 crash-loops"}})).To(Succeed())
	preempted := eventuallyPhase(t, ns, "prod-v2", stagecoachv1.PhaseAborted)
	g.Expect(preempted.Status.Message).To(And(ContainSubstring("preempted by Rollback prod-rollback (requested by alice)"), ContainSubstring("v2 crash-loops")))
	g.Expect(preempted.Status.VerifiedAt).To(BeNil())
	app.waitForRevision(digest(1), false)
	// Written back at once: nowhere near the ten-minute deadline (generous for a loaded machine).
	g.Expect(time.Since(requested)).To(BeNumerically("<", time.Minute))
	app.deploy(digest(1), false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, "prod-rollback", stagecoachv1.PhaseSucceeded)

	s := getStage(g, t.Context(), ns, "prod")
	g.Expect(s.Status.Current.Digest).To(Equal(digest(1)))
	g.Expect(s.Status.History).To(ContainElement(And(HaveField("Promotion", "prod-v2"), HaveField("Phase", stagecoachv1.PhaseAborted))))
	g.Expect(s.Status.History).NotTo(ContainElement(And(HaveField("Digest", digest(2)), HaveField("Phase", stagecoachv1.PhaseSucceeded))))
	g.Eventually(func(g Gomega) {
		var events eventsv1.EventList
		g.Expect(env.Client.List(t.Context(), &events, client.InNamespace(ns))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(And(HaveField("Reason", stagecoachv1.ReasonPreempted),
			HaveField("Regarding.Name", "prod-v2"))))
	}, timeout, interval).Should(Succeed())
}
