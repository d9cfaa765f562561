package promotion

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

func TestProgressStep(t *testing.T) {
	appliedAt := stepNow.Add(-time.Minute)
	longAgo := stepNow.Add(-time.Hour)
	landedStatus := map[string]any{
		"operationState": map[string]any{"phase": "Succeeded", "finishedAt": stepNow.Add(-30 * time.Second).Format(time.RFC3339),
			"syncResult": map[string]any{"revision": digestV2}, "operation": map[string]any{"sync": map[string]any{"revision": digestV2}}},
		"sync":         map[string]any{"status": "Synced", "revision": digestV2},
		"health":       map[string]any{"status": "Healthy"},
		"reconciledAt": stepNow.Add(-10 * time.Second).Format(time.RFC3339),
	}
	verifiedV1 := func(s *stagecoachv1.Stage) {
		verified := metav1.NewTime(longAgo)
		s.Status.Current = &stagecoachv1.CurrentVersion{Version: "v1.0.0", Digest: digestV1, VerifiedAt: &verified}
		s.Status.LastAppliedDigest = digestV1
	}
	noGrace := func(s *stagecoachv1.Stage) {
		verifiedV1(s)
		s.Spec.Verification = &stagecoachv1.VerificationPolicy{Grace: &metav1.Duration{}}
	}
	for _, tc := range []struct {
		name         string
		fixture      stepFixture
		wantPhase    stagecoachv1.Phase
		wantMessage  string
		wantRevision string
		wantStage    func(g Gomega, s *stagecoachv1.Stage)
		// wantRequeue, when set, is how soon the Stage must be looked at again.
		wantRequeue time.Duration
	}{
		{name: "a started promote is applied and recorded on the Stage, and looked at again soon",
			fixture: stepFixture{stage: stepStage(verifiedV1), appRevision: digestV1,
				promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, running(nil, nil))}},
			wantPhase: stagecoachv1.PhaseRunning, wantMessage: "applied v2.0.0@" + digestV2, wantRevision: digestV2,
			wantStage:   func(g Gomega, s *stagecoachv1.Stage) { g.Expect(s.Status.LastAppliedDigest).To(Equal(digestV2)) },
			wantRequeue: lookAgainAfterApply},
		// A reconcile whose cache lacks the Promotion's applied status finds the applier written: it
		// changes nothing, and must not leave the Stage unlooked at until the progress deadline
		// (the applier's event of the write was its own).
		{name: "a write found done is looked at again soon",
			fixture: stepFixture{stage: stepStage(verifiedV1), appRevision: digestV2,
				promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, running(nil, nil))}},
			wantPhase: stagecoachv1.PhaseRunning, wantMessage: "applied v2.0.0@" + digestV2, wantRevision: digestV2,
			wantStage:   func(g Gomega, s *stagecoachv1.Stage) { g.Expect(s.Status.LastAppliedDigest).To(Equal(digestV2)) },
			wantRequeue: lookAgainAfterApply},
		{name: "a value someone else wrote freezes the Stage instead of being overwritten",
			fixture: stepFixture{stage: stepStage(verifiedV1), appRevision: "sha256:" + "9999999999999999999999999999999999999999999999999999999999999999",
				promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, running(nil, nil))}},
			wantPhase: stagecoachv1.PhaseAborted, wantMessage: "which Stagecoach did not write", wantRevision: "sha256:9999999999999999999999999999999999999999999999999999999999999999",
			wantStage: func(g Gomega, s *stagecoachv1.Stage) {
				frozen := meta.FindStatusCondition(s.Status.Conditions, stagecoachv1.ConditionFrozen)
				g.Expect(frozen).NotTo(BeNil())
				g.Expect(frozen.Reason).To(Equal(stagecoachv1.ReasonForeignWrite))
			}},
		{name: "landed without a grace period is verified at once",
			fixture: stepFixture{stage: stepStage(noGrace), appRevision: digestV2, appStatus: landedStatus,
				promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, running(&appliedAt, nil))}},
			wantPhase: stagecoachv1.PhaseSucceeded, wantMessage: "verified: operation Succeeded", wantRevision: digestV2,
			wantStage: func(g Gomega, s *stagecoachv1.Stage) {
				g.Expect(s.Status.Current.Digest).To(Equal(digestV2))
				g.Expect(s.Status.History).To(HaveLen(1))
				g.Expect(meta.IsStatusConditionTrue(s.Status.Conditions, stagecoachv1.ConditionVerified)).To(BeTrue())
			}},
		{name: "landed with a grace period starts the clock",
			fixture: stepFixture{stage: stepStage(verifiedV1), appRevision: digestV2, appStatus: landedStatus,
				promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, running(&appliedAt, nil))}},
			wantPhase: stagecoachv1.PhaseRunning, wantMessage: "operation Succeeded", wantRevision: digestV2,
			wantStage: func(g Gomega, s *stagecoachv1.Stage) { g.Expect(s.Status.Current.Digest).To(Equal(digestV1)) }},
		{name: "past the deadline the promote fails, is remembered, and rolls back",
			fixture: stepFixture{stage: stepStage(verifiedV1), appRevision: digestV2,
				promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, running(&longAgo, nil))}},
			wantPhase: stagecoachv1.PhaseFailed, wantMessage: "rolling back to v1.0.0@" + digestV1 + " with Promotion p-rollback", wantRevision: digestV2,
			wantStage: func(g Gomega, s *stagecoachv1.Stage) {
				g.Expect(s.Status.FailedDigests).To(ConsistOf(digestV2))
				g.Expect(s.Status.Hold).NotTo(BeNil())
				g.Expect(s.Status.AutomaticRollbacks).To(Equal(int32(1)))
				verified := meta.FindStatusCondition(s.Status.Conditions, stagecoachv1.ConditionVerified)
				g.Expect(verified.Reason).To(Equal(stagecoachv1.ReasonDeadlineExceeded))
			}},
		{name: "a retry after the Stage's status was written keeps the rollback in the message and counts it once",
			fixture: stepFixture{stage: stepStage(func(s *stagecoachv1.Stage) {
				verifiedV1(s)
				// What the first attempt committed before the Promotion's own status write lost a race.
				s.Status.AutomaticRollbacks = 1
				s.Status.History = []stagecoachv1.HistoryEntry{{Promotion: "p", Digest: digestV2, Phase: stagecoachv1.PhaseFailed}}
			}), appRevision: digestV2,
				promotions: []*stagecoachv1.Promotion{
					stepPromotion("p", stagecoachv1.ActionPromote, digestV2, running(&longAgo, nil)),
					stepPromotion("p-rollback", stagecoachv1.ActionRollback, digestV1, func(rb *stagecoachv1.Promotion) {
						rb.Annotations = map[string]string{stagecoachv1.RollbackOfAnnotation: "p"}
						rb.Spec.Version.Tag = "v1.0.0"
					})}},
			wantPhase: stagecoachv1.PhaseFailed, wantMessage: "rolling back to v1.0.0@" + digestV1 + " with Promotion p-rollback", wantRevision: digestV2,
			wantStage: func(g Gomega, s *stagecoachv1.Stage) {
				g.Expect(s.Status.AutomaticRollbacks).To(Equal(int32(1)))
				g.Expect(s.Status.History).To(HaveLen(1))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			env := newStepEnv(t, tc.fixture)
			requeue, err := env.run.progress(t.Context(), &env.run.promotions[0])
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(env.run.commit(t.Context())).To(Succeed())
			if tc.wantRequeue > 0 {
				g.Expect(requeue).To(BeNumerically(">", 0))
				g.Expect(requeue).To(BeNumerically("<=", tc.wantRequeue))
			}
			got := env.promotion(t, "p")
			g.Expect(got.Status.Phase).To(Equal(tc.wantPhase))
			g.Expect(got.Status.Message).To(ContainSubstring(tc.wantMessage))
			g.Expect(env.targetRevision(t)).To(Equal(tc.wantRevision))
			tc.wantStage(g, env.stage(t))
			if tc.wantPhase == stagecoachv1.PhaseFailed {
				rb := env.promotion(t, "p-rollback")
				g.Expect(rb.Spec.Action).To(Equal(stagecoachv1.ActionRollback))
				g.Expect(rb.Spec.Version.Digest).To(Equal(digestV1))
			}
		})
	}
}

// A takeover is saved with the reconcile's one status write, or before anything is written over
// the baseline when a Promotion applies in the same reconcile; status.adopted is its record.
func TestAdoption(t *testing.T) {
	for _, tc := range []struct {
		name       string
		promotions []*stagecoachv1.Promotion
		// wantSavedEarly: the Stage's status holds the takeover before the reconcile's end.
		wantSavedEarly bool
	}{
		{name: "with nothing to apply the takeover waits for the one status write", wantSavedEarly: false},
		{name: "a Promotion that applies saves the baseline before it writes", wantSavedEarly: true,
			promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, running(nil, nil))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var adoptedAtAppWrite *stagecoachv1.AdoptedRevision
			appWrites := 0
			intercept := &interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if obj.GetObjectKind().GroupVersionKind().Kind == "Application" {
					appWrites++
					s := &stagecoachv1.Stage{}
					g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "prod", Name: "payments"}, s)).To(Succeed())
					adoptedAtAppWrite = s.Status.Adopted
				}
				return c.Patch(ctx, obj, patch, opts...)
			}}
			env := newStepEnv(t, stepFixture{stage: stepStage(nil), appRevision: "v9.9.9", promotions: tc.promotions, intercept: intercept})
			_, err := env.run.Reconcile(t.Context())
			g.Expect(err).NotTo(HaveOccurred())
			saved := env.stage(t).Status.Adopted
			if tc.wantSavedEarly {
				g.Expect(appWrites).To(BeNumerically(">", 0))
				g.Expect(adoptedAtAppWrite).NotTo(BeNil(), "the Application was written before the takeover was saved")
				g.Expect(adoptedAtAppWrite.Revision).To(Equal("v9.9.9"))
			} else {
				g.Expect(saved).To(BeNil(), "a status write before the reconcile's end")
				g.Expect(env.events.Events).To(BeEmpty())
			}
			g.Expect(env.run.commit(t.Context())).To(Succeed())
			saved = env.stage(t).Status.Adopted
			g.Expect(saved).NotTo(BeNil())
			g.Expect(saved.Revision).To(Equal("v9.9.9"))
			var notes []string
			for len(env.events.Events) > 0 {
				notes = append(notes, <-env.events.Events)
			}
			g.Expect(notes).NotTo(ContainElement(HavePrefix("Normal Adopted")), "status.adopted is the record, not an Event")
		})
	}
}
