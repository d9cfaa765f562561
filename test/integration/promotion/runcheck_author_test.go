package promotion

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// promotionRun is a run template that is a Promotion of Stage stage for the version, naming
// requester: a check whose run promotes elsewhere.
func promotionRun(stage, requester string) runtime.RawExtension {
	return runtime.RawExtension{Raw: fmt.Appendf(nil, `{"apiVersion":"stagecoach.dev/v1alpha1","kind":"Promotion",
		"spec":{"stage":%q,"requestedBy":%q,"version":{"digest":"{{.Digest}}","tag":"{{.Version}}"}}}`, stage, requester)}
}

// Issue 50 item 1: a check's run is its author's act, created as its author, so admission judges
// the author and not the controller. Alice, who may create Promotions and approve, writes a Stage
// whose check's run promotes staging. Made in the controller's name (requestedBy the controller's
// service account), the run would be automation, and her own Approval would open prod: admission
// refuses it as hers. Made in her own name, the run is her promotion, and her Approval in prod
// does not count.
func TestRunCheckIsItsAuthorsAct(t *testing.T) {
	for _, tc := range []struct {
		name      string
		requester string
		// refused: the run is refused by the promotion-requester-guard, naming alice as its creator.
		refused bool
	}{
		{name: "a run in the controller's name is refused as alice's", requester: controllerSA, refused: true},
		{name: "a run in alice's name is her promotion, which she cannot approve", requester: "alice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			enforcePromotionPolicies(t, ns)
			mayPromoteAndApprove(t, ns, "alice", "bob")
			alice := env.ClientAs(t, "alice", "release-managers")
			testsApp := newApplication(t, ns, "tests", ociSpec(ns))
			stagingApp := newApplication(t, ns, "staging", ociSpec(ns))
			newApplication(t, ns, "prod", ociSpec(ns))
			newStage(t, ns, "tests", func(s *stagecoachv1.Stage) {
				s.Spec.Author = &stagecoachv1.StageAuthor{User: "alice", Groups: []string{"release-managers"}}
				s.Spec.Verification.Checks = []stagecoachv1.Check{{Name: "promote-staging", Timeout: &metav1.Duration{Duration: 5 * time.Second},
					Run: &stagecoachv1.RunCheck{Template: promotionRun("staging", tc.requester), Completion: &stagecoachv1.CompletionRules{
						ObservedCompletion: &stagecoachv1.ObservedCompletion{
							Succeeded: &stagecoachv1.FieldMatch{Key: "status.phase", Value: string(stagecoachv1.PhaseSucceeded)}}}}}}
			})
			newStage(t, ns, "staging", nil)
			newStage(t, ns, "prod", func(s *stagecoachv1.Stage) {
				s.Spec.Source.Upstream = &stagecoachv1.UpstreamSource{Stage: "staging"}
				s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true,
					Approvals: &stagecoachv1.ApprovalPolicy{Required: 1, Groups: []string{"release-managers"}}}
			})
			startControllerAsServiceAccount(t)

			g.Expect(alice.Create(t.Context(), &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tests-v1"},
				Spec: stagecoachv1.PromotionSpec{Stage: "tests", RequestedBy: "alice",
					Version: &stagecoachv1.VersionReference{Digest: digest(1), Tag: "v1.0.0"}}})).To(Succeed())
			testsApp.deploy(digest(1), false, "Succeeded", "Healthy")

			if tc.refused {
				var failed *stagecoachv1.Promotion
				g.Eventually(func(g Gomega) {
					failed = getPromotion(g, t.Context(), ns, "tests-v1")
					g.Expect(failed.Status.Phase).To(BeElementOf(stagecoachv1.PhaseFailed, stagecoachv1.PhaseRolledBack))
				}, timeout, interval).Should(Succeed())
				g.Expect(failed.Status.Gates).To(ContainElement(And(HaveField("Gate", "check/promote-staging"), HaveField("Passed", false),
					HaveField("Message", And(ContainSubstring("created as the Stage's author alice (groups release-managers)"),
						ContainSubstring("names requester "+controllerSA+" but was created by alice"))))))
				g.Expect(promotionsOf(g, t, ns, "staging")).To(BeEmpty())
				return
			}
			var run stagecoachv1.Promotion
			g.Eventually(func(g Gomega) {
				list := promotionsOf(g, t, ns, "staging")
				g.Expect(list).To(HaveLen(1))
				run = list[0]
			}, timeout, interval).Should(Succeed())
			g.Expect(run.Spec.RequestedBy).To(Equal("alice"))
			g.Expect(run.Labels).To(HaveKeyWithValue(stagecoachv1.RunCheckLabel, "promote-staging"))
			stagingApp.deploy(digest(1), false, "Succeeded", "Healthy")
			eventuallyPhase(t, ns, run.Name, stagecoachv1.PhaseSucceeded)

			g.Expect(alice.Create(t.Context(), &stagecoachv1.Approval{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "by-alice"},
				Spec: stagecoachv1.ApprovalSpec{Stage: "prod", Digest: digest(1), Approver: "alice", Groups: []string{"release-managers"}}})).To(Succeed())
			eventuallyBlockedBy(t, ns, "prod", stagecoachv1.GateApprovals, "0 of 1 approvals for "+digest(1),
				"alice promoted this version by hand in "+ns+"/staging and cannot approve it")
			g.Consistently(func(g Gomega) {
				g.Expect(promotionsOf(g, t, ns, "prod")).To(BeEmpty())
			}, 2*time.Second, interval).Should(Succeed())
		})
	}
}
