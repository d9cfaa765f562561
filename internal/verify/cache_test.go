package verify

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/stagecoach-dev/stagecoach/internal/verify/verifytest"
)

// ForgetUnsigned drops only the repository's verdicts that are not Verified, whatever trust
// reached them.
func TestCacheForgetUnsigned(t *testing.T) {
	g := NewWithT(t)
	reg := newTestRegistry(t, nil)
	kp := verifytest.NewKeyPair(t)
	repo, otherRepo := reg.host+"/team/app", reg.host+"/team/other"
	signed := verifytest.PushRandomImage(t, repo, "v1")
	verifytest.SignLegacy(t, t.Context(), signed, kp)
	unsigned := verifytest.PushRandomImage(t, repo, "v2")
	elsewhere := verifytest.PushRandomImage(t, otherRepo, "v1")
	cache := NewCache(0)
	byKey := mustNew(t, Options{Keys: [][]byte{kp.PublicPEM}, Cache: cache})
	byOtherKey := mustNew(t, Options{Keys: [][]byte{verifytest.NewKeyPair(t).PublicPEM}, Cache: cache})
	for _, ref := range []string{signed, unsigned, elsewhere} {
		_, err := byKey.Verify(t.Context(), ref)
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, err := byOtherKey.Verify(t.Context(), signed) // invalid for this key
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cache.Len()).To(Equal(4))

	g.Expect(cache.ForgetUnsigned(reg.host+"/team")).To(Equal(0), "a repository is not a prefix of another")
	g.Expect(cache.ForgetUnsigned(repo)).To(Equal(2), "missing v2, and v1 as the other key sees it")
	g.Expect(cache.Len()).To(Equal(2))
	g.Expect(cache.ForgetUnsigned(repo)).To(Equal(0))
	g.Expect(cache.ForgetUnsigned(otherRepo)).To(Equal(1))
}
