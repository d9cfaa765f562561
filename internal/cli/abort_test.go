package cli

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

func TestNewAbort(t *testing.T) {
	stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "payments"}}
	cases := []struct {
		name, reason, wantReason string
	}{
		{name: "with a reason", reason: "canary is failing", wantReason: "canary is failing"},
		{name: "without a reason", wantReason: "abort by alice with the stagecoach CLI"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := newPromotion(stage, stagecoachv1.ActionAbort, "alice", tc.reason)
			g.Expect(p.Namespace).To(Equal("argocd"))
			g.Expect(p.Spec.Stage).To(Equal("payments"))
			g.Expect(p.Spec.Action).To(Equal(stagecoachv1.ActionAbort))
			g.Expect(p.Spec.RequestedBy).To(Equal("alice"))
			g.Expect(p.Spec.Reason).To(Equal(tc.wantReason))
			g.Expect(p.Spec.Version).To(BeNil())
			g.Expect(p.Labels).To(HaveKeyWithValue(stagecoachv1.PromotionStageLabel, "payments"))
		})
	}
}
