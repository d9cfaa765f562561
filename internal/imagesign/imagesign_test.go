package imagesign

import (
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"

	"github.com/stagecoach-dev/stagecoach/internal/verify"
	"github.com/stagecoach-dev/stagecoach/internal/verify/verifytest"
)

// A signature made here, written to an OCI layout and pushed from it, verifies with the
// project's own verifier under the release key only, and names the image's digest.
func TestSignWriteAndPushVerify(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	repo := strings.TrimPrefix(srv.URL, "http://") + "/team/stagecoach"
	img, err := random.Image(128, 1)
	g.Expect(err).NotTo(HaveOccurred())
	tag, err := name.NewTag(repo + ":v0.1.0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(remote.Write(tag, img, remote.WithContext(t.Context()))).To(Succeed())
	digest, err := img.Digest()
	g.Expect(err).NotTo(HaveOccurred())

	// An encrypted cosign key costs seconds of scrypt under -race: hack/release's test signs
	// with one; any signer will do here.
	release := verifytest.NewKeyPair(t)
	sig, err := Sign(release.Signer, repo, digest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sig.Tag).To(Equal("sha256-" + digest.Hex + ".sig"))

	// The manifest is cosign's: one simple-signing layer with the signature annotation, whose
	// payload names the digest.
	m, err := sig.Image.Manifest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.Layers).To(HaveLen(1))
	g.Expect(string(m.Layers[0].MediaType)).To(Equal("application/vnd.dev.cosign.simplesigning.v1+json"))
	g.Expect(m.Layers[0].Annotations).To(HaveKey("dev.cosignproject.cosign/signature"))
	layers, err := sig.Image.Layers()
	g.Expect(err).NotTo(HaveOccurred())
	rc, err := layers[0].Uncompressed()
	g.Expect(err).NotTo(HaveOccurred())
	var pl struct {
		Critical struct {
			Identity struct {
				DockerReference string `json:"docker-reference"`
			} `json:"identity"`
			Image struct {
				Digest string `json:"docker-manifest-digest"`
			} `json:"image"`
		} `json:"critical"`
	}
	g.Expect(json.NewDecoder(rc).Decode(&pl)).To(Succeed())
	g.Expect(pl.Critical.Image.Digest).To(Equal(digest.String()))
	g.Expect(pl.Critical.Identity.DockerReference).To(Equal(repo))

	dir := filepath.Join(t.TempDir(), "image-signature")
	g.Expect(WriteLayout(dir, sig)).To(Succeed())
	pushed, err := Push(t.Context(), dir, repo, digest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pushed).To(Equal(repo + ":" + sig.Tag))

	other := verifytest.NewKeyPair(t) // any other key
	for _, tc := range []struct {
		name       string
		key        []byte
		wantReason string
	}{
		{name: "the release key verifies it", key: release.PublicPEM, wantReason: verify.ReasonSignatureVerified},
		{name: "another key does not", key: other.PublicPEM, wantReason: verify.ReasonSignatureInvalid},
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
}

func TestLoadKeyAndPushRefusals(t *testing.T) {
	pub := verifytest.NewKeyPair(t).PublicPEM
	for _, tc := range []struct {
		name    string
		key     []byte
		wantErr string
	}{
		// A good key with a good or bad password: hack/release's test (scrypt is slow).
		{name: "a public key", key: pub, wantErr: "unsupported pem type"},
		{name: "not PEM", key: []byte("hello"), wantErr: "invalid pem block"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadKey(tc.key, []byte("s3cret"))
			NewWithT(t).Expect(err).To(MatchError(And(ContainSubstring(tc.wantErr), ContainSubstring("COSIGN_PASSWORD"))))
		})
	}
	t.Run("a signature of another digest is not pushed", func(t *testing.T) {
		g := NewWithT(t)
		one, err := random.Image(16, 1)
		g.Expect(err).NotTo(HaveOccurred())
		two, err := random.Image(16, 1)
		g.Expect(err).NotTo(HaveOccurred())
		d1, _ := one.Digest()
		d2, _ := two.Digest()
		sig, err := Sign(verifytest.NewKeyPair(t).Signer, "registry.example/stagecoach", d1)
		g.Expect(err).NotTo(HaveOccurred())
		dir := filepath.Join(t.TempDir(), "sig")
		g.Expect(WriteLayout(dir, sig)).To(Succeed())
		_, err = Push(t.Context(), dir, "registry.example/stagecoach", d2)
		g.Expect(err).To(MatchError(ContainSubstring("run make release again")))
	})
}
