package main

import (
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	. "github.com/onsi/gomega"

	"github.com/stagecoach-dev/stagecoach/internal/verify/verifytest"
)

// The plugin renders a digest only when a mounted key signed it, checked against a real
// registry (in memory, on loopback), whatever the format.
func TestCMPGenerateVerifiesSignatures(t *testing.T) {
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)), ggcrregistry.WithReferrersSupport(true)))
	t.Cleanup(srv.Close)
	repo := strings.TrimPrefix(srv.URL, "http://") + "/deploy/payments"
	release, other := verifytest.NewKeyPair(t), verifytest.NewKeyPair(t)
	keysDir := t.TempDir()
	NewWithT(t).Expect(os.WriteFile(filepath.Join(keysDir, "release.pub"), release.PublicPEM, 0o600)).To(Succeed())
	NewWithT(t).Expect(os.MkdirAll(filepath.Join(keysDir, "..data"), 0o700)).To(Succeed()) // as in a mounted Secret

	legacy := verifytest.PushRandomImage(t, repo, "v1.0.0")
	verifytest.SignLegacy(t, t.Context(), legacy, release)
	bundle := verifytest.PushRandomImage(t, repo, "v2.0.0")
	verifytest.SignBundle(t, t.Context(), bundle, release)
	unsigned := verifytest.PushRandomImage(t, repo, "v3.0.0")
	foreign := verifytest.PushRandomImage(t, repo, "v4.0.0")
	verifytest.SignLegacy(t, t.Context(), foreign, other)
	copied := verifytest.PushRandomImage(t, repo, "v5.0.0")
	verifytest.CopyLegacySignature(t, legacy, copied)

	app := filepath.Join(t.TempDir(), "repo", "apps", "web")
	NewWithT(t).Expect(os.MkdirAll(app, 0o755)).To(Succeed())
	NewWithT(t).Expect(os.WriteFile(filepath.Join(app, ".stagecoach.yaml"), []byte("stage: web\nimages: ["+repo+"]\n"), 0o644)).To(Succeed())
	NewWithT(t).Expect(os.WriteFile(filepath.Join(app, "pod.yaml"), []byte(
		"apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - {name: web, image: "+repo+":latest}\n"), 0o644)).To(Succeed())

	digestOf := func(ref string) string { return ref[strings.Index(ref, "@")+1:] }
	for _, tc := range []struct {
		name, ref, wantErr string
	}{
		{name: "legacy signature", ref: legacy},
		{name: "bundle", ref: bundle},
		{name: "unsigned", ref: unsigned, wantErr: "SignatureMissing"},
		{name: "another key", ref: foreign, wantErr: "SignatureInvalid"},
		{name: "signature copied from another digest", ref: copied, wantErr: "SignatureInvalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			argoCDEnv(t, "apps/web", map[string]string{"ARGOCD_ENV_STAGECOACH_DIGEST": digestOf(tc.ref), verifyKeysDirEnv: keysDir})
			out, _, err := runCMPGenerate(t, app, nil)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(out).To(ContainSubstring("image: " + tc.ref))
				return
			}
			g.Expect(err).To(MatchError(And(ContainSubstring(tc.wantErr), ContainSubstring(digestOf(tc.ref)))))
			g.Expect(err.Error()).NotTo(ContainSubstring("\n"))
			g.Expect(out).To(BeEmpty())
		})
	}
}
