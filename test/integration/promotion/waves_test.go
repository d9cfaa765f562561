package promotion

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/fakeargocd"
)

// cluster is one Argo CD cluster of a test fleet, and how its Application names it.
type cluster struct {
	name, region string
	byName       bool // the Application's destination names the cluster; else its server
}

func (c cluster) server() string { return "https://" + c.name + ".clusters.example" }

// newFleet creates an ApplicationSet labelled for the Stage, one cluster Secret per cluster and
// one Application per cluster owned by the ApplicationSet and labelled from its template (as the
// applicationset-controller makes them), and returns the Applications' names.
func newFleet(t *testing.T, ns, stage string, clusters []cluster) []string {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	set := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"generators": []any{map[string]any{"clusters": map[string]any{}}},
		"template": map[string]any{"metadata": map[string]any{"name": "{{name}}-" + stage, "labels": map[string]any{stagecoachv1.StageLabel: stage}},
			"spec": map[string]any{"project": "default", "source": map[string]any{"repoURL": "oci://registry.example/deploy/payments"},
				"destination": map[string]any{"server": "{{server}}"}}},
	}}}
	set.SetAPIVersion("argoproj.io/v1alpha1")
	set.SetKind("ApplicationSet")
	set.SetNamespace(ns)
	set.SetName(stage)
	set.SetLabels(map[string]string{stagecoachv1.StageLabel: stage})
	g.Expect(env.Client.Create(ctx, set)).To(Succeed())

	var names []string
	for _, c := range clusters {
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster-" + c.name,
				Labels: map[string]string{"argocd.argoproj.io/secret-type": "cluster", "region": c.region}},
			StringData: map[string]string{"name": c.name, "server": c.server()},
		}
		g.Expect(env.Client.Create(ctx, secret)).To(Succeed())

		spec := ociSpec(ns)
		if c.byName {
			spec["destination"] = map[string]any{"name": c.name, "namespace": "payments"}
		} else {
			spec["destination"] = map[string]any{"server": c.server(), "namespace": "payments"}
		}
		app := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		app.SetAPIVersion("argoproj.io/v1alpha1")
		app.SetKind("Application")
		app.SetNamespace(ns)
		app.SetName(c.name + "-" + stage)
		app.SetLabels(map[string]string{stagecoachv1.StageLabel: stage})
		app.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "ApplicationSet",
			Name: set.GetName(), UID: set.GetUID(), Controller: ptr(true), BlockOwnerDeletion: ptr(true)}})
		g.Expect(env.Client.Create(ctx, app)).To(Succeed())
		names = append(names, app.GetName())
	}
	return names
}

func ptr[T any](v T) *T { return &v }

// fleetArgoCD plays Argo CD for every Application of a namespace: each revision Stagecoach
// writes is deployed (refresh, sync, health) with the outcome fail gives, and written down in
// the order the writes were seen.
type fleetArgoCD struct {
	mu     sync.Mutex
	synced []string // "<application>@<digest>" in the order Argo CD synced them
	paused atomic.Bool
	held   atomic.Value // the name of an Application not deployed for now
}

func startFleetArgoCD(t *testing.T, ns string, fail func(app, digest string) bool) *fleetArgoCD {
	f := &fleetArgoCD{}
	f.held.Store("")
	ctx := t.Context()
	done := make(chan struct{})
	t.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
			if f.paused.Load() {
				continue
			}
			apps := &unstructured.UnstructuredList{}
			apps.SetAPIVersion("argoproj.io/v1alpha1")
			apps.SetKind("ApplicationList")
			if err := env.Client.List(ctx, apps, client.InNamespace(ns)); err != nil {
				continue
			}
			for i := range apps.Items {
				app := &apps.Items[i]
				rev := fakeargocd.DesiredRevision(app)
				if rev == "" || !fakeargocd.Applied(app, rev) || app.GetName() == f.held.Load().(string) {
					continue
				}
				phase := "Succeeded"
				if fail != nil && fail(app.GetName(), rev) {
					phase = "Failed"
				}
				a := &fakeargocd.App{Client: env.Client, Key: client.ObjectKeyFromObject(app)}
				if err := a.Deploy(ctx, phase, "Healthy"); err != nil {
					continue
				}
				f.mu.Lock()
				f.synced = append(f.synced, app.GetName()+"@"+rev)
				f.mu.Unlock()
			}
		}
	}()
	return f
}

func (f *fleetArgoCD) order() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.synced)
}

func regionNot(values ...string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "region", Operator: metav1.LabelSelectorOpNotIn, Values: values}}}
}

func intOr(n int) *intstr.IntOrString { v := intstr.FromInt32(int32(n)); return &v }

// newWavesStage creates a Stage rolling the ApplicationSet of its name out in three waves: a
// canary in eu, one cluster elsewhere, then the rest two at a time. No grace, so that a target
// is done once it landed.
func newWavesStage(t *testing.T, ns, name string, mutate func(*stagecoachv1.Stage)) *stagecoachv1.Stage {
	return newStage(t, ns, name, func(s *stagecoachv1.Stage) {
		s.Spec.ApplyRef = stagecoachv1.ApplierReference{Kind: "ApplicationSet", Name: name}
		s.Spec.Verification = &stagecoachv1.VerificationPolicy{Grace: &metav1.Duration{}}
		s.Spec.Waves = []stagecoachv1.Wave{
			{Name: "canary", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}}, MaxTargets: intOr(1)},
			{Name: "one elsewhere", Selector: regionNot("eu"), MaxTargets: intOr(1)},
			{Name: "the rest", MaxParallel: intOr(2)},
		}
		if mutate != nil {
			mutate(s)
		}
	})
}

var fiveClusters = []cluster{
	{name: "eu1", region: "eu", byName: true}, {name: "eu2", region: "eu"},
	{name: "us1", region: "us", byName: true}, {name: "us2", region: "us"}, {name: "ap1", region: "ap"},
}

// wavesOf waits for the Stage's wave statuses of a digest to satisfy check, and returns them.
func wavesOf(t *testing.T, ns, name, digest string, check func(g Gomega, ws []stagecoachv1.WaveStatus)) []stagecoachv1.WaveStatus {
	t.Helper()
	var ws []stagecoachv1.WaveStatus
	NewWithT(t).Eventually(func(g Gomega) {
		ws = getStage(g, t.Context(), ns, name).Status.Waves
		g.Expect(ws).NotTo(BeEmpty())
		for _, w := range ws {
			g.Expect(w.Digest).To(Equal(digest), "wave %q", w.Name)
		}
		check(g, ws)
	}, timeout, interval).Should(Succeed())
	return ws
}

func allCompleted(g Gomega, ws []stagecoachv1.WaveStatus) {
	for _, w := range ws {
		g.Expect(w.Phase).To(Equal(stagecoachv1.PhaseSucceeded), "wave %q: %s", w.Name, w.Message)
	}
}

// A fleet rollout: destinations by name and by server, three waves in order, times written
// once, and a new version resets the waves.
func TestWavesRollOutInOrder(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	apps := newFleet(t, ns, "fleet", fiveClusters)
	newWavesStage(t, ns, "fleet", nil)
	ctl := startController(t, nil)
	argo := startFleetArgoCD(t, ns, nil)
	eventuallyCondition(t, ns, "fleet", stagecoachv1.ConditionReady, metav1.ConditionTrue, stagecoachv1.ReasonApplierReady, "5 Applications roll out in 3 waves")

	newPromotion(t, ns, "v1", "fleet", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
	p := eventuallyPhase(t, ns, "v1", stagecoachv1.PhaseSucceeded)
	g.Expect(p.Status.Message).To(ContainSubstring("all 3 waves completed"))
	ws := wavesOf(t, ns, "fleet", digest(1), allCompleted)

	t.Run("every target in exactly one wave, destinations by name and by server", func(t *testing.T) {
		g := NewWithT(t)
		var all []string
		for _, w := range ws {
			g.Expect(w.Completed).To(ConsistOf(w.Targets))
			all = append(all, w.Targets...)
		}
		g.Expect(all).To(ConsistOf(apps))
		g.Expect(ws[0].Targets).To(HaveLen(1))
		g.Expect(ws[0].Targets[0]).To(HavePrefix("eu"))
		g.Expect(ws[1].Targets).To(HaveLen(1))
		g.Expect(ws[1].Targets[0]).NotTo(HavePrefix("eu"))
		g.Expect(ws[2].Targets).To(HaveLen(3))
	})
	t.Run("waves synced in order", func(t *testing.T) {
		g := NewWithT(t)
		order := argo.order()
		g.Expect(order).To(HaveLen(5))
		pos := map[string]int{}
		for i, s := range order {
			pos[s] = i
		}
		for i := 0; i+1 < len(ws); i++ {
			for _, a := range ws[i].Targets {
				for _, b := range ws[i+1].Targets {
					g.Expect(pos[a+"@"+digest(1)]).To(BeNumerically("<", pos[b+"@"+digest(1)]), "%s (wave %d) synced after %s (wave %d)", a, i, b, i+1)
				}
			}
		}
		g.Expect(ctl.revisionPatches.Load()).To(Equal(int32(5)), "each Application is written once")
	})
	t.Run("Stage verified at the version", func(t *testing.T) {
		s := eventuallyCondition(t, ns, "fleet", stagecoachv1.ConditionVerified, metav1.ConditionTrue, stagecoachv1.ReasonVerified, digest(1))
		NewWithT(t).Expect(s.Status.Current.Digest).To(Equal(digest(1)))
	})
	t.Run("a new version resets the waves", func(t *testing.T) {
		g := NewWithT(t)
		argo.paused.Store(true)
		newPromotion(t, ns, "v2", "fleet", stagecoachv1.ActionPromote, digest(2), "v2.0.0")
		reset := wavesOf(t, ns, "fleet", digest(2), func(g Gomega, ws []stagecoachv1.WaveStatus) {
			g.Expect(ws[0].Phase).To(Equal(stagecoachv1.PhaseRunning))
			g.Expect(ws[0].Syncing).To(HaveLen(1))
		})
		for _, w := range reset {
			g.Expect(w.Completed).To(BeEmpty(), "wave %q", w.Name)
			g.Expect(w.FinishedAt).To(BeNil(), "wave %q", w.Name)
		}
		g.Expect(reset[1].Phase).To(Equal(stagecoachv1.PhasePending))
		g.Expect(reset[1].StartedAt).To(BeNil())
		eventuallyCondition(t, ns, "fleet", stagecoachv1.ConditionPromoting, metav1.ConditionTrue, stagecoachv1.ReasonPromoting, "wave \"canary\"")
		t.Run("Verified does not report the previous rollout complete", func(t *testing.T) {
			s := getStage(NewWithT(t), t.Context(), ns, "fleet")
			v := meta.FindStatusCondition(s.Status.Conditions, stagecoachv1.ConditionVerified)
			NewWithT(t).Expect(v).NotTo(BeNil())
			NewWithT(t).Expect(v.Status).NotTo(Equal(metav1.ConditionTrue), "Verified while v2 rolls out: %s: %s", v.Reason, v.Message)
			NewWithT(t).Expect(v.Message).To(ContainSubstring(digest(2)))
		})
		argo.held.Store(ws[1].Targets[0]) // the second wave stays syncing
		argo.paused.Store(false)
		mid := wavesOf(t, ns, "fleet", digest(2), func(g Gomega, ws []stagecoachv1.WaveStatus) {
			g.Expect(ws[0].Phase).To(Equal(stagecoachv1.PhaseSucceeded))
			g.Expect(ws[1].Phase).To(Equal(stagecoachv1.PhaseRunning))
		})
		t.Run("startedAt and finishedAt are written once", func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(mid[0].StartedAt).NotTo(BeNil())
			g.Expect(mid[0].FinishedAt).NotTo(BeNil())
			g.Expect(mid[1].StartedAt).NotTo(BeNil())
			// Later reconciles (a requested one, a second later) keep them, as the seed's
			// controller did not.
			time.Sleep(1100 * time.Millisecond)
			g.Eventually(func(g Gomega) { // retried: the controller writes the Stage's status meanwhile
				s := getStage(g, t.Context(), ns, "fleet")
				s.Annotations = map[string]string{stagecoachv1.ReconcileRequestAnnotation: "now"}
				g.Expect(env.Client.Update(t.Context(), s)).To(Succeed())
			}, timeout, interval).Should(Succeed())
			g.Eventually(func(g Gomega) {
				g.Expect(getStage(g, t.Context(), ns, "fleet").Status.LastHandledReconcileAt).To(Equal("now"))
			}, timeout, interval).Should(Succeed())
			again := getStage(g, t.Context(), ns, "fleet").Status.Waves
			g.Expect(again[0].StartedAt.Equal(mid[0].StartedAt)).To(BeTrue(), "wave 1 startedAt moved")
			g.Expect(again[0].FinishedAt.Equal(mid[0].FinishedAt)).To(BeTrue(), "wave 1 finishedAt moved")
			g.Expect(again[1].StartedAt.Equal(mid[1].StartedAt)).To(BeTrue(), "wave 2 startedAt moved")
		})
		argo.held.Store("")
		eventuallyPhase(t, ns, "v2", stagecoachv1.PhaseSucceeded)
		wavesOf(t, ns, "fleet", digest(2), allCompleted)
	})
}

// A plan that leaves clusters out is refused by default, naming them; a cluster Secret whose
// labels change wakes the Stage (its watch), and the plan is taken once it selects every cluster.
func TestWavesPartialPlanRefused(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	newFleet(t, ns, "fleet", fiveClusters)
	newWavesStage(t, ns, "fleet", func(s *stagecoachv1.Stage) {
		s.Spec.Waves = []stagecoachv1.Wave{{Name: "eu only", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}}}}
	})
	startController(t, nil)
	s := eventuallyCondition(t, ns, "fleet", stagecoachv1.ConditionReady, metav1.ConditionFalse, stagecoachv1.ReasonWavePlanRefused, "leave 3 of 5 targets out")
	msg := meta.FindStatusCondition(s.Status.Conditions, stagecoachv1.ConditionReady).Message
	g.Expect(msg).To(ContainSubstring("allowPartial: true"))
	g.Expect(msg).To(ContainSubstring("us1-fleet (us1)"))

	for _, c := range fiveClusters[2:] {
		secret := &corev1.Secret{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "cluster-" + c.name}, secret)).To(Succeed())
		secret.Labels["region"] = "eu"
		g.Expect(env.Client.Update(t.Context(), secret)).To(Succeed())
	}
	eventuallyCondition(t, ns, "fleet", stagecoachv1.ConditionReady, metav1.ConditionTrue, stagecoachv1.ReasonApplierReady, "5 Applications roll out in 1 waves")
}

// canaryHeldInSync starts promoting v1 over five clusters while Argo CD holds every sync: the
// canary is written and syncing, nothing else yet.
func canaryHeldInSync(t *testing.T) (string, *runningController, *fleetArgoCD) {
	t.Helper()
	ns := newNamespace(t)
	newFleet(t, ns, "fleet", fiveClusters)
	newWavesStage(t, ns, "fleet", nil)
	ctl := startController(t, nil)
	argo := startFleetArgoCD(t, ns, nil)
	argo.paused.Store(true)
	newPromotion(t, ns, "v1", "fleet", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
	wavesOf(t, ns, "fleet", digest(1), func(g Gomega, ws []stagecoachv1.WaveStatus) { g.Expect(ws[0].Syncing).To(HaveLen(1)) })
	return ns, ctl, argo
}

// Suspend stops the rollout where it is and says so; resuming goes on.
func TestWavesSuspend(t *testing.T) {
	g := NewWithT(t)
	ns, ctl, argo := canaryHeldInSync(t)

	setSuspend(t, ns, "fleet", true) // retried: the controller writes the Stage's status meanwhile
	eventuallyCondition(t, ns, "fleet", stagecoachv1.ConditionPromoting, metav1.ConditionUnknown, stagecoachv1.ReasonSuspended, "is suspended")
	// Counted from here: a write of the canary repeated before the suspend was seen (a status
	// write that lost a race is retried from a cache that may not show the first write yet)
	// is not one made while suspended.
	written := ctl.revisionPatches.Load()
	argo.paused.Store(false)
	// The canary lands, but nothing more is written while suspended.
	g.Eventually(argo.order, timeout, interval).Should(HaveLen(1))
	g.Consistently(func(g Gomega) {
		g.Expect(ctl.revisionPatches.Load()).To(Equal(written))
		g.Expect(appsAt(g, t.Context(), ns, digest(1))).To(HaveLen(1))
	}, 2*time.Second, interval).Should(Succeed())
	g.Expect(getPromotion(g, t.Context(), ns, "v1").Status.Message).To(ContainSubstring("suspended"))
	// The second wave is next, but nothing of it was promoted: it has not started.
	ws := wavesOf(t, ns, "fleet", digest(1), func(g Gomega, ws []stagecoachv1.WaveStatus) {
		g.Expect(ws[0].Phase).To(Equal(stagecoachv1.PhaseSucceeded), ws[0].Message)
	})
	g.Expect(ws[1].Syncing).To(BeEmpty())
	g.Expect(ws[1].StartedAt).To(BeNil(), "wave %q is stamped started while the Stage is suspended: %s", ws[1].Name, ws[1].Message)
	g.Expect(ws[1].Phase).To(Equal(stagecoachv1.PhasePending), ws[1].Message)

	setSuspend(t, ns, "fleet", false)
	eventuallyPhase(t, ns, "v1", stagecoachv1.PhaseSucceeded)
	g.Expect(appsAt(g, t.Context(), ns, digest(1))).To(HaveLen(len(fiveClusters)))
	g.Expect(ctl.revisionPatches.Load()).To(BeNumerically(">=", written+int32(len(fiveClusters)-1)))
}

// appsAt names the Applications of a namespace whose desired revision is digest.
func appsAt(g Gomega, ctx context.Context, ns, digest string) []string {
	apps := &unstructured.UnstructuredList{}
	apps.SetAPIVersion("argoproj.io/v1alpha1")
	apps.SetKind("ApplicationList")
	g.Expect(env.Client.List(ctx, apps, client.InNamespace(ns))).To(Succeed())
	var names []string
	for i := range apps.Items {
		if fakeargocd.DesiredRevision(&apps.Items[i]) == digest {
			names = append(names, apps.Items[i].GetName())
		}
	}
	return names
}

// Abort cancels the running rollout: phase Aborted, the reason recorded, nothing more written.
func TestWavesAbort(t *testing.T) {
	g := NewWithT(t)
	ns, ctl, argo := canaryHeldInSync(t)

	abort := &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stop"},
		Spec: stagecoachv1.PromotionSpec{Stage: "fleet", Action: stagecoachv1.ActionAbort, Reason: "canary looks wrong"}}
	g.Expect(env.Client.Create(t.Context(), abort)).To(Succeed())
	p := eventuallyPhase(t, ns, "v1", stagecoachv1.PhaseAborted)
	g.Expect(p.Status.Message).To(ContainSubstring("canary looks wrong"))
	g.Expect(p.Status.Message).To(ContainSubstring("Promotion stop"))
	eventuallyPhase(t, ns, "stop", stagecoachv1.PhaseSucceeded)
	ws := getStage(g, t.Context(), ns, "fleet").Status.Waves
	g.Expect(ws[0].Message).To(ContainSubstring("canary looks wrong"))
	g.Expect(ws[0].FinishedAt).NotTo(BeNil())
	for _, w := range ws {
		g.Expect(w.Phase).To(Equal(stagecoachv1.PhaseAborted), "wave %q: %s", w.Name, w.Message)
	}

	written := ctl.revisionPatches.Load()
	argo.paused.Store(false)
	g.Consistently(func(g Gomega) {
		g.Expect(ctl.revisionPatches.Load()).To(Equal(written), "nothing is written after the abort")
		g.Expect(appsAt(g, t.Context(), ns, digest(1))).To(HaveLen(1), "only the canary runs the aborted version")
	}, 2*time.Second, interval).Should(Succeed())
	// Automation holds until a person promotes again.
	eventuallyCondition(t, ns, "fleet", stagecoachv1.ConditionStalled, metav1.ConditionTrue, stagecoachv1.ReasonHeld, "v1 was aborted")
}

// A failure past maxFailures halts the rollout and rolls every moved target back.
func TestWavesFailureHaltsAndRollsBack(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	apps := newFleet(t, ns, "fleet", fiveClusters)
	newWavesStage(t, ns, "fleet", nil)
	ctl := startController(t, nil)
	var failing atomic.Value
	failing.Store("")
	argo := startFleetArgoCD(t, ns, func(app, d string) bool { return d == digest(2) && app == failing.Load().(string) })
	newPromotion(t, ns, "v1", "fleet", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
	eventuallyPhase(t, ns, "v1", stagecoachv1.PhaseSucceeded)
	ws := wavesOf(t, ns, "fleet", digest(1), allCompleted)
	failing.Store(ws[1].Targets[0]) // the second wave's target fails v2
	before := ctl.revisionPatches.Load()

	newPromotion(t, ns, "v2", "fleet", stagecoachv1.ActionPromote, digest(2), "v2.0.0")
	p := eventuallyPhase(t, ns, "v2", stagecoachv1.PhaseRolledBack)
	g.Expect(p.Status.Message).To(ContainSubstring("more than maxFailures allows"))
	g.Expect(p.Status.Message).To(ContainSubstring(ws[1].Targets[0]))
	eventuallyCondition(t, ns, "fleet", stagecoachv1.ConditionVerified, metav1.ConditionTrue, stagecoachv1.ReasonRolledBack, digest(1))

	t.Run("the third wave was never promoted", func(t *testing.T) {
		g := NewWithT(t)
		for _, s := range argo.order() {
			for _, a := range ws[2].Targets {
				g.Expect(s).NotTo(Equal(a + "@" + digest(2)))
			}
		}
		// Two targets moved to v2 and two moved back.
		g.Expect(ctl.revisionPatches.Load() - before).To(Equal(int32(4)))
	})
	t.Run("every target runs the previous version again", func(t *testing.T) {
		g := NewWithT(t)
		for _, name := range apps {
			a := &fakeargocd.App{Client: env.Client, Key: client.ObjectKey{Namespace: ns, Name: name}}
			u, err := a.Get(t.Context())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(fakeargocd.DesiredRevision(u)).To(Equal(digest(1)), "Application %s", name)
		}
	})
	t.Run("the halted wave says why", func(t *testing.T) {
		g := NewWithT(t)
		s := getStage(g, t.Context(), ns, "fleet")
		g.Expect(s.Status.Waves).NotTo(BeEmpty())
		g.Expect(s.Status.Waves[0].Digest).To(Equal(digest(1)), "the rollback's waves are the status now")
		var h []string
		for _, e := range s.Status.History {
			h = append(h, fmt.Sprintf("%s:%s", e.Promotion, e.Phase))
		}
		g.Expect(h).To(ContainElement("v2:Failed"))
	})
}

// Abort, Freeze and Unfreeze act while the Stage is not Ready (its ApplicationSet lost its
// label): a person must be able to stop or freeze a rollout whatever became of its applier.
func TestWavesControlsWhileNotReady(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	newFleet(t, ns, "fleet", fiveClusters)
	newWavesStage(t, ns, "fleet", nil)
	startController(t, nil)
	argo := startFleetArgoCD(t, ns, nil)
	argo.paused.Store(true)
	newPromotion(t, ns, "v1", "fleet", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
	wavesOf(t, ns, "fleet", digest(1), func(g Gomega, ws []stagecoachv1.WaveStatus) { g.Expect(ws[0].Syncing).To(HaveLen(1)) })

	set := &unstructured.Unstructured{}
	set.SetAPIVersion("argoproj.io/v1alpha1")
	set.SetKind("ApplicationSet")
	g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "fleet"}, set)).To(Succeed())
	set.SetLabels(nil)
	g.Expect(env.Client.Update(t.Context(), set)).To(Succeed())
	eventuallyCondition(t, ns, "fleet", stagecoachv1.ConditionReady, metav1.ConditionFalse, stagecoachv1.ReasonApplierUnlabelled, "")

	control := func(name string, action stagecoachv1.PromotionAction) {
		p := &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: stagecoachv1.PromotionSpec{Stage: "fleet", Action: action, Reason: "the ApplicationSet is being repaired"}}
		g.Expect(env.Client.Create(t.Context(), p)).To(Succeed())
	}
	t.Run("Freeze", func(t *testing.T) {
		control("freeze", stagecoachv1.ActionFreeze)
		eventuallyPhase(t, ns, "freeze", stagecoachv1.PhaseSucceeded)
		eventuallyCondition(t, ns, "fleet", stagecoachv1.ConditionFrozen, metav1.ConditionTrue, stagecoachv1.ReasonFrozenByPromotion, "freeze")
	})
	t.Run("Unfreeze", func(t *testing.T) {
		control("unfreeze", stagecoachv1.ActionUnfreeze)
		eventuallyPhase(t, ns, "unfreeze", stagecoachv1.PhaseSucceeded)
		eventuallyCondition(t, ns, "fleet", stagecoachv1.ConditionFrozen, metav1.ConditionFalse, stagecoachv1.ReasonUnfrozen, "unfreeze")
	})
	t.Run("Abort", func(t *testing.T) {
		control("stop", stagecoachv1.ActionAbort)
		eventuallyPhase(t, ns, "stop", stagecoachv1.PhaseSucceeded)
		p := eventuallyPhase(t, ns, "v1", stagecoachv1.PhaseAborted)
		NewWithT(t).Expect(p.Status.Message).To(ContainSubstring("the ApplicationSet is being repaired"))
	})
}
