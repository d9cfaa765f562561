package promotion

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// Issue 53 item 2: with automation, a newer version supersedes the automatic promote that has not
// landed yet (spec.promotion.supersede defaults to Automatic): five versions pushed back to back
// while the engine lands none; each newer one replaces the one before at once, and only the
// newest lands. Every superseded Promotion ends Aborted, is never verified, and the history says
// so; Never keeps the running one.
func TestNewerVersionsSupersedeAnUnlandedPromote(t *testing.T) {
	for _, tc := range []struct {
		name      string
		supersede stagecoachv1.SupersedePolicy
	}{
		{name: "by default"},
		{name: "never", supersede: stagecoachv1.SupersedeNever},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			reg := newTestRegistry(t)
			app := newApplication(t, ns, "dev", ociSpec(ns))
			newStage(t, ns, "dev", func(s *stagecoachv1.Stage) {
				s.Spec.Source = stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{
					Repository: reg.repo, Semver: ">=1.0.0", Interval: &metav1.Duration{Duration: time.Hour}}}
				s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true, Supersede: tc.supersede}
				s.Spec.Verification.ProgressDeadline = &metav1.Duration{Duration: 10 * time.Minute}
			})
			startController(t, nil)
			var digests []string
			for i := 1; i <= 5; i++ {
				d := reg.push(t, fmt.Sprintf("v1.%d.0", i))
				digests = append(digests, d)
				if i > 1 {
					askToLook(t, ns, "dev")
				}
				if tc.supersede == stagecoachv1.SupersedeNever && i > 1 {
					continue
				}
				// Written (the engine never lands it): the next one comes while it runs.
				app.waitForRevision(d, false)
			}
			if tc.supersede == stagecoachv1.SupersedeNever {
				g.Consistently(func(g Gomega) {
					list := promotionsOf(g, t, ns, "dev")
					g.Expect(list).To(HaveLen(1))
					g.Expect(list[0].Status.Phase).To(Equal(stagecoachv1.PhaseRunning))
				}, 3*time.Second, interval).Should(Succeed())
				g.Expect(app.desiredRevision(app.get())).To(Equal(digests[0]))
				return
			}
			newest := digests[4]
			app.deploy(newest, false, "Succeeded", "Healthy")
			eventuallyCondition(t, ns, "dev", stagecoachv1.ConditionVerified, metav1.ConditionTrue, stagecoachv1.ReasonVerified, newest)
			list := promotionsOf(g, t, ns, "dev")
			g.Expect(list).To(HaveLen(5))
			for _, p := range list {
				if p.Spec.Version.Digest == newest {
					g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhaseSucceeded))
					continue
				}
				g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhaseAborted), "%s: %s", p.Name, p.Status.Message)
				g.Expect(p.Status.Message).To(ContainSubstring("superseded by Promotion"))
				g.Expect(p.Status.VerifiedAt).To(BeNil())
				g.Expect(p.Status.AppliedAt).NotTo(BeNil(), "each was written before the next came")
			}
			s := getStage(g, t.Context(), ns, "dev")
			g.Expect(s.Status.Current.Digest).To(Equal(newest))
			for _, d := range digests[:4] {
				g.Expect(s.Status.History).To(ContainElement(And(HaveField("Digest", d), HaveField("Phase", stagecoachv1.PhaseAborted))))
				g.Expect(s.Status.History).NotTo(ContainElement(And(HaveField("Digest", d), HaveField("Phase", stagecoachv1.PhaseSucceeded))))
			}
		})
	}
}

// A person's running promote is not superseded by automation unless the Stage says All.
func TestAPersonsPromoteIsSupersededOnlyWhenTheStageSaysAll(t *testing.T) {
	for _, tc := range []struct {
		name       string
		supersede  stagecoachv1.SupersedePolicy
		superseded bool
	}{
		{name: "Automatic keeps it"},
		{name: "All supersedes it", supersede: stagecoachv1.SupersedeAll, superseded: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			reg := newTestRegistry(t)
			app := newApplication(t, ns, "dev", ociSpec(ns))
			v1 := reg.push(t, "v1.0.0")
			newStage(t, ns, "dev", func(s *stagecoachv1.Stage) {
				s.Spec.Source = stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{
					Repository: reg.repo, Semver: ">=1.0.0", Interval: &metav1.Duration{Duration: time.Hour}}}
				s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true, Supersede: tc.supersede}
				s.Spec.Verification.ProgressDeadline = &metav1.Duration{Duration: 10 * time.Minute}
			})
			startController(t, nil)
			first := onlyPromotion(t, ns, "dev")
			g.Expect(first.Spec.Version.Digest).To(Equal(v1))
			app.deploy(v1, false, "Succeeded", "Healthy")
			eventuallyPhase(t, ns, first.Name, stagecoachv1.PhaseSucceeded)

			// A person promotes an older build by hand; it never lands. Then v2 is pushed.
			newPromotion(t, ns, "by-hand", "dev", stagecoachv1.ActionPromote, digest(9), "v0.9.0")
			app.waitForRevision(digest(9), false)
			v2 := reg.push(t, "v2.0.0")
			askToLook(t, ns, "dev")
			if tc.superseded {
				p := eventuallyPhase(t, ns, "by-hand", stagecoachv1.PhaseAborted)
				g.Expect(p.Status.Message).To(ContainSubstring("superseded by Promotion"))
				app.waitForRevision(v2, false)
				return
			}
			g.Consistently(func(g Gomega) {
				g.Expect(getPromotion(g, t.Context(), ns, "by-hand").Status.Phase).To(Equal(stagecoachv1.PhaseRunning))
			}, 3*time.Second, interval).Should(Succeed())
			g.Expect(app.desiredRevision(app.get())).To(Equal(digest(9)))
		})
	}
}

// Issue 53 item 5: preempting is rolling back, so it takes the right to create the Stage's
// Promotions. v2 is stuck as above; a person whose Rollback the API server refuses preempts
// nothing (v2 keeps running and written), and the same Rollback from a person granted that right
// preempts it.
func TestPreemptingTakesTheRightToRollBack(t *testing.T) {
	for _, tc := range []struct {
		name        string
		user        string
		mayPromote  bool
		wantPreempt bool
	}{
		{name: "a person who may not create Promotions", user: "mallory"},
		{name: "a person who may", user: "bob", mayPromote: true, wantPreempt: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			app := newApplication(t, ns, "prod", ociSpec(ns))
			newStage(t, ns, "prod", func(s *stagecoachv1.Stage) {
				s.Spec.Verification.ProgressDeadline = &metav1.Duration{Duration: 10 * time.Minute}
			})
			if tc.mayPromote {
				grantPromotionCreate(t, ns, tc.user)
			}
			startController(t, nil)
			promoteAndLand(t, ns, "prod", app, "prod-v1", 1)
			eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionVerified, metav1.ConditionTrue, stagecoachv1.ReasonVerified, digest(1))
			newPromotion(t, ns, "prod-v2", "prod", stagecoachv1.ActionPromote, digest(2), "v2.0.0")
			app.waitForRevision(digest(2), false)

			err := env.ClientAs(t, tc.user).Create(t.Context(), &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod-rollback"},
				Spec: stagecoachv1.PromotionSpec{Stage: "prod", Action: stagecoachv1.ActionRollback, RequestedBy: tc.user, Reason: "v2 crash-loops"}})
			if !tc.wantPreempt {
				g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want the API server to refuse %s's Rollback, got %v", tc.user, err)
				g.Consistently(func(g Gomega) {
					g.Expect(getPromotion(g, t.Context(), ns, "prod-v2").Status.Phase).To(Equal(stagecoachv1.PhaseRunning))
				}, 2*time.Second, interval).Should(Succeed())
				app.waitForRevision(digest(2), false)
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			preempted := eventuallyPhase(t, ns, "prod-v2", stagecoachv1.PhaseAborted)
			g.Expect(preempted.Status.Message).To(ContainSubstring("preempted by Rollback prod-rollback (requested by " + tc.user + ")"))
			app.waitForRevision(digest(1), false)
		})
	}
}

// grantPromotionCreate lets user create (and read) Promotions in ns, as a team's release Role would.
func grantPromotionCreate(t *testing.T, ns, user string) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "promoter"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{stagecoachv1.GroupVersion.Group}, Resources: []string{"promotions"}, Verbs: []string{"create", "get", "list", "watch"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "promoter-" + user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	for _, obj := range []client.Object{role, binding} {
		if err := env.Client.Create(t.Context(), obj); err != nil {
			t.Fatalf("failed to grant %s Promotions in %s: %v", user, ns, err)
		}
	}
}
