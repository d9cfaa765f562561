package registry

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/verify"
	"github.com/stagecoach-dev/stagecoach/internal/verify/verifytest"
)

// Push, then sign (issue 31): CI pushes an image and signs it a moment later. A listing in
// between caches "not signed"; the next listing — at the interval, or at once when a person asks
// with stagecoach.dev/requested-at — checks the digest again instead of waiting for the cached
// verdict to expire. Verified verdicts stay cached.
func TestListingRechecksUnsignedDigests(t *testing.T) {
	sigstore := verifytest.NewSigstore(t)
	ci := verifytest.GitHubActions("org/app", "release.yml", "refs/tags/v1.0.0")
	identities := []verify.Identity{{Issuer: "^" + verifytest.GitHubIssuer + "$", Subject: "^https://github.com/org/app/.*$"}}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

	tests := []struct {
		name string
		// next is what happens after the signature is pushed: it returns the time of the next
		// Offer and may ask for a listing.
		next         func(stage *stagecoachv1.Stage) time.Time
		wantVerified bool
	}{
		{name: "a person asks for a listing", wantVerified: true, next: func(stage *stagecoachv1.Stage) time.Time {
			stage.Annotations = map[string]string{stagecoachv1.ReconcileRequestAnnotation: "2026-12-01T10:00:05Z"}
			return t0.Add(5 * time.Second)
		}},
		{name: "the interval passes", wantVerified: true, next: func(*stagecoachv1.Stage) time.Time {
			return t0.Add(time.Minute)
		}},
		{name: "no listing in between keeps the verdict", wantVerified: false, next: func(*stagecoachv1.Stage) time.Time {
			return t0.Add(5 * time.Second)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			reg := newTestRegistry(t, nil)
			repo := reg.repo("team/app")
			digest := reg.push(t, repo, "v1.0.0")
			stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: "app"},
				Spec: stagecoachv1.StageSpec{Source: stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{
					Repository: repo, Interval: &metav1.Duration{Duration: time.Minute}}}}}
			cache := verify.NewCache(0)
			src := &Source{Lister: &Lister{}, Verdicts: cache}
			// An hour: only a listing can make the verifier look again within the test.
			v, err := verify.New(verify.Options{Identities: identities, TrustedRoot: sigstore.TrustedRoot(), Cache: cache, NegativeTTL: time.Hour})
			g.Expect(err).NotTo(HaveOccurred())
			verdictAt := func(now time.Time) verify.Verdict {
				offer, err := src.Offer(t.Context(), stage, now)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(offer.Candidates).To(HaveLen(1))
				g.Expect(offer.Candidates[0].Digest).To(Equal(digest))
				verdict, err := v.Verify(t.Context(), repo+"@"+digest)
				g.Expect(err).NotTo(HaveOccurred())
				return verdict
			}

			g.Expect(verdictAt(t0).Reason).To(Equal(verify.ReasonSignatureMissing))
			sigstore.SignBundle(t, t.Context(), repo+"@"+digest, ci, verifytest.Keyless{})
			verdict := verdictAt(tt.next(stage))
			g.Expect(verdict.Verified).To(Equal(tt.wantVerified), verdict.Message)
			if !tt.wantVerified {
				return
			}
			// A verified verdict survives the next listing: no registry request to verify again.
			stage.Annotations = map[string]string{stagecoachv1.ReconcileRequestAnnotation: "again"}
			offer, err := src.Offer(t.Context(), stage, t0.Add(2*time.Minute))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(offer.Candidates).To(HaveLen(1))
			heads, gets := reg.heads.Load(), reg.gets.Load()
			again, err := v.Verify(t.Context(), repo+"@"+digest)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(again).To(Equal(verdict))
			g.Expect([]int64{reg.heads.Load(), reg.gets.Load()}).To(Equal([]int64{heads, gets}))
		})
	}
}
