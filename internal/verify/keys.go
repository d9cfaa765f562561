package verify

import (
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// KeysFromSecretData returns every "*.pub" entry of a Secret's data, in name order, after
// checking each parses as a PEM public key. The error names the bad entry; a Secret with no
// "*.pub" entry is an error too.
func KeysFromSecretData(data map[string][]byte) ([][]byte, error) {
	names := make([]string, 0, len(data))
	for k := range data {
		if strings.HasSuffix(k, ".pub") {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("secret has no *.pub entry: add each trusted cosign public key as an entry such as cosign.pub")
	}
	slices.Sort(names)
	keys := make([][]byte, 0, len(names))
	for _, n := range names {
		if _, err := cryptoutils.UnmarshalPEMToPublicKey(data[n]); err != nil {
			return nil, fmt.Errorf("secret entry %q is not a PEM public key (expected the cosign.pub file): %w", n, err)
		}
		keys = append(keys, data[n])
	}
	return keys, nil
}

// trustedKey is a parsed public key with its verifier.
type trustedKey struct {
	id       string
	verifier signature.Verifier
}

func parseKey(pemBytes []byte) (trustedKey, error) {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pemBytes)
	if err != nil {
		return trustedKey{}, err
	}
	// The default hash for the key type is what cosign signs with (SHA-256 for P-256 and RSA).
	v, err := signature.LoadDefaultVerifier(pub)
	if err != nil {
		return trustedKey{}, err
	}
	id, err := KeyID(pub)
	if err != nil {
		return trustedKey{}, err
	}
	return trustedKey{id: id, verifier: v}, nil
}

// KeyID names a public key: "sha256:" and the first 16 hex digits of the SHA-256 of its
// DER (PKIX) encoding. Stable across PEM formatting, short enough for messages.
func KeyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("cannot encode public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:])[:16], nil
}

// KeyIDFromPEM is KeyID for a PEM public key.
func KeyIDFromPEM(pemBytes []byte) (string, error) {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pemBytes)
	if err != nil {
		return "", fmt.Errorf("not a PEM public key: %w", err)
	}
	return KeyID(pub)
}
