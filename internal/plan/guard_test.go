package plan

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

func TestGuarded(t *testing.T) {
	stage := func(kind string, approvals bool) *stagecoachv1.Stage {
		s := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "payments"},
			Spec: stagecoachv1.StageSpec{ApplyRef: stagecoachv1.ApplierReference{Kind: kind, Name: "payments"}}}
		if approvals {
			s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Approvals: &stagecoachv1.ApprovalPolicy{Required: 1}}
		}
		return s
	}
	all := map[string]bool{stagecoachv1.PolicyApplication: true, stagecoachv1.PolicyApplicationCreate: true, stagecoachv1.PolicyApplicationSet: true, stagecoachv1.PolicyPromotionRequester: true, stagecoachv1.PolicyApproval: true,
		stagecoachv1.PolicyFluxOCIRepository: true, stagecoachv1.PolicyFluxKustomization: true, stagecoachv1.PolicyFluxHelmRelease: true, stagecoachv1.PolicyStageAuthor: true,
		stagecoachv1.PolicyStageStatus: true, stagecoachv1.PolicyPromotionStatus: true}
	without := func(names ...string) map[string]bool {
		m := map[string]bool{}
		for k, v := range all {
			m[k] = v
		}
		for _, n := range names {
			delete(m, n)
		}
		return m
	}
	cases := []struct {
		name        string
		stage       *stagecoachv1.Stage
		enforced    map[string]bool
		wantNil     bool
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage string
	}{
		{name: "Application, all installed", stage: stage("Application", false), enforced: all,
			wantStatus: metav1.ConditionTrue, wantReason: stagecoachv1.ReasonPoliciesInstalled,
			wantMessage: "admission policies application-guard.stagecoach.dev, application-create-guard.stagecoach.dev, promotion-requester-guard.stagecoach.dev, stage-status-guard.stagecoach.dev, promotion-status-guard.stagecoach.dev deny what they guard"},
		{name: "Application without its guard", stage: stage("Application", false), enforced: without(stagecoachv1.PolicyApplication),
			wantStatus: metav1.ConditionFalse, wantReason: stagecoachv1.ReasonPoliciesMissing,
			wantMessage: "admission policy application-guard.stagecoach.dev is not installed and bound to deny: anyone who may edit Application 'shop/payments' can change what it runs; install manifests/policies (or the Helm chart with policies.enabled)"},
		{name: "HelmRelease with approvals, nothing installed", stage: stage("HelmRelease", true), enforced: map[string]bool{},
			wantStatus: metav1.ConditionFalse, wantReason: stagecoachv1.ReasonPoliciesMissing,
			wantMessage: "admission policies flux-helmrelease-guard.stagecoach.dev, promotion-requester-guard.stagecoach.dev, approval-guard.stagecoach.dev, stage-status-guard.stagecoach.dev, promotion-status-guard.stagecoach.dev are not installed"},
		{name: "Application without its create guard", stage: stage("Application", false), enforced: without(stagecoachv1.PolicyApplicationCreate),
			wantStatus: metav1.ConditionFalse, wantReason: stagecoachv1.ReasonPoliciesMissing,
			wantMessage: "admission policy application-create-guard.stagecoach.dev is not installed and bound to deny"},
		{name: "ApplicationSet relies on both Argo CD guards", stage: stage("ApplicationSet", false), enforced: without(stagecoachv1.PolicyApplicationSet),
			wantStatus: metav1.ConditionFalse, wantReason: stagecoachv1.ReasonPoliciesMissing, wantMessage: "applicationset-guard.stagecoach.dev is not installed"},
		{name: "OCIRepository", stage: stage("OCIRepository", false), enforced: without(stagecoachv1.PolicyFluxKustomization),
			wantStatus: metav1.ConditionTrue, wantReason: stagecoachv1.ReasonPoliciesInstalled},
		{name: "Kustomization", stage: stage("Kustomization", false), enforced: without(stagecoachv1.PolicyFluxKustomization),
			wantStatus: metav1.ConditionFalse, wantReason: stagecoachv1.ReasonPoliciesMissing, wantMessage: "flux-kustomization-guard.stagecoach.dev"},
		{name: "any other kind relies on the author guard", stage: stage("Widget", false), enforced: all,
			wantStatus: metav1.ConditionTrue, wantReason: stagecoachv1.ReasonPoliciesInstalled, wantMessage: "admission policies stage-author-guard.stagecoach.dev, stage-status-guard.stagecoach.dev, promotion-status-guard.stagecoach.dev deny"},
		// Issue 50 item 4: every Stage relies on the status guards, each reported missing.
		{name: "Application without the Stage status guard", stage: stage("Application", false), enforced: without(stagecoachv1.PolicyStageStatus),
			wantStatus: metav1.ConditionFalse, wantReason: stagecoachv1.ReasonPoliciesMissing,
			wantMessage: "admission policy stage-status-guard.stagecoach.dev is not installed and bound to deny: anyone who may write the status of Stage 'shop/payments' or its Promotions can mark a version verified"},
		{name: "any other kind without the Promotion status guard", stage: stage("Widget", false), enforced: without(stagecoachv1.PolicyPromotionStatus),
			wantStatus: metav1.ConditionFalse, wantReason: stagecoachv1.ReasonPoliciesMissing,
			wantMessage: "admission policy promotion-status-guard.stagecoach.dev is not installed and bound to deny: anyone who may write the status of Stage"},
		{name: "any other kind without the author guard", stage: stage("Widget", false), enforced: without(stagecoachv1.PolicyStageAuthor),
			wantStatus: metav1.ConditionFalse, wantReason: stagecoachv1.ReasonPoliciesMissing,
			wantMessage: "admission policy stage-author-guard.stagecoach.dev is not installed and bound to deny: anyone who may write Stage 'shop/"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := Guarded(tc.stage, tc.enforced)
			if tc.wantNil {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got).NotTo(BeNil())
			g.Expect(got.Type).To(Equal(stagecoachv1.ConditionGuarded))
			g.Expect(got.Status).To(Equal(tc.wantStatus))
			g.Expect(got.Reason).To(Equal(tc.wantReason))
			g.Expect(got.Message).To(ContainSubstring(tc.wantMessage))
		})
	}
}
