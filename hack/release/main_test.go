package main

import (
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
	"github.com/sigstore/cosign/v3/pkg/cosign"

	"github.com/stagecoach-dev/stagecoach/internal/imagesign"
	"github.com/stagecoach-dev/stagecoach/internal/verify"
	"github.com/stagecoach-dev/stagecoach/internal/verify/verifytest"
)

// fakeDist is a dist/ as `make image` leaves it: the image's OCI layout and its tarball.
func fakeDist(t *testing.T) (string, v1.Image) {
	t.Helper()
	g := NewWithT(t)
	dist := t.TempDir()
	img, err := random.Image(256, 1)
	g.Expect(err).NotTo(HaveOccurred())
	p, err := layout.Write(filepath.Join(dist, "image"), empty.Index)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.AppendImage(img)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dist, "stagecoach-image.tar"), []byte("tarball"), 0o644)).To(Succeed())
	return dist, img
}

// make release with a cosign key signs the image into dist/image-signature; pushed beside the
// image (as make image-push does), the signature verifies with the project's verifier under the
// release's public key and not under another; a wrong password fails the release, and a release
// without a key leaves no signature (not even an earlier one).
func TestReleaseSignsTheImage(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	repo := strings.TrimPrefix(srv.URL, "http://") + "/team/stagecoach"

	keys, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return []byte("s3cret"), nil })
	g.Expect(err).NotTo(HaveOccurred())
	keyFile := filepath.Join(t.TempDir(), "cosign.key")
	g.Expect(os.WriteFile(keyFile, keys.PrivateBytes, 0o600)).To(Succeed())

	dist, img := fakeDist(t)
	digest, err := img.Digest()
	g.Expect(err).NotTo(HaveOccurred())
	release := Options{Version: "v0.1.0", Image: repo, Dist: dist, Repo: "../..", CosignKey: keyFile, CosignPassword: []byte("s3cret")}
	_, err = Release(t.Context(), release)
	g.Expect(err).NotTo(HaveOccurred())
	sig, err := imagesign.ReadLayout(filepath.Join(dist, SignatureDir))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sig.Tag).To(Equal("sha256-" + digest.Hex + ".sig"))

	// make image-push: the image, then its signature.
	tag, err := name.NewTag(repo + ":v0.1.0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(remote.Write(tag, img, remote.WithContext(t.Context()))).To(Succeed())
	_, err = imagesign.Push(t.Context(), filepath.Join(dist, SignatureDir), repo, digest)
	g.Expect(err).NotTo(HaveOccurred())

	for _, tc := range []struct {
		name       string
		key        []byte
		wantReason string
	}{
		{name: "verified with the release key", key: keys.PublicBytes, wantReason: verify.ReasonSignatureVerified},
		{name: "refused with another key", key: verifytest.NewKeyPair(t).PublicPEM, wantReason: verify.ReasonSignatureInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			v, err := verify.New(verify.Options{Keys: [][]byte{tc.key}})
			g.Expect(err).NotTo(HaveOccurred())
			verdict, err := v.Verify(t.Context(), repo+"@"+digest.String())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(verdict.Reason).To(Equal(tc.wantReason), verdict.Message)
			g.Expect(verdict.Verified).To(Equal(tc.wantReason == verify.ReasonSignatureVerified))
		})
	}

	t.Run("a wrong password fails the release", func(t *testing.T) {
		g := NewWithT(t)
		wrong := release
		wrong.CosignPassword = []byte("nope")
		_, err := Release(t.Context(), wrong)
		g.Expect(err).To(MatchError(ContainSubstring("COSIGN_PASSWORD")))
	})
	t.Run("without a key, no signature is left in dist", func(t *testing.T) {
		g := NewWithT(t)
		_, err := Release(t.Context(), release)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(filepath.Join(dist, SignatureDir)).To(BeADirectory())
		unsigned := release
		unsigned.CosignKey = ""
		_, err = Release(t.Context(), unsigned)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(filepath.Join(dist, SignatureDir)).NotTo(BeADirectory())
	})
}
