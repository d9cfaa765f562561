// Package trust is a follower's trust config (--upstream-trust): named cosign public keys, each
// bound to the record streams it may sign and the repositories those streams are read from.
//
//	keys:
//	- name: staging-recorder
//	  publicKey: |
//	    -----BEGIN PUBLIC KEY-----
//	    ...
//	    -----END PUBLIC KEY-----
//	  repositories: ["registry.example/delivery/streams"]
//	  streams: ["8d1e4f2a9c0b/staging/*"]
//
// Stream and repository patterns use path.Match syntax, so "*" never crosses a "/":
// "<cluster>/staging/*" is every Stage of one namespace in one cluster. A key vouches for a
// stream only as read from a repository it is bound to. Why the repository too: a Stage names
// the repository it reads, and signed records copy verbatim, so a key bound to stream names
// alone would vouch for a copy of the stream anywhere — one that ends before the upstream's
// failures, in a repository whoever writes the Stage controls. List the upstream recorder's
// repository and the mirrors you trust to keep it whole.
//
// A stream may be bound to several keys; a record counts when any of them verifies it. That is
// how a key is rotated: list the new key beside the old one in every follower first, then switch
// the recorder.
//
// An entry may trust a CI identity instead of a key file (keyless, issue 31), spelled as a Stage's
// verify.matchOIDCIdentity: records signed keyless carry a Sigstore bundle (what `cosign sign-blob
// --bundle` writes from CI: a short-lived Fulcio certificate, a transparency log entry, a signed
// timestamp), which counts when its certificate names one of the identities and chains to the
// entry's trustedRoot (a trusted_root.json, inline; unset: the public Sigstore instance's):
//
//	keys:
//	- name: staging-ci
//	  matchOIDCIdentity:
//	  - issuer: ^https://token.actions.githubusercontent.com$
//	    subject: ^https://github.com/org/delivery/.github/workflows/record.yml@refs/heads/main$
//	  repositories: ["registry.example/delivery/streams"]
//	  streams: ["8d1e4f2a9c0b/staging/*"]
package trust

import (
	"bytes"
	"crypto"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/options"
	"sigs.k8s.io/yaml"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/verify"
)

// MaxConfigBytes bounds a trust config: a ConfigMap cannot hold more, and a parser must not be
// made to read more.
const maxConfigBytes = 1 << 20

// Config is a parsed trust config.
type Config struct {
	Keys []Key
}

// Key is one trusted public key, or set of keyless identities, and the streams it may sign.
type Key struct {
	// Name is the entry's name, shown in every verdict that relies on it.
	Name string
	// ID is verify.KeyID of the public key ("sha256:" + 16 hex digits); "keyless" for an entry
	// of identities.
	ID string
	// Identities are the keyless identities of an entry without a public key.
	Identities []verify.Identity
	// Streams are path.Match patterns of the stream ids this key may sign.
	Streams []string
	// Repositories are path.Match patterns of the repositories (as go-containerregistry names
	// them, such as registry.example/delivery/streams) those streams are read from.
	Repositories []string

	verifier signature.Verifier
	keyless  *verify.BlobVerifier
}

// document is the YAML form; UnmarshalStrict refuses unknown fields so a typo
// ("stream:" for "streams:") is an error, not a key bound to nothing.
type document struct {
	Keys []entry `json:"keys"`
}

type entry struct {
	Name         string   `json:"name"`
	PublicKey    string   `json:"publicKey"`
	Repositories []string `json:"repositories"`
	Streams      []string `json:"streams"`
	// MatchOIDCIdentity and TrustedRoot trust keyless signatures instead of PublicKey.
	MatchOIDCIdentity []stagecoachv1.OIDCIdentityMatch `json:"matchOIDCIdentity"`
	TrustedRoot       string                           `json:"trustedRoot"`
}

var keyName = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,62})$`)

// Parse reads a trust config. Errors name the entry (keys[i] and its name) and say what to fix.
func Parse(data []byte) (*Config, error) {
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("upstream trust config is %d bytes, more than the %d allowed", len(data), maxConfigBytes)
	}
	var doc document
	if err := yaml.UnmarshalStrict(data, &doc); err != nil {
		return nil, fmt.Errorf("upstream trust config is not valid YAML of the form {keys: [{name, publicKey (or matchOIDCIdentity), repositories, streams}]}: %w", err)
	}
	if len(doc.Keys) == 0 {
		return nil, errors.New("upstream trust config lists no keys: add at least one entry under keys with name, publicKey, repositories and streams")
	}
	cfg := &Config{Keys: make([]Key, 0, len(doc.Keys))}
	seen := map[string]int{}
	for i, e := range doc.Keys {
		where := fmt.Sprintf("upstream trust config keys[%d]", i)
		if e.Name != "" {
			where += fmt.Sprintf(" (name %q)", e.Name)
		}
		if !keyName.MatchString(e.Name) {
			return nil, fmt.Errorf("%s: name must be 1-63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit", where)
		}
		if j, dup := seen[e.Name]; dup {
			return nil, fmt.Errorf("%s: name is already used by keys[%d]; give each key its own name", where, j)
		}
		seen[e.Name] = i
		key, err := parseTrust(e)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if len(e.Streams) == 0 {
			return nil, fmt.Errorf("%s: streams is empty; bind the key to the upstream streams it signs, such as \"<cluster>/staging/*\"", where)
		}
		for j, s := range e.Streams {
			if s == "" {
				return nil, fmt.Errorf("%s: streams[%d] is empty", where, j)
			}
			if _, err := path.Match(s, ""); err != nil {
				return nil, fmt.Errorf("%s: streams[%d] %q is not a valid pattern (path.Match syntax: *, ?, [...]): %w", where, j, s, err)
			}
		}
		if len(e.Repositories) == 0 {
			return nil, fmt.Errorf("%s: repositories is empty; a key is bound to the repositories its streams are read from as well as to the streams: "+
				"add repositories: [\"<the upstream's records repository, such as registry.example/delivery/streams>\"] "+
				"(and any mirror you trust to keep the stream whole)", where)
		}
		repos := make([]string, 0, len(e.Repositories))
		for j, r := range e.Repositories {
			norm, err := repositoryPattern(r)
			if err != nil {
				return nil, fmt.Errorf("%s: repositories[%d] %q %v", where, j, r, err)
			}
			repos = append(repos, norm)
		}
		key.Name, key.Streams, key.Repositories = e.Name, append([]string(nil), e.Streams...), repos
		cfg.Keys = append(cfg.Keys, key)
	}
	return cfg, nil
}

// parseTrust reads what an entry trusts: its publicKey, or its keyless identities and root.
func parseTrust(e entry) (Key, error) {
	if len(e.MatchOIDCIdentity) > 0 || e.TrustedRoot != "" {
		if e.PublicKey != "" {
			return Key{}, errors.New("give publicKey or matchOIDCIdentity, not both; list a key and identities as two entries (as while moving a recorder to keyless)")
		}
		if len(e.MatchOIDCIdentity) == 0 {
			return Key{}, errors.New("trustedRoot is for keyless signatures: list the identities that sign under matchOIDCIdentity")
		}
		ids := make([]verify.Identity, len(e.MatchOIDCIdentity))
		for i, m := range e.MatchOIDCIdentity {
			ids[i] = verify.Identity{Issuer: m.Issuer, Subject: m.Subject}
		}
		var root []byte // nil: the public Sigstore instance's
		if e.TrustedRoot != "" {
			root = []byte(e.TrustedRoot)
		}
		bv, err := verify.NewBlobVerifier(ids, root)
		if err != nil {
			return Key{}, fmt.Errorf("matchOIDCIdentity: %w", err)
		}
		return Key{ID: "keyless", Identities: ids, keyless: bv}, nil
	}
	if e.PublicKey == "" {
		return Key{}, errors.New("publicKey is empty; paste the recorder's cosign.pub (a PEM PUBLIC KEY block), " +
			"or list the identities that sign keyless under matchOIDCIdentity")
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey([]byte(e.PublicKey))
	if err != nil {
		return Key{}, fmt.Errorf("publicKey is not a PEM public key (expected the recorder's cosign.pub): %w", err)
	}
	v, err := loadVerifier(pub)
	if err != nil {
		return Key{}, fmt.Errorf("publicKey cannot verify signatures: %w", err)
	}
	id, err := verify.KeyID(pub)
	if err != nil {
		return Key{}, err
	}
	return Key{ID: id, verifier: v}, nil
}

// loadVerifier loads pub the way cosign verifies blobs: the key type's default hash, and
// Ed25519ph for Ed25519 keys (what cosign signs with).
func loadVerifier(pub crypto.PublicKey) (signature.Verifier, error) {
	return signature.LoadDefaultVerifier(pub, options.WithED25519ph())
}

// repositoryPattern checks a repositories entry and returns it as matched: a name without
// pattern characters is normalized the way the records store names its repository (so
// "docker.io/x/y" matches "index.docker.io/x/y"); "oci://" is dropped.
func repositoryPattern(p string) (string, error) {
	p = strings.TrimPrefix(p, "oci://")
	if p == "" {
		return "", errors.New("is empty")
	}
	if _, err := path.Match(p, ""); err != nil {
		return "", fmt.Errorf("is not a valid pattern (path.Match syntax: *, ?, [...]): %w", err)
	}
	if strings.ContainsAny(p, `*?[\`) {
		if !strings.Contains(p, "/") {
			return "", errors.New("is not a repository pattern: name the registry and the repository, such as registry.example/delivery/*")
		}
		return p, nil
	}
	r, err := name.NewRepository(p, name.WeakValidation)
	if err != nil {
		return "", fmt.Errorf("is not an OCI repository name (such as registry.example/delivery/streams): %w", err)
	}
	return r.Name(), nil
}

// Binds reports whether the key may sign stream as read from repository.
func (k Key) Binds(repository, stream string) bool {
	return matchAny(k.Repositories, repository) && matchAny(k.Streams, stream)
}

func matchAny(patterns []string, s string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, s); ok {
			return true
		}
	}
	return false
}

// Binds returns nil when a key is bound to stream in repository, and otherwise says what to add
// to the trust config.
func (c *Config) Binds(repository, stream string) error {
	if c == nil {
		return fmt.Errorf("there is no upstream trust config, so no key is bound to stream %q", stream)
	}
	if len(c.KeysFor(repository, stream)) > 0 {
		return nil
	}
	var elsewhere []string
	for _, k := range c.Keys {
		if matchAny(k.Streams, stream) {
			elsewhere = append(elsewhere, k.Name)
		}
	}
	if len(elsewhere) > 0 {
		return fmt.Errorf("the upstream trust config binds stream %q to key(s) %s, but not in repository %s: "+
			"add %s to their repositories if it holds the upstream's records (or a mirror you trust to keep them whole)",
			stream, strings.Join(elsewhere, ", "), repository, repository)
	}
	return fmt.Errorf("no key in the upstream trust config is bound to stream %q in repository %s; "+
		"add the upstream recorder's public key with a streams pattern matching it and the repository under repositories", stream, repository)
}

// Keyless reports whether the entry trusts keyless identities rather than a key.
func (k Key) Keyless() bool { return k.keyless != nil }

// Verify checks sig over message with the key.
func (k Key) Verify(message, sig []byte) error {
	if k.verifier == nil {
		return errors.New("entry " + k.Name + " trusts keyless identities, not a key: a plain signature cannot verify with it")
	}
	return k.verifier.VerifySignature(bytesReader(sig), bytesReader(message))
}

// VerifyBundle checks a keyless Sigstore bundle over message against the entry's identities and
// trusted root, and returns who signed.
func (k Key) VerifyBundle(message, bundle []byte) (*verify.Signer, error) {
	if k.keyless == nil {
		return nil, errors.New("entry " + k.Name + " trusts a key, not keyless identities")
	}
	return k.keyless.Verify(message, bundle)
}

// KeysFor returns the keys bound to stream in repository, in config order.
func (c *Config) KeysFor(repository, stream string) []Key {
	if c == nil {
		return nil
	}
	var out []Key
	for _, k := range c.Keys {
		if k.Binds(repository, stream) {
			out = append(out, k)
		}
	}
	return out
}

// Verify returns the name of the first key bound to stream in repository whose signature sig
// over message verifies. ok is false when none does: no key is bound to stream there, or the
// signature is from a key the config does not list, or it is not a valid signature of message.
func (c *Config) Verify(repository, stream string, message, sig []byte) (name string, ok bool) {
	for _, k := range c.KeysFor(repository, stream) {
		if !k.Keyless() && k.Verify(message, sig) == nil {
			return k.Name, true
		}
	}
	return "", false
}

// VerifyBundle returns the name of the first keyless entry bound to stream in repository that
// vouches for bundle, a keyless signature of message, and who signed. When none does, err says
// why: no keyless entry is bound there, or each entry's refusal (naming the identity the
// certificate carries).
func (c *Config) VerifyBundle(repository, stream string, message, bundle []byte) (name string, signer *verify.Signer, err error) {
	var why []string
	for _, k := range c.KeysFor(repository, stream) {
		if !k.Keyless() {
			continue
		}
		s, err := k.VerifyBundle(message, bundle)
		if err == nil {
			return k.Name, s, nil
		}
		why = append(why, fmt.Sprintf("%s: %v", k.Name, err))
	}
	if len(why) == 0 {
		return "", nil, fmt.Errorf("no keyless entry (matchOIDCIdentity) is bound to stream %q in repository %s", stream, repository)
	}
	return "", nil, errors.New(strings.Join(why, "; "))
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
