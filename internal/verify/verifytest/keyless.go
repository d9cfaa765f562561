package verifytest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"net/url"
	"testing"
	"time"

	ct "github.com/google/certificate-transparency-go"
	cttls "github.com/google/certificate-transparency-go/tls"
	ctx509 "github.com/google/certificate-transparency-go/x509"
	ctx509util "github.com/google/certificate-transparency-go/x509util"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	cbundle "github.com/sigstore/cosign/v3/pkg/cosign/bundle"
	"github.com/sigstore/cosign/v3/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	"github.com/sigstore/cosign/v3/pkg/oci/static"
	"github.com/sigstore/cosign/v3/pkg/types"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protodsse "github.com/sigstore/protobuf-specs/gen/pb-go/dsse"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Sigstore is a Sigstore instance in memory, to sign keyless as CI does without a network: a
// Fulcio (root, intermediate, short-lived certificates naming a CI identity, each with an SCT of
// the instance's CT log) plus the Rekor transparency log and RFC 3161 timestamp authority of
// sigstore-go's virtual Sigstore (github.com/sigstore/sigstore-go/pkg/testing/ca). TrustedRoot
// is its trusted_root.json, what a Stage names in verify.trustedRoot.
//
//	sigstore := verifytest.NewSigstore(t)
//	ci := verifytest.GitHubActions("org/app", "release.yml", "refs/tags/v1.0.0")
//	sigstore.SignBundle(t, ctx, ref, ci, verifytest.Keyless{}) // cosign v3 keyless, from CI
//	sigstore.SignLegacy(t, ctx, ref, ci, verifytest.Keyless{}) // cosign v2 keyless (.sig tag)
type Sigstore struct {
	virtual     *ca.VirtualSigstore
	fulcioRoot  *x509.Certificate
	fulcioInter *x509.Certificate
	fulcioKey   *ecdsa.PrivateKey
	ctKey       *ecdsa.PrivateKey
	ctLogID     [sha256.Size]byte
	trustedRoot []byte
}

// CI is a keyless signer: the OIDC issuer and subject its certificate names, and the CI
// extensions Fulcio copies from the token.
type CI struct {
	Issuer  string
	Subject string
	// Workflow (build config URI), Ref and Repository go into Fulcio's CI extensions.
	Workflow   string
	Ref        string
	Repository string
}

// GitHubIssuer is the OIDC issuer of GitHub Actions.
const GitHubIssuer = "https://token.actions.githubusercontent.com"

// GitHubActions is the identity of a GitHub Actions workflow of repo (owner/name) running for ref:
// its subject is the workflow file's URL at the ref, as Fulcio writes it.
func GitHubActions(repo, workflowFile, ref string) CI {
	workflow := "https://github.com/" + repo + "/.github/workflows/" + workflowFile + "@" + ref
	return CI{Issuer: GitHubIssuer, Subject: workflow, Workflow: workflow, Ref: ref, Repository: "https://github.com/" + repo}
}

// Keyless tunes a keyless signature, mostly to break one part of it.
type Keyless struct {
	// CertFrom is when the certificate's 10 minutes of validity start (default: a minute ago).
	CertFrom time.Time
	// LogTime is when the transparency log says it saw the signature (default: now).
	LogTime time.Time
	// NoLogEntry leaves the transparency log entry out.
	NoLogEntry bool
	// NoTimestamp leaves the RFC 3161 signed timestamp out.
	NoTimestamp bool
	// NoSCT issues the certificate without an SCT.
	NoSCT bool
	// Tamper changes the signed payload after signing (the log entry and timestamp stay those of
	// the original).
	Tamper func(payload []byte) []byte
}

// NewSigstore starts a Sigstore instance in memory.
func NewSigstore(t testing.TB) *Sigstore {
	t.Helper()
	virtual, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatalf("virtual sigstore: %v", err)
	}
	s := &Sigstore{virtual: virtual}
	now := time.Now()
	rootKey := newKey(t)
	s.fulcioRoot = createCert(t, &x509.Certificate{
		SerialNumber: serial(t), Subject: pkix.Name{CommonName: "sigstore", Organization: []string{"test.sigstore"}},
		NotBefore: now.Add(-24 * time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, BasicConstraintsValid: true, IsCA: true,
	}, nil, &rootKey.PublicKey, rootKey)
	s.fulcioKey = newKey(t)
	s.fulcioInter = createCert(t, &x509.Certificate{
		SerialNumber: serial(t), Subject: pkix.Name{CommonName: "sigstore-intermediate", Organization: []string{"test.sigstore"}},
		NotBefore: now.Add(-24 * time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
		BasicConstraintsValid: true, IsCA: true,
	}, s.fulcioRoot, &s.fulcioKey.PublicKey, rootKey)
	s.ctKey = newKey(t)
	der, err := x509.MarshalPKIXPublicKey(&s.ctKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	s.ctLogID = sha256.Sum256(der)

	// The virtual Sigstore names its logs by the hex of their ID; a trusted_root.json wants the bytes.
	rekor := map[string]*root.TransparencyLog{}
	for id, l := range virtual.RekorLogs() {
		raw, err := hex.DecodeString(id)
		if err != nil {
			t.Fatal(err)
		}
		l.ID = raw
		l.ValidityPeriodStart, l.ValidityPeriodEnd = now.Add(-24*time.Hour), time.Time{}
		rekor[id] = l
	}
	ctlogs := map[string]*root.TransparencyLog{hex.EncodeToString(s.ctLogID[:]): {
		BaseURL: "https://ctfe.localhost/test", ID: s.ctLogID[:], ValidityPeriodStart: now.Add(-24 * time.Hour),
		HashFunc: crypto.SHA256, PublicKey: &s.ctKey.PublicKey, SignatureHashFunc: crypto.SHA256,
	}}
	fulcio := []root.CertificateAuthority{&root.FulcioCertificateAuthority{Root: s.fulcioRoot,
		Intermediates: []*x509.Certificate{s.fulcioInter}, ValidityPeriodStart: now.Add(-24 * time.Hour), URI: "https://fulcio.localhost"}}
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, fulcio, ctlogs, virtual.TimestampingAuthorities(), rekor)
	if err != nil {
		t.Fatalf("trusted root: %v", err)
	}
	if s.trustedRoot, err = tr.MarshalJSON(); err != nil {
		t.Fatalf("trusted root: %v", err)
	}
	return s
}

// TrustedRoot is the instance's trusted_root.json.
func (s *Sigstore) TrustedRoot() []byte { return bytes.Clone(s.trustedRoot) }

// SignBundle signs ref's digest keyless as ci, like `cosign sign` in v3 from CI: a DSSE in-toto
// statement (predicate https://sigstore.dev/cosign/sign/v1) whose subject is the digest, signed
// with a fresh key certified by the instance's Fulcio, logged in its Rekor and timestamped, in a
// Sigstore v0.3 bundle pushed as an OCI referrer of the image. It returns the bundle JSON (see
// AttachBundle).
func (s *Sigstore) SignBundle(t testing.TB, ctx context.Context, ref string, ci CI, o Keyless, opts ...remote.Option) []byte {
	t.Helper()
	d := resolve(t, ctx, ref, opts)
	return s.AttestBundle(t, ctx, ref, Statement(t, d.DigestStr(), types.CosignSignPredicateType, map[string]any{}), ci, o, opts...)
}

// AttestBundle attaches statement to ref's digest keyless as ci, like `cosign attest` in v3
// from CI: a DSSE envelope signed with a fresh key certified by the instance's Fulcio, logged
// and timestamped, in a Sigstore v0.3 bundle pushed as an OCI referrer annotated with its
// predicate type. It returns the bundle JSON.
func (s *Sigstore) AttestBundle(t testing.TB, ctx context.Context, ref string, statement []byte, ci CI, o Keyless, opts ...remote.Option) []byte {
	t.Helper()
	predicateType := predicateTypeOf(t, statement)
	const payloadType = "application/vnd.in-toto+json"
	leaf, key := s.issue(t, ci, o)
	sig := signWith(t, key, dsse.PAE(payloadType, statement))
	vm := &protobundle.VerificationMaterial{
		Content: &protobundle.VerificationMaterial_Certificate{Certificate: &protocommon.X509Certificate{RawBytes: leaf.Raw}},
	}
	if !o.NoLogEntry {
		env := &dsse.Envelope{PayloadType: payloadType, Payload: base64.StdEncoding.EncodeToString(statement),
			Signatures: []dsse.Signature{{Sig: base64.StdEncoding.EncodeToString(sig)}}}
		entry, err := s.virtual.GenerateTlogEntry(leaf, env, sig, logTime(o).Unix(), true)
		if err != nil {
			t.Fatalf("log entry: %v", err)
		}
		vm.TlogEntries = []*protorekor.TransparencyLogEntry{s.promised(t, entry, "dsse", "0.0.1")}
	}
	if !o.NoTimestamp {
		vm.TimestampVerificationData = &protobundle.TimestampVerificationData{
			Rfc3161Timestamps: []*protocommon.RFC3161SignedTimestamp{{SignedTimestamp: s.timestamp(t, sig)}}}
	}
	if o.Tamper != nil {
		statement = o.Tamper(statement)
	}
	b := &protobundle.Bundle{
		MediaType:            "application/vnd.dev.sigstore.bundle.v0.3+json",
		VerificationMaterial: vm,
		Content: &protobundle.Bundle_DsseEnvelope{DsseEnvelope: &protodsse.Envelope{
			Payload: statement, PayloadType: payloadType, Signatures: []*protodsse.Signature{{Sig: sig}}}},
	}
	bundleJSON, err := protojson.Marshal(b)
	if err != nil {
		t.Fatalf("marshal bundle: %v", err)
	}
	AttachStatementBundle(t, ctx, ref, bundleJSON, predicateType, opts...)
	return bundleJSON
}

// SignLegacy signs ref's digest keyless as ci, like `cosign sign` in v2 from CI: a
// simple-signing payload under the <repo>:sha256-<hex>.sig tag, its layer annotated with the
// Fulcio certificate and chain, the Rekor bundle (a hashedrekord entry with its signed entry
// timestamp) and the RFC 3161 timestamp.
func (s *Sigstore) SignLegacy(t testing.TB, ctx context.Context, ref string, ci CI, o Keyless, opts ...remote.Option) {
	t.Helper()
	d := resolve(t, ctx, ref, opts)
	pl, err := (&payload.Cosign{Image: d}).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	leaf, key := s.issue(t, ci, o)
	sig := signWith(t, key, pl)
	leafPEM, err := cryptoutils.MarshalCertificateToPEM(leaf)
	if err != nil {
		t.Fatal(err)
	}
	chainPEM, err := cryptoutils.MarshalCertificatesToPEM([]*x509.Certificate{s.fulcioInter, s.fulcioRoot})
	if err != nil {
		t.Fatal(err)
	}
	sopts := []static.Option{static.WithCertChain(leafPEM, chainPEM)}
	if !o.NoLogEntry {
		sopts = append(sopts, static.WithBundle(s.hashedRekord(t, leaf, leafPEM, pl, sig, logTime(o))))
	}
	if !o.NoTimestamp {
		sopts = append(sopts, static.WithRFC3161Timestamp(&cbundle.RFC3161Timestamp{SignedRFC3161Timestamp: s.timestamp(t, sig)}))
	}
	if o.Tamper != nil {
		pl = o.Tamper(pl)
	}
	signed, err := static.NewSignature(pl, base64.StdEncoding.EncodeToString(sig), sopts...)
	if err != nil {
		t.Fatal(err)
	}
	oopts := []ociremote.Option{ociremote.WithRemoteOptions(withContext(ctx, opts)...)}
	se, err := ociremote.SignedEntity(d, oopts...)
	if err != nil {
		t.Fatalf("read %s: %v", d, err)
	}
	withSig, err := mutate.AttachSignatureToEntity(se, signed)
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	if err := ociremote.WriteSignatures(d.Repository, withSig, oopts...); err != nil {
		t.Fatalf("write signatures of %s: %v", d, err)
	}
}

// AttestLegacy attaches statement to ref's digest keyless as ci, like `cosign attest` in v2 from
// CI: a DSSE envelope signed with a fresh key certified by the instance's Fulcio, a layer of the
// <repo>:sha256-<hex>.att tag annotated with its predicate type, the certificate and chain, the
// Rekor bundle (a dsse entry with its signed entry timestamp) and the RFC 3161 timestamp.
func (s *Sigstore) AttestLegacy(t testing.TB, ctx context.Context, ref string, statement []byte, ci CI, o Keyless, opts ...remote.Option) {
	t.Helper()
	d := resolve(t, ctx, ref, opts)
	const payloadType = "application/vnd.in-toto+json"
	leaf, key := s.issue(t, ci, o)
	sig := signWith(t, key, dsse.PAE(payloadType, statement))
	env := &dsse.Envelope{PayloadType: payloadType, Payload: base64.StdEncoding.EncodeToString(statement),
		Signatures: []dsse.Signature{{Sig: base64.StdEncoding.EncodeToString(sig)}}}
	leafPEM, err := cryptoutils.MarshalCertificateToPEM(leaf)
	if err != nil {
		t.Fatal(err)
	}
	chainPEM, err := cryptoutils.MarshalCertificatesToPEM([]*x509.Certificate{s.fulcioInter, s.fulcioRoot})
	if err != nil {
		t.Fatal(err)
	}
	sopts := []static.Option{static.WithLayerMediaType(types.DssePayloadType), static.WithCertChain(leafPEM, chainPEM),
		static.WithAnnotations(map[string]string{"predicateType": predicateTypeOf(t, statement)})}
	if !o.NoLogEntry {
		entry, err := s.virtual.GenerateTlogEntry(leaf, env, sig, logTime(o).Unix(), false)
		if err != nil {
			t.Fatalf("log entry: %v", err)
		}
		tle := s.promised(t, entry, "dsse", "0.0.1")
		sopts = append(sopts, static.WithBundle(&cbundle.RekorBundle{SignedEntryTimestamp: tle.InclusionPromise.SignedEntryTimestamp,
			Payload: cbundle.RekorPayload{Body: base64.StdEncoding.EncodeToString(tle.CanonicalizedBody), IntegratedTime: tle.IntegratedTime,
				LogIndex: tle.LogIndex, LogID: hex.EncodeToString(tle.LogId.KeyId)}}))
	}
	if !o.NoTimestamp {
		sopts = append(sopts, static.WithRFC3161Timestamp(&cbundle.RFC3161Timestamp{SignedRFC3161Timestamp: s.timestamp(t, sig)}))
	}
	if o.Tamper != nil {
		env.Payload = base64.StdEncoding.EncodeToString(o.Tamper(statement))
	}
	envJSON, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	att, err := static.NewAttestation(envJSON, sopts...)
	if err != nil {
		t.Fatal(err)
	}
	writeAttestation(t, ctx, d, att, opts)
}

// SignBlob signs blob keyless as ci, like `cosign sign-blob --bundle` from CI: a Sigstore v0.3
// bundle with a message signature over the blob's SHA-256, the Fulcio certificate, a hashedrekord
// entry of the instance's Rekor (with its signed entry timestamp) and a signed timestamp. It
// returns the bundle JSON; nothing is pushed. Tamper, if set, changes the blob whose digest the
// bundle names after signing.
func (s *Sigstore) SignBlob(t testing.TB, blob []byte, ci CI, o Keyless) []byte {
	t.Helper()
	leaf, key := s.issue(t, ci, o)
	sig := signWith(t, key, blob)
	vm := &protobundle.VerificationMaterial{
		Content: &protobundle.VerificationMaterial_Certificate{Certificate: &protocommon.X509Certificate{RawBytes: leaf.Raw}},
	}
	if !o.NoLogEntry {
		leafPEM, err := cryptoutils.MarshalCertificateToPEM(leaf)
		if err != nil {
			t.Fatal(err)
		}
		rb := s.hashedRekord(t, leaf, leafPEM, blob, sig, logTime(o))
		body, err := base64.StdEncoding.DecodeString(rb.Payload.Body.(string))
		if err != nil {
			t.Fatal(err)
		}
		logID, err := hex.DecodeString(rb.Payload.LogID)
		if err != nil {
			t.Fatal(err)
		}
		// A v0.3 bundle needs an inclusion proof; the virtual log proves the body at index 0.
		proof, err := s.virtual.GetInclusionProof(body)
		if err != nil {
			t.Fatalf("inclusion proof: %v", err)
		}
		//nolint:staticcheck // a v1 hashedrekord entry with its proof is exactly NewEntry's fields
		entry, err := tlog.NewEntry(body, rb.Payload.IntegratedTime, 0, logID, rb.SignedEntryTimestamp, proof)
		if err != nil {
			t.Fatalf("log entry: %v", err)
		}
		vm.TlogEntries = []*protorekor.TransparencyLogEntry{s.promised(t, entry, "hashedrekord", "0.0.1")}
	}
	if !o.NoTimestamp {
		vm.TimestampVerificationData = &protobundle.TimestampVerificationData{
			Rfc3161Timestamps: []*protocommon.RFC3161SignedTimestamp{{SignedTimestamp: s.timestamp(t, sig)}}}
	}
	if o.Tamper != nil {
		blob = o.Tamper(bytes.Clone(blob))
	}
	sum := sha256.Sum256(blob)
	b := &protobundle.Bundle{
		MediaType:            "application/vnd.dev.sigstore.bundle.v0.3+json",
		VerificationMaterial: vm,
		Content: &protobundle.Bundle_MessageSignature{MessageSignature: &protocommon.MessageSignature{
			MessageDigest: &protocommon.HashOutput{Algorithm: protocommon.HashAlgorithm_SHA2_256, Digest: sum[:]},
			Signature:     sig}},
	}
	out, err := protojson.Marshal(b)
	if err != nil {
		t.Fatalf("marshal bundle: %v", err)
	}
	return out
}

// issue is Fulcio: a fresh key and a 10-minute certificate for ci, with an embedded SCT.
func (s *Sigstore) issue(t testing.TB, ci CI, o Keyless) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key := newKey(t)
	from := o.CertFrom
	if from.IsZero() {
		from = time.Now().Add(-time.Minute)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		NotBefore:    from, NotAfter: from.Add(10 * time.Minute),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
	}
	if u, err := url.Parse(ci.Subject); err == nil && u.Scheme != "" {
		tmpl.URIs = []*url.URL{u}
	} else {
		tmpl.EmailAddresses = []string{ci.Subject}
	}
	utf8 := func(v string) []byte {
		b, err := asn1.MarshalWithParams(v, "utf8")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// The issuer in both forms Fulcio writes (raw, deprecated; DER UTF8String), then the CI
	// extensions (the GitHub-specific ref raw, the generic ones DER).
	type ext struct {
		oid asn1.ObjectIdentifier
		val []byte
	}
	exts := []ext{{certificate.OIDIssuer, []byte(ci.Issuer)}, {certificate.OIDIssuerV2, utf8(ci.Issuer)}}
	if ci.Workflow != "" {
		exts = append(exts, ext{certificate.OIDBuildConfigURI, utf8(ci.Workflow)})
	}
	if ci.Ref != "" {
		exts = append(exts, ext{certificate.OIDGitHubWorkflowRef, []byte(ci.Ref)}, ext{certificate.OIDSourceRepositoryRef, utf8(ci.Ref)})
	}
	if ci.Repository != "" {
		exts = append(exts, ext{certificate.OIDSourceRepositoryURI, utf8(ci.Repository)})
	}
	for _, e := range exts {
		tmpl.ExtraExtensions = append(tmpl.ExtraExtensions, pkix.Extension{Id: e.oid, Value: e.val})
	}
	pre := createCert(t, tmpl, s.fulcioInter, &key.PublicKey, s.fulcioKey)
	if o.NoSCT {
		return pre, key
	}
	// The SCT signs the certificate without its SCT list (what a precertificate is once its
	// poison extension is removed), so the same template signed again with the list appended
	// verifies.
	tmpl.ExtraExtensions = append(tmpl.ExtraExtensions, pkix.Extension{Id: asn1.ObjectIdentifier(ctx509.OIDExtensionCTSCT),
		Value: s.sctList(t, pre, from)})
	return createCert(t, tmpl, s.fulcioInter, &key.PublicKey, s.fulcioKey), key
}

// sctList is the CT log's SCT list extension value for a precertificate.
func (s *Sigstore) sctList(t testing.TB, pre *x509.Certificate, at time.Time) []byte {
	t.Helper()
	sct := ct.SignedCertificateTimestamp{SCTVersion: ct.V1, LogID: ct.LogID{KeyID: s.ctLogID}, Timestamp: uint64(at.UnixMilli())}
	leaf := ct.LogEntry{Leaf: ct.MerkleTreeLeaf{Version: ct.V1, LeafType: ct.TimestampedEntryLeafType,
		TimestampedEntry: &ct.TimestampedEntry{Timestamp: sct.Timestamp, EntryType: ct.PrecertLogEntryType,
			PrecertEntry: &ct.PreCert{IssuerKeyHash: sha256.Sum256(s.fulcioInter.RawSubjectPublicKeyInfo), TBSCertificate: pre.RawTBSCertificate}}}}
	data, err := ct.SerializeSCTSignatureInput(sct, leaf)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	sig, err := ecdsa.SignASN1(rand.Reader, s.ctKey, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	sct.Signature = ct.DigitallySigned{Algorithm: cttls.SignatureAndHashAlgorithm{Hash: cttls.SHA256, Signature: cttls.ECDSA}, Signature: sig}
	list, err := ctx509util.MarshalSCTsIntoSCTList([]*ct.SignedCertificateTimestamp{&sct})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := cttls.Marshal(*list)
	if err != nil {
		t.Fatal(err)
	}
	ext, err := asn1.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	return ext
}

// promised adds what a Rekor v1 entry in a bundle carries besides the body and proof: its kind
// and the log's signed entry timestamp (the inclusion promise).
func (s *Sigstore) promised(t testing.TB, entry *tlog.Entry, kind, version string) *protorekor.TransparencyLogEntry {
	t.Helper()
	tle := proto.Clone(entry.TransparencyLogEntry()).(*protorekor.TransparencyLogEntry)
	tle.KindVersion = &protorekor.KindVersion{Kind: kind, Version: version}
	set := s.set(t, tle.CanonicalizedBody, tle.IntegratedTime, tle.LogIndex)
	tle.InclusionPromise = &protorekor.InclusionPromise{SignedEntryTimestamp: set}
	return tle
}

// set is the Rekor log's signed entry timestamp of a body.
func (s *Sigstore) set(t testing.TB, body []byte, integrated, index int64) []byte {
	t.Helper()
	logID, err := s.virtual.RekorLogID()
	if err != nil {
		t.Fatal(err)
	}
	set, err := s.virtual.RekorSignPayload(tlog.RekorPayload{Body: base64.StdEncoding.EncodeToString(body),
		IntegratedTime: integrated, LogIndex: index, LogID: logID})
	if err != nil {
		t.Fatalf("signed entry timestamp: %v", err)
	}
	return set
}

// hashedRekord is the Rekor bundle cosign v2 annotates a legacy keyless signature with.
func (s *Sigstore) hashedRekord(t testing.TB, leaf *x509.Certificate, leafPEM, pl, sig []byte, at time.Time) *cbundle.RekorBundle {
	t.Helper()
	sum := sha256.Sum256(pl)
	// Canonical JSON: encoding/json sorts map keys and adds no space.
	body, err := json.Marshal(map[string]any{
		"apiVersion": "0.0.1", "kind": "hashedrekord",
		"spec": map[string]any{
			"data":      map[string]any{"hash": map[string]any{"algorithm": "sha256", "value": hex.EncodeToString(sum[:])}},
			"signature": map[string]any{"content": sig, "publicKey": map[string]any{"content": leafPEM}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	logID, err := s.virtual.RekorLogID()
	if err != nil {
		t.Fatal(err)
	}
	const index = 7
	b64 := base64.StdEncoding.EncodeToString(body)
	return &cbundle.RekorBundle{
		SignedEntryTimestamp: s.set(t, body, at.Unix(), index),
		Payload:              cbundle.RekorPayload{Body: b64, IntegratedTime: at.Unix(), LogIndex: index, LogID: logID},
	}
}

// timestamp is the timestamp authority's RFC 3161 response over a signature.
func (s *Sigstore) timestamp(t testing.TB, sig []byte) []byte {
	t.Helper()
	tsr, err := s.virtual.TimestampResponse(sig)
	if err != nil {
		t.Fatalf("timestamp: %v", err)
	}
	return tsr
}

func logTime(o Keyless) time.Time {
	if o.LogTime.IsZero() {
		return time.Now()
	}
	return o.LogTime
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// createCert signs tmpl with parentKey (self-signed when parent is nil).
func createCert(t testing.TB, tmpl, parent *x509.Certificate, pub crypto.PublicKey, parentKey crypto.Signer) *x509.Certificate {
	t.Helper()
	if parent == nil {
		parent = tmpl
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, parentKey)
	if err != nil {
		t.Fatalf("certificate: %v", err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// signWith signs message with key, hashing with SHA-256 as cosign does with ECDSA P-256.
func signWith(t testing.TB, key *ecdsa.PrivateKey, message []byte) []byte {
	t.Helper()
	s, err := signature.LoadECDSASigner(key, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := s.SignMessage(bytes.NewReader(message))
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

// WithoutTransparencyLogs is a trusted_root.json with its transparency logs left out, as a private
// Sigstore that only timestamps publishes it.
func WithoutTransparencyLogs(t testing.TB, trustedRoot []byte) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(trustedRoot, &doc); err != nil {
		t.Fatal(err)
	}
	delete(doc, "tlogs")
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
