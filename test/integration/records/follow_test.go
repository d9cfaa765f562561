package records

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/records"
)

// staging records its promote and its verdict; prod, in the other cluster, takes the version
// through the registry alone, cites the record it relied on, and remembers it in upstreamSeen.
func TestFollowAVerifiedVersion(t *testing.T) {
	g := NewWithT(t)
	v1 := pushVersion(t, "v1")
	nsA, nsB, stream := pipeline(t)
	startA(t, nil)
	startB(t)

	promote(t, envA, nsA, "staging-v1", "staging", v1, "v1", nil)
	land(t, envA, nsA, "staging", v1, true)
	p := eventuallyRecorded(t, nsA, "staging-v1", stagecoachv1.PhaseSucceeded, records.ActionVerify)
	verifiedSeen := time.Now()
	g.Expect(p.Status.Record.Seq).To(Equal(int64(2)))
	g.Expect(p.Status.Record.Ref).To(Equal(reg.streams() + ":" + records.Tag(stream, 2)))
	staging := getStage(g, t, envA, nsA, "staging")
	g.Expect(staging.Status.Stream).NotTo(BeNil())
	g.Expect(staging.Status.Stream.ID).To(Equal(stream))
	g.Expect(staging.Status.Stream.Seq).To(Equal(int64(2)))
	g.Expect(staging.Status.History).NotTo(BeEmpty())
	g.Expect(staging.Status.History[0].Record).To(Equal(p.Status.Record))

	// prod takes v1 by itself.
	var created time.Time
	var name string
	g.Eventually(func(g Gomega) {
		for _, q := range promotionsOf(g, t, envB, nsB) {
			if q.Spec.Version != nil && q.Spec.Version.Digest == v1 {
				name = q.Name
				created, _ = time.Parse(time.RFC3339Nano, q.Annotations[stagecoachv1.CreatedAtAnnotation])
			}
		}
		g.Expect(name).NotTo(BeEmpty())
	}, timeout, interval).Should(Succeed())
	// The lag is from when the test saw staging's verdict recorded (polling every 50 ms) to the
	// creation of prod's automatic Promotion; no assertion on it, only the number.
	t.Logf("follower lag: upstream Verified recorded -> downstream Promotion created: %s (poll interval 1s)", created.Sub(verifiedSeen).Round(time.Millisecond))
	land(t, envB, nsB, "prod", v1, true)
	g.Eventually(func(g Gomega) {
		q := getPromotion(g, t, envB, nsB, name)
		g.Expect(q.Status.Phase).To(Equal(stagecoachv1.PhaseSucceeded), q.Status.Message)
		var published string
		for _, r := range q.Status.Gates {
			if r.Gate == "published" {
				published = r.Message
			}
		}
		g.Expect(published).To(ContainSubstring("verified upstream in record 2 (upstreamSeq=2 upstreamHead=" + staging.Status.Stream.Digest + ")"))
	}, timeout, interval).Should(Succeed())
	prod := eventuallyReady(t, nsB, metav1.ConditionTrue, stagecoachv1.ReasonApplierReady, "")
	g.Expect(prod.Status.UpstreamSeen).To(Equal(&stagecoachv1.UpstreamSeen{Seq: 2, Digest: staging.Status.Stream.Digest}))
	// prod records nothing: cluster B has no recorder, and says so.
	g.Expect(prod.Status.Stream).NotTo(BeNil())
	g.Expect(prod.Status.Stream.Message).To(HavePrefix("records are off"))

	a := audit(t, stream)
	g.Expect(a.Breaks).To(BeEmpty())
	var steps []string
	for _, e := range a.Entries {
		steps = append(steps, string(e.Record.Action)+"/"+string(e.Record.Verdict))
	}
	g.Expect(strings.Join(steps, ",")).To(Equal("Promote/Succeeded,Verify/Verified"))
}
