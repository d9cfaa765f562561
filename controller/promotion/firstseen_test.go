package promotion

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
)

// An automatic Promotion keeps when the source first offered its version: the candidate's
// firstSeen is cleared once the Promotion exists, and DORA lead time starts there.
func TestAutomaticPromotionKeepsFirstSeen(t *testing.T) {
	seen := metav1.NewTime(stepNow.Add(-90 * time.Minute))
	for _, tc := range []struct {
		name      string
		candidate plan.Candidate
		want      map[string]string
	}{
		{name: "registry candidate", candidate: plan.Candidate{Digest: digestV2, Tag: "v2.0.0", FirstSeen: &seen},
			want: map[string]string{stagecoachv1.FirstSeenAnnotation: "2026-12-01T08:30:00Z"}},
		{name: "upstream candidate: nothing to keep", candidate: plan.Candidate{Digest: digestV2, Tag: "v2.0.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			e := newStepEnv(t, stepFixture{stage: stepStage(nil)})
			p := e.run.automaticPromotion(&tc.candidate)
			if tc.want == nil {
				g.Expect(p.Annotations).NotTo(HaveKey(stagecoachv1.FirstSeenAnnotation))
				return
			}
			for k, v := range tc.want {
				g.Expect(p.Annotations).To(HaveKeyWithValue(k, v))
			}
		})
	}
}
