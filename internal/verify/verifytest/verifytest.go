// Package verifytest signs images in tests the way the cosign CLI does, so any package's tests
// can produce signed, unsigned and tampered digests in an in-memory registry:
//
//	kp := verifytest.NewKeyPair(t)
//	ref := verifytest.PushRandomImage(t, host+"/team/app", "v1.0.0") // repo@sha256:...
//	verifytest.SignLegacy(t, t.Context(), ref, kp) // cosign sign (v2 default, .sig tag)
//	verifytest.SignBundle(t, t.Context(), ref, kp) // cosign sign (v3 default, bundle referrer)
//
// Registries on loopback are reached over plain HTTP; pass remote options for credentials.
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
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v3/pkg/oci"
	"github.com/sigstore/cosign/v3/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	"github.com/sigstore/cosign/v3/pkg/oci/static"
	"github.com/sigstore/cosign/v3/pkg/types"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	sigdsse "github.com/sigstore/sigstore/pkg/signature/dsse"
	"github.com/sigstore/sigstore/pkg/signature/payload"
	"google.golang.org/protobuf/encoding/protojson"
)

// KeyPair is a cosign signing key: the PEM public key to trust and the signer.
type KeyPair struct {
	// PublicPEM is what goes into a Secret entry such as cosign.pub.
	PublicPEM []byte
	Signer    signature.SignerVerifier
}

// NewKeyPair generates an ECDSA P-256 key pair, as `cosign generate-key-pair` does.
func NewKeyPair(t testing.TB) KeyPair {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate key: %v", err)
	}
	sv, err := signature.LoadECDSASignerVerifier(priv, crypto.SHA256)
	if err != nil {
		t.Fatalf("load signer: %v", err)
	}
	pub, err := cryptoutils.MarshalPublicKeyToPEM(&priv.PublicKey)
	if err != nil {
		t.Fatalf("marshal public key: %v", err)
	}
	return KeyPair{PublicPEM: pub, Signer: sv}
}

// PushRandomImage pushes a small random image as repo:tag and returns "repo@sha256:<hex>".
func PushRandomImage(t testing.TB, repo, tag string, opts ...remote.Option) string {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatalf("random image: %v", err)
	}
	ref, err := name.NewTag(repo + ":" + tag)
	if err != nil {
		t.Fatalf("tag %s:%s: %v", repo, tag, err)
	}
	if err := remote.Write(ref, img, withContext(t.Context(), opts)...); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	h, err := img.Digest()
	if err != nil {
		t.Fatalf("digest: %v", err)
	}
	return ref.Context().Digest(h.String()).String()
}

// SignLegacy signs ref's digest like `cosign sign --key` in v2: a simple-signing payload stored
// under the <repo>:sha256-<hex>.sig tag (added to the signatures already there).
func SignLegacy(t testing.TB, ctx context.Context, ref string, kp KeyPair, opts ...remote.Option) {
	t.Helper()
	d := resolve(t, ctx, ref, opts)
	pl, err := (&payload.Cosign{Image: d}).MarshalJSON()
	if err != nil {
		t.Fatalf("payload: %v", err)
	}
	raw, err := kp.Signer.SignMessage(bytes.NewReader(pl))
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	sig, err := static.NewSignature(pl, base64.StdEncoding.EncodeToString(raw))
	if err != nil {
		t.Fatalf("signature: %v", err)
	}
	oopts := []ociremote.Option{ociremote.WithRemoteOptions(withContext(ctx, opts)...)}
	se, err := ociremote.SignedEntity(d, oopts...)
	if err != nil {
		t.Fatalf("read %s: %v", d, err)
	}
	signed, err := mutate.AttachSignatureToEntity(se, sig)
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	if err := ociremote.WriteSignatures(d.Repository, signed, oopts...); err != nil {
		t.Fatalf("write signatures of %s: %v", d, err)
	}
}

// SignBundle signs ref's digest like `cosign sign --key` in v3 (new bundle format, no
// transparency log): a DSSE in-toto statement with predicate https://sigstore.dev/cosign/sign/v1
// whose subject is the digest, in a Sigstore v0.3 bundle pushed as an OCI referrer of the image.
// It returns the bundle JSON (see AttachBundle).
func SignBundle(t testing.TB, ctx context.Context, ref string, kp KeyPair, opts ...remote.Option) []byte {
	t.Helper()
	d := resolve(t, ctx, ref, opts)
	return AttestBundle(t, ctx, ref, kp, Statement(t, d.DigestStr(), types.CosignSignPredicateType, map[string]any{}), opts...)
}

// Statement is an in-toto v1 statement about digest ("sha256:<hex>") of predicateType.
func Statement(t testing.TB, digest, predicateType string, predicate any) []byte {
	t.Helper()
	statement, err := json.Marshal(map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []any{map[string]any{"name": "image", "digest": map[string]string{"sha256": digest[len("sha256:"):]}}},
		"predicateType": predicateType,
		"predicate":     predicate,
	})
	if err != nil {
		t.Fatalf("statement: %v", err)
	}
	return statement
}

// AttestBundle attaches statement to ref's digest like `cosign attest --key` in v3: signed as a
// DSSE envelope in a Sigstore v0.3 bundle pushed as an OCI referrer, annotated with its
// predicate type. It returns the bundle JSON. The statement is taken as it is (its subject may
// name another digest).
func AttestBundle(t testing.TB, ctx context.Context, ref string, kp KeyPair, statement []byte, opts ...remote.Option) []byte {
	t.Helper()
	kpw, err := newBundleKeypair(kp)
	if err != nil {
		t.Fatalf("keypair: %v", err)
	}
	b, err := sign.Bundle(&sign.DSSEData{Data: statement, PayloadType: "application/vnd.in-toto+json"}, kpw, sign.BundleOptions{Context: ctx})
	if err != nil {
		t.Fatalf("sign bundle: %v", err)
	}
	bundleJSON, err := protojson.Marshal(b)
	if err != nil {
		t.Fatalf("marshal bundle: %v", err)
	}
	AttachStatementBundle(t, ctx, ref, bundleJSON, predicateTypeOf(t, statement), opts...)
	return bundleJSON
}

// AttestLegacy attaches statement to ref's digest like `cosign attest --key` in v2: a DSSE
// envelope signed with the key, a layer of the <repo>:sha256-<hex>.att tag annotated with its
// predicate type (added to the attestations already there).
func AttestLegacy(t testing.TB, ctx context.Context, ref string, kp KeyPair, statement []byte, opts ...remote.Option) {
	t.Helper()
	d := resolve(t, ctx, ref, opts)
	env, err := sigdsse.WrapSigner(kp.Signer, "application/vnd.in-toto+json").SignMessage(bytes.NewReader(statement))
	if err != nil {
		t.Fatalf("sign envelope: %v", err)
	}
	att, err := static.NewAttestation(env, static.WithLayerMediaType(types.DssePayloadType),
		static.WithAnnotations(map[string]string{"predicateType": predicateTypeOf(t, statement)}))
	if err != nil {
		t.Fatalf("attestation: %v", err)
	}
	writeAttestation(t, ctx, d, att, opts)
}

// writeAttestation adds att to the attestations under d's .att tag.
func writeAttestation(t testing.TB, ctx context.Context, d name.Digest, att oci.Signature, opts []remote.Option) {
	t.Helper()
	oopts := []ociremote.Option{ociremote.WithRemoteOptions(withContext(ctx, opts)...)}
	se, err := ociremote.SignedEntity(d, oopts...)
	if err != nil {
		t.Fatalf("read %s: %v", d, err)
	}
	attested, err := mutate.AttachAttestationToEntity(se, att)
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	if err := ociremote.WriteAttestations(d.Repository, attested, oopts...); err != nil {
		t.Fatalf("write attestations of %s: %v", d, err)
	}
}

func predicateTypeOf(t testing.TB, statement []byte) string {
	t.Helper()
	var st struct {
		PredicateType string `json:"predicateType"`
	}
	_ = json.Unmarshal(statement, &st) // a malformed statement is attached as it is
	return st.PredicateType
}

// AttachStatementBundle pushes bundle JSON as a Sigstore bundle referrer of ref's digest
// annotated with predicateType, as cosign v3 attaches attestations.
func AttachStatementBundle(t testing.TB, ctx context.Context, ref string, bundleJSON []byte, predicateType string, opts ...remote.Option) {
	t.Helper()
	d := resolve(t, ctx, ref, opts)
	if err := ociremote.WriteAttestationNewBundleFormat(d, bundleJSON, predicateType, ociremote.WithRemoteOptions(withContext(ctx, opts)...)); err != nil {
		t.Fatalf("attach bundle to %s: %v", d, err)
	}
}

// AttachBundle pushes bundle JSON as a Sigstore bundle referrer of ref's digest, as cosign v3 does.
// Attaching another digest's bundle simulates a copied signature.
func AttachBundle(t testing.TB, ctx context.Context, ref string, bundleJSON []byte, opts ...remote.Option) {
	t.Helper()
	d := resolve(t, ctx, ref, opts)
	err := ociremote.WriteAttestationNewBundleFormat(d, bundleJSON, types.CosignSignPredicateType,
		ociremote.WithRemoteOptions(withContext(ctx, opts)...))
	if err != nil {
		t.Fatalf("attach bundle to %s: %v", d, err)
	}
}

// CopyLegacySignature copies the .sig manifest of digest ref from to the .sig tag of digest ref
// to, as an attacker replaying a signature would.
func CopyLegacySignature(t testing.TB, from, to string, opts ...remote.Option) {
	t.Helper()
	ctx := t.Context()
	src, dst := resolve(t, ctx, from, opts), resolve(t, ctx, to, opts)
	ropts := withContext(ctx, opts)
	srcTag, err := ociremote.SignatureTag(src)
	if err != nil {
		t.Fatalf("signature tag of %s: %v", src, err)
	}
	dstTag, err := ociremote.SignatureTag(dst)
	if err != nil {
		t.Fatalf("signature tag of %s: %v", dst, err)
	}
	img, err := remote.Image(srcTag, ropts...)
	if err != nil {
		t.Fatalf("read %s: %v", srcTag, err)
	}
	if err := remote.Write(dstTag, img, ropts...); err != nil {
		t.Fatalf("write %s: %v", dstTag, err)
	}
}

// resolve turns a tag or digest reference into a digest reference.
func resolve(t testing.TB, ctx context.Context, ref string, opts []remote.Option) name.Digest {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatalf("parse %q: %v", ref, err)
	}
	if d, ok := r.(name.Digest); ok {
		return d
	}
	desc, err := remote.Head(r, withContext(ctx, opts)...)
	if err != nil {
		t.Fatalf("resolve %s: %v", r, err)
	}
	return r.Context().Digest(desc.Digest.String())
}

func withContext(ctx context.Context, opts []remote.Option) []remote.Option {
	return append([]remote.Option{remote.WithContext(ctx)}, opts...)
}

// bundleKeypair adapts a KeyPair to sigstore-go's sign.Keypair.
type bundleKeypair struct {
	kp   KeyPair
	pub  crypto.PublicKey
	hint []byte
}

func newBundleKeypair(kp KeyPair) (*bundleKeypair, error) {
	pub, err := kp.Signer.PublicKey()
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	return &bundleKeypair{kp: kp, pub: pub, hint: []byte(base64.StdEncoding.EncodeToString(sum[:]))}, nil
}

func (b *bundleKeypair) GetHashAlgorithm() protocommon.HashAlgorithm {
	return protocommon.HashAlgorithm_SHA2_256
}

func (b *bundleKeypair) GetSigningAlgorithm() protocommon.PublicKeyDetails {
	return protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256
}

func (b *bundleKeypair) GetHint() []byte                { return b.hint }
func (b *bundleKeypair) GetKeyAlgorithm() string        { return "ECDSA" }
func (b *bundleKeypair) GetPublicKey() crypto.PublicKey { return b.pub }

func (b *bundleKeypair) GetPublicKeyPem() (string, error) { return string(b.kp.PublicPEM), nil }

func (b *bundleKeypair) SignData(_ context.Context, data []byte) ([]byte, []byte, error) {
	sum := sha256.Sum256(data)
	sig, err := b.kp.Signer.SignMessage(bytes.NewReader(data))
	if err != nil {
		return nil, nil, err
	}
	return sig, sum[:], nil
}
