package verify

import (
	"bytes"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/stagecoach-dev/stagecoach/internal/verify/verifytest"
)

// A keyless signature over bytes (cosign sign-blob --bundle) counts only from a trusted identity,
// certified by the trusted root, over these very bytes; a refusal names the part and who signed.
func TestBlobVerifier(t *testing.T) {
	sigstore := verifytest.NewSigstore(t)
	other := verifytest.NewSigstore(t)
	blob := []byte(`{"apiVersion":"records.stagecoach.dev/v1","seq":1}`)
	nightly := verifytest.GitHubActions("org/app", "nightly.yml", "refs/heads/main")

	tests := []struct {
		name        string
		bundle      func(t *testing.T) []byte
		blob        []byte
		root        []byte // nil: sigstore's
		wantFailure string // "": verified
		wantInErr   []string
	}{
		{name: "signed by the trusted CI identity",
			bundle: func(t *testing.T) []byte { return sigstore.SignBlob(t, blob, releaseCI, verifytest.Keyless{}) }},
		{name: "signed by another identity",
			bundle:      func(t *testing.T) []byte { return sigstore.SignBlob(t, blob, nightly, verifytest.Keyless{}) },
			wantFailure: FailureIdentity, wantInErr: []string{"identity mismatch", nightly.Subject, "release.yml"}},
		{name: "certified by another Sigstore",
			bundle:      func(t *testing.T) []byte { return other.SignBlob(t, blob, releaseCI, verifytest.Keyless{}) },
			wantFailure: FailureRoot, wantInErr: []string{"does not chain to a Fulcio certificate authority of the trusted root"}},
		{name: "a bundle over other bytes",
			bundle: func(t *testing.T) []byte {
				return sigstore.SignBlob(t, []byte("another record"), releaseCI, verifytest.Keyless{})
			},
			wantFailure: FailureClaim, wantInErr: []string{"bundle signs message digest"}},
		{name: "tampered after signing", blob: []byte("changed"),
			bundle: func(t *testing.T) []byte {
				return sigstore.SignBlob(t, blob, releaseCI, verifytest.Keyless{Tamper: func([]byte) []byte { return []byte("changed") }})
			},
			wantFailure: FailureSignature},
		{name: "not in the transparency log",
			bundle: func(t *testing.T) []byte {
				return sigstore.SignBlob(t, blob, releaseCI, verifytest.Keyless{NoLogEntry: true})
			},
			wantFailure: FailureLog},
		{name: "an expired certificate logged after it expired",
			bundle: func(t *testing.T) []byte {
				return sigstore.SignBlob(t, blob, releaseCI, verifytest.Keyless{CertFrom: time.Now().Add(-time.Hour), NoTimestamp: true})
			},
			wantFailure: FailureTime},
		{name: "not a bundle", bundle: func(*testing.T) []byte { return []byte("MEUCIQ==") },
			wantFailure: FailureForm, wantInErr: []string{"not a Sigstore bundle"}},
		{name: "too large", bundle: func(*testing.T) []byte { return bytes.Repeat([]byte(" "), MaxBlobBundleBytes+1) },
			wantFailure: FailureForm, wantInErr: []string{"more than"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			root := tt.root
			if root == nil {
				root = sigstore.TrustedRoot()
			}
			v, err := NewBlobVerifier([]Identity{trustCI}, root)
			g.Expect(err).NotTo(HaveOccurred())
			signed := blob
			if tt.blob != nil {
				signed = tt.blob
			}
			signer, err := v.Verify(signed, tt.bundle(t))
			if tt.wantFailure == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(signer.Subject).To(Equal(releaseCI.Subject))
				g.Expect(signer.Issuer).To(Equal(verifytest.GitHubIssuer))
				return
			}
			g.Expect(err).To(HaveOccurred())
			g.Expect(FailureOf(err)).To(Equal(tt.wantFailure), err.Error())
			for _, s := range tt.wantInErr {
				g.Expect(err.Error()).To(ContainSubstring(s))
			}
		})
	}
}

func TestNewBlobVerifierRefuses(t *testing.T) {
	for _, tt := range []struct {
		name       string
		identities []Identity
		root       []byte
		wantErr    string
	}{
		{name: "no identities", wantErr: "no keyless identities"},
		{name: "a bad expression", identities: []Identity{{Issuer: "(", Subject: "x"}}, wantErr: "identity 1: issuer \"(\" is not a regular expression"},
		{name: "a bad root", identities: []Identity{trustCI}, root: []byte("{}"), wantErr: "trusted root:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewBlobVerifier(tt.identities, tt.root)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
		})
	}
}
