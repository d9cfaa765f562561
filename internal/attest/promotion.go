package attest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	sgbundle "github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/stagecoach-dev/stagecoach/internal/verify"
)

// PromotionPredicateType is the predicate type of Stagecoach's promotion attestation.
const PromotionPredicateType = "https://stagecoach.dev/attestation/promotion/v1"

// PromotionAnnotation on the referrer manifest names the Promotion an attestation is of
// (<namespace>/<name>/<uid>), for people and tools listing referrers; Find goes by the signed
// statement, not by it.
const PromotionAnnotation = "dev.stagecoach.promotion"

// Promotion is the predicate of a promotion attestation: which Stage of which cluster verified
// the digest, how it got there and what proved it landed. Its JSON field names are the contract
// downstream conditions are written against (docs/sources-and-signatures.md).
type Promotion struct {
	// Cluster names the cluster (the records' cluster id) the Stage is in.
	Cluster     string `json:"cluster,omitempty"`
	Namespace   string `json:"namespace"`
	Stage       string `json:"stage"`
	Service     string `json:"service"`
	Environment string `json:"environment"`
	// Promotion is the Promotion's name, PromotionUID its UID, Action its spec.action (Promote
	// or Rollback).
	Promotion    string  `json:"promotion"`
	PromotionUID string  `json:"promotionUID"`
	Action       string  `json:"action"`
	Version      Version `json:"version"`
	RequestedBy  string  `json:"requestedBy,omitempty"`
	// Gates are the verdicts of every gate the Promotion passed.
	Gates []Gate `json:"gates"`
	// Landed is the engine's proof that the version runs, and when.
	Landed Landed `json:"landed"`
	// Record is the Stage's record stream, when the controller writes records.
	Record *Record `json:"record,omitempty"`
}

// Version is the promoted version.
type Version struct {
	Tag    string `json:"tag,omitempty"`
	Digest string `json:"digest"`
}

// Gate is one gate's verdict.
type Gate struct {
	Gate    string `json:"gate"`
	Passed  bool   `json:"passed"`
	Message string `json:"message,omitempty"`
}

// Landed says where and when the version landed and was verified.
type Landed struct {
	Applier    string    `json:"applier"`
	AppliedAt  time.Time `json:"appliedAt,omitzero"`
	LandedAt   time.Time `json:"landedAt,omitzero"`
	VerifiedAt time.Time `json:"verifiedAt"`
	// Evidence is what the Promotion's verification said.
	Evidence string `json:"evidence,omitempty"`
}

// Record is where the Stage's signed records are and, once the recorder wrote it, the record of
// this Promotion's last step (its seq, action and digest in the stream).
type Record struct {
	Stream string `json:"stream"`
	Seq    int64  `json:"seq,omitempty"`
	Action string `json:"action,omitempty"`
	Digest string `json:"digest,omitempty"`
}

// Statement is the in-toto v1 statement of a promotion attestation about digest
// ("sha256:<hex>") of repository.
func Statement(repository, digest string, p Promotion) ([]byte, error) {
	alg, hex, ok := bytes.Cut([]byte(digest), []byte(":"))
	if !ok || string(alg) != "sha256" || len(hex) != 64 {
		return nil, fmt.Errorf("promotion attestation: %q is not a sha256 digest", digest)
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	predicate := &structpb.Struct{}
	if err := protojson.Unmarshal(raw, predicate); err != nil {
		return nil, err
	}
	st := &intoto.Statement{
		Type:          intoto.StatementTypeUri,
		Subject:       []*intoto.ResourceDescriptor{{Name: repository, Digest: map[string]string{"sha256": string(hex)}}},
		PredicateType: PromotionPredicateType,
		Predicate:     predicate,
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("promotion attestation: %w", err)
	}
	return protojson.Marshal(st)
}

// Signer signs promotion attestations with the controller's key.
type Signer struct {
	sv    signature.SignerVerifier
	pub   crypto.PublicKey
	pem   []byte
	keyID string
	hint  []byte
	algo  protocommon.PublicKeyDetails
}

// LoadSigner loads the encrypted private key `cosign generate-key-pair` writes (cosign.key)
// with its password. Decryption is slow (scrypt): load once, sign many.
func LoadSigner(privatePEM, password []byte) (*Signer, error) {
	sv, err := cosign.LoadPrivateKey(privatePEM, password, nil)
	if err != nil {
		return nil, fmt.Errorf("attestation key is not a cosign private key that this password opens (expected cosign.key and its password, "+
			"as `cosign generate-key-pair` writes them): %w", err)
	}
	return NewSigner(sv)
}

// NewSigner wraps a loaded ECDSA P-256 signer (what `cosign generate-key-pair` makes): the
// bundle names its algorithm, so another key type is refused rather than mislabelled.
func NewSigner(sv signature.SignerVerifier) (*Signer, error) {
	pub, err := sv.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("attestation key has no public key: %w", err)
	}
	if ec, ok := pub.(*ecdsa.PublicKey); !ok || ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("attestation key is a %T, not the ECDSA P-256 key `cosign generate-key-pair` makes: generate one", pub)
	}
	pemBytes, err := cryptoutils.MarshalPublicKeyToPEM(pub)
	if err != nil {
		return nil, err
	}
	id, err := verify.KeyID(pub)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	return &Signer{sv: sv, pub: pub, pem: pemBytes, keyID: id, hint: []byte(base64.StdEncoding.EncodeToString(sum[:])),
		algo: protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256}, nil
}

// KeyID names the signer's public key (verify.KeyID).
func (s *Signer) KeyID() string { return s.keyID }

// PublicKeyPEM is the public key to trust (a cosign.pub entry of a downstream Stage's secretRef).
func (s *Signer) PublicKeyPEM() []byte { return bytes.Clone(s.pem) }

// Bundle signs the statement as a DSSE envelope in a Sigstore v0.3 bundle (no transparency log:
// the key is the trust, as for `cosign attest --key --tlog-upload=false`).
func (s *Signer) Bundle(ctx context.Context, statement []byte) ([]byte, error) {
	b, err := sign.Bundle(&sign.DSSEData{Data: statement, PayloadType: "application/vnd.in-toto+json"}, keypair{s}, sign.BundleOptions{Context: ctx})
	if err != nil {
		return nil, fmt.Errorf("cannot sign the promotion attestation: %w", err)
	}
	return protojson.Marshal(b)
}

// keypair presents the Signer to sigstore-go's bundle signing.
type keypair struct{ s *Signer }

func (k keypair) GetHashAlgorithm() protocommon.HashAlgorithm {
	return protocommon.HashAlgorithm_SHA2_256
}
func (k keypair) GetSigningAlgorithm() protocommon.PublicKeyDetails { return k.s.algo }
func (k keypair) GetHint() []byte                                   { return k.s.hint }
func (k keypair) GetKeyAlgorithm() string                           { return "ECDSA" }
func (k keypair) GetPublicKey() crypto.PublicKey                    { return k.s.pub }
func (k keypair) GetPublicKeyPem() (string, error)                  { return string(k.s.pem), nil }
func (k keypair) SignData(_ context.Context, data []byte) ([]byte, []byte, error) {
	sum := sha256.Sum256(data)
	sig, err := k.s.sv.SignMessage(bytes.NewReader(data))
	if err != nil {
		return nil, nil, err
	}
	return sig, sum[:], nil
}

// Find returns the referrer carrying the promotion attestation of the Promotion with uid in
// namespace, signed by a key v trusts (the controller's): "" when there is none. A referrer that
// only says so in its annotations, or is signed by another key, is not it. Errors are registry
// errors.
func Find(ctx context.Context, v *verify.Verifier, ref, namespace, uid string) (string, error) {
	found, err := v.Attestations(ctx, ref, PromotionPredicateType)
	if err != nil {
		return "", err
	}
	for _, a := range found.Verified {
		var st struct {
			Predicate Promotion `json:"predicate"`
		}
		if a.Referrer != "" && json.Unmarshal(a.Statement, &st) == nil && st.Predicate.Namespace == namespace && st.Predicate.PromotionUID == uid {
			return a.Referrer, nil
		}
	}
	return "", nil
}

// Attach pushes the signed bundle as a Sigstore bundle referrer of digest, as cosign v3 attaches
// attestations (so cosign verify-attestation and admission policies find it), annotated with its
// predicate type and the Promotion it is of.
func Attach(d name.Digest, bundleJSON []byte, promotionKey string, created time.Time, ropts []remote.Option) error {
	mediaType, err := sgbundle.MediaTypeString("0.3")
	if err != nil {
		return err
	}
	annotations := map[string]string{
		"org.opencontainers.image.created":  created.UTC().Format(time.RFC3339),
		"dev.sigstore.bundle.content":       "dsse-envelope",
		"dev.sigstore.bundle.predicateType": PromotionPredicateType,
		PromotionAnnotation:                 promotionKey,
	}
	layer := static.NewLayer(bundleJSON, types.MediaType(mediaType))
	return ociremote.WriteReferrer(d, mediaType, []v1.Layer{layer}, annotations, ociremote.WithRemoteOptions(ropts...))
}
