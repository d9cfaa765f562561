package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"k8s.io/utils/clock"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
)

// Signature formats.
const (
	// FormatLegacy is a cosign signature stored under the <repo>:sha256-<hex>.sig tag.
	FormatLegacy = "legacy"
	// FormatBundle is a Sigstore bundle (v0.3) stored as an OCI referrer of the image.
	FormatBundle = "bundle"
)

// Verdict reasons.
const (
	// ReasonSignatureVerified: a signature over this digest verifies with a trusted key.
	ReasonSignatureVerified = stagecoachv1.ReasonSignatureVerified
	// ReasonSignatureMissing: neither a bundle referrer nor a .sig tag exists for the digest.
	ReasonSignatureMissing = stagecoachv1.ReasonSignatureMissing
	// ReasonSignatureInvalid: signatures exist but none verifies with a trusted key for this digest.
	ReasonSignatureInvalid = stagecoachv1.ReasonSignatureInvalid
	// ReasonImageNotFound: the digest does not exist in the repository.
	ReasonImageNotFound = stagecoachv1.ReasonImageNotFound
)

// DefaultNegativeTTL is how long SignatureMissing and SignatureInvalid verdicts are cached, so a
// signature pushed after the image is seen within this time.
const DefaultNegativeTTL = time.Minute

// ErrKeylessUnsupported is returned by New for identities without public keys.
var ErrKeylessUnsupported = errors.New("keyless verification (matchOIDCIdentity) is not supported yet: " +
	"set verify.secretRef to a Secret with the cosign public keys")

// Identity is a keyless signing identity, as regular expressions.
type Identity struct {
	Issuer  string
	Subject string
}

// Options configure a Verifier.
type Options struct {
	// Keys are PEM public keys; a signature verified by any of them counts (see KeysFromSecretData).
	Keys [][]byte
	// Identities are keyless identities. Not supported yet: New fails when they come without Keys,
	// and they are ignored when Keys are set.
	Identities []Identity
	// Keychain supplies registry credentials; nil means anonymous.
	Keychain authn.Keychain
	// Insecure allows plain HTTP to a registry that is not on loopback.
	Insecure bool
	// Transport is the base HTTP transport; nil means http.DefaultTransport.
	Transport http.RoundTripper
	// RemoteOptions are appended to every registry call.
	RemoteOptions []remote.Option
	// Cache holds verdicts; it may be shared between Verifiers. Nil means a new Cache of CacheSize.
	Cache *Cache
	// CacheSize bounds the cache New creates (DefaultCacheSize when <= 0).
	CacheSize int
	// NegativeTTL is how long "missing" and "invalid" verdicts are cached (DefaultNegativeTTL when 0,
	// never when negative). Verified verdicts stay until evicted.
	NegativeTTL time.Duration
	// Clock for cache expiry; nil means the real clock.
	Clock clock.PassiveClock
}

// Verdict is a definite answer about one digest.
type Verdict struct {
	Verified bool
	// Reason is one of the Reason* constants.
	Reason string
	// Message names the digest and says why, for conditions and events.
	Message string
	// Format of the signature that verified, or of those that failed ("legacy" or "bundle").
	Format string
	// KeyID (see KeyID) of the key that verified.
	KeyID string
}

// Verifier checks cosign signatures of image digests against trusted public keys, offline
// (no transparency log), for both legacy .sig signatures and Sigstore bundle referrers.
// It is safe for concurrent use.
type Verifier struct {
	keys        []trustedKey
	fingerprint string
	opts        Options
	cache       *Cache
	clock       clock.PassiveClock
	negativeTTL time.Duration
}

// New validates the options and parses the keys; errors name the bad key or identity.
func New(opts Options) (*Verifier, error) {
	for i, id := range opts.Identities {
		for field, expr := range map[string]string{"issuer": id.Issuer, "subject": id.Subject} {
			if _, err := regexp.Compile(expr); err != nil {
				return nil, fmt.Errorf("identity %d: %s %q is not a regular expression: %w", i+1, field, expr, err)
			}
		}
	}
	if len(opts.Keys) == 0 {
		if len(opts.Identities) > 0 {
			return nil, ErrKeylessUnsupported
		}
		return nil, errors.New("no trusted public keys: set verify.secretRef to a Secret with *.pub cosign public keys")
	}
	v := &Verifier{opts: opts, cache: opts.Cache, clock: opts.Clock, negativeTTL: opts.NegativeTTL}
	ids := make([]string, 0, len(opts.Keys))
	for i, k := range opts.Keys {
		tk, err := parseKey(k)
		if err != nil {
			return nil, fmt.Errorf("trusted key %d of %d is not a usable PEM public key: %w", i+1, len(opts.Keys), err)
		}
		v.keys = append(v.keys, tk)
		ids = append(ids, tk.id)
	}
	// The fingerprint keys the cache: same digest, different trust, different verdict.
	slices.Sort(ids)
	sum := sha256.Sum256([]byte(strings.Join(ids, ",")))
	v.fingerprint = hex.EncodeToString(sum[:]) // the whole hash: a shortened one could let two key sets share verdicts
	if v.cache == nil {
		v.cache = NewCache(opts.CacheSize)
	}
	if v.clock == nil {
		v.clock = clock.RealClock{}
	}
	if v.negativeTTL == 0 {
		v.negativeTTL = DefaultNegativeTTL
	}
	return v, nil
}

// KeyIDs lists the trusted keys' IDs in the order given.
func (v *Verifier) KeyIDs() []string {
	out := make([]string, len(v.keys))
	for i, k := range v.keys {
		out[i] = k.id
	}
	return out
}

// Verify checks the signatures of ref ("repository@sha256:<hex>"). A Verdict is a definite
// answer (verified, missing, invalid, no such image); an error means it could not be checked
// (registry unreachable, credentials refused, bad reference) and should be retried.
func (v *Verifier) Verify(ctx context.Context, ref string) (Verdict, error) {
	d, err := name.NewDigest(ref, ociclient.NameOptions(v.opts.Insecure)...)
	if err != nil {
		return Verdict{}, fmt.Errorf("cannot verify %q: want repository@sha256:<digest>: %w", ref, err)
	}
	key := d.Context().Name() + "@" + d.DigestStr() + "#" + v.fingerprint
	if verdict, ok := v.cache.get(key, v.clock.Now()); ok {
		return verdict, nil
	}
	verdict, err := v.check(ctx, d)
	if err != nil {
		return Verdict{}, err
	}
	switch {
	case verdict.Verified:
		v.cache.put(key, verdict, time.Time{})
	case verdict.Reason == ReasonImageNotFound || v.negativeTTL < 0:
		// The image may be pushed later; ask again next time.
	default:
		v.cache.put(key, verdict, v.clock.Now().Add(v.negativeTTL))
	}
	return verdict, nil
}

// failure is one signature that did not verify, for the verdict message.
type failure struct {
	format string
	what   string
	err    error
}

func (v *Verifier) check(ctx context.Context, d name.Digest) (Verdict, error) {
	repo := d.Context().Name()
	base := ociclient.RemoteOptions(ctx, ociclient.Options{
		Keychain:  v.opts.Keychain,
		Insecure:  v.opts.Insecure,
		Transport: v.opts.Transport,
		Extra:     v.opts.RemoteOptions,
	})
	puller, err := remote.NewPuller(base...)
	if err != nil {
		return Verdict{}, fmt.Errorf("failed to set up registry client for %q: %w", repo, err)
	}
	// Every later call reuses the puller's connection and token.
	ropts := append(slices.Clone(base), remote.Reuse(puller))

	desc, err := puller.Head(ctx, d)
	if err != nil {
		if ociclient.IsNotFound(err) {
			return Verdict{Reason: ReasonImageNotFound,
				Message: fmt.Sprintf("digest %s does not exist in repository %s", d.DigestStr(), repo)}, nil
		}
		return Verdict{}, fmt.Errorf("cannot verify digest %s: %w", d.DigestStr(), ociclient.ClassifyError(repo, err))
	}
	hash := desc.Digest
	if hash.String() != d.DigestStr() {
		// A registry must address manifests by digest; anything else is not to be trusted.
		return Verdict{}, fmt.Errorf("registry for %q answered digest %s for %s", repo, hash, d.DigestStr())
	}

	// Bundles first: cosign v3 signs that way by default.
	var failures []failure
	verdict, bundleFailures, err := v.checkBundles(ctx, d, hash, ropts)
	if err != nil || verdict.Verified {
		return verdict, err
	}
	failures = append(failures, bundleFailures...)
	verdict, legacyFailures, err := v.checkLegacy(ctx, d, hash, ropts)
	if err != nil || verdict.Verified {
		return verdict, err
	}
	failures = append(failures, legacyFailures...)
	return v.negative(d, failures), nil
}

func (v *Verifier) verified(d name.Digest, format, keyID, what string) Verdict {
	return Verdict{
		Verified: true,
		Reason:   ReasonSignatureVerified,
		Format:   format,
		KeyID:    keyID,
		Message: fmt.Sprintf("digest %s of %s is signed by trusted key %s (%s)",
			d.DigestStr(), d.Context().Name(), keyID, what),
	}
}

func (v *Verifier) negative(d name.Digest, failures []failure) Verdict {
	if len(failures) == 0 {
		return Verdict{
			Reason: ReasonSignatureMissing,
			Message: fmt.Sprintf("digest %s of %s has no cosign signature (no Sigstore bundle referrer, no %s tag); "+
				"sign it with cosign and one of the trusted keys", d.DigestStr(), d.Context().Name(), legacyTagName(d)),
		}
	}
	format := failures[0].format
	parts := make([]string, 0, len(failures))
	for _, f := range failures {
		if f.format != format {
			format = FormatBundle + "," + FormatLegacy
		}
		parts = append(parts, fmt.Sprintf("%s: %v", f.what, f.err))
	}
	const maxLen = 900
	detail := strings.Join(parts, "; ")
	if len(detail) > maxLen {
		detail = detail[:maxLen] + "…"
	}
	return Verdict{
		Reason: ReasonSignatureInvalid,
		Format: format,
		Message: fmt.Sprintf("digest %s of %s has %d signature(s) but none verifies for this digest with the %d trusted key(s) %s: %s",
			d.DigestStr(), d.Context().Name(), len(failures), len(v.keys), strings.Join(v.KeyIDs(), ", "), detail),
	}
}

func legacyTagName(d name.Digest) string {
	return strings.Replace(d.DigestStr(), ":", "-", 1) + ".sig"
}

// digestBytes returns the raw bytes of a sha256 digest.
func digestBytes(h v1.Hash) ([]byte, error) {
	if h.Algorithm != "sha256" {
		return nil, fmt.Errorf("digest %s: only sha256 digests are supported", h)
	}
	return hex.DecodeString(h.Hex)
}
