package promotion

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
)

func newApproval(t *testing.T, ns, name, stage, d, approver string, groups ...string) {
	t.Helper()
	NewWithT(t).Expect(env.Client.Create(t.Context(), &stagecoachv1.Approval{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       stagecoachv1.ApprovalSpec{Stage: stage, Digest: d, Approver: approver, Groups: groups},
	})).To(Succeed())
}

// eventuallyBlockedBy waits until the Stage's candidate is held by the gate with a message
// holding every part.
func eventuallyBlockedBy(t *testing.T, ns, stage, gate string, parts ...string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		s := getStage(g, t.Context(), ns, stage)
		g.Expect(s.Status.Candidate).NotTo(BeNil())
		matchers := []types.GomegaMatcher{HaveField("Gate", gate)}
		for _, p := range parts {
			matchers = append(matchers, HaveField("Message", ContainSubstring(p)))
		}
		g.Expect(s.Status.Candidate.BlockedBy).To(ContainElement(And(matchers...)), toJSON(s.Status.Candidate))
	}, timeout, interval).Should(Succeed())
}

// Automation waits for an Approval from a member of the approving group; the person who promoted
// the version upstream cannot approve it.
func TestApprovalsCountWithoutThePromoter(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	stagingApp, prodApp := newPipeline(t, ns, &stagecoachv1.PromotionPolicy{Auto: true,
		Approvals: &stagecoachv1.ApprovalPolicy{Required: 1, Groups: []string{"release-managers"}}}, nil)
	startController(t, nil)

	p := &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "staging-v1"},
		Spec: stagecoachv1.PromotionSpec{Stage: "staging", RequestedBy: "alice",
			Version: &stagecoachv1.VersionReference{Digest: digest(1), Tag: "v1.0.0"}}}
	g.Expect(env.Client.Create(t.Context(), p)).To(Succeed())
	stagingApp.deploy(digest(1), false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, "staging-v1", stagecoachv1.PhaseSucceeded)
	eventuallyBlockedBy(t, ns, "prod", stagecoachv1.GateApprovals, "0 of 1 approvals for "+digest(1), "release-managers")

	newApproval(t, ns, "by-alice", "prod", digest(1), "alice", "release-managers")
	eventuallyBlockedBy(t, ns, "prod", stagecoachv1.GateApprovals, "0 of 1", "alice promoted this version by hand in "+ns+"/staging and cannot approve it")
	newApproval(t, ns, "by-carol", "prod", digest(1), "carol", "developers")
	eventuallyBlockedBy(t, ns, "prod", stagecoachv1.GateApprovals, "carol approved without naming one of those groups")
	g.Consistently(func(g Gomega) {
		g.Expect(promotionsOf(g, t, ns, "prod")).To(BeEmpty())
	}, time.Second, interval).Should(Succeed())

	newApproval(t, ns, "by-bob", "prod", digest(1), "bob", "release-managers")
	auto := onlyPromotion(t, ns, "prod")
	g.Expect(plan.IsAutomatic(&auto)).To(BeTrue())
	g.Expect(auto.Spec.RequestedBy).NotTo(BeEmpty(), "automation names the controller's user")
	prodApp.deploy(digest(1), false, "Succeeded", "Healthy")
	done := eventuallyPhase(t, ns, auto.Name, stagecoachv1.PhaseSucceeded)
	g.Expect(done.Status.Gates).To(ContainElement(And(HaveField("Gate", stagecoachv1.GateApprovals), HaveField("Passed", true))))
}

// A person's Promotion waits for the gates too: a deny window and a dependency on another Stage's
// version. Break-glass passes the window, not the dependency.
func TestWindowAndDependencyHoldAPersonsPromotion(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	baseApp := newApplication(t, ns, "base", ociSpec(ns))
	newStage(t, ns, "base", nil)
	prodApp := newApplication(t, ns, "prod", ociSpec(ns))
	alwaysDenied := stagecoachv1.TimeWindow{Kind: stagecoachv1.WindowDeny, Schedule: "* * * * *", Duration: metav1.Duration{Duration: time.Hour}}
	newStage(t, ns, "prod", func(s *stagecoachv1.Stage) {
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Windows: []stagecoachv1.TimeWindow{alwaysDenied}}
		s.Spec.DependsOn = []stagecoachv1.StageDependency{{Stage: "base", Version: ">=2.0.0"}}
	})
	startController(t, nil)

	newPromotion(t, ns, "prod-v1", "prod", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
	g.Eventually(func(g Gomega) {
		p := getPromotion(g, t.Context(), ns, "prod-v1")
		g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhasePending))
		g.Expect(p.Status.Message).To(And(ContainSubstring("window: inside the deny window"),
			ContainSubstring("dependsOn: depends on Stage "+ns+"/base: not verified: it has no Verified version yet")))
	}, timeout, interval).Should(Succeed())

	glass := &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod-v2-glass"},
		Spec: stagecoachv1.PromotionSpec{Stage: "prod", BreakGlass: true, Version: &stagecoachv1.VersionReference{Digest: digest(2), Tag: "v2.0.0"}}}
	g.Expect(env.Client.Create(t.Context(), glass)).To(Succeed())
	g.Eventually(func(g Gomega) {
		p := getPromotion(g, t.Context(), ns, glass.Name)
		g.Expect(p.Status.Message).To(ContainSubstring("dependsOn:"))
		g.Expect(p.Status.Message).NotTo(ContainSubstring("window:"))
	}, timeout, interval).Should(Succeed())

	// base at v1.9.0 is too old; at v2.1.0 it meets the constraint.
	newPromotion(t, ns, "base-old", "base", stagecoachv1.ActionPromote, digest(19), "v1.9.0")
	baseApp.deploy(digest(19), false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, "base-old", stagecoachv1.PhaseSucceeded)
	g.Eventually(func(g Gomega) {
		g.Expect(getPromotion(g, t.Context(), ns, glass.Name).Status.Message).To(ContainSubstring(`runs v1.9.0, which does not meet ">=2.0.0"`))
	}, timeout, interval).Should(Succeed())
	newPromotion(t, ns, "base-new", "base", stagecoachv1.ActionPromote, digest(21), "v2.1.0")
	baseApp.deploy(digest(21), false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, "base-new", stagecoachv1.PhaseSucceeded)

	// The break-glass Promotion goes first and passes the window; the other still waits for it.
	prodApp.deploy(digest(2), false, "Succeeded", "Healthy")
	done := eventuallyPhase(t, ns, glass.Name, stagecoachv1.PhaseSucceeded)
	g.Expect(done.Status.Gates).To(ContainElements(
		And(HaveField("Gate", stagecoachv1.GateWindow), HaveField("Message", "passed with break-glass")),
		And(HaveField("Gate", stagecoachv1.GateDependsOn), HaveField("Passed", true))))
	// (While the break-glass one ran, prod-v1 said it was queued behind it; now its own gates speak.)
	g.Eventually(func(g Gomega) {
		g.Expect(getPromotion(g, t.Context(), ns, "prod-v1").Status.Message).To(ContainSubstring("window: inside the deny window"))
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		p := getPromotion(g, t.Context(), ns, "prod-v1")
		g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhasePending))
		g.Expect(p.Status.Message).To(ContainSubstring("window: inside the deny window"))
	}, time.Second, interval).Should(Succeed())
}
