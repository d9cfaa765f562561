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
	"github.com/stagecoach-dev/stagecoach/internal/plan"
)

// promotionsOf lists a Stage's Promotions, live.
func promotionsOf(g Gomega, t *testing.T, ns, stage string) []stagecoachv1.Promotion {
	var list stagecoachv1.PromotionList
	g.Expect(env.Client.List(t.Context(), &list, client.InNamespace(ns))).To(Succeed())
	var out []stagecoachv1.Promotion
	for _, p := range list.Items {
		if p.Spec.Stage == stage {
			out = append(out, p)
		}
	}
	return out
}

// promoteAndLand promotes a digest by hand on a Stage and plays a good sync of it.
func promoteAndLand(t *testing.T, ns, stage string, app *fakeArgoCD, name string, n int) {
	t.Helper()
	newPromotion(t, ns, name, stage, stagecoachv1.ActionPromote, digest(n), tag(n))
	app.deploy(digest(n), false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, name, stagecoachv1.PhaseSucceeded)
}

func tag(n int) string { return "v" + string(rune('0'+n)) + ".0.0" }

// An upstream Stage verifies versions; the downstream Stage follows automatically. A version that
// fails downstream rolls back, is never offered automatically again, and holds automation until a
// person promotes.
func TestFollowUpstreamFailRollBackAndHold(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	stagingApp, prodApp := newPipeline(t, ns, &stagecoachv1.PromotionPolicy{Auto: true}, nil)
	startController(t, nil)

	// v1 verified upstream is promoted downstream without anyone asking.
	promoteAndLand(t, ns, "staging", stagingApp, "staging-v1", 1)
	prodApp.deploy(digest(1), false, "Succeeded", "Healthy")
	s := eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionVerified, metav1.ConditionTrue, stagecoachv1.ReasonVerified, digest(1))
	g.Expect(s.Status.Current.Version).To(Equal("v1.0.0"))
	auto := promotionsOf(g, t, ns, "prod")
	g.Expect(auto).To(HaveLen(1))
	g.Expect(plan.IsAutomatic(&auto[0])).To(BeTrue())

	// v2 fails downstream: the sync ends Failed.
	promoteAndLand(t, ns, "staging", stagingApp, "staging-v2", 2)
	prodApp.deploy(digest(2), false, "Failed", "")
	var failed stagecoachv1.Promotion
	g.Eventually(func(g Gomega) {
		for _, p := range promotionsOf(g, t, ns, "prod") {
			if p.Spec.Version != nil && p.Spec.Version.Digest == digest(2) {
				failed = p
			}
		}
		g.Expect(failed.Status.Phase).To(Or(Equal(stagecoachv1.PhaseFailed), Equal(stagecoachv1.PhaseRolledBack)))
	}, timeout, interval).Should(Succeed())
	g.Expect(failed.Status.Message).To(ContainSubstring("the sync of " + digest(2) + " ended Failed"))
	g.Expect(failed.Status.Message).To(ContainSubstring("rolling back to v1.0.0@" + digest(1)))

	// The rollback writes v1 back; Argo CD syncs it.
	rollbackName := failed.Name + "-rollback"
	rb := eventuallyPhase(t, ns, rollbackName, stagecoachv1.PhaseRunning)
	g.Expect(rb.Spec.Action).To(Equal(stagecoachv1.ActionRollback))
	g.Expect(rb.Spec.RequestedBy).NotTo(BeEmpty(), "the controller names itself: the promotion-requester-guard policy refuses a Promotion without requestedBy")
	prodApp.deploy(digest(1), false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, rollbackName, stagecoachv1.PhaseSucceeded)
	p := eventuallyPhase(t, ns, failed.Name, stagecoachv1.PhaseRolledBack)
	g.Expect(p.Status.Message).To(ContainSubstring("rolled back by " + rollbackName))

	// Verified says what happened: the failed Promotion, and the version restored (issue 15).
	s = eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionVerified, metav1.ConditionTrue, stagecoachv1.ReasonRolledBack,
		"rolled back: Promotion "+failed.Name+" failed, and v1.0.0@"+digest(1)+" was restored and verified")
	// Automation holds until a person promotes, and Stalled says so.
	eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionStalled, metav1.ConditionTrue, stagecoachv1.ReasonHeld, "promote a version by hand to resume")
	g.Expect(s.Status.Current.Digest).To(Equal(digest(1)))
	g.Expect(s.Status.FailedDigests).To(ConsistOf(digest(2)))
	g.Expect(s.Status.Hold).NotTo(BeNil())
	g.Expect(s.Status.Hold.Message).To(ContainSubstring("promote a version by hand to resume"))
	g.Expect(s.Status.History).To(HaveLen(3))
	g.Expect(s.Status.History[0].Action).To(Equal(stagecoachv1.ActionRollback))
	g.Expect(s.Status.History[1].Phase).To(Equal(stagecoachv1.PhaseFailed))

	// Upstream still offers v2: it is not tried again, and the Stage says why.
	g.Eventually(func(g Gomega) {
		s := getStage(g, t.Context(), ns, "prod")
		g.Expect(s.Status.Candidate).NotTo(BeNil())
		var gates []string
		for _, b := range s.Status.Candidate.BlockedBy {
			gates = append(gates, b.Gate)
		}
		g.Expect(gates).To(ContainElements(stagecoachv1.GateHistory, stagecoachv1.GateHold))
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(promotionsOf(g, t, ns, "prod")).To(HaveLen(3))
	}, time.Second, interval).Should(Succeed())

	// v3 upstream is held too, until a person promotes.
	promoteAndLand(t, ns, "staging", stagingApp, "staging-v3", 3)
	g.Consistently(func(g Gomega) {
		g.Expect(promotionsOf(g, t, ns, "prod")).To(HaveLen(3))
	}, time.Second, interval).Should(Succeed())
	promoteAndLand(t, ns, "prod", prodApp, "prod-v3-by-hand", 3)
	s = getStage(g, t.Context(), ns, "prod")
	g.Expect(s.Status.Hold).To(BeNil())
	g.Expect(s.Status.AutomaticRollbacks).To(BeZero())
	// The person's verified promote ends the hold (no Stalled) and the rollback's Verified reason.
	s = eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionVerified, metav1.ConditionTrue, stagecoachv1.ReasonVerified, digest(3))
	g.Expect(meta.FindStatusCondition(s.Status.Conditions, stagecoachv1.ConditionStalled)).To(BeNil())
}

// A rollback that fails does not roll back again: the Stage holds, saying so.
func TestRollbackThatFailsHolds(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	app := newApplication(t, ns, "prod", ociSpec(ns))
	newStage(t, ns, "prod", nil)
	startController(t, nil)

	promoteAndLand(t, ns, "prod", app, "v1", 1)
	newPromotion(t, ns, "v2", "prod", stagecoachv1.ActionPromote, digest(2), "v2.0.0")
	// v2 syncs, then turns Degraded.
	app.deploy(digest(2), false, "Succeeded", "Degraded")
	p := eventuallyPhase(t, ns, "v2", stagecoachv1.PhaseFailed)
	g.Expect(p.Status.Message).To(ContainSubstring("is Degraded after the sync of " + digest(2)))

	eventuallyPhase(t, ns, "v2-rollback", stagecoachv1.PhaseRunning)
	app.deploy(digest(1), false, "Error", "")
	rb := eventuallyPhase(t, ns, "v2-rollback", stagecoachv1.PhaseFailed)
	g.Expect(rb.Status.Message).To(ContainSubstring("the sync of " + digest(1) + " ended Error"))

	s := eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionVerified, metav1.ConditionFalse, "SyncFailed", digest(1))
	g.Expect(s.Status.Hold).NotTo(BeNil())
	g.Expect(s.Status.Hold.Reason).To(Equal(stagecoachv1.ReasonRollbackFailed))
	g.Expect(s.Status.Hold.Promotion).To(Equal("v2-rollback"))
	g.Expect(s.Status.FailedDigests).To(ConsistOf(digest(2)), "a failed rollback does not mark the old version as failed")
	g.Consistently(func(g Gomega) {
		g.Expect(promotionsOf(g, t, ns, "prod")).To(HaveLen(3), "no second rollback")
	}, time.Second, interval).Should(Succeed())
}

// A sync the cluster refused changed nothing: the rollback writes v1 back, and Argo CD, comparing,
// finds v1 running (Synced, Healthy) and starts no sync. The rollback lands by that comparison
// after its write, not by a sync that never comes (it used to wait until its deadline).
func TestRollbackAfterARefusedSyncLandsWithoutASync(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	app := newApplication(t, ns, "prod", ociSpec(ns))
	newStage(t, ns, "prod", nil)
	startController(t, nil)

	promoteAndLand(t, ns, "prod", app, "v1", 1)
	newPromotion(t, ns, "v2", "prod", stagecoachv1.ActionPromote, digest(2), "v2.0.0")
	app.deploy(digest(2), false, "Failed", "") // admission refused v2: v1 still runs
	eventuallyPhase(t, ns, "v2", stagecoachv1.PhaseFailed)
	eventuallyPhase(t, ns, "v2-rollback", stagecoachv1.PhaseRunning)
	app.waitForRevision(digest(1), false)
	// Before Argo CD has compared after the write (the refresh annotation is still there), the
	// old Synced status is no proof.
	g.Consistently(func(g Gomega) {
		p := &stagecoachv1.Promotion{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "v2-rollback"}, p)).To(Succeed())
		g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhaseRunning))
	}, time.Second, interval).Should(Succeed())
	now := time.Now()
	app.refresh(now)
	app.assess("Healthy", now) // Synced at v1, no operation: the last one is still v2's failed sync

	rb := eventuallyPhase(t, ns, "v2-rollback", stagecoachv1.PhaseSucceeded)
	g.Expect(rb.Status.Message).To(ContainSubstring("nothing to sync (the cluster already ran it)"))
	eventuallyPhase(t, ns, "v2", stagecoachv1.PhaseRolledBack)
	s := getStage(g, t.Context(), ns, "prod")
	g.Expect(s.Status.Current.Digest).To(Equal(digest(1)))
	last, _, _ := unstructured.NestedString(app.get().Object, "status", "operationState", "phase")
	g.Expect(last).To(Equal("Failed"), "the fake played no sync of v1")
}

// A version that does not land within the progress deadline fails; with nothing verified before
// it, there is nothing to roll back to.
func TestDeadlineExceeded(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	newApplication(t, ns, "prod", ociSpec(ns))
	newStage(t, ns, "prod", func(s *stagecoachv1.Stage) {
		s.Spec.Verification.ProgressDeadline = &metav1.Duration{Duration: 2 * time.Second}
	})
	startController(t, nil)

	newPromotion(t, ns, "v1", "prod", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
	p := eventuallyPhase(t, ns, "v1", stagecoachv1.PhaseFailed)
	g.Expect(p.Status.Message).To(ContainSubstring("did not land within the progress deadline of 2s"))
	g.Expect(p.Status.FinishedAt.Sub(p.Status.AppliedAt.Time)).To(BeNumerically(">=", 2*time.Second))
	s := eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionVerified, metav1.ConditionFalse, stagecoachv1.ReasonDeadlineExceeded, "")
	g.Expect(s.Status.Hold).NotTo(BeNil())
	g.Expect(promotionsOf(g, t, ns, "prod")).To(HaveLen(1), "nothing to roll back to")
}

// The controller stops after it applied a version and before the engine proved it; a new one
// finishes the Promotion once: no second write to the Application, one history entry.
func TestRestartFinishesOnce(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	app := newApplication(t, ns, "prod", ociSpec(ns))
	newStage(t, ns, "prod", nil)

	first := startController(t, nil)
	newPromotion(t, ns, "v1", "prod", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
	app.waitForRevision(digest(1), false)
	g.Eventually(func(g Gomega) {
		g.Expect(getPromotion(g, t.Context(), ns, "v1").Status.AppliedAt).NotTo(BeNil())
	}, timeout, interval).Should(Succeed())
	first.stop()

	app.deploy(digest(1), false, "Succeeded", "Healthy")
	second := startController(t, nil)
	eventuallyPhase(t, ns, "v1", stagecoachv1.PhaseSucceeded)
	s := eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionVerified, metav1.ConditionTrue, stagecoachv1.ReasonVerified, digest(1))
	g.Expect(s.Status.History).To(HaveLen(1))
	g.Expect(first.revisionPatches.Load()).To(Equal(int32(1)))
	g.Expect(second.revisionPatches.Load()).To(BeZero())
	g.Consistently(func(g Gomega) {
		g.Expect(getStage(g, t.Context(), ns, "prod").Status.History).To(HaveLen(1))
	}, time.Second, interval).Should(Succeed())
}

// A running Promotion still ends by its deadline when its applier stops being usable meanwhile.
func TestDeadlineWhileApplierUnusable(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	app := newApplication(t, ns, "prod", ociSpec(ns))
	newStage(t, ns, "prod", func(s *stagecoachv1.Stage) {
		s.Spec.Verification.ProgressDeadline = &metav1.Duration{Duration: 2 * time.Second}
	})
	startController(t, nil)

	newPromotion(t, ns, "v1", "prod", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
	app.waitForRevision(digest(1), false)
	app.update(func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, "spec", "syncPolicy") })
	eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionReady, metav1.ConditionFalse, stagecoachv1.ReasonApplierNotAutomated, "")
	p := eventuallyPhase(t, ns, "v1", stagecoachv1.PhaseFailed)
	g.Expect(p.Status.Message).To(ContainSubstring("did not land within the progress deadline of 2s, and the applier cannot be used"))
	g.Expect(p.Status.Message).To(ContainSubstring("does not sync automatically"))
}

// A version soaks upstream for spec.promotion.soak before automation takes it; the Stage says
// until when, and needs no event to go on when the time comes.
func TestSoakHoldsAutomationUntilItOpens(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	stagingApp, prodApp := newPipeline(t, ns,
		&stagecoachv1.PromotionPolicy{Auto: true, Soak: &metav1.Duration{Duration: 3 * time.Second}}, nil)
	startController(t, nil)

	promoteAndLand(t, ns, "staging", stagingApp, "staging-v1", 1)
	staging := getStage(g, t.Context(), ns, "staging")
	verifiedAt := staging.Status.Current.VerifiedAt.Time
	g.Eventually(func(g Gomega) {
		s := getStage(g, t.Context(), ns, "prod")
		g.Expect(s.Status.Candidate).NotTo(BeNil())
		g.Expect(s.Status.Candidate.BlockedBy).To(ContainElement(And(HaveField("Gate", "soak"),
			HaveField("Message", ContainSubstring("the Stage asks for 3s")))))
	}, timeout, interval).Should(Succeed())

	prodApp.deploy(digest(1), false, "Succeeded", "Healthy")
	var auto stagecoachv1.Promotion
	g.Eventually(func(g Gomega) {
		list := promotionsOf(g, t, ns, "prod")
		g.Expect(list).To(HaveLen(1))
		auto = list[0]
		g.Expect(auto.Status.Phase).To(Equal(stagecoachv1.PhaseSucceeded))
	}, timeout, interval).Should(Succeed())
	// Created no earlier than the soak allowed (creation times have one-second resolution).
	g.Expect(auto.CreationTimestamp.Add(time.Second)).To(BeTemporally(">=", verifiedAt.Add(3*time.Second)))
}

// A Rollback passes no gates, so it may only go back to what the Stage verified: with approvals
// required, a Rollback to a digest never promoted there fails and leaves the Application as it
// was, while a Rollback to the verified version runs.
func TestRollbackOnlyToAVerifiedVersion(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	app := newApplication(t, ns, "prod", ociSpec(ns))
	newStage(t, ns, "prod", nil)
	startController(t, nil)
	promoteAndLand(t, ns, "prod", app, "prod-v1", 1)
	eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionVerified, metav1.ConditionTrue, stagecoachv1.ReasonVerified, digest(1))

	// From now on, two approvals are required.
	g.Eventually(func() error {
		s := &stagecoachv1.Stage{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "prod"}, s); err != nil {
			return err
		}
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Approvals: &stagecoachv1.ApprovalPolicy{Required: 2}}
		return env.Client.Update(t.Context(), s)
	}, timeout, interval).Should(Succeed())

	tests := []struct {
		name      string
		digest    string
		wantPhase stagecoachv1.Phase
		wantMsg   string
	}{
		{name: "a digest never promoted here is refused", digest: digest(7), wantPhase: stagecoachv1.PhaseFailed,
			wantMsg: "was never verified in Stage prod"},
		{name: "the verified version runs without approvals", digest: digest(1), wantPhase: stagecoachv1.PhaseRunning},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			name := "prod-rollback-" + string(rune('a'+i))
			newPromotion(t, ns, name, "prod", stagecoachv1.ActionRollback, tt.digest, "")
			p := eventuallyPhase(t, ns, name, tt.wantPhase)
			g.Expect(p.Status.Message).To(ContainSubstring(tt.wantMsg))
			g.Expect(app.desiredRevision(app.get())).To(Equal(digest(1)), "the Application still runs the verified version")
		})
	}
}
