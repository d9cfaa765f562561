package attest_test

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	. "github.com/onsi/gomega"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/stagecoach-dev/stagecoach/internal/attest"
	"github.com/stagecoach-dev/stagecoach/internal/verify"
	"github.com/stagecoach-dev/stagecoach/internal/verify/verifytest"
)

// A promotion attestation is an in-toto v1 statement about the digest whose predicate carries
// the documented fields, and a downstream requirement on it reads them.
func TestPromotionStatement(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	verified := time.Date(2026, 12, 7, 1, 2, 3, 0, time.UTC)
	pred := attest.Promotion{Cluster: "eu1", Namespace: "payments", Stage: "staging", Service: "payments", Environment: "staging",
		Promotion: "staging-ab", Action: "Promote", Version: attest.Version{Tag: "v1.2.0", Digest: digest}, RequestedBy: "alice",
		Gates:  []attest.Gate{{Gate: "signature", Passed: true, Message: "signed"}, {Gate: "approvals", Passed: true}},
		Landed: attest.Landed{Applier: "OCIRepository/payments-staging", VerifiedAt: verified, Evidence: "Ready"},
		Record: &attest.Record{Stream: "eu1/payments/staging", Seq: 7, Action: "Verify", Digest: "sha256:cd"}}
	for _, tc := range []struct {
		name      string
		condition string
		want      bool
	}{
		{name: "the Stage and its namespace", condition: `predicate.namespace == "payments" && predicate.stage == "staging"`, want: true},
		{name: "another namespace's Stage of that name", condition: `predicate.namespace == "team-b" && predicate.stage == "staging"`},
		{name: "the gates", condition: `predicate.gates.exists(g, g.gate == "approvals" && g.passed)`, want: true},
		{name: "the version and the record", condition: `predicate.version.tag == "v1.2.0" && predicate.record.seq == 7 && predicate.record.action == "Verify"`, want: true},
		{name: "when it was verified", condition: `timestamp(predicate.landed.verifiedAt) < timestamp("2027-01-01T00:00:00Z")`, want: true},
		{name: "the subject", condition: `subject[0].name == "registry.example/payments" && subject[0].digest.sha256 == "` + strings.Repeat("ab", 32) + `"`, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			st, err := attest.Statement("registry.example/payments", digest, pred)
			g.Expect(err).NotTo(HaveOccurred())
			var got map[string]any
			g.Expect(json.Unmarshal(st, &got)).To(Succeed())
			g.Expect(got["_type"]).To(Equal("https://in-toto.io/Statement/v1"))
			g.Expect(got["predicateType"]).To(Equal(attest.PromotionPredicateType))
			c, err := attest.Compile(tc.condition)
			g.Expect(err).NotTo(HaveOccurred())
			holds, err := c.Holds(t.Context(), st)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(holds).To(Equal(tc.want))
		})
	}
	t.Run("not a sha256 digest", func(t *testing.T) {
		_, err := attest.Statement("registry.example/payments", "sha1:"+strings.Repeat("a", 40), pred)
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("is not a sha256 digest")))
	})
}

// What the controller's key signs, a verifier trusting that key accepts for the digest: the
// bundle is a DSSE envelope over the statement with the key's hint.
func TestSignerBundle(t *testing.T) {
	g := NewWithT(t)
	kp := verifytest.NewKeyPair(t)
	signer, err := attest.NewSigner(kp.Signer)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(signer.PublicKeyPEM())).To(Equal(string(kp.PublicPEM)))
	id, err := verify.KeyIDFromPEM(kp.PublicPEM)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(signer.KeyID()).To(Equal(id))

	host := newRegistryTB(t)
	ref := verifytest.PushRandomImage(t, host+"/team/app", "v1")
	st, err := attest.Statement(host+"/team/app", digestOf(ref), attest.Promotion{Namespace: "payments", Stage: "staging"})
	g.Expect(err).NotTo(HaveOccurred())
	bundle, err := signer.Bundle(t.Context(), st)
	g.Expect(err).NotTo(HaveOccurred())
	verifytest.AttachStatementBundle(t, t.Context(), ref, bundle, attest.PromotionPredicateType)
	v, err := verify.New(verify.Options{Keys: [][]byte{kp.PublicPEM}})
	g.Expect(err).NotTo(HaveOccurred())
	found, err := v.Attestations(t.Context(), ref, attest.PromotionPredicateType)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found.Refused).To(BeEmpty())
	g.Expect(found.Verified).To(HaveLen(1))
	g.Expect(found.Verified[0].KeyID).To(Equal(id))

	other := verifytest.NewKeyPair(t)
	v, err = verify.New(verify.Options{Keys: [][]byte{other.PublicPEM}})
	g.Expect(err).NotTo(HaveOccurred())
	found, err = v.Attestations(t.Context(), ref, attest.PromotionPredicateType)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found.Verified).To(BeEmpty())
	g.Expect(found.Refused).To(HaveLen(1))
}

// What counts as attached is a bundle the controller's key signed naming the Promotion's UID: a
// referrer planted by someone who may push, annotated as that Promotion's or signed by another
// key, is not it.
func TestFind(t *testing.T) {
	g := NewWithT(t)
	controllerKey, planter := verifytest.NewKeyPair(t), verifytest.NewKeyPair(t)
	host := newRegistryTB(t)
	ref := verifytest.PushRandomImage(t, host+"/team/app", "v1")
	d, err := name.NewDigest(ref)
	g.Expect(err).NotTo(HaveOccurred())
	own, err := verify.New(verify.Options{Keys: [][]byte{controllerKey.PublicPEM}})
	g.Expect(err).NotTo(HaveOccurred())
	sign := func(kp verifytest.KeyPair, uid string) []byte {
		signer, err := attest.NewSigner(kp.Signer)
		g.Expect(err).NotTo(HaveOccurred())
		st, err := attest.Statement(host+"/team/app", digestOf(ref), attest.Promotion{Namespace: "payments", Stage: "staging", PromotionUID: uid})
		g.Expect(err).NotTo(HaveOccurred())
		b, err := signer.Bundle(t.Context(), st)
		g.Expect(err).NotTo(HaveOccurred())
		return b
	}
	key := "payments/staging-1/uid-1"
	// Planted: the right annotation, another key's signature.
	g.Expect(attest.Attach(d, sign(planter, "uid-1"), key, time.Now(), nil)).To(Succeed())
	found, err := attest.Find(t.Context(), own, ref, "payments", "uid-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeEmpty())
	// The controller's own, of another Promotion.
	g.Expect(attest.Attach(d, sign(controllerKey, "uid-2"), "payments/staging-2/uid-2", time.Now(), nil)).To(Succeed())
	found, err = attest.Find(t.Context(), own, ref, "payments", "uid-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeEmpty())
	// The controller's own, of this Promotion.
	g.Expect(attest.Attach(d, sign(controllerKey, "uid-1"), key, time.Now(), nil)).To(Succeed())
	found, err = attest.Find(t.Context(), own, ref, "payments", "uid-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(HavePrefix("sha256:"))
	found2, err := attest.Find(t.Context(), own, ref, "team-b", "uid-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found2).To(BeEmpty(), "another namespace's Promotion")
}

// The bundle names the key's algorithm: a key other than P-256 is refused, not mislabelled.
func TestSignerRefusesOtherKeys(t *testing.T) {
	g := NewWithT(t)
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	g.Expect(err).NotTo(HaveOccurred())
	sv, err := signature.LoadRSAPKCS1v15SignerVerifier(priv, crypto.SHA256)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = attest.NewSigner(sv)
	g.Expect(err).To(MatchError(ContainSubstring("not the ECDSA P-256 key")))
}
