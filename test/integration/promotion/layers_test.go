package promotion

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// Layers base → mgmt → apps: apps starts only when base and mgmt are Verified and settled. While
// base moves to a new version, apps waits and says which dependency and why, and the moment the
// last dependency settles apps starts (its Promotion finishing wakes it, no polling).
func TestLayersWaitForSettledDependencies(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	baseApp := newApplication(t, ns, "base", ociSpec(ns))
	mgmtApp := newApplication(t, ns, "mgmt", ociSpec(ns))
	appsApp := newApplication(t, ns, "apps", ociSpec(ns))
	newStage(t, ns, "base", nil)
	newStage(t, ns, "mgmt", func(s *stagecoachv1.Stage) {
		s.Spec.DependsOn = []stagecoachv1.StageDependency{{Stage: "base"}}
	})
	newStage(t, ns, "apps", func(s *stagecoachv1.Stage) {
		s.Spec.DependsOn = []stagecoachv1.StageDependency{{Stage: "base", Version: ">=2.0.0"}, {Stage: "mgmt"}}
	})
	startController(t, nil)

	newPromotion(t, ns, "base-1", "base", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
	baseApp.deploy(digest(1), false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, "base-1", stagecoachv1.PhaseSucceeded)
	newPromotion(t, ns, "mgmt-1", "mgmt", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
	mgmtApp.deploy(digest(1), false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, "mgmt-1", stagecoachv1.PhaseSucceeded)

	// base is moving to v2 (applied, not landed yet): apps waits although base is still Verified at v1.
	newPromotion(t, ns, "base-2", "base", stagecoachv1.ActionPromote, digest(2), "v2.0.0")
	eventuallyPhase(t, ns, "base-2", stagecoachv1.PhaseRunning)
	newPromotion(t, ns, "apps-1", "apps", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
	g.Eventually(func(g Gomega) {
		p := getPromotion(g, t.Context(), ns, "apps-1")
		g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhasePending))
		g.Expect(p.Status.Message).To(ContainSubstring("dependsOn: depends on Stage " + ns + "/base: still promoting: Promote Promotion base-2 (Running)"))
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(getPromotion(g, t.Context(), ns, "apps-1").Status.Phase).To(Equal(stagecoachv1.PhasePending))
	}, time.Second, interval).Should(Succeed())

	// base lands v2 and settles: apps starts at once.
	baseApp.deploy(digest(2), false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, "base-2", stagecoachv1.PhaseSucceeded)
	eventuallyPhase(t, ns, "apps-1", stagecoachv1.PhaseRunning)
	appsApp.deploy(digest(1), false, "Succeeded", "Healthy")
	done := eventuallyPhase(t, ns, "apps-1", stagecoachv1.PhaseSucceeded)
	g.Expect(done.Status.Gates).To(ContainElement(And(HaveField("Gate", stagecoachv1.GateDependsOn), HaveField("Passed", true))))
}

// A dependsOn cycle is refused with the cycle listed; a Kubernetes version prerequisite holds a
// Promotion when the cluster does not meet it and passes when it does (envtest's API server runs
// the Kubernetes version test/envbin builds).
func TestCycleAndKubernetesPrerequisite(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	newApplication(t, ns, "a", ociSpec(ns))
	newApplication(t, ns, "b", ociSpec(ns))
	newStage(t, ns, "a", func(s *stagecoachv1.Stage) { s.Spec.DependsOn = []stagecoachv1.StageDependency{{Stage: "b"}} })
	newStage(t, ns, "b", func(s *stagecoachv1.Stage) { s.Spec.DependsOn = []stagecoachv1.StageDependency{{Stage: "a"}} })
	oldApp := newApplication(t, ns, "old", ociSpec(ns))
	newStage(t, ns, "old", func(s *stagecoachv1.Stage) {
		s.Spec.Prerequisites = &stagecoachv1.Prerequisites{KubernetesVersion: ">=1.20.0"}
	})
	newApplication(t, ns, "future", ociSpec(ns))
	newStage(t, ns, "future", func(s *stagecoachv1.Stage) {
		s.Spec.Prerequisites = &stagecoachv1.Prerequisites{KubernetesVersion: ">=9.0.0"}
	})
	startController(t, nil)

	eventuallyCondition(t, ns, "a", stagecoachv1.ConditionReady, metav1.ConditionFalse, stagecoachv1.ReasonDependencyCycle,
		ns+"/a -> "+ns+"/b -> "+ns+"/a")
	eventuallyCondition(t, ns, "b", stagecoachv1.ConditionStalled, metav1.ConditionTrue, stagecoachv1.ReasonDependencyCycle,
		ns+"/b -> "+ns+"/a -> "+ns+"/b")

	newPromotion(t, ns, "future-1", "future", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
	g.Eventually(func(g Gomega) {
		p := getPromotion(g, t.Context(), ns, "future-1")
		g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhasePending))
		g.Expect(p.Status.Message).To(MatchRegexp(`prerequisites: the API server runs Kubernetes v1\.[0-9.]+, which does not meet spec.prerequisites.kubernetesVersion ">=9.0.0"`))
	}, timeout, interval).Should(Succeed())

	newPromotion(t, ns, "old-1", "old", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
	oldApp.deploy(digest(1), false, "Succeeded", "Healthy")
	done := eventuallyPhase(t, ns, "old-1", stagecoachv1.PhaseSucceeded)
	g.Expect(done.Status.Gates).To(ContainElement(And(HaveField("Gate", stagecoachv1.GatePrereqs), HaveField("Passed", true),
		HaveField("Message", ContainSubstring(`meets ">=1.20.0"`)))))
}

// Suspend: a Promotion already running finishes (and the Stage says it will), one created while
// suspended waits and says why, the Stage says it is suspended, and resuming lets it start.
func TestSuspendFinishesTheRunningAndHoldsTheRest(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	app := newApplication(t, ns, "prod", ociSpec(ns))
	newStage(t, ns, "prod", nil)
	startController(t, nil)

	newPromotion(t, ns, "prod-1", "prod", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
	eventuallyPhase(t, ns, "prod-1", stagecoachv1.PhaseRunning)
	setSuspend(t, ns, "prod", true)
	eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionPromoting, metav1.ConditionTrue, stagecoachv1.ReasonPromoting,
		"the Stage is suspended: this Promotion finishes, nothing else starts")
	app.deploy(digest(1), false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, "prod-1", stagecoachv1.PhaseSucceeded)
	eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionPromoting, metav1.ConditionFalse, stagecoachv1.ReasonSuspended,
		"Stage prod is suspended: no Promotion starts")

	newPromotion(t, ns, "prod-2", "prod", stagecoachv1.ActionPromote, digest(2), "v2.0.0")
	g.Eventually(func(g Gomega) {
		p := getPromotion(g, t.Context(), ns, "prod-2")
		g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhasePending))
		g.Expect(p.Status.Message).To(ContainSubstring("Stage prod is suspended"))
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(getPromotion(g, t.Context(), ns, "prod-2").Status.Phase).To(Equal(stagecoachv1.PhasePending))
	}, time.Second, interval).Should(Succeed())

	setSuspend(t, ns, "prod", false)
	eventuallyPhase(t, ns, "prod-2", stagecoachv1.PhaseRunning)
}

func setSuspend(t *testing.T, ns, name string, suspend bool) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		s := getStage(g, t.Context(), ns, name)
		s.Spec.Suspend = suspend
		g.Expect(env.Client.Update(t.Context(), s)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

// A Stage whose upstream Stage does not exist cannot learn of versions: Ready=False with the
// source's reason and what to do; it turns Ready once the upstream exists.
func TestMissingUpstreamMakesTheStageNotReady(t *testing.T) {
	ns := newNamespace(t)
	newApplication(t, ns, "prod", ociSpec(ns))
	newStage(t, ns, "prod", func(s *stagecoachv1.Stage) {
		s.Spec.Source = stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "staging"}}
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true}
	})
	startController(t, nil)
	eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionReady, metav1.ConditionFalse, stagecoachv1.ReasonUpstreamUnreadable,
		"Stage prod cannot read its source: upstream Stage '"+ns+"/staging' does not exist: create it or fix spec.source.upstream")
	newApplication(t, ns, "staging", ociSpec(ns))
	newStage(t, ns, "staging", nil)
	askToLook(t, ns, "prod")
	eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionReady, metav1.ConditionTrue, stagecoachv1.ReasonApplierReady, "")
}
