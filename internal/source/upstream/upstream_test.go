package upstream

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

func TestCandidate(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	digest := "sha256:" + "ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12"
	verified := metav1.Condition{Type: stagecoachv1.ConditionVerified, Status: metav1.ConditionTrue, Reason: stagecoachv1.ReasonVerified}
	failed := metav1.Condition{Type: stagecoachv1.ConditionVerified, Status: metav1.ConditionFalse, Reason: stagecoachv1.ReasonDeadlineExceeded}
	current := &stagecoachv1.CurrentVersion{Version: "v1.2.0", Digest: digest, VerifiedAt: &at}
	for _, tc := range []struct {
		name   string
		status stagecoachv1.StageStatus
		want   bool
	}{
		{name: "verified current version is offered", status: stagecoachv1.StageStatus{Current: current, Conditions: []metav1.Condition{verified}}, want: true},
		{name: "nothing verified yet", status: stagecoachv1.StageStatus{Conditions: []metav1.Condition{verified}}},
		{name: "its last promote failed", status: stagecoachv1.StageStatus{Current: current, Conditions: []metav1.Condition{failed}}},
		{name: "no Verified condition", status: stagecoachv1.StageStatus{Current: current}},
		{name: "current without verifiedAt", status: stagecoachv1.StageStatus{Current: &stagecoachv1.CurrentVersion{Digest: digest},
			Conditions: []metav1.Condition{verified}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := Candidate(&stagecoachv1.Stage{Status: tc.status})
			if !tc.want {
				g.Expect(c).To(BeNil())
				return
			}
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Digest).To(Equal(digest))
			g.Expect(c.Tag).To(Equal("v1.2.0"))
			g.Expect(c.VerifiedAt).To(Equal(&at))
		})
	}
}
