package registry

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// Soak for a registry source counts from when a digest was first offered: later listings keep
// that time, a tag moved to a new digest starts again, and after a restart the Stage's candidate
// keeps the time status recorded.
func TestOfferFirstSeen(t *testing.T) {
	g := NewWithT(t)
	reg := newTestRegistry(t, nil)
	repo := reg.repo("team/app")
	v1 := reg.push(t, repo, "v1.0.0")
	stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: "app"},
		Spec: stagecoachv1.StageSpec{Source: stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{
			Repository: repo, Interval: &metav1.Duration{Duration: time.Minute}}}}}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 500, time.UTC)
	firstSeenAt := func(s *Source, now time.Time) map[string]time.Time {
		offer, err := s.Offer(t.Context(), stage, now)
		g.Expect(err).NotTo(HaveOccurred())
		out := map[string]time.Time{}
		for _, c := range offer.Candidates {
			g.Expect(c.FirstSeen).NotTo(BeNil(), c.Tag)
			out[c.Tag] = c.FirstSeen.Time
		}
		return out
	}
	src := &Source{Lister: &Lister{}}
	g.Expect(firstSeenAt(src, t0)).To(Equal(map[string]time.Time{"v1.0.0": t0.Truncate(time.Second)}))

	reg.push(t, repo, "v1.1.0")
	later := t0.Add(2 * time.Minute)
	g.Expect(firstSeenAt(src, later)).To(Equal(map[string]time.Time{
		"v1.0.0": t0.Truncate(time.Second), "v1.1.0": later.Truncate(time.Second)}))

	// v1.0.0 moved to a new digest: a new version, seen now.
	moved := reg.push(t, repo, "v1.0.0")
	g.Expect(moved).NotTo(Equal(v1))
	evenLater := later.Add(2 * time.Minute)
	g.Expect(firstSeenAt(src, evenLater)).To(Equal(map[string]time.Time{
		"v1.0.0": evenLater.Truncate(time.Second), "v1.1.0": later.Truncate(time.Second)}))

	// A restarted controller remembers the candidate's time from status, the rest from now.
	recorded := metav1.NewTime(t0.Add(-time.Hour))
	stage.Status.Candidate = &stagecoachv1.CandidateVersion{Version: "v1.0.0", Digest: moved, FirstSeen: &recorded}
	restarted := &Source{Lister: &Lister{}}
	afterRestart := evenLater.Add(time.Minute)
	g.Expect(firstSeenAt(restarted, afterRestart)).To(Equal(map[string]time.Time{
		"v1.0.0": recorded.Time, "v1.1.0": afterRestart.Truncate(time.Second)}))
}

// A look that ends in a block (here: the repository is not there yet) is tried again within
// seconds, backing off, not after the Stage's interval; once a look succeeds the interval rules.
func TestBlockedLooksRetrySoon(t *testing.T) {
	reg := newTestRegistry(t, nil)
	repo := reg.repo("team/later")
	stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: "app"},
		Spec: stagecoachv1.StageSpec{Source: stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{
			Repository: repo, Interval: &metav1.Duration{Duration: time.Hour}}}}}
	src := &Source{Lister: &Lister{}}
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	for _, step := range []struct {
		name        string
		after       time.Duration
		push        string
		wantReason  string
		wantTags    []string
		wantRecheck time.Duration
	}{
		{name: "no repository yet", wantReason: stagecoachv1.ReasonRepositoryNotFound, wantRecheck: 5 * time.Second},
		{name: "looked again after 5s, still none", after: 5 * time.Second, wantReason: stagecoachv1.ReasonRepositoryNotFound, wantRecheck: 10 * time.Second},
		{name: "pushed, but the block stands until the backoff passes", after: 14 * time.Second, push: "v1.0.0",
			wantReason: stagecoachv1.ReasonRepositoryNotFound, wantRecheck: time.Second},
		{name: "looked again after 10s more", after: 15 * time.Second, wantTags: []string{"v1.0.0"}, wantRecheck: time.Hour},
		{name: "then the interval rules", after: 15*time.Second + 30*time.Minute, push: "v1.1.0", wantTags: []string{"v1.0.0"}, wantRecheck: 30 * time.Minute},
	} {
		t.Run(step.name, func(t *testing.T) {
			g := NewWithT(t)
			if step.push != "" {
				reg.push(t, repo, step.push)
			}
			offer, err := src.Offer(t.Context(), stage, t0.Add(step.after))
			g.Expect(err).NotTo(HaveOccurred())
			if step.wantReason != "" {
				g.Expect(offer.Block).To(HaveField("Reason", step.wantReason))
			} else {
				g.Expect(offer.Block).To(BeNil())
			}
			var tags []string
			for _, c := range offer.Candidates {
				tags = append(tags, c.Tag)
			}
			g.Expect(tags).To(Equal(step.wantTags))
			g.Expect(offer.Recheck).To(Equal(step.wantRecheck))
		})
	}
}
