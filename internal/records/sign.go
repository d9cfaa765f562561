package records

import (
	"bytes"
	"crypto"
	"fmt"

	"github.com/sigstore/cosign/v3/pkg/cosign"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/stagecoach-dev/stagecoach/internal/verify"
)

// Signer signs record bytes with the recorder key.
//
// The signature is over the record bytes themselves, with the key's default hash (SHA-256 for
// the P-256 keys cosign generates) — exactly what `cosign sign-blob --key` produces. An auditor
// with nothing but cosign can check a record:
//
//	cosign verify-blob --key cosign.pub --insecure-ignore-tlog --signature <annotation> record.json
type Signer struct {
	sv    signature.SignerVerifier
	keyID string
}

// LoadSigner loads the encrypted PEM private key that `cosign generate-key-pair` writes
// (cosign.key, "ENCRYPTED SIGSTORE PRIVATE KEY" or the older "ENCRYPTED COSIGN PRIVATE KEY")
// with its password. Decryption is deliberately slow (scrypt): load once, sign many.
func LoadSigner(privatePEM, password []byte) (*Signer, error) {
	sv, err := cosign.LoadPrivateKey(privatePEM, password, nil)
	if err != nil {
		return nil, fmt.Errorf("recorder key is not a cosign private key that this password opens (expected cosign.key "+
			"and its password, as `cosign generate-key-pair` writes them): %w", err)
	}
	return NewSigner(sv)
}

// NewSigner wraps a loaded sigstore SignerVerifier.
func NewSigner(sv signature.SignerVerifier) (*Signer, error) {
	pub, err := sv.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("recorder key has no public key: %w", err)
	}
	id, err := verify.KeyID(pub)
	if err != nil {
		return nil, err
	}
	return &Signer{sv: sv, keyID: id}, nil
}

// KeyID names the signer's public key (verify.KeyID), written beside each signature as a hint.
func (s *Signer) KeyID() string { return s.keyID }

// PublicKey is the signer's public key.
func (s *Signer) PublicKey() (crypto.PublicKey, error) { return s.sv.PublicKey() }

// Sign signs b.
func (s *Signer) Sign(b []byte) ([]byte, error) {
	sig, err := s.sv.SignMessage(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("cannot sign record with the recorder key: %w", err)
	}
	return sig, nil
}

// verifyOwn checks sig was made by this signer over b.
func (s *Signer) verifyOwn(b, sig []byte) bool {
	return s.sv.VerifySignature(bytes.NewReader(sig), bytes.NewReader(b)) == nil
}
