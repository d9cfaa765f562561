package verify

import (
	"bytes"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/stagecoach-dev/stagecoach/internal/verify/verifytest"
)

// The CI identity the tests trust, as a Stage lists it (Flux's spelling).
var (
	releaseCI = verifytest.GitHubActions("org/app", "release.yml", "refs/tags/v1.0.0")
	trustCI   = Identity{Issuer: "^https://token.actions.githubusercontent.com$",
		Subject: "^https://github.com/org/app/.github/workflows/release.yml@refs/tags/v.*$"}
)

func TestVerifyKeyless(t *testing.T) {
	sigstore := verifytest.NewSigstore(t)
	other := verifytest.NewSigstore(t)
	key := verifytest.NewKeyPair(t)
	tamper := func(p []byte) []byte {
		return bytes.Replace(p, []byte(`"predicate":{}`), []byte(`"predicate":{"x":1}`), 1)
	}
	tamperLegacy := func(p []byte) []byte {
		return bytes.Replace(p, []byte(`"optional":null`), []byte(`"optional":{"x":"1"}`), 1)
	}

	tests := []struct {
		name       string
		setup      func(t *testing.T, repo string) string
		identities []Identity
		keys       [][]byte
		// root is the trusted root; nil means sigstore's, publicGood the one Stagecoach ships.
		root        []byte
		publicGood  bool
		wantReason  string
		wantFailure string
		wantFormat  string
		wantSigner  string
		wantInMsg   []string
	}{
		{
			name: "bundle signed by the listed CI identity",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				sigstore.SignBundle(t, t.Context(), ref, releaseCI, verifytest.Keyless{})
				return ref
			},
			wantReason: ReasonSignatureVerified, wantFormat: FormatBundle, wantSigner: releaseCI.Subject,
			wantInMsg: []string{"signed keyless by", releaseCI.Subject, "issuer " + verifytest.GitHubIssuer,
				"workflow " + releaseCI.Workflow, "ref refs/tags/v1.0.0", "repository https://github.com/org/app"},
		},
		{
			name: "legacy .sig signed by the listed CI identity",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				sigstore.SignLegacy(t, t.Context(), ref, releaseCI, verifytest.Keyless{})
				return ref
			},
			wantReason: ReasonSignatureVerified, wantFormat: FormatLegacy, wantSigner: releaseCI.Subject,
			wantInMsg: []string{"signed keyless by", "legacy signature 1"},
		},
		{
			name: "signed timestamp alone is enough when the root has no transparency log",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				sigstore.SignBundle(t, t.Context(), ref, releaseCI, verifytest.Keyless{NoLogEntry: true})
				return ref
			},
			root:       withoutLogs(t, sigstore.TrustedRoot()),
			wantReason: ReasonSignatureVerified, wantFormat: FormatBundle, wantSigner: releaseCI.Subject,
		},
		{
			name: "another subject (another repository's workflow)",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				sigstore.SignBundle(t, t.Context(), ref, verifytest.GitHubActions("org/fork", "release.yml", "refs/tags/v1.0.0"), verifytest.Keyless{})
				return ref
			},
			wantReason: ReasonSignatureInvalid, wantFailure: FailureIdentity, wantFormat: FormatBundle,
			wantSigner: "https://github.com/org/fork/.github/workflows/release.yml@refs/tags/v1.0.0",
			wantInMsg:  []string{"identity mismatch: signed by subject \"https://github.com/org/fork/", "matches none of the trusted identities"},
		},
		{
			name: "another issuer",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				ci := releaseCI
				ci.Issuer = "https://gitlab.com"
				sigstore.SignBundle(t, t.Context(), ref, ci, verifytest.Keyless{})
				return ref
			},
			wantReason: ReasonSignatureInvalid, wantFailure: FailureIdentity, wantFormat: FormatBundle, wantSigner: releaseCI.Subject,
			wantInMsg: []string{"identity mismatch", "issuer https://gitlab.com"},
		},
		{
			name: "the subject must match whole, not contain a match",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				sigstore.SignBundle(t, t.Context(), ref, verifytest.GitHubActions("evil/x", "a.yml", "refs/heads/https://github.com/org/app/"), verifytest.Keyless{})
				return ref
			},
			identities: []Identity{{Issuer: "token.actions.githubusercontent.com", Subject: "https://github.com/org/app/"}},
			wantReason: ReasonSignatureInvalid, wantFailure: FailureIdentity, wantFormat: FormatBundle,
		},
		{
			name: "certificate from another Sigstore's root",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				other.SignBundle(t, t.Context(), ref, releaseCI, verifytest.Keyless{})
				return ref
			},
			wantReason: ReasonSignatureInvalid, wantFailure: FailureRoot, wantFormat: FormatBundle,
			wantInMsg: []string{"does not chain to a Fulcio certificate authority of the trusted root"},
		},
		{
			name: "public Sigstore root (the default) does not trust a private Fulcio",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				sigstore.SignBundle(t, t.Context(), ref, releaseCI, verifytest.Keyless{})
				return ref
			},
			publicGood: true,
			wantReason: ReasonSignatureInvalid, wantFailure: FailureRoot, wantFormat: FormatBundle,
		},
		{
			name: "transparency log entry missing",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				sigstore.SignBundle(t, t.Context(), ref, releaseCI, verifytest.Keyless{NoLogEntry: true})
				return ref
			},
			wantReason: ReasonSignatureInvalid, wantFailure: FailureLog, wantFormat: FormatBundle, wantSigner: releaseCI.Subject,
			wantInMsg: []string{"no transparency log entry of the trusted root records this signature"},
		},
		{
			name: "log entry and timestamp outside the certificate's validity (expired certificate)",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				sigstore.SignBundle(t, t.Context(), ref, releaseCI, verifytest.Keyless{CertFrom: time.Now().Add(-30 * time.Minute)})
				return ref
			},
			wantReason: ReasonSignatureInvalid, wantFailure: FailureTime, wantFormat: FormatBundle,
			wantInMsg: []string{"an expired certificate without a log entry or timestamp inside its validity"},
		},
		{
			name: "signed timestamp outside the certificate's validity (a root without logs)",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				sigstore.SignBundle(t, t.Context(), ref, releaseCI, verifytest.Keyless{NoLogEntry: true, CertFrom: time.Now().Add(-30 * time.Minute)})
				return ref
			},
			root:       withoutLogs(t, sigstore.TrustedRoot()),
			wantReason: ReasonSignatureInvalid, wantFailure: FailureTime, wantFormat: FormatBundle,
			wantInMsg: []string{"was not valid when the log or timestamp authority saw the signature"},
		},
		{
			name: "certificate without SCT",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				sigstore.SignBundle(t, t.Context(), ref, releaseCI, verifytest.Keyless{NoSCT: true})
				return ref
			},
			wantReason: ReasonSignatureInvalid, wantFailure: FailureSCT, wantFormat: FormatBundle,
			wantInMsg: []string{"no valid SCT"},
		},
		{
			name: "bundle for another digest",
			setup: func(t *testing.T, repo string) string {
				a := verifytest.PushRandomImage(t, repo, "a")
				b := verifytest.PushRandomImage(t, repo, "b")
				verifytest.AttachBundle(t, t.Context(), b, sigstore.SignBundle(t, t.Context(), a, releaseCI, verifytest.Keyless{}))
				return b
			},
			wantReason: ReasonSignatureInvalid, wantFailure: FailureClaim, wantFormat: FormatBundle,
			wantInMsg: []string{"bundle signs another digest"},
		},
		{
			name: "tampered payload",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				sigstore.SignBundle(t, t.Context(), ref, releaseCI, verifytest.Keyless{Tamper: tamper})
				return ref
			},
			wantReason: ReasonSignatureInvalid, wantFailure: FailureSignature, wantFormat: FormatBundle, wantSigner: releaseCI.Subject,
			wantInMsg: []string{"signature does not verify over what it signs"},
		},
		{
			name: "legacy: another subject",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				sigstore.SignLegacy(t, t.Context(), ref, verifytest.GitHubActions("org/app", "nightly.yml", "refs/heads/main"), verifytest.Keyless{})
				return ref
			},
			wantReason: ReasonSignatureInvalid, wantFailure: FailureIdentity, wantFormat: FormatLegacy,
			wantInMsg: []string{"nightly.yml@refs/heads/main"},
		},
		{
			name: "legacy: transparency log entry missing",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				sigstore.SignLegacy(t, t.Context(), ref, releaseCI, verifytest.Keyless{NoLogEntry: true})
				return ref
			},
			wantReason: ReasonSignatureInvalid, wantFailure: FailureLog, wantFormat: FormatLegacy,
		},
		{
			name: "legacy: log time outside the certificate's validity",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				sigstore.SignLegacy(t, t.Context(), ref, releaseCI, verifytest.Keyless{CertFrom: time.Now().Add(-30 * time.Minute)})
				return ref
			},
			wantReason: ReasonSignatureInvalid, wantFailure: FailureTime, wantFormat: FormatLegacy,
		},
		{
			name: "legacy: tampered payload",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				sigstore.SignLegacy(t, t.Context(), ref, releaseCI, verifytest.Keyless{Tamper: tamperLegacy})
				return ref
			},
			wantReason: ReasonSignatureInvalid, wantFailure: FailureSignature, wantFormat: FormatLegacy,
		},
		{
			name: "legacy: copied from another digest",
			setup: func(t *testing.T, repo string) string {
				a := verifytest.PushRandomImage(t, repo, "a")
				b := verifytest.PushRandomImage(t, repo, "b")
				sigstore.SignLegacy(t, t.Context(), a, releaseCI, verifytest.Keyless{})
				verifytest.CopyLegacySignature(t, a, b)
				return b
			},
			wantReason: ReasonSignatureInvalid, wantFailure: FailureClaim, wantFormat: FormatLegacy,
			wantInMsg: []string{"invalid or missing digest in claim"},
		},
		{
			name: "legacy: certificate from another root",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				other.SignLegacy(t, t.Context(), ref, releaseCI, verifytest.Keyless{})
				return ref
			},
			wantReason: ReasonSignatureInvalid, wantFailure: FailureRoot, wantFormat: FormatLegacy,
		},
		{
			name: "keyless signature when only keys are trusted",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				sigstore.SignBundle(t, t.Context(), ref, releaseCI, verifytest.Keyless{})
				return ref
			},
			keys: [][]byte{key.PublicPEM}, identities: []Identity{},
			wantReason: ReasonSignatureInvalid, wantFailure: FailureForm, wantFormat: FormatBundle,
			wantInMsg: []string{"signed keyless (a certificate naming subject", "list the signer in verify.matchOIDCIdentity"},
		},
		{
			name: "key signature when only identities are trusted",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				verifytest.SignLegacy(t, t.Context(), ref, key)
				return ref
			},
			wantReason: ReasonSignatureInvalid, wantFailure: FailureForm, wantFormat: FormatLegacy,
			wantInMsg: []string{"signed with a key, but only keyless identities are trusted"},
		},
		{
			name: "keys and identities: a keyless signature counts",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				sigstore.SignLegacy(t, t.Context(), ref, releaseCI, verifytest.Keyless{})
				return ref
			},
			keys:       [][]byte{key.PublicPEM},
			wantReason: ReasonSignatureVerified, wantFormat: FormatLegacy, wantSigner: releaseCI.Subject,
		},
		{
			name: "keys and identities: a key signature counts",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				verifytest.SignBundle(t, t.Context(), ref, key)
				return ref
			},
			keys:       [][]byte{key.PublicPEM},
			wantReason: ReasonSignatureVerified, wantFormat: FormatBundle,
		},
		{
			name: "unsigned",
			setup: func(t *testing.T, repo string) string {
				return verifytest.PushRandomImage(t, repo, "v1")
			},
			wantReason: ReasonSignatureMissing,
			wantInMsg:  []string{"keyless (cosign sign from CI) as one of the trusted identities"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			reg := newTestRegistry(t, nil)
			ref := tt.setup(t, reg.host+"/team/app")
			opts := Options{Keys: tt.keys, Identities: tt.identities, TrustedRoot: tt.root}
			if opts.Identities == nil {
				opts.Identities = []Identity{trustCI}
			}
			if len(opts.Identities) > 0 && opts.TrustedRoot == nil && !tt.publicGood {
				opts.TrustedRoot = sigstore.TrustedRoot()
			}
			verdict, err := mustNew(t, opts).Verify(t.Context(), ref)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(verdict.Reason).To(Equal(tt.wantReason), verdict.Message)
			g.Expect(verdict.Verified).To(Equal(tt.wantReason == ReasonSignatureVerified))
			g.Expect(verdict.Failure).To(Equal(tt.wantFailure), verdict.Message)
			g.Expect(verdict.Format).To(Equal(tt.wantFormat))
			if tt.wantSigner != "" {
				g.Expect(verdict.Signer).NotTo(BeNil())
				g.Expect(verdict.Signer.Subject).To(Equal(tt.wantSigner))
			}
			g.Expect(verdict.Message).To(ContainSubstring(ref[len(ref)-71:]), "message names the digest")
			for _, s := range tt.wantInMsg {
				g.Expect(verdict.Message).To(ContainSubstring(s))
			}
		})
	}
}

// The signer's CI extensions are read from the certificate.
func TestKeylessSigner(t *testing.T) {
	g := NewWithT(t)
	sigstore := verifytest.NewSigstore(t)
	reg := newTestRegistry(t, nil)
	ref := verifytest.PushRandomImage(t, reg.host+"/team/app", "v1")
	sigstore.SignBundle(t, t.Context(), ref, releaseCI, verifytest.Keyless{})

	verdict, err := mustNew(t, Options{Identities: []Identity{trustCI}, TrustedRoot: sigstore.TrustedRoot()}).Verify(t.Context(), ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(verdict.Signer).To(Equal(&Signer{Issuer: verifytest.GitHubIssuer, Subject: releaseCI.Subject,
		Workflow: releaseCI.Workflow, Ref: "refs/tags/v1.0.0", Repository: "https://github.com/org/app"}))
	g.Expect(verdict.KeyID).To(BeEmpty())
}

// Verdicts are cached per identity set and trusted root content, as they are per key set.
func TestKeylessVerdictCache(t *testing.T) {
	sigstore := verifytest.NewSigstore(t)
	other := verifytest.NewSigstore(t)

	t.Run("different identities or roots do not share verdicts", func(t *testing.T) {
		g := NewWithT(t)
		reg := newTestRegistry(t, nil)
		ref := verifytest.PushRandomImage(t, reg.host+"/team/app", "v1")
		sigstore.SignBundle(t, t.Context(), ref, releaseCI, verifytest.Keyless{})
		cache := NewCache(10)
		trusting := mustNew(t, Options{Identities: []Identity{trustCI}, TrustedRoot: sigstore.TrustedRoot(), Cache: cache})
		otherID := mustNew(t, Options{Identities: []Identity{{Issuer: trustCI.Issuer, Subject: "^https://github.com/org/other/.*$"}},
			TrustedRoot: sigstore.TrustedRoot(), Cache: cache})
		otherRoot := mustNew(t, Options{Identities: []Identity{trustCI}, TrustedRoot: other.TrustedRoot(), Cache: cache})
		// Same subject, another issuer (issue 37: a cache keyed without it reused the verdict).
		otherIssuer := mustNew(t, Options{Identities: []Identity{{Issuer: "^https://gitlab.example$", Subject: trustCI.Subject}},
			TrustedRoot: sigstore.TrustedRoot(), Cache: cache})

		ok, err := trusting.Verify(t.Context(), ref)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok.Verified).To(BeTrue(), ok.Message)
		no, err := otherID.Verify(t.Context(), ref)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(no.Failure).To(Equal(FailureIdentity))
		no, err = otherRoot.Verify(t.Context(), ref)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(no.Failure).To(Equal(FailureRoot))
		no, err = otherIssuer.Verify(t.Context(), ref)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(no.Verified).To(BeFalse(), no.Message)
		g.Expect(no.Failure).To(Equal(FailureIdentity))
		g.Expect(cache.Len()).To(Equal(4))
	})

	t.Run("the order of the identities does not matter", func(t *testing.T) {
		g := NewWithT(t)
		a := Identity{Issuer: "a", Subject: "b"}
		one := mustNew(t, Options{Identities: []Identity{trustCI, a}, TrustedRoot: sigstore.TrustedRoot()})
		two := mustNew(t, Options{Identities: []Identity{a, trustCI}, TrustedRoot: sigstore.TrustedRoot()})
		g.Expect(one.fingerprint).To(Equal(two.fingerprint))
		keys := mustNew(t, Options{Keys: [][]byte{verifytest.NewKeyPair(t).PublicPEM}})
		g.Expect(keys.fingerprint).NotTo(Equal(one.fingerprint))
	})

	t.Run("a cached keyless verdict costs no registry request", func(t *testing.T) {
		g := NewWithT(t)
		reg := newTestRegistry(t, nil)
		ref := verifytest.PushRandomImage(t, reg.host+"/team/app", "v1")
		sigstore.SignLegacy(t, t.Context(), ref, releaseCI, verifytest.Keyless{})
		v := mustNew(t, Options{Identities: []Identity{trustCI}, TrustedRoot: sigstore.TrustedRoot()})
		first, err := v.Verify(t.Context(), ref)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(first.Verified).To(BeTrue(), first.Message)
		before := reg.requests.Load()
		second, err := v.Verify(t.Context(), ref)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(second).To(Equal(first))
		g.Expect(reg.requests.Load()).To(Equal(before))
	})
}

func TestParseTrustedRoot(t *testing.T) {
	sigstore := verifytest.NewSigstore(t)
	tests := []struct {
		name    string
		data    []byte
		wantErr string
	}{
		{name: "public Sigstore", data: PublicGoodTrustedRoot()},
		{name: "virtual Sigstore", data: sigstore.TrustedRoot()},
		{name: "timestamp authority without log", data: withoutLogs(t, sigstore.TrustedRoot())},
		{name: "empty", data: nil, wantErr: "trusted root is empty"},
		{name: "not JSON", data: []byte("trusted"), wantErr: "not a Sigstore trusted_root.json"},
		{name: "no Fulcio", data: []byte(`{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`), wantErr: "names no Fulcio certificate authority"},
		{name: "too big", data: bytes.Repeat([]byte(" "), MaxTrustedRootBytes+1), wantErr: "more than the"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			tr, err := ParseTrustedRoot(tt.data)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(tr.Fingerprint).To(MatchRegexp(`^[0-9a-f]{64}$`))
		})
	}
}

func TestIdentityMatch(t *testing.T) {
	tests := []struct {
		name            string
		id              Identity
		issuer, subject string
		want            bool
		wantErr         string
	}{
		{name: "exact", id: Identity{Issuer: "https://token.actions.githubusercontent.com", Subject: "https://github.com/org/app/.github/workflows/r.yml@refs/tags/v1"},
			issuer: "https://token.actions.githubusercontent.com", subject: "https://github.com/org/app/.github/workflows/r.yml@refs/tags/v1", want: true},
		{name: "Flux-style anchors", id: trustCI, issuer: verifytest.GitHubIssuer, subject: releaseCI.Subject, want: true},
		{name: "a prefix is not the whole subject", id: Identity{Issuer: ".*", Subject: "https://github.com/org/app"},
			issuer: "x", subject: "https://github.com/org/app.evil/x", want: false},
		{name: "contained is not matched", id: Identity{Issuer: ".*", Subject: "github.com/org/app/.*"},
			issuer: "x", subject: "https://evil/github.com/org/app/x", want: false},
		{name: "alternation stays inside the anchors", id: Identity{Issuer: ".*", Subject: "a|b"}, issuer: "x", subject: "ab", want: false},
		{name: "issuer must match too", id: Identity{Issuer: "^https://gitlab.com$", Subject: ".*"}, issuer: verifytest.GitHubIssuer, subject: "x", want: false},
		{name: "bad issuer", id: Identity{Issuer: "(", Subject: ".*"}, wantErr: `issuer "(" is not a regular expression`},
		{name: "closing group cannot escape the anchors", id: Identity{Issuer: ".*", Subject: "a)|(.*"}, wantErr: `subject "a)|(.*" is not a regular expression`},
		{name: "empty issuer", id: Identity{Subject: ".*"}, wantErr: "issuer is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			m, err := compileIdentity(tt.id)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(m.matches(tt.issuer, tt.subject)).To(Equal(tt.want))
		})
	}
}

// withoutLogs is a trusted root with its transparency logs left out: a private instance that
// only timestamps.
func withoutLogs(t testing.TB, data []byte) []byte {
	t.Helper()
	return verifytest.WithoutTransparencyLogs(t, data)
}
