package records

import (
	"flag"
	"fmt"
	"sort"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller"
)

var (
	lagVersions = flag.Int("records.lag-versions", 0,
		"TestFollowerLag: versions to carry from staging to prod (0 skips the benchmark; make bench runs it)")
	lagInterval = flag.Duration("records.lag-interval", 5*time.Second,
		"TestFollowerLag: how often prod's controller reads staging's stream (--upstream-records-interval)")
)

// TestFollowerLag is the follower-lag benchmark, run by make bench: from staging's Promotion seen
// Verified in cluster A (polled every 10 ms) to prod's automatic Promotion of that version
// created in cluster B (its exact creation time, stagecoach.dev/created-at), one new version at a
// time. The goal is at most one poll interval plus 1 s; it prints p50, max, the goal and
// max/goal, and fails only when a lag misses the goal.
func TestFollowerLag(t *testing.T) {
	if *lagVersions <= 0 {
		t.Skip("a benchmark: run with -records.lag-versions=N (make bench)")
	}
	g := NewWithT(t)
	nsA, nsB, _ := pipeline(t)
	startA(t, nil)
	start(t, envB, func(o *controller.Options) {
		o.UpstreamTrust = trustFile
		o.UpstreamRecordsInterval = *lagInterval
	})
	var lags []time.Duration
	for i := range *lagVersions {
		tag := fmt.Sprintf("lag%d", i)
		digest := pushVersion(t, tag)
		name := fmt.Sprintf("staging-%d", i)
		promote(t, envA, nsA, name, "staging", digest, tag, nil)
		land(t, envA, nsA, "staging", digest, true)
		var verified time.Time
		g.Eventually(func(g Gomega) {
			p := getPromotion(g, t, envA, nsA, name)
			g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhaseSucceeded), p.Status.Message)
			verified = time.Now()
		}, timeout, 10*time.Millisecond).Should(Succeed())
		var created time.Time
		g.Eventually(func(g Gomega) {
			for _, q := range promotionsOf(g, t, envB, nsB) {
				if q.Spec.Version != nil && q.Spec.Version.Digest == digest {
					created, _ = time.Parse(time.RFC3339Nano, q.Annotations[stagecoachv1.CreatedAtAnnotation])
				}
			}
			g.Expect(created).NotTo(BeZero())
		}, *lagInterval+timeout, 10*time.Millisecond).Should(Succeed())
		lags = append(lags, created.Sub(verified))
		land(t, envB, nsB, "prod", digest, true)
		// The next version starts once prod runs this one, as in a steady pipeline.
		g.Eventually(func(g Gomega) {
			prod := getStage(g, t, envB, nsB, "prod")
			g.Expect(prod.Status.Current).NotTo(BeNil())
			g.Expect(prod.Status.Current.Digest).To(Equal(digest))
		}, timeout, interval).Should(Succeed())
	}
	sorted := append([]time.Duration(nil), lags...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	goal := *lagInterval + time.Second
	p50, worst := sorted[len(sorted)/2], sorted[len(sorted)-1]
	round := func(ds []time.Duration) []string {
		out := make([]string, len(ds))
		for i, d := range ds {
			out[i] = d.Round(time.Millisecond).String()
		}
		return out
	}
	fmt.Printf("REPORT: follower lag (staging Verified in cluster A -> prod's Promotion created in cluster B), %d versions, poll interval %s: p50 %s, max %s (%v); goal <= %s; max/goal %.2f\n",
		len(lags), *lagInterval, p50.Round(time.Millisecond), worst.Round(time.Millisecond), round(lags), goal, worst.Seconds()/goal.Seconds())
	g.Expect(worst).To(BeNumerically("<=", goal), "the follower lag misses its goal of one poll interval plus 1 s")
}
