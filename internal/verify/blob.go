package verify

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	sgbundle "github.com/sigstore/sigstore-go/pkg/bundle"
)

// MaxBlobBundleBytes bounds a Sigstore bundle over a blob: a certificate, a log entry and a
// timestamp take a few kilobytes; the parser must not be made to read more.
const MaxBlobBundleBytes = 64 << 10

// BlobVerifier checks keyless signatures over arbitrary bytes (not image digests): a Sigstore
// bundle with a message signature over the bytes' SHA-256, as `cosign sign-blob --bundle`
// writes one from CI, checked offline against trusted identities and a trusted root exactly as
// image signatures are (Options.Identities, Options.TrustedRoot). Stagecoach's signed records
// use it. It is safe for concurrent use.
type BlobVerifier struct {
	k *keyless
}

// NewBlobVerifier compiles the identities and parses the trusted root (nil: the public Sigstore
// instance's, shipped with Stagecoach); errors name the bad identity or root.
func NewBlobVerifier(identities []Identity, trustedRoot []byte) (*BlobVerifier, error) {
	set, err := compileIdentities(identities)
	if err != nil {
		return nil, err
	}
	if len(set) == 0 {
		return nil, errors.New("no keyless identities: list at least one {issuer, subject}")
	}
	root, err := trustedRootFor(trustedRoot)
	if err != nil {
		return nil, fmt.Errorf("trusted root: %w", err)
	}
	return &BlobVerifier{k: &keyless{identities: set, root: root}}, nil
}

// String lists the trusted identities, for messages.
func (v *BlobVerifier) String() string { return v.k.identities.String() }

// Verify checks that bundleJSON is a keyless signature of blob by a trusted identity and returns
// who signed. A refusal names the part that failed (FailureOf) and, once the certificate chains
// to the trusted root, who it says signed (the Signer is returned with the error then).
func (v *BlobVerifier) Verify(blob, bundleJSON []byte) (*Signer, error) {
	if len(bundleJSON) > MaxBlobBundleBytes {
		return nil, failed(FailureForm, "bundle is %d bytes, more than the %d a signature bundle may have", len(bundleJSON), MaxBlobBundleBytes)
	}
	b := &sgbundle.Bundle{Bundle: new(protobundle.Bundle)}
	if err := b.UnmarshalJSON(bundleJSON); err != nil {
		return nil, failed(FailureForm, "not a Sigstore bundle: %v", err)
	}
	ms := b.GetMessageSignature()
	if ms == nil {
		return nil, failed(FailureForm, "bundle holds no message signature (as `cosign sign-blob --bundle` writes)")
	}
	sum := sha256.Sum256(blob)
	md := ms.GetMessageDigest()
	if md.GetAlgorithm() != protocommon.HashAlgorithm_SHA2_256 || !bytes.Equal(md.GetDigest(), sum[:]) {
		return nil, failed(FailureClaim, "bundle signs message digest %s, not sha256:%s", hex.EncodeToString(md.GetDigest()), hex.EncodeToString(sum[:]))
	}
	vc, err := b.VerificationContent()
	if err != nil {
		return nil, failed(FailureForm, "bundle has no verification material: %v", err)
	}
	leaf := vc.Certificate()
	if leaf == nil {
		return nil, failed(FailureForm, "signed with a key, not keyless: a keyless signature carries a Fulcio certificate")
	}
	return v.k.verifyBundle(b, leaf, "sha256", sum[:])
}

// FailureOf is the part of a signature a refusal names (one of the Failure* constants);
// FailureForm when the error names none.
func FailureOf(err error) string { return partOf(err, FailureForm) }
