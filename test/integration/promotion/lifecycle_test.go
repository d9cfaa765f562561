package promotion

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// Each way an Application can be unfit is reported on the Stage, and fixing it is picked up.
func TestArgoCDApplierValidation(t *testing.T) {
	cases := []struct {
		name       string
		mutate     func(spec map[string]any)
		condType   string
		status     metav1.ConditionStatus
		reason     string
		msg        string
		fix        func(spec map[string]any)
		fixedReady bool
		// mediatedFalse: Mediated turns False with the same reason (it must not just disappear).
		mediatedFalse bool
	}{
		{name: "multi-source", condType: stagecoachv1.ConditionReady, status: metav1.ConditionFalse, reason: stagecoachv1.ReasonApplierMultiSource,
			msg: "has 2 entries in spec.sources", mediatedFalse: true,
			mutate: func(s map[string]any) {
				src := s["source"]
				delete(s, "source")
				s["sources"] = []any{src, map[string]any{"repoURL": "oci://registry.example/other", "path": "."}}
			}},
		{name: "not OCI", condType: stagecoachv1.ConditionReady, status: metav1.ConditionFalse, reason: stagecoachv1.ReasonApplierNotOCI,
			msg:    `source "https://git.example/payments.git", which is not OCI and does not use the stagecoach plugin`,
			mutate: func(s map[string]any) { s["source"].(map[string]any)["repoURL"] = "https://git.example/payments.git" },
			fix: func(s map[string]any) {
				s["source"].(map[string]any)["plugin"] = map[string]any{"name": "stagecoach"}
			}, fixedReady: true},
		{name: "not automated", condType: stagecoachv1.ConditionReady, status: metav1.ConditionFalse, reason: stagecoachv1.ReasonApplierNotAutomated,
			msg:    "does not sync automatically: set spec.syncPolicy.automated",
			mutate: func(s map[string]any) { delete(s, "syncPolicy") },
			fix:    func(s map[string]any) { s["syncPolicy"] = map[string]any{"automated": map[string]any{}} }, fixedReady: true},
		{name: "kustomize images", condType: stagecoachv1.ConditionMediated, status: metav1.ConditionFalse, reason: stagecoachv1.ReasonNotMediated,
			msg: "sets spec.source.kustomize.images: something besides the digest decides what runs",
			mutate: func(s map[string]any) {
				s["source"].(map[string]any)["kustomize"] = map[string]any{"images": []any{"app=app:v9"}}
			}},
		{name: "helm values", condType: stagecoachv1.ConditionMediated, status: metav1.ConditionFalse, reason: stagecoachv1.ReasonNotMediated,
			msg: "spec.source.helm.valueFiles",
			mutate: func(s map[string]any) {
				s["source"].(map[string]any)["helm"] = map[string]any{"valueFiles": []any{"prod.yaml"}}
			}},
		{name: "fit", condType: stagecoachv1.ConditionMediated, status: metav1.ConditionTrue, reason: stagecoachv1.ReasonMediated,
			msg: "only the promoted digest decides what it runs", mutate: func(map[string]any) {}},
	}
	startController(t, nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			spec := ociSpec(ns)
			tc.mutate(spec)
			app := newApplication(t, ns, "payments", spec)
			newStage(t, ns, "payments", nil)
			eventuallyCondition(t, ns, "payments", tc.condType, tc.status, tc.reason, fmt.Sprintf("Application '%s/payments'", ns))
			eventuallyCondition(t, ns, "payments", tc.condType, tc.status, tc.reason, tc.msg)
			if tc.mediatedFalse {
				eventuallyCondition(t, ns, "payments", stagecoachv1.ConditionMediated, metav1.ConditionFalse, tc.reason, tc.msg)
			}
			if tc.fix != nil {
				app.update(func(u *unstructured.Unstructured) {
					s, _, _ := unstructured.NestedMap(u.Object, "spec")
					tc.fix(s)
					_ = unstructured.SetNestedMap(u.Object, s, "spec")
				})
				eventuallyCondition(t, ns, "payments", stagecoachv1.ConditionReady, metav1.ConditionTrue, stagecoachv1.ReasonApplierReady, "")
			}
		})
	}
}

// A person promotes a digest: Stagecoach writes it and asks for a refresh, Argo CD syncs, and
// only the full proof held through the grace period makes it Verified.
func TestPromoteLandsAndVerifies(t *testing.T) {
	for _, plugin := range []bool{false, true} {
		t.Run(fmt.Sprintf("plugin=%v", plugin), func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			spec := ociSpec(ns)
			if plugin {
				spec["source"] = map[string]any{"repoURL": "https://git.example/payments.git", "path": "app", "targetRevision": "main",
					"plugin": map[string]any{"name": "stagecoach", "env": []any{map[string]any{"name": "STAGE", "value": "prod"}}}}
			}
			app := newApplication(t, ns, "payments", spec)
			newStage(t, ns, "payments", nil)
			ctl := startController(t, nil)

			newPromotion(t, ns, "v1", "payments", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
			eventuallyPhase(t, ns, "v1", stagecoachv1.PhaseRunning)
			app.waitForRevision(digest(1), plugin)
			annotations := app.get().GetAnnotations()
			g.Expect(annotations).To(HaveKeyWithValue(stagecoachv1.VersionAnnotation, "v1.0.0@"+digest(1)))
			g.Expect(annotations).To(HaveKeyWithValue(stagecoachv1.PromotionAnnotation, "v1"))
			g.Expect(annotations).To(HaveKeyWithValue(stagecoachv1.PhaseAnnotation, "Running"))
			eventuallyCondition(t, ns, "payments", stagecoachv1.ConditionPromoting, metav1.ConditionTrue, stagecoachv1.ReasonPromoting, "Promotion v1")

			app.deploy(digest(1), plugin, "Succeeded", "Healthy")
			p := eventuallyPhase(t, ns, "v1", stagecoachv1.PhaseSucceeded)
			g.Expect(p.Status.AppliedAt).NotTo(BeNil())
			g.Expect(p.Status.LandedAt).NotTo(BeNil())
			g.Expect(p.Status.VerifiedAt).NotTo(BeNil())
			g.Expect(p.Status.VerifiedAt.Sub(p.Status.LandedAt.Time)).To(BeNumerically(">=", time.Second), "landed must hold for the grace period")
			g.Expect(p.Status.Message).To(ContainSubstring("verified: operation Succeeded at " + digest(1)))

			s := eventuallyCondition(t, ns, "payments", stagecoachv1.ConditionVerified, metav1.ConditionTrue, stagecoachv1.ReasonVerified, "v1.0.0@"+digest(1))
			g.Expect(s.Status.Current).NotTo(BeNil())
			g.Expect(s.Status.Current.Digest).To(Equal(digest(1)))
			g.Expect(s.Status.Current.Version).To(Equal("v1.0.0"))
			g.Expect(s.Status.Current.Promotion).To(Equal("v1"))
			g.Expect(s.Status.History).To(HaveLen(1))
			g.Expect(s.Status.History[0].Phase).To(Equal(stagecoachv1.PhaseSucceeded))
			eventuallyCondition(t, ns, "payments", stagecoachv1.ConditionPromoting, metav1.ConditionFalse, stagecoachv1.ReasonIdle, "")
			g.Eventually(func() map[string]string { return app.get().GetAnnotations() }, timeout, interval).
				Should(HaveKeyWithValue(stagecoachv1.PhaseAnnotation, "Succeeded"))
			g.Expect(ctl.revisionPatches.Load()).To(Equal(int32(1)))

			// Events tell the story on the Promotion.
			g.Eventually(func(g Gomega) {
				var events eventsv1.EventList
				g.Expect(env.Client.List(t.Context(), &events, client.InNamespace(ns))).To(Succeed())
				var reasons []string
				for _, e := range events.Items {
					if e.Regarding.Kind == "Promotion" && e.Regarding.Name == "v1" {
						reasons = append(reasons, e.Reason)
					}
				}
				g.Expect(reasons).To(ContainElements("Promoted", "Landed", "Verified"))
			}, timeout, interval).Should(Succeed())
		})
	}
}

// The classic race: right after the sync, Argo CD still reports Healthy from the previous
// revision (reconciled before the sync finished). That is not landed.
func TestStaleHealthIsNotLanded(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	app := newApplication(t, ns, "payments", ociSpec(ns))
	app.assess("Healthy", time.Now().Add(-time.Minute)) // healthy at the old version
	newStage(t, ns, "payments", nil)
	startController(t, nil)

	newPromotion(t, ns, "v2", "payments", stagecoachv1.ActionPromote, digest(2), "v2")
	app.waitForRevision(digest(2), false)
	now := time.Now()
	app.refresh(now.Add(-5 * time.Second))
	app.sync("Succeeded", "successfully synced", now, now)
	// Synced at the digest, Healthy, but reconciled five seconds before the sync finished.
	app.assess("Healthy", now.Add(-5*time.Second))

	notLanded := func(g Gomega) {
		p := getPromotion(g, t.Context(), ns, "v2")
		g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhaseRunning))
		g.Expect(p.Status.LandedAt).To(BeNil())
		g.Expect(p.Status.Message).To(ContainSubstring("before the sync finished"))
	}
	g.Eventually(notLanded, timeout, interval).Should(Succeed())
	g.Consistently(notLanded, 2*time.Second, interval).Should(Succeed())

	app.assess("Healthy", time.Now())
	eventuallyPhase(t, ns, "v2", stagecoachv1.PhaseSucceeded)
}

// What the applier runs when a Stage takes it over is adopted, not taken for someone else's
// write: the first promote replaces it. After that, a targetRevision Stagecoach did not write
// freezes the Stage instead of being overwritten, and an Unfreeze Promotion lifts it.
func TestTakeoverAdoptsThenForeignWriteFreezes(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	spec := ociSpec(ns)
	spec["source"].(map[string]any)["targetRevision"] = "v9.9.9"
	app := newApplication(t, ns, "payments", spec)
	newStage(t, ns, "payments", nil)
	ctl := startController(t, nil)

	// Adopted on the Stage's first reconcile, before anything is promoted; status.adopted is the
	// record (no Event: 5,000 of them at an install were noise, issue 21).
	g.Eventually(func(g Gomega) {
		s := getStage(g, t.Context(), ns, "payments")
		g.Expect(s.Status.Adopted).NotTo(BeNil())
		g.Expect(s.Status.Adopted.Revision).To(Equal("v9.9.9"))
		g.Expect(s.Status.LastAppliedDigest).To(Equal("v9.9.9"))
		g.Expect(s.Status.Adopted.At.IsZero()).To(BeFalse())
		g.Expect(eventNotes(g, t.Context(), ns, "Adopted", "payments")).To(BeEmpty())
	}, timeout, interval).Should(Succeed())

	newPromotion(t, ns, "v1", "payments", stagecoachv1.ActionPromote, digest(1), "v1")
	eventuallyPhase(t, ns, "v1", stagecoachv1.PhaseRunning)
	app.waitForRevision(digest(1), false)
	// The API server shows the write before the controller's Patch call returns and counts it.
	g.Eventually(ctl.revisionPatches.Load, timeout, interval).Should(Equal(int32(1)))
	app.deploy(digest(1), false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, "v1", stagecoachv1.PhaseSucceeded)
	g.Expect(getStage(g, t.Context(), ns, "payments").Status.Conditions).NotTo(ContainElement(
		And(HaveField("Type", stagecoachv1.ConditionFrozen), HaveField("Status", metav1.ConditionTrue))))

	// Once the Stage has taken over, a value someone else writes is a foreign write.
	app.update(func(u *unstructured.Unstructured) {
		g.Expect(unstructured.SetNestedField(u.Object, "v8.8.8", "spec", "source", "targetRevision")).To(Succeed())
	})
	newPromotion(t, ns, "v2", "payments", stagecoachv1.ActionPromote, digest(2), "v2")
	p := eventuallyPhase(t, ns, "v2", stagecoachv1.PhaseAborted)
	g.Expect(p.Status.Message).To(ContainSubstring(`runs "v8.8.8", which Stagecoach did not write: someone else changed it`))
	eventuallyCondition(t, ns, "payments", stagecoachv1.ConditionFrozen, metav1.ConditionTrue, stagecoachv1.ReasonForeignWrite,
		`create an Unfreeze Promotion (stagecoach unfreeze -n `+ns+` --stage payments) and promote again`)
	g.Expect(app.desiredRevision(app.get())).To(Equal("v8.8.8"))
	g.Expect(ctl.revisionPatches.Load()).To(Equal(int32(1)))

	// While frozen, a new Promotion waits and says why.
	newPromotion(t, ns, "v2-again", "payments", stagecoachv1.ActionPromote, digest(2), "v2")
	g.Eventually(func(g Gomega) {
		p := getPromotion(g, t.Context(), ns, "v2-again")
		g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhasePending))
		g.Expect(p.Status.Message).To(ContainSubstring("is frozen"))
	}, timeout, interval).Should(Succeed())

	// Unfreezing accepts the value found there; the waiting Promotion then applies over it.
	newPromotion(t, ns, "unfreeze", "payments", stagecoachv1.ActionUnfreeze, "", "")
	eventuallyPhase(t, ns, "unfreeze", stagecoachv1.PhaseSucceeded)
	eventuallyCondition(t, ns, "payments", stagecoachv1.ConditionFrozen, metav1.ConditionFalse, "Unfrozen", "unfrozen by Promotion unfreeze")
	eventuallyPhase(t, ns, "v2-again", stagecoachv1.PhaseRunning)
	app.waitForRevision(digest(2), false)
	// The write is counted once its Patch call returns, a moment after the API server shows it.
	g.Eventually(ctl.revisionPatches.Load, timeout, interval).Should(Equal(int32(2)))
	app.deploy(digest(2), false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, "v2-again", stagecoachv1.PhaseSucceeded)
}

// A Stage that takes over an applier holding no version records the takeover all the same: a
// value someone else writes before the first promote is theirs, not adopted.
func TestTakeoverOfAnEmptyApplier(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	app := newApplication(t, ns, "payments", ociSpec(ns))
	newStage(t, ns, "payments", nil)
	ctl := startController(t, nil)

	g.Eventually(func(g Gomega) {
		s := getStage(g, t.Context(), ns, "payments")
		g.Expect(s.Status.Adopted).NotTo(BeNil())
		g.Expect(s.Status.Adopted.Revision).To(BeEmpty())
		g.Expect(s.Status.Adopted.At.IsZero()).To(BeFalse())
	}, timeout, interval).Should(Succeed())

	app.update(func(u *unstructured.Unstructured) {
		g.Expect(unstructured.SetNestedField(u.Object, "v7.7.7", "spec", "source", "targetRevision")).To(Succeed())
	})
	// The Stage is woken by the write (it watches its applier) and must not adopt it now.
	g.Consistently(func(g Gomega) {
		g.Expect(getStage(g, t.Context(), ns, "payments").Status.LastAppliedDigest).To(BeEmpty())
	}, 2*time.Second, interval).Should(Succeed())

	newPromotion(t, ns, "v1", "payments", stagecoachv1.ActionPromote, digest(1), "v1")
	p := eventuallyPhase(t, ns, "v1", stagecoachv1.PhaseAborted)
	g.Expect(p.Status.Message).To(ContainSubstring(`runs "v7.7.7", which Stagecoach did not write: someone else changed it`))
	eventuallyCondition(t, ns, "payments", stagecoachv1.ConditionFrozen, metav1.ConditionTrue, stagecoachv1.ReasonForeignWrite, "v7.7.7")
	g.Expect(app.desiredRevision(app.get())).To(Equal("v7.7.7"))
	g.Expect(ctl.revisionPatches.Load()).To(BeZero())
}

// eventNotes lists the notes of the events in ns with this reason about the object named regarding.
func eventNotes(g Gomega, ctx context.Context, ns, reason, regarding string) []string {
	var events eventsv1.EventList
	g.Expect(env.Client.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
	var notes []string
	for _, e := range events.Items {
		if e.Reason == reason && e.Regarding.Name == regarding {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

// One Promotion runs at a time; the others wait in creation order; a newer automatic one
// replaces a waiting older automatic one, never a running one nor a person's.
func TestQueueAndSupersede(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	app := newApplication(t, ns, "payments", ociSpec(ns))
	newStage(t, ns, "payments", nil)
	startController(t, nil)

	newPromotion(t, ns, "first", "payments", stagecoachv1.ActionPromote, digest(1), "v1")
	eventuallyPhase(t, ns, "first", stagecoachv1.PhaseRunning)
	app.waitForRevision(digest(1), false)

	auto := func(name string, d string) {
		p := &stagecoachv1.Promotion{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{stagecoachv1.AutomaticLabel: "true"},
				// As automation does: the exact time orders Promotions created in the same second.
				Annotations: map[string]string{stagecoachv1.CreatedAtAnnotation: time.Now().UTC().Format(time.RFC3339Nano)}},
			Spec: stagecoachv1.PromotionSpec{Stage: "payments", Version: &stagecoachv1.VersionReference{Digest: d}},
		}
		g.Expect(env.Client.Create(t.Context(), p)).To(Succeed())
	}
	auto("p1-auto-old", digest(2))
	newPromotion(t, ns, "p2-manual", "payments", stagecoachv1.ActionPromote, digest(3), "v3")
	auto("p3-auto-new", digest(4))

	p := eventuallyPhase(t, ns, "p1-auto-old", stagecoachv1.PhaseAborted)
	g.Expect(p.Status.Message).To(ContainSubstring("superseded by a newer automatic Promotion"))
	g.Expect(getPromotion(g, t.Context(), ns, "first").Status.Phase).To(Equal(stagecoachv1.PhaseRunning))

	app.deploy(digest(1), false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, "first", stagecoachv1.PhaseSucceeded)
	eventuallyPhase(t, ns, "p2-manual", stagecoachv1.PhaseRunning)
	g.Expect(getPromotion(g, t.Context(), ns, "p3-auto-new").Status.Phase).NotTo(Equal(stagecoachv1.PhaseRunning))

	app.deploy(digest(3), false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, "p2-manual", stagecoachv1.PhaseSucceeded)
	eventuallyPhase(t, ns, "p3-auto-new", stagecoachv1.PhaseRunning)
	app.deploy(digest(4), false, "Succeeded", "Healthy")
	s := getStage(g, t.Context(), ns, "payments")
	g.Eventually(func(g Gomega) {
		s = getStage(g, t.Context(), ns, "payments")
		g.Expect(s.Status.History).To(HaveLen(3))
	}, timeout, interval).Should(Succeed())
	g.Expect([]string{s.Status.History[0].Promotion, s.Status.History[1].Promotion, s.Status.History[2].Promotion}).
		To(Equal([]string{"p3-auto-new", "p2-manual", "first"}), "history is newest first")
}

// A Freeze selecting the Stage holds every Promotion except a break-glass one (which says so),
// and automation lists it in blockedBy until it ends.
func TestFreezeHoldsPromotions(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	stagingApp, prodApp := newPipeline(t, ns, &stagecoachv1.PromotionPolicy{Auto: true},
		func(s *stagecoachv1.Stage) { s.Labels = map[string]string{"tier": "payments"} })
	until := metav1.NewTime(time.Now().Add(time.Hour).Truncate(time.Second))
	freeze := &stagecoachv1.Freeze{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quarter-end"},
		Spec: stagecoachv1.FreezeSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "payments"}},
			Reason: "quarter end", Until: &until}}
	g.Expect(env.Client.Create(t.Context(), freeze)).To(Succeed())
	startController(t, nil)

	// Upstream verifies v1: automation would promote it, but the Freeze holds it and says until when.
	promoteAndLand(t, ns, "staging", stagingApp, "staging-v1", 1)
	g.Eventually(func(g Gomega) {
		s := getStage(g, t.Context(), ns, "prod")
		g.Expect(s.Status.Candidate).NotTo(BeNil())
		g.Expect(s.Status.Candidate.BlockedBy).To(ContainElement(And(
			HaveField("Gate", "freeze"),
			HaveField("Message", fmt.Sprintf("Freeze %s/quarter-end (quarter end) holds it until %s", ns, until.UTC().Format(time.RFC3339))),
			HaveField("Until", Equal(&until)))))
	}, timeout, interval).Should(Succeed())

	// The Freeze says which Stages it holds and until when; the held Stage says which Freeze holds it.
	g.Eventually(func(g Gomega) {
		f := &stagecoachv1.Freeze{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(freeze), f)).To(Succeed())
		g.Expect(f.Status.Stages).To(ContainElement(ns + "/prod"))
		active := meta.FindStatusCondition(f.Status.Conditions, stagecoachv1.FreezeConditionActive)
		g.Expect(active).NotTo(BeNil())
		g.Expect(active.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(active.Message).To(ContainSubstring("until " + until.UTC().Format(time.RFC3339)))
	}, timeout, interval).Should(Succeed())
	eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionFrozen, metav1.ConditionTrue, stagecoachv1.ReasonFrozen,
		fmt.Sprintf("Freeze %s/quarter-end (quarter end) holds it until %s", ns, until.UTC().Format(time.RFC3339)))

	// A person's Promotion waits; a break-glass one starts, and says it broke the glass.
	newPromotion(t, ns, "by-hand", "prod", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
	g.Eventually(func(g Gomega) {
		p := getPromotion(g, t.Context(), ns, "by-hand")
		g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhasePending))
		g.Expect(p.Status.Message).To(ContainSubstring("waiting: Freeze " + ns + "/quarter-end (quarter end) holds it"))
	}, timeout, interval).Should(Succeed())
	g.Expect(env.Client.Create(t.Context(), &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "glass"},
		Spec: stagecoachv1.PromotionSpec{Stage: "prod", BreakGlass: true, Reason: "hotfix",
			Version: &stagecoachv1.VersionReference{Digest: digest(1), Tag: "v1.0.0"}}})).To(Succeed())
	// Break-glass passes the waiting one and runs despite the Freeze, and says so.
	// (Its status message moves on at once; the event below keeps what it broke.)
	eventuallyPhase(t, ns, "glass", stagecoachv1.PhaseRunning)
	prodApp.deploy(digest(1), false, "Succeeded", "Healthy")
	glass := eventuallyPhase(t, ns, "glass", stagecoachv1.PhaseSucceeded)
	// What it broke stays on the Promotion, after its message moved on.
	g.Expect(meta.FindStatusCondition(glass.Status.Conditions, stagecoachv1.PromotionConditionBreakGlass)).To(
		PointTo(HaveField("Message", ContainSubstring("started with break-glass although Freeze "+ns+"/quarter-end"))))
	g.Expect(getPromotion(g, t.Context(), ns, "by-hand").Status.Phase).To(Equal(stagecoachv1.PhasePending))
	g.Eventually(func(g Gomega) {
		g.Expect(eventNotes(g, t.Context(), ns, "BreakGlass", "prod")).To(ContainElement(ContainSubstring("Promotion glass started with break-glass although Freeze " + ns + "/quarter-end")))
	}, timeout, interval).Should(Succeed())

	// Deleting the Freeze lets the waiting Promotion start (v1 already runs, so it lands at once).
	g.Expect(env.Client.Delete(t.Context(), freeze)).To(Succeed())
	eventuallyPhase(t, ns, "by-hand", stagecoachv1.PhaseSucceeded)
	eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionFrozen, metav1.ConditionFalse, stagecoachv1.ReasonUnfrozen, "no Freeze holds the Stage")
}

// A Promotion for a Stage that does not exist says so and proceeds once the Stage appears; a
// Stage deleted under a running Promotion ends it as Aborted, saying why.
func TestPromotionOfAMissingStage(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	newApplication(t, ns, "prod", ociSpec(ns))
	startController(t, nil)

	newPromotion(t, ns, "early", "prod", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
	p := eventuallyPhase(t, ns, "early", stagecoachv1.PhasePending)
	g.Expect(p.Status.Message).To(Equal(fmt.Sprintf("waiting: Stage %s/prod does not exist: create it, or delete this Promotion and create one naming an existing Stage in spec.stage", ns)))

	stage := newStage(t, ns, "prod", nil)
	eventuallyPhase(t, ns, "early", stagecoachv1.PhaseRunning)

	g.Expect(env.Client.Delete(t.Context(), stage)).To(Succeed())
	p = eventuallyPhase(t, ns, "early", stagecoachv1.PhaseAborted)
	g.Expect(p.Status.Message).To(Equal(fmt.Sprintf("aborted: Stage %s/prod was deleted while this Promotion was running", ns)))
}
