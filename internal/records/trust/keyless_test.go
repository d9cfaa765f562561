package trust

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/stagecoach-dev/stagecoach/internal/verify/verifytest"
)

const ciIdentity = "  matchOIDCIdentity:\n  - issuer: ^https://token.actions.githubusercontent.com$\n" +
	"    subject: ^https://github.com/org/delivery/.github/workflows/record.yml@refs/heads/main$\n"

func TestParseKeylessRefuses(t *testing.T) {
	_, pub := newKey(t)
	bound := "  repositories: [" + repoA + "]\n  streams: [x]\n"
	for _, tc := range []struct {
		name, in, wantErr string
	}{
		{name: "a key and identities in one entry", in: "keys:\n- name: a\n  publicKey: |\n" + indent(pub) + "\n" + ciIdentity + bound,
			wantErr: `keys[0] (name "a"): give publicKey or matchOIDCIdentity, not both`},
		{name: "a trusted root without identities", in: "keys:\n- name: a\n  trustedRoot: '{}'\n" + bound,
			wantErr: `keys[0] (name "a"): trustedRoot is for keyless signatures`},
		{name: "an identity that is not a regular expression", in: "keys:\n- name: a\n  matchOIDCIdentity: [{issuer: '(', subject: x}]\n" + bound,
			wantErr: `keys[0] (name "a"): matchOIDCIdentity: identity 1: issuer "(" is not a regular expression`},
		{name: "an empty subject", in: "keys:\n- name: a\n  matchOIDCIdentity: [{issuer: x}]\n" + bound,
			wantErr: `matchOIDCIdentity: identity 1: subject is empty`},
		{name: "a trusted root that is not one", in: "keys:\n- name: a\n" + ciIdentity + "  trustedRoot: '{}'\n" + bound,
			wantErr: `keys[0] (name "a"): matchOIDCIdentity: trusted root:`},
		{name: "a misspelt field", in: "keys:\n- name: a\n  matchOIDCIdentities: []\n" + bound, wantErr: `unknown field "matchOIDCIdentities"`},
		{name: "identities still need streams", in: "keys:\n- name: a\n" + ciIdentity, wantErr: `keys[0] (name "a"): streams is empty`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in))
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

// A keyless entry vouches for a Sigstore bundle of the record bytes made by one of its
// identities and certified by its trusted root, bound like a key to streams and repositories;
// a refusal names the identity the certificate carries.
func TestVerifyBundleBindsIdentities(t *testing.T) {
	sigstore, other := verifytest.NewSigstore(t), verifytest.NewSigstore(t)
	sv, pub := newKey(t)
	root, err := yaml.Marshal(string(sigstore.TrustedRoot()))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	cfg, err := Parse([]byte("keys:\n" +
		"- name: staging-ci\n" + ciIdentity + "  trustedRoot: " + strings.TrimSpace(string(root)) + "\n  repositories: [" + repoA + "]\n  streams: [\"c1/staging/*\"]\n" +
		"- name: staging-key\n  publicKey: |\n" + indent(pub) + "\n  repositories: [" + repoA + "]\n  streams: [\"c1/staging/*\"]\n"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(cfg.Keys[0].Keyless()).To(BeTrue())
	NewWithT(t).Expect(cfg.Keys[0].ID).To(Equal("keyless"))
	msg := []byte(`{"seq":1}`)
	recorder := verifytest.GitHubActions("org/delivery", "record.yml", "refs/heads/main")
	nightly := verifytest.GitHubActions("org/delivery", "nightly.yml", "refs/heads/main")
	for _, tc := range []struct {
		name, repository, stream string
		bundle                   []byte
		message                  []byte
		wantErr                  []string // "" entries: trusted
	}{
		{name: "the trusted identity", bundle: sigstore.SignBlob(t, msg, recorder, verifytest.Keyless{})},
		{name: "another identity", bundle: sigstore.SignBlob(t, msg, nightly, verifytest.Keyless{}),
			wantErr: []string{"staging-ci: identity mismatch", nightly.Subject}},
		{name: "another Sigstore", bundle: other.SignBlob(t, msg, recorder, verifytest.Keyless{}),
			wantErr: []string{"staging-ci: certificate", "does not chain"}},
		{name: "another record", bundle: sigstore.SignBlob(t, msg, recorder, verifytest.Keyless{}), message: []byte(`{"seq":2}`),
			wantErr: []string{"bundle signs message digest"}},
		{name: "a stream the entry is not bound to", stream: "c1/prod/payments", bundle: sigstore.SignBlob(t, msg, recorder, verifytest.Keyless{}),
			wantErr: []string{`no keyless entry (matchOIDCIdentity) is bound to stream "c1/prod/payments"`}},
		{name: "another repository", repository: "registry-b.example/delivery/streams", bundle: sigstore.SignBlob(t, msg, recorder, verifytest.Keyless{}),
			wantErr: []string{"no keyless entry"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			repository, stream, message := repoA, "c1/staging/payments", msg
			if tc.repository != "" {
				repository = tc.repository
			}
			if tc.stream != "" {
				stream = tc.stream
			}
			if tc.message != nil {
				message = tc.message
			}
			name, signer, err := cfg.VerifyBundle(repository, stream, message, tc.bundle)
			if tc.wantErr == nil {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(name).To(Equal("staging-ci"))
				g.Expect(signer.Subject).To(Equal(recorder.Subject))
				return
			}
			g.Expect(err).To(HaveOccurred())
			for _, s := range tc.wantErr {
				g.Expect(err.Error()).To(ContainSubstring(s))
			}
		})
	}
	t.Run("a plain signature never verifies with a keyless entry", func(t *testing.T) {
		g := NewWithT(t)
		sig, err := sv.SignMessage(strings.NewReader(string(msg)))
		g.Expect(err).NotTo(HaveOccurred())
		name, ok := cfg.Verify(repoA, "c1/staging/payments", msg, sig)
		g.Expect(ok).To(BeTrue())
		g.Expect(name).To(Equal("staging-key"), "the key entry, not the keyless one")
		g.Expect(cfg.Keys[0].Verify(msg, sig)).To(MatchError(ContainSubstring("trusts keyless identities, not a key")))
	})
}
