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

// Keyless (issue 31): the keys directory may list CI identities in verify.yaml, spelled as a
// Stage's verify.matchOIDCIdentity, with the Sigstore's trusted_root.json beside them. The plugin
// renders a digest only when a trusted identity signed it, certified by that root; a refusal
// names the identity the certificate carries.
func TestCMPGenerateVerifiesKeylessSignatures(t *testing.T) {
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)), ggcrregistry.WithReferrersSupport(true)))
	t.Cleanup(srv.Close)
	repo := strings.TrimPrefix(srv.URL, "http://") + "/deploy/payments"
	sigstore, other := verifytest.NewSigstore(t), verifytest.NewSigstore(t)
	key := verifytest.NewKeyPair(t)
	release := verifytest.GitHubActions("org/payments", "release.yml", "refs/tags/v1.0.0")
	nightly := verifytest.GitHubActions("org/payments", "nightly.yml", "refs/heads/main")
	const identities = "matchOIDCIdentity:\n" +
		"- issuer: ^https://token.actions.githubusercontent.com$\n" +
		"  subject: ^https://github.com/org/payments/.github/workflows/release.yml@refs/tags/v.*$\n"
	dir := func(files map[string][]byte) string {
		d := t.TempDir()
		NewWithT(t).Expect(os.MkdirAll(filepath.Join(d, "..data"), 0o700)).To(Succeed()) // as in a mounted Secret
		for name, b := range files {
			NewWithT(t).Expect(os.WriteFile(filepath.Join(d, name), b, 0o600)).To(Succeed())
		}
		return d
	}
	keyless := dir(map[string][]byte{"verify.yaml": []byte(identities), "trusted_root.json": sigstore.TrustedRoot()})
	both := dir(map[string][]byte{"release.pub": key.PublicPEM, "verify.yaml": []byte(identities), "trusted_root.json": sigstore.TrustedRoot()})
	// No trusted_root.json: the public Sigstore instance's, which did not certify the virtual one.
	publicGood := dir(map[string][]byte{"verify.yaml": []byte(identities)})

	bundle := verifytest.PushRandomImage(t, repo, "v1.0.0")
	sigstore.SignBundle(t, t.Context(), bundle, release, verifytest.Keyless{})
	legacy := verifytest.PushRandomImage(t, repo, "v1.0.1")
	sigstore.SignLegacy(t, t.Context(), legacy, release, verifytest.Keyless{})
	byNightly := verifytest.PushRandomImage(t, repo, "v2.0.0")
	sigstore.SignBundle(t, t.Context(), byNightly, nightly, verifytest.Keyless{})
	byOtherRoot := verifytest.PushRandomImage(t, repo, "v3.0.0")
	other.SignBundle(t, t.Context(), byOtherRoot, release, verifytest.Keyless{})
	byKey := verifytest.PushRandomImage(t, repo, "v4.0.0")
	verifytest.SignBundle(t, t.Context(), byKey, key)

	app := filepath.Join(t.TempDir(), "repo", "apps", "web")
	NewWithT(t).Expect(os.MkdirAll(app, 0o755)).To(Succeed())
	NewWithT(t).Expect(os.WriteFile(filepath.Join(app, ".stagecoach.yaml"), []byte("stage: web\nimages: ["+repo+"]\n"), 0o644)).To(Succeed())
	NewWithT(t).Expect(os.WriteFile(filepath.Join(app, "pod.yaml"), []byte(
		"apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - {name: web, image: "+repo+":latest}\n"), 0o644)).To(Succeed())

	digestOf := func(ref string) string { return ref[strings.Index(ref, "@")+1:] }
	for _, tc := range []struct {
		name, keysDir, ref string
		wantErr            []string
	}{
		{name: "bundle signed by the trusted identity", keysDir: keyless, ref: bundle},
		{name: "legacy signature by the trusted identity", keysDir: keyless, ref: legacy},
		{name: "another identity is refused, naming it", keysDir: keyless, ref: byNightly,
			wantErr: []string{"SignatureInvalid", "identity mismatch", nightly.Subject}},
		{name: "certified by another Sigstore", keysDir: keyless, ref: byOtherRoot,
			wantErr: []string{"SignatureInvalid", "does not chain to a Fulcio certificate authority of the trusted root"}},
		{name: "without trusted_root.json the public instance's root is used", keysDir: publicGood, ref: bundle,
			wantErr: []string{"SignatureInvalid", "does not chain"}},
		{name: "signed with a key, only identities trusted", keysDir: keyless, ref: byKey,
			wantErr: []string{"SignatureInvalid", "only keyless identities are trusted"}},
		{name: "keys and identities: the key's signature", keysDir: both, ref: byKey},
		{name: "keys and identities: the identity's signature", keysDir: both, ref: bundle},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			argoCDEnv(t, "apps/web", map[string]string{"ARGOCD_ENV_STAGECOACH_DIGEST": digestOf(tc.ref), verifyKeysDirEnv: tc.keysDir})
			out, _, err := runCMPGenerate(t, app, nil)
			if tc.wantErr == nil {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(out).To(ContainSubstring("image: " + tc.ref))
				return
			}
			g.Expect(err).To(HaveOccurred())
			for _, m := range append(tc.wantErr, digestOf(tc.ref)) {
				g.Expect(err.Error()).To(ContainSubstring(m))
			}
			g.Expect(err.Error()).NotTo(ContainSubstring("\n"))
			g.Expect(out).To(BeEmpty())
		})
	}
}

// A keyless trust that cannot be used is refused in one line naming the file, never rendered
// unverified.
func TestCMPGenerateRefusesBadKeylessTrust(t *testing.T) {
	root := verifytest.NewSigstore(t).TrustedRoot()
	for _, tc := range []struct {
		name    string
		files   map[string]string
		wantErr string
	}{
		{name: "a trusted root without identities", files: map[string]string{"trusted_root.json": string(root)},
			wantErr: "trusted_root.json is for keyless signatures, but there is no verify.yaml"},
		{name: "a misspelt field", files: map[string]string{"verify.yaml": "matchOIDCIdentities: []\n"},
			wantErr: "verify.yaml is not of the form {matchOIDCIdentity: [{issuer, subject}]}"},
		{name: "no identity listed", files: map[string]string{"verify.yaml": "matchOIDCIdentity: []\n"},
			wantErr: "verify.yaml lists no matchOIDCIdentity"},
		{name: "an identity that is not a regular expression", files: map[string]string{"verify.yaml": "matchOIDCIdentity: [{issuer: '(', subject: x}]\n"},
			wantErr: `identity 1: issuer "(" is not a regular expression`},
		{name: "a trusted root that is not one", files: map[string]string{"verify.yaml": "matchOIDCIdentity: [{issuer: x, subject: y}]\n", "trusted_root.json": "{}"},
			wantErr: "trusted root:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			keysDir := t.TempDir()
			for name, b := range tc.files {
				g.Expect(os.WriteFile(filepath.Join(keysDir, name), []byte(b), 0o600)).To(Succeed())
			}
			argoCDEnv(t, "apps/plain", map[string]string{"ARGOCD_ENV_STAGECOACH_DIGEST": cmpTestDigest, verifyKeysDirEnv: keysDir})
			out, _, err := runCMPGenerate(t, fixtureApp(t, "apps/plain"), nil)
			g.Expect(err).To(MatchError(And(ContainSubstring("failed to load the verification keys in "+keysDir), ContainSubstring(tc.wantErr))))
			g.Expect(err.Error()).NotTo(ContainSubstring("\n"))
			g.Expect(out).To(BeEmpty())
		})
	}
}
