package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
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

// Options configure a Verifier.
type Options struct {
	// Keys are PEM public keys; a signature verified by any of them counts (see KeysFromSecretData).
	Keys [][]byte
	// Identities are keyless identities: a signature counts when its Fulcio certificate chains to
	// TrustedRoot and names one of them. Keys and Identities may both be set: a signature either
	// trusts counts (a team moving from a key to keyless lists both meanwhile).
	Identities []Identity
	// TrustedRoot is the trusted_root.json keyless signatures are checked against; nil means the
	// public Sigstore instance's, shipped with Stagecoach (see PublicGoodTrustedRoot). Only for
	// Identities.
	TrustedRoot []byte
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
	// MaxAttestationSize bounds one attestation read (MaxAttestationSize when <= 0).
	MaxAttestationSize int64
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
	// Signer is who signed, for a keyless signature that verified; for a refused keyless
	// signature whose certificate chains to the trusted root, the identity it names (an
	// untrusted certificate's claims are not repeated as who signed).
	Signer *Signer
	// Failure is the part of the (first) refused signature that failed, one of the Failure*
	// constants, for SignatureInvalid verdicts.
	Failure string
}

// Verifier checks cosign signatures of image digests, for both legacy .sig signatures and
// Sigstore bundle referrers, offline: against trusted public keys (no transparency log), and
// keyless against trusted identities and a Sigstore trusted root (its log, CT log and timestamp
// authority keys vouch for the entries the signature carries). It is safe for concurrent use.
type Verifier struct {
	keys        []trustedKey
	keyless     *keyless // nil: no keyless identities are trusted
	fingerprint string
	opts        Options
	cache       *Cache
	clock       clock.PassiveClock
	negativeTTL time.Duration
}

// New validates the options and parses the keys and the trusted root; errors name the bad key,
// identity or root.
func New(opts Options) (*Verifier, error) {
	identities, err := compileIdentities(opts.Identities)
	if err != nil {
		return nil, err
	}
	if len(opts.Keys) == 0 && len(identities) == 0 {
		return nil, errors.New("no trusted public keys or keyless identities: set verify.secretRef to a Secret with *.pub cosign public keys, " +
			"or verify.matchOIDCIdentity to the identities that sign keyless")
	}
	if opts.TrustedRoot != nil && len(identities) == 0 {
		return nil, errors.New("a trusted root is for keyless signatures: set verify.matchOIDCIdentity too")
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
	trust := strings.Join(ids, ",")
	if len(identities) > 0 {
		root, err := trustedRootFor(opts.TrustedRoot)
		if err != nil {
			return nil, fmt.Errorf("trusted root: %w", err)
		}
		v.keyless = &keyless{identities: identities, root: root}
		// The root's content too: a Fulcio added to it may make a refused signature good.
		trust += "\x00keyless\x00" + identities.key() + "\x00" + root.Fingerprint
	}
	sum := sha256.Sum256([]byte(trust))
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

// Fingerprint identifies what the Verifier trusts (its keys, identities and trusted root): two
// Verifiers with the same fingerprint reach the same verdicts.
func (v *Verifier) Fingerprint() string { return v.fingerprint }

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
	// part is the Failure* constant the refusal is about.
	part string
	// signer is who the signature says signed (keyless), when its certificate was read.
	signer *Signer
}

// errImageNotFound: the digest does not exist in its repository.
var errImageNotFound = errors.New("image not found")

// open heads the digest in its registry and returns the remote options every later call of one
// check reuses (the puller's connection and token). errImageNotFound when there is no such
// digest; other errors say why the registry could not be read.
func (v *Verifier) open(ctx context.Context, d name.Digest) (v1.Hash, []remote.Option, error) {
	repo := d.Context().Name()
	base := ociclient.RemoteOptions(ctx, ociclient.Options{
		Keychain:  v.opts.Keychain,
		Insecure:  v.opts.Insecure,
		Transport: v.opts.Transport,
		Extra:     v.opts.RemoteOptions,
	})
	puller, err := remote.NewPuller(base...)
	if err != nil {
		return v1.Hash{}, nil, fmt.Errorf("failed to set up registry client for %q: %w", repo, err)
	}
	ropts := append(slices.Clone(base), remote.Reuse(puller))
	desc, err := puller.Head(ctx, d)
	if err != nil {
		if ociclient.IsNotFound(err) {
			return v1.Hash{}, nil, errImageNotFound
		}
		return v1.Hash{}, nil, fmt.Errorf("cannot read digest %s: %w", d.DigestStr(), ociclient.ClassifyError(repo, err))
	}
	if desc.Digest.String() != d.DigestStr() {
		// A registry must address manifests by digest; anything else is not to be trusted.
		return v1.Hash{}, nil, fmt.Errorf("registry for %q answered digest %s for %s", repo, desc.Digest, d.DigestStr())
	}
	return desc.Digest, ropts, nil
}

func (v *Verifier) check(ctx context.Context, d name.Digest) (Verdict, error) {
	hash, ropts, err := v.open(ctx, d)
	if errors.Is(err, errImageNotFound) {
		return Verdict{Reason: ReasonImageNotFound,
			Message: fmt.Sprintf("digest %s does not exist in repository %s", d.DigestStr(), d.Context().Name())}, nil
	}
	if err != nil {
		return Verdict{}, err
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

func (v *Verifier) verified(d name.Digest, format, keyID string, signer *Signer, what string) Verdict {
	verdict := Verdict{
		Verified: true,
		Reason:   ReasonSignatureVerified,
		Format:   format,
		KeyID:    keyID,
		Signer:   signer,
		Message: fmt.Sprintf("digest %s of %s is signed by trusted key %s (%s)",
			d.DigestStr(), d.Context().Name(), keyID, what),
	}
	if signer != nil {
		verdict.Message = fmt.Sprintf("digest %s of %s is signed keyless by %s (%s)", d.DigestStr(), d.Context().Name(), signer, what)
	}
	return verdict
}

func (v *Verifier) negative(d name.Digest, failures []failure) Verdict {
	if len(failures) == 0 {
		return Verdict{
			Reason: ReasonSignatureMissing,
			Message: fmt.Sprintf("digest %s of %s has no cosign signature (no Sigstore bundle referrer, no %s tag); "+
				"sign it with cosign and %s", d.DigestStr(), d.Context().Name(), legacyTagName(d), v.howToSign()),
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
		Reason:  ReasonSignatureInvalid,
		Format:  format,
		Failure: failures[0].part,
		Signer:  failures[0].signer,
		Message: fmt.Sprintf("digest %s of %s has %d signature(s) but none verifies for this digest with %s: %s",
			d.DigestStr(), d.Context().Name(), len(failures), v.describeTrust(), detail),
	}
}

// DescribeTrust names what the Verifier trusts, for messages.
func (v *Verifier) DescribeTrust() string { return v.describeTrust() }

// describeTrust names what the Verifier trusts, for messages.
func (v *Verifier) describeTrust() string {
	var parts []string
	if len(v.keys) > 0 {
		parts = append(parts, fmt.Sprintf("the %d trusted key(s) %s", len(v.keys), strings.Join(v.KeyIDs(), ", ")))
	}
	if v.keyless != nil {
		parts = append(parts, fmt.Sprintf("the %d trusted keyless identity(ies) %s", len(v.keyless.identities), v.keyless.identities))
	}
	return strings.Join(parts, " or ")
}

// howToSign says how to make a signature the Verifier accepts.
func (v *Verifier) howToSign() string {
	switch {
	case v.keyless == nil:
		return "one of the trusted keys"
	case len(v.keys) == 0:
		return "keyless (cosign sign from CI) as one of the trusted identities"
	}
	return "one of the trusted keys, or keyless as one of the trusted identities"
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
