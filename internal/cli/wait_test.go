package cli

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// The Promotion as a reader following it sees it, step by step.
func promotionSteps(final stagecoachv1.Phase) []*stagecoachv1.Promotion {
	promote := stagecoachv1.ActionPromote
	queued := fixturePromotion("web-x1", "web-prod", promote, digest1, "v1", stagecoachv1.PhasePending, 0, -1, -1, -1, -1, -1)
	queued.Status.Version, queued.Status.Message = nil, "waiting for Promotion web-x0 to finish"
	gated := queued.DeepCopy()
	gated.Status.Message = "waiting for the gates: soak (10m left)"
	running := fixturePromotion("web-x1", "web-prod", promote, digest1, "v1", stagecoachv1.PhaseRunning, 0, 10, -1, -1, -1, -1)
	running.Status.Gates = []stagecoachv1.GateResult{{Gate: "soak", Passed: true}, {Gate: "approvals", Passed: true, Message: "1 of 1"}}
	applied := running.DeepCopy()
	applied.Status.AppliedAt = at(11)
	applied.Status.Message = "applied v1; waiting for the engine"
	landed := applied.DeepCopy()
	landed.Status.LandedAt = at(12)
	landed.Status.Message = "operation Succeeded at 2026-11-01T09:12:00Z, Synced, Healthy"
	end := landed.DeepCopy()
	end.Status.Phase, end.Status.FinishedAt = final, at(13)
	if final == stagecoachv1.PhaseSucceeded {
		end.Status.VerifiedAt = at(13)
		end.Status.Message = "verified: operation Succeeded at 2026-11-01T09:12:00Z, Synced, Healthy"
	} else {
		end.Status.Message = "Degraded after the sync: pod crash-looping"
	}
	return []*stagecoachv1.Promotion{queued, queued, gated, running, applied, landed, end}
}

// following serves each read of the Promotion the next step of its life.
func following(t *testing.T, steps []*stagecoachv1.Promotion) client.Client {
	reads := 0
	return fake.NewClientBuilder().WithScheme(newScheme(t)).WithObjects(steps[0]).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			p, ok := obj.(*stagecoachv1.Promotion)
			if !ok {
				return c.Get(ctx, key, obj, opts...)
			}
			*p = *steps[min(reads, len(steps)-1)].DeepCopy()
			reads++
			return nil
		}}).Build()
}

func TestWaitForPromotion(t *testing.T) {
	tests := []struct {
		name    string
		steps   []*stagecoachv1.Promotion
		timeout time.Duration
		golden  string
		wantErr string
	}{
		{name: "verified: every step once, exit without error", steps: promotionSteps(stagecoachv1.PhaseSucceeded), golden: "wait-verified.txt"},
		{name: "failed: the steps, then the reason", steps: promotionSteps(stagecoachv1.PhaseFailed), golden: "wait-failed.txt",
			wantErr: "not verified: Promotion shop/web-x1 failed: Degraded after the sync: pod crash-looping"},
		{name: "never ends: the timeout says where it stands", steps: promotionSteps(stagecoachv1.PhaseSucceeded)[:3], timeout: 50 * time.Millisecond,
			golden: "wait-timeout.txt", wantErr: "not verified: Promotion shop/web-x1 did not finish within 50ms (it is Pending: waiting for the gates: soak (10m left)); raise --timeout or look with stagecoach plan"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var out bytes.Buffer
			timeout := tt.timeout
			if timeout == 0 {
				timeout = time.Minute
			}
			p, err := WaitForPromotion(t.Context(), following(t, tt.steps), "shop", "web-x1", WaitOptions{Timeout: timeout, Interval: time.Millisecond}, &out)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(tt.wantErr))
				g.Expect(errors.Is(err, errNotVerified)).To(BeTrue())
			} else {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(p.Status.VerifiedAt).NotTo(BeNil())
			}
			golden(t, tt.golden, out.String())
		})
	}
}

func TestOutcome(t *testing.T) {
	verified := fixturePromotion("p", "s", stagecoachv1.ActionPromote, digest1, "v1", stagecoachv1.PhaseSucceeded, 0, 0, 1, 2, 3, 3)
	frozen := fixturePromotion("p", "s", stagecoachv1.ActionFreeze, "", "", stagecoachv1.PhaseSucceeded, 0, -1, -1, -1, -1, 1)
	noVerify := fixturePromotion("p", "s", stagecoachv1.ActionPromote, digest1, "v1", stagecoachv1.PhaseSucceeded, 0, -1, -1, -1, -1, 1)
	noVerify.Status.Message = "the Stage is frozen"
	running := fixturePromotion("p", "s", stagecoachv1.ActionPromote, digest1, "v1", stagecoachv1.PhaseRunning, 0, 0, -1, -1, -1, -1)
	rolled := fixturePromotion("p", "s", stagecoachv1.ActionPromote, digest1, "v1", stagecoachv1.PhaseRolledBack, 0, 0, 1, -1, -1, 5)
	rolled.Status.Message = "rolled back by p-rollback: DeadlineExceeded"
	tests := []struct {
		name    string
		p       *stagecoachv1.Promotion
		done    bool
		wantErr string
	}{
		{name: "verified", p: verified, done: true},
		{name: "a Freeze done", p: frozen, done: true},
		{name: "succeeded without verifying", p: noVerify, done: true, wantErr: "not verified: Promotion shop/p succeeded without verifying a version: the Stage is frozen"},
		{name: "running", p: running},
		{name: "rolled back", p: rolled, done: true, wantErr: "not verified: Promotion shop/p failed and was rolled back: rolled back by p-rollback: DeadlineExceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			done, err := Outcome(tt.p)
			g.Expect(done).To(Equal(tt.done))
			if tt.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(MatchError(tt.wantErr))
			}
		})
	}
}

func TestSteps(t *testing.T) {
	applied := fixturePromotion("p", "s", stagecoachv1.ActionPromote, digest1, "v1", stagecoachv1.PhaseRunning, 0, 0, 1, -1, -1, -1)
	verifiedAtOnce := fixturePromotion("p", "s", stagecoachv1.ActionPromote, digest1, "v1", stagecoachv1.PhaseSucceeded, 0, 0, 1, 2, 2, 2)
	verifiedAtOnce.Status.Message = "verified: Ready at v1@" + digest1
	failedAtOnce := verifiedAtOnce.DeepCopy()
	failedAtOnce.Status.Phase, failedAtOnce.Status.VerifiedAt, failedAtOnce.Status.Message = stagecoachv1.PhaseFailed, nil, "landed, but check smoke failed"
	tests := []struct {
		name          string
		before, after *stagecoachv1.Promotion
		want          []string
	}{
		{name: "nothing changed", before: applied, after: applied},
		{name: "landed and verified in one step (no grace)", before: applied, after: verifiedAtOnce,
			want: []string{"landed: Ready at v1@" + digest1, "verified: Ready at v1@" + digest1}},
		{name: "landed and failed its checks in one step", before: applied, after: failedAtOnce,
			want: []string{"landed", "failed: landed, but check smoke failed"}},
		{name: "first read of a finished Promotion tells all of it", after: verifiedAtOnce,
			want: []string{"gates: none to pass", "applied: v1 (" + digest1 + ") at 2026-11-01T09:01:00Z", "landed: Ready at v1@" + digest1, "verified: Ready at v1@" + digest1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(Steps(tt.before, tt.after)).To(Equal(tt.want))
		})
	}
}

// approve --wait: nothing carries the version yet, so the wait says what blocks it; then it
// follows the Promotion automation created for it.
func TestWaitForVersion(t *testing.T) {
	g := NewWithT(t)
	stage := fixtureStage("web-prod", "prod", "")
	stage.Status.Candidate = &stagecoachv1.CandidateVersion{Digest: digest1, Version: "v1",
		BlockedBy: []stagecoachv1.GateBlock{{Gate: "approvals", Message: "1 of 2 approvals"}}}
	old := fixturePromotion("web-old", "web-prod", stagecoachv1.ActionPromote, digest1, "v1", stagecoachv1.PhaseFailed, 0, 0, 1, -1, -1, 2)
	auto := fixturePromotion("web-auto", "web-prod", stagecoachv1.ActionPromote, digest1, "v1", stagecoachv1.PhaseSucceeded, 30, 30, 31, 32, 33, 33)
	auto.Status.Message = "verified: Synced, Healthy"
	lists := 0
	c := fake.NewClientBuilder().WithScheme(newScheme(t)).WithObjects(stage, old, auto).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lists++
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			if lists <= 2 { // automation has not created it yet
				l := list.(*stagecoachv1.PromotionList)
				l.Items = slices.DeleteFunc(l.Items, func(p stagecoachv1.Promotion) bool { return p.Name == "web-auto" })
			}
			return nil
		}}).Build()
	var out bytes.Buffer
	p, err := WaitForVersion(t.Context(), c, "shop", "web-prod", digest1, at(20).Time, WaitOptions{Timeout: time.Minute, Interval: time.Millisecond}, &out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Name).To(Equal("web-auto"), "the Promotion from before the approval is not the one")
	g.Expect(out.String()).To(Equal("waiting for a Promotion: blocked by approvals: 1 of 2 approvals\n" +
		"promotion: web-auto carries " + digest1 + " to Stage web-prod\n" +
		"gates: none to pass\napplied: v1 (" + digest1 + ") at 2026-11-01T09:31:00Z\nlanded: Synced, Healthy\nverified: Synced, Healthy\n"))
}
