package attest_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	. "github.com/onsi/gomega"
	"github.com/sigstore/cosign/v3/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	"github.com/sigstore/cosign/v3/pkg/oci/static"
	"github.com/sigstore/cosign/v3/pkg/types"
	sigdsse "github.com/sigstore/sigstore/pkg/signature/dsse"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/attest"
	"github.com/stagecoach-dev/stagecoach/internal/verify"
	"github.com/stagecoach-dev/stagecoach/internal/verify/verifytest"
)

// notProvenance is a predicate type no requirement asks for; its statements below carry an SLSA
// provenance predicate that would meet fromOurs, were they taken for provenance.
const notProvenance = "https://example.dev/not-provenance/v1"

// An attestation counts for a requirement only when the signed statement's predicateType is the
// one required: a trusted signer's statement of another type, attached under a referrer (or an
// .att entry) whose annotation says it is of the required type, is passed over, whatever the
// label says and however well its predicate would meet the condition.
func TestPredicateTypeIsTheStatements(t *testing.T) {
	host := newRegistry(t)
	sigstore := verifytest.NewSigstore(t)
	builder := verifytest.NewKeyPair(t)
	keys, err := verify.New(verify.Options{Keys: [][]byte{builder.PublicPEM}})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	keyless, err := verify.New(verify.Options{Identities: []verify.Identity{trustCI}, TrustedRoot: sigstore.TrustedRoot()})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())

	// mislabeledBundle signs statement with the builder's key (or keyless as the release
	// workflow), then attaches it to ref as a Sigstore bundle referrer annotated label.
	mislabeledBundle := func(t *testing.T, repo, ref string, statement []byte, label string, keylessly bool) {
		scratch := verifytest.PushRandomImage(t, repo, "scratch")
		var bundleJSON []byte
		if keylessly {
			bundleJSON = sigstore.AttestBundle(t, t.Context(), scratch, statement, releaseCI, verifytest.Keyless{})
		} else {
			bundleJSON = verifytest.AttestBundle(t, t.Context(), scratch, builder, statement)
		}
		verifytest.AttachStatementBundle(t, t.Context(), ref, bundleJSON, label)
	}
	provenanceOf := func(ref, predicateType, repository string) []byte {
		return verifytest.Statement(t, digestOf(ref), predicateType, provenance(repository, ourBuilder))
	}

	for i, tc := range []struct {
		name       string
		setup      func(t *testing.T, repo, ref string)
		signers    *verify.Verifier
		wantPassed bool
		wantReason string
		wantInMsg  []string
	}{
		{name: "a bundle labelled provenance whose statement is of another type (key)", signers: keys,
			setup: func(t *testing.T, repo, ref string) {
				mislabeledBundle(t, repo, ref, provenanceOf(ref, notProvenance, ourRepo), slsaV1, false)
			},
			wantReason: stagecoachv1.ReasonAttestationMissing, wantInMsg: []string{"has no attestation of predicate type " + slsaV1}},
		{name: "a bundle labelled provenance whose statement is of another type (keyless)", signers: keyless,
			setup: func(t *testing.T, repo, ref string) {
				mislabeledBundle(t, repo, ref, provenanceOf(ref, notProvenance, ourRepo), slsaV1, true)
			},
			wantReason: stagecoachv1.ReasonAttestationMissing, wantInMsg: []string{"has no attestation of predicate type " + slsaV1}},
		{name: "an .att entry labelled provenance whose statement is of another type", signers: keys,
			setup: func(t *testing.T, _, ref string) {
				attestLegacyLabelled(t, ref, builder, provenanceOf(ref, notProvenance, ourRepo), slsaV1)
			},
			wantReason: stagecoachv1.ReasonAttestationMissing, wantInMsg: []string{"has no attestation of predicate type " + slsaV1}},
		{name: "a mislabelled bundle beside real provenance that fails the condition", signers: keys,
			setup: func(t *testing.T, repo, ref string) {
				mislabeledBundle(t, repo, ref, provenanceOf(ref, notProvenance, ourRepo), slsaV1, false)
				verifytest.AttestLegacy(t, t.Context(), ref, builder, provenanceOf(ref, slsaV1, "https://github.com/org/fork"))
			},
			wantReason: stagecoachv1.ReasonAttestationRefused,
			wantInMsg:  []string{"has 1 attestation(s) of predicate type " + slsaV1, "attestation 1 in sha256-", "does not meet the condition"}},
		// The same setup with the statement of the required type passes: the refusals above are
		// the predicate type's.
		{name: "a bundle labelled and stated provenance (key)", signers: keys, wantPassed: true,
			setup: func(t *testing.T, repo, ref string) {
				mislabeledBundle(t, repo, ref, provenanceOf(ref, slsaV1, ourRepo), slsaV1, false)
			},
			wantInMsg: []string{"attestation " + slsaV1 + " signed by trusted key", "meets"}},
		{name: "an .att entry labelled and stated provenance", signers: keys, wantPassed: true,
			setup: func(t *testing.T, _, ref string) {
				attestLegacyLabelled(t, ref, builder, provenanceOf(ref, slsaV1, ourRepo), slsaV1)
			},
			wantInMsg: []string{"attestation 1 in sha256-", "meets"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			repo := fmt.Sprintf("%s/team/typed%d", host, i)
			ref := verifytest.PushRandomImage(t, repo, "v1")
			tc.setup(t, repo, ref)
			got, err := attest.Check(t.Context(), ref, []attest.Requirement{requirement(t, slsaV1, fromOurs, tc.signers)})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Passed).To(Equal(tc.wantPassed), got.Message)
			g.Expect(got.Reason).To(Equal(tc.wantReason), got.Message)
			for _, s := range tc.wantInMsg {
				g.Expect(got.Message).To(ContainSubstring(s))
			}
		})
	}
}

// attestLegacyLabelled is verifytest.AttestLegacy with the .att layer's predicateType annotation
// set to label rather than read from the statement.
func attestLegacyLabelled(t *testing.T, ref string, kp verifytest.KeyPair, statement []byte, label string) {
	t.Helper()
	d, err := name.NewDigest(ref)
	if err != nil {
		t.Fatal(err)
	}
	env, err := sigdsse.WrapSigner(kp.Signer, "application/vnd.in-toto+json").SignMessage(bytes.NewReader(statement))
	if err != nil {
		t.Fatalf("sign envelope: %v", err)
	}
	att, err := static.NewAttestation(env, static.WithLayerMediaType(types.DssePayloadType),
		static.WithAnnotations(map[string]string{"predicateType": label}))
	if err != nil {
		t.Fatalf("attestation: %v", err)
	}
	se, err := ociremote.SignedEntity(d)
	if err != nil {
		t.Fatalf("read %s: %v", d, err)
	}
	attested, err := mutate.AttachAttestationToEntity(se, att)
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	if err := ociremote.WriteAttestations(d.Repository, attested); err != nil {
		t.Fatalf("write attestations of %s: %v", d, err)
	}
}
