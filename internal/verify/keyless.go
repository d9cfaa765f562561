package verify

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/sigstore/cosign/v3/pkg/oci"
	sgbundle "github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	sgverify "github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/options"
)

// Parts of a signature a refusal names (Verdict.Failure).
const (
	// FailureClaim: the signature is for another digest.
	FailureClaim = "claim"
	// FailureKey: signed with a key, and no trusted key verifies it.
	FailureKey = "key"
	// FailureRoot: the certificate was not issued by a Fulcio of the trusted root.
	FailureRoot = "root"
	// FailureIdentity: the certificate's issuer and subject match none of the trusted identities.
	FailureIdentity = "identity"
	// FailureSignature: the signature does not verify over what it claims to sign (tampered).
	FailureSignature = "signature"
	// FailureLog: no entry of a transparency log of the trusted root records the signature.
	FailureLog = "log"
	// FailureTime: no log entry or signed timestamp falls inside the certificate's validity
	// (an expired certificate with nothing to say it signed in time).
	FailureTime = "time"
	// FailureSCT: the certificate carries no valid timestamp of a CT log of the trusted root.
	FailureSCT = "sct"
	// FailureForm: signed in a way the Stage does not trust at all (keyless without identities
	// to trust, a key without keys to trust), or unreadable.
	FailureForm = "form"
)

// partError is a failure with the part it is about.
type partError struct {
	part string
	err  error
}

func (e *partError) Error() string { return e.err.Error() }
func (e *partError) Unwrap() error { return e.err }

func failed(part string, format string, args ...any) error {
	return &partError{part: part, err: fmt.Errorf(format, args...)}
}

// partOf is the part an error names (FailureForm when it names none).
func partOf(err error, fallback string) string {
	var pe *partError
	if errors.As(err, &pe) {
		return pe.part
	}
	return fallback
}

// Signer is who signed keyless: the identity in the Fulcio certificate.
type Signer struct {
	// Issuer is the OIDC issuer, such as https://token.actions.githubusercontent.com.
	Issuer string
	// Subject is the certificate's subject alternative name: for GitHub Actions the workflow's
	// URL at its ref, for a person their email.
	Subject string
	// Workflow, Ref and Repository come from the certificate's CI extensions (GitHub Actions and
	// GitLab CI set them); empty when the issuer sets none.
	Workflow   string
	Ref        string
	Repository string
}

// String names the signer for messages.
func (s *Signer) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "subject %q (issuer %s", s.Subject, s.Issuer)
	for _, f := range [][2]string{{"repository", s.Repository}, {"workflow", s.Workflow}, {"ref", s.Ref}} {
		if f[1] != "" {
			fmt.Fprintf(&b, "; %s %s", f[0], f[1])
		}
	}
	b.WriteString(")")
	return b.String()
}

func signerOf(s certificate.Summary) *Signer {
	e := s.Extensions
	return &Signer{
		Issuer:     e.Issuer,
		Subject:    s.SubjectAlternativeName,
		Workflow:   firstOf(e.BuildConfigURI, e.GithubWorkflowName),
		Ref:        firstOf(e.SourceRepositoryRef, e.GithubWorkflowRef),
		Repository: firstOf(e.SourceRepositoryURI, e.GithubWorkflowRepository),
	}
}

func firstOf(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

// keyless verifies Fulcio-certificate signatures against a trusted root and identities.
type keyless struct {
	identities identitySet
	root       *TrustedRoot
}

// verify checks a keyless signature: in the order a person fixing it needs the answer, the
// certificate's root, its identity and the signature itself, then (with sigstore-go) the log
// entry, the timestamps inside the certificate's validity and the SCT. checkSig verifies the
// signature with the certificate's key; artifact is what sigstore-go checks it signs.
func (k *keyless) verify(entity sgverify.SignedEntity, leaf *x509.Certificate, checkSig func(crypto.PublicKey) error,
	artifact sgverify.ArtifactPolicyOption) (*Signer, error) {
	if err := k.root.chains(leaf); err != nil {
		return nil, failed(FailureRoot, "certificate (issued by %q) does not chain to a Fulcio certificate authority of the trusted root: %v",
			leaf.Issuer.String(), err)
	}
	summary, err := certificate.SummarizeCertificate(leaf)
	if err != nil {
		return nil, failed(FailureIdentity, "certificate names no identity: %v", err)
	}
	signer := signerOf(summary)
	matched, ok := k.identities.match(signer.Issuer, signer.Subject)
	if !ok {
		return signer, failed(FailureIdentity, "identity mismatch: signed by %s, which matches none of the trusted identities %s",
			signer, k.identities)
	}
	if err := checkSig(leaf.PublicKey); err != nil {
		return signer, failed(FailureSignature, "signature does not verify over what it signs (tampered or corrupt): %v", err)
	}
	id, err := sgverify.NewShortCertificateIdentity("", matched.issuer.String(), "", matched.subject.String())
	if err != nil {
		return signer, failed(FailureIdentity, "identity %s: %v", matched.Identity, err)
	}
	if _, err := k.root.verifier.Verify(entity, sgverify.NewPolicy(artifact, sgverify.WithCertificateIdentity(id))); err != nil {
		return signer, k.classify(leaf, err)
	}
	return signer, nil
}

// classify names the part sigstore-go refused, from the step its error comes from.
func (k *keyless) classify(leaf *x509.Certificate, err error) error {
	msg := err.Error()
	validity := fmt.Sprintf("%s to %s", leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))
	switch {
	case strings.Contains(msg, "outside certificate validity"):
		// The log (or timestamp authority) saw the signature after the certificate expired.
		return failed(FailureTime, "certificate (valid %s) was not valid when the log saw the signature: "+
			"an expired certificate without a log entry or timestamp inside its validity (%v)", validity, err)
	case strings.HasPrefix(msg, "failed to verify log inclusion"):
		return failed(FailureLog, "no transparency log entry of the trusted root records this signature: %v", err)
	case strings.HasPrefix(msg, "failed to verify timestamps"):
		if k.root.requiresLog() {
			return failed(FailureTime, "no verified log entry or signed timestamp says when it signed: %v", err)
		}
		return failed(FailureTime, "no signed timestamp of the trusted root says when it signed: %v", err)
	case strings.HasPrefix(msg, "failed to verify leaf certificate"):
		return failed(FailureTime, "certificate (valid %s) was not valid when the log or timestamp authority saw the signature: "+
			"an expired certificate without a log entry or timestamp inside its validity", validity)
	case strings.HasPrefix(msg, "failed to verify signed certificate timestamp"):
		return failed(FailureSCT, "certificate has no valid SCT from a CT log of the trusted root: %v", err)
	case strings.HasPrefix(msg, "failed to verify signature"):
		return failed(FailureSignature, "signature does not verify for this digest: %v", err)
	case strings.HasPrefix(msg, "failed to verify certificate identity"):
		return failed(FailureIdentity, "identity mismatch: %v", err)
	}
	return failed(FailureForm, "%v", err)
}

// chains checks the certificate chains to a Fulcio of the trusted root, at a time inside its
// own validity: whether it was valid when it signed is the timestamps' question, asked later.
func (t *TrustedRoot) chains(leaf *x509.Certificate) error {
	c := *leaf
	// Fulcio may mark an OtherName SAN critical, which crypto/x509 does not handle (sigstore-go
	// drops it the same way).
	c.UnhandledCriticalExtensions = nil
	for _, oid := range leaf.UnhandledCriticalExtensions {
		if !oid.Equal(cryptoutils.SANOID) {
			c.UnhandledCriticalExtensions = append(c.UnhandledCriticalExtensions, oid)
		}
	}
	var errs []error
	for _, ca := range t.material.FulcioCertificateAuthorities() {
		if _, err := ca.Verify(&c, leaf.NotBefore); err != nil {
			errs = append(errs, err)
			continue
		}
		return nil
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return fmt.Errorf("none of %d certificate authorities: %w", len(errs), errors.Join(errs...))
}

// verifyBundle verifies a bundle signed with a Fulcio certificate.
func (k *keyless) verifyBundle(b *sgbundle.Bundle, leaf *x509.Certificate, hashAlg string, want []byte) (*Signer, error) {
	sc, err := b.SignatureContent()
	if err != nil {
		return nil, failed(FailureForm, "bundle has no signature: %v", err)
	}
	checkSig := func(pub crypto.PublicKey) error {
		if env := sc.EnvelopeContent(); env != nil {
			raw := env.RawEnvelope()
			if len(raw.Signatures) != 1 {
				return fmt.Errorf("envelope has %d signatures, want 1", len(raw.Signatures))
			}
			payload, err := base64.StdEncoding.DecodeString(raw.Payload)
			if err != nil {
				return fmt.Errorf("envelope payload: %w", err)
			}
			sig, err := base64.StdEncoding.DecodeString(raw.Signatures[0].Sig)
			if err != nil {
				return fmt.Errorf("envelope signature: %w", err)
			}
			return verifyWith(pub, sig, dsse.PAE(raw.PayloadType, payload))
		}
		ms := sc.MessageSignatureContent()
		var h crypto.Hash
		switch ms.DigestAlgorithm() {
		case "SHA2_256":
			h = crypto.SHA256
		case "SHA2_384":
			h = crypto.SHA384
		case "SHA2_512":
			h = crypto.SHA512
		default:
			return fmt.Errorf("message digest algorithm %q is not supported", ms.DigestAlgorithm())
		}
		sv, err := signature.LoadVerifier(pub, h)
		if err != nil {
			return err
		}
		return sv.VerifySignature(bytes.NewReader(ms.Signature()), nil, options.WithDigest(ms.Digest()))
	}
	return k.verify(b, leaf, checkSig, sgverify.WithArtifactDigest(hashAlg, want))
}

// verifyLegacyAttestation verifies a DSSE envelope under the legacy .att tag made keyless (cosign
// v2 `cosign attest` without a key): the certificate, the Rekor bundle (a dsse or intoto entry)
// and the RFC 3161 timestamp travel as annotations, as for a legacy signature.
func (k *keyless) verifyLegacyAttestation(att oci.Signature, leaf *x509.Certificate, env *dsse.Envelope, hashAlg string, want []byte) (*Signer, error) {
	if len(env.Signatures) != 1 {
		return nil, failed(FailureForm, "envelope has %d signatures, want 1", len(env.Signatures))
	}
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		return nil, failed(FailureForm, "envelope payload: %v", err)
	}
	sig, err := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
	if err != nil {
		return nil, failed(FailureForm, "envelope signature: %v", err)
	}
	entries, stamps, err := legacyEvidence(att)
	if err != nil {
		return nil, err
	}
	entity := &legacyEntity{leaf: leaf, sig: sig, entries: entries, stamps: stamps, envelope: &sgbundle.Envelope{Envelope: env}}
	checkSig := func(pub crypto.PublicKey) error { return verifyWith(pub, sig, dsse.PAE(env.PayloadType, payload)) }
	return k.verify(entity, leaf, checkSig, sgverify.WithArtifactDigest(hashAlg, want))
}

// legacyEvidence reads what a legacy keyless signature or attestation carries of its logging:
// the Rekor bundle annotation as a log entry, and the RFC 3161 timestamp.
func legacyEvidence(sig oci.Signature) ([]*tlog.Entry, [][]byte, error) {
	var entries []*tlog.Entry
	rb, err := sig.Bundle()
	if err != nil {
		return nil, nil, failed(FailureLog, "transparency log bundle annotation unreadable: %v", err)
	}
	if rb != nil {
		body, ok := rb.Payload.Body.(string)
		if !ok {
			return nil, nil, failed(FailureLog, "transparency log bundle has no body")
		}
		bodyRaw, err := base64.StdEncoding.DecodeString(body)
		if err != nil {
			return nil, nil, failed(FailureLog, "transparency log bundle body: %v", err)
		}
		logID, err := hex.DecodeString(rb.Payload.LogID)
		if err != nil {
			return nil, nil, failed(FailureLog, "transparency log bundle log ID: %v", err)
		}
		//nolint:staticcheck // the Rekor bundle of a legacy signature carries exactly NewEntry's fields
		entry, err := tlog.NewEntry(bodyRaw, rb.Payload.IntegratedTime, rb.Payload.LogIndex, logID, rb.SignedEntryTimestamp, nil)
		if err != nil {
			return nil, nil, failed(FailureLog, "transparency log bundle: %v", err)
		}
		entries = []*tlog.Entry{entry}
	}
	ts, err := sig.RFC3161Timestamp()
	if err != nil {
		return nil, nil, failed(FailureTime, "signed timestamp annotation unreadable: %v", err)
	}
	var stamps [][]byte
	if ts != nil {
		stamps = [][]byte{ts.SignedRFC3161Timestamp}
	}
	return entries, stamps, nil
}

// verifyLegacy verifies a legacy .sig signature made keyless (cosign v2 `cosign sign` without a
// key): the certificate, the Rekor bundle and the RFC 3161 timestamp travel as annotations.
func (k *keyless) verifyLegacy(sig oci.Signature, leaf *x509.Certificate) (*Signer, error) {
	payload, err := sig.Payload()
	if err != nil {
		return nil, failed(FailureForm, "signature payload unreadable: %v", err)
	}
	raw, err := sig.Signature()
	if err != nil {
		return nil, failed(FailureForm, "signature unreadable: %v", err)
	}
	entries, stamps, err := legacyEvidence(sig)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(payload)
	entity := &legacyEntity{leaf: leaf, sig: raw, digest: sum[:], entries: entries, stamps: stamps}
	checkSig := func(pub crypto.PublicKey) error { return verifyWith(pub, raw, payload) }
	return k.verify(entity, leaf, checkSig, sgverify.WithArtifact(bytes.NewReader(payload)))
}

// verifyWith verifies sig over message with pub, hashing as the key type does by default (what
// cosign signs with).
func verifyWith(pub crypto.PublicKey, sig, message []byte) error {
	sv, err := signature.LoadDefaultVerifier(pub)
	if err != nil {
		return fmt.Errorf("certificate key cannot verify signatures: %w", err)
	}
	return sv.VerifySignature(bytes.NewReader(sig), bytes.NewReader(message))
}

// legacyEntity presents a legacy keyless signature to sigstore-go: a message signature over the
// payload (or, for an attestation, its DSSE envelope), the Fulcio certificate, the Rekor entry and
// the signed timestamp.
type legacyEntity struct {
	leaf     *x509.Certificate
	sig      []byte
	digest   []byte
	envelope *sgbundle.Envelope // an attestation's; nil for a signature
	entries  []*tlog.Entry
	stamps   [][]byte
}

var _ sgverify.SignedEntity = (*legacyEntity)(nil)

func (e *legacyEntity) HasInclusionPromise() bool { return len(e.entries) > 0 }
func (e *legacyEntity) HasInclusionProof() bool   { return false }
func (e *legacyEntity) Timestamps() ([][]byte, error) {
	return e.stamps, nil
}
func (e *legacyEntity) TlogEntries() ([]*tlog.Entry, error) { return e.entries, nil }

// Version: a Rekor bundle of a legacy signature has the promise, not the proof, as v0.1 bundles.
func (e *legacyEntity) Version() (string, error) { return "v0.1", nil }

func (e *legacyEntity) VerificationContent() (sgverify.VerificationContent, error) {
	return sgbundle.NewCertificate(e.leaf), nil
}

func (e *legacyEntity) SignatureContent() (sgverify.SignatureContent, error) {
	if e.envelope != nil {
		return e.envelope, nil
	}
	return sgbundle.NewMessageSignature(e.digest, "SHA2_256", e.sig), nil
}
