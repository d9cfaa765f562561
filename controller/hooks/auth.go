package hooks

import (
	"context"
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // Flux's generic-hmac receivers accept sha1 signatures; we accept what Flux can send
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// How the hooks know a request comes from the engine: Flux's HMAC signature, Argo CD's bearer
// token, and the Secrets both are read from (cached, so that unauthenticated requests cannot make
// the controller hammer the API server).

// ParseSignature reads X-Signature: <alg>=<hex HMAC> (Flux's generic-hmac Provider): the hash
// and the MAC, whose length must be the hash's.
func ParseSignature(header string) (func() hash.Hash, []byte, error) {
	alg, sig, found := strings.Cut(header, "=")
	if header == "" || !found {
		return nil, nil, errors.New("missing X-Signature: <alg>=<hex>")
	}
	var newHash func() hash.Hash
	switch alg {
	case "sha256":
		newHash = sha256.New
	case "sha512":
		newHash = sha512.New
	case "sha1":
		newHash = sha1.New
	default:
		return nil, nil, errors.New("unsupported X-Signature algorithm: use sha256, sha512 or sha1")
	}
	mac, err := hex.DecodeString(sig)
	if err != nil {
		return nil, nil, errors.New("X-Signature is not hex")
	}
	if len(mac) != newHash().Size() {
		return nil, nil, fmt.Errorf("X-Signature %s MAC has %d bytes, want %d", alg, len(mac), newHash().Size())
	}
	return newHash, mac, nil
}

// checkFluxHeader refuses a request whose signature header cannot be right, or when the key
// cannot be read, before its body is read.
func (h *Receiver) checkFluxHeader(r *http.Request) (bool, int, string) {
	if _, _, err := ParseSignature(r.Header.Get("X-Signature")); err != nil {
		return false, http.StatusUnauthorized, err.Error()
	}
	if _, err := h.FluxToken(r.Context()); err != nil {
		return false, http.StatusServiceUnavailable, "hook secret unavailable"
	}
	return true, 0, ""
}

// verifyFlux checks the HMAC of the raw body.
func (h *Receiver) verifyFlux(r *http.Request, body []byte) (bool, int, string) {
	newHash, want, err := ParseSignature(r.Header.Get("X-Signature"))
	if err != nil {
		return false, http.StatusUnauthorized, err.Error()
	}
	key, err := h.FluxToken(r.Context())
	if err != nil {
		return false, http.StatusServiceUnavailable, "hook secret unavailable"
	}
	mac := hmac.New(newHash, key)
	mac.Write(body)
	if !hmac.Equal(mac.Sum(nil), want) {
		return false, http.StatusUnauthorized, "bad signature"
	}
	return true, 0, ""
}

// verifyArgoCD checks Authorization: Bearer <token>, in constant time.
func (h *Receiver) verifyArgoCD(r *http.Request) (bool, int, string) {
	got, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !found || got == "" {
		return false, http.StatusUnauthorized, "missing Authorization: Bearer <token>"
	}
	token, err := h.ArgoCDToken(r.Context())
	if err != nil {
		return false, http.StatusServiceUnavailable, "hook secret unavailable"
	}
	// Compare digests so that the comparison takes the same time whatever the lengths.
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256(token)
	if subtle.ConstantTimeCompare(a[:], b[:]) != 1 {
		return false, http.StatusUnauthorized, "bad token"
	}
	return true, 0, ""
}

// SecretFailureTTL is how long a failed Secret read is remembered: a flood of requests while the
// Secret is missing or unreadable costs the API server one read per SecretFailureTTL.
const SecretFailureTTL = 5 * time.Second

// CachedSecretKey reads one key of a Secret through reader, keeping it for ttl (and a failure for
// SecretFailureTTL) so that unauthenticated requests cannot make the controller hammer the API
// server.
func CachedSecretKey(reader client.Reader, key client.ObjectKey, field string, ttl time.Duration) SecretReader {
	var mu sync.Mutex
	var value []byte
	var fetched, failedAt time.Time
	var failure error
	return func(ctx context.Context) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		if value != nil && time.Since(fetched) < ttl {
			return value, nil
		}
		if failure != nil && time.Since(failedAt) < SecretFailureTTL {
			return nil, failure
		}
		v, err := readSecretKey(ctx, reader, key, field)
		if err != nil {
			failure, failedAt = err, time.Now()
			return nil, err
		}
		value, fetched, failure = v, time.Now(), nil
		return value, nil
	}
}

func readSecretKey(ctx context.Context, reader client.Reader, key client.ObjectKey, field string) ([]byte, error) {
	secret := &corev1.Secret{}
	if err := reader.Get(ctx, key, secret); err != nil {
		return nil, fmt.Errorf("failed to read Secret %s: %w", key, err)
	}
	v, ok := secret.Data[field]
	if !ok || len(v) == 0 {
		return nil, fmt.Errorf("secret %s has no key %q", key, field)
	}
	return v, nil
}
