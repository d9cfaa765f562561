// Package trust is a follower's trust config (--upstream-trust): named cosign public keys, each
// bound to the record streams it may sign.
//
//	keys:
//	- name: staging-recorder
//	  publicKey: |
//	    -----BEGIN PUBLIC KEY-----
//	    ...
//	    -----END PUBLIC KEY-----
//	  streams: ["8d1e4f2a9c0b/staging/*"]
//
// Stream patterns use path.Match syntax, so "*" never crosses a "/": "<cluster>/staging/*" is
// every Stage of one namespace in one cluster. A stream may be bound to several keys; a record
// counts when any of them verifies it. That is how a key is rotated: list the new key beside the
// old one in every follower first, then switch the recorder.
package trust

import (
	"bytes"
	"crypto"
	"errors"
	"fmt"
	"path"
	"regexp"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/options"
	"sigs.k8s.io/yaml"

	"github.com/stagecoach-dev/stagecoach/internal/verify"
)

// MaxConfigBytes bounds a trust config: a ConfigMap cannot hold more, and a parser must not be
// made to read more.
const MaxConfigBytes = 1 << 20

// Config is a parsed trust config.
type Config struct {
	Keys []Key
}

// Key is one trusted public key and the streams it may sign.
type Key struct {
	// Name is the entry's name, shown in every verdict that relies on it.
	Name string
	// ID is verify.KeyID of the public key ("sha256:" + 16 hex digits).
	ID string
	// Streams are path.Match patterns of the stream ids this key may sign.
	Streams []string

	verifier signature.Verifier
}

// document is the YAML form; UnmarshalStrict refuses unknown fields so a typo
// ("stream:" for "streams:") is an error, not a key bound to nothing.
type document struct {
	Keys []entry `json:"keys"`
}

type entry struct {
	Name      string   `json:"name"`
	PublicKey string   `json:"publicKey"`
	Streams   []string `json:"streams"`
}

var keyName = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,62})$`)

// Parse reads a trust config. Errors name the entry (keys[i] and its name) and say what to fix.
func Parse(data []byte) (*Config, error) {
	if len(data) > MaxConfigBytes {
		return nil, fmt.Errorf("upstream trust config is %d bytes, more than the %d allowed", len(data), MaxConfigBytes)
	}
	var doc document
	if err := yaml.UnmarshalStrict(data, &doc); err != nil {
		return nil, fmt.Errorf("upstream trust config is not valid YAML of the form {keys: [{name, publicKey, streams}]}: %w", err)
	}
	if len(doc.Keys) == 0 {
		return nil, errors.New("upstream trust config lists no keys: add at least one entry under keys with name, publicKey and streams")
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
		if e.PublicKey == "" {
			return nil, fmt.Errorf("%s: publicKey is empty; paste the recorder's cosign.pub (a PEM PUBLIC KEY block)", where)
		}
		pub, err := cryptoutils.UnmarshalPEMToPublicKey([]byte(e.PublicKey))
		if err != nil {
			return nil, fmt.Errorf("%s: publicKey is not a PEM public key (expected the recorder's cosign.pub): %w", where, err)
		}
		v, err := loadVerifier(pub)
		if err != nil {
			return nil, fmt.Errorf("%s: publicKey cannot verify signatures: %w", where, err)
		}
		id, err := verify.KeyID(pub)
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
		cfg.Keys = append(cfg.Keys, Key{Name: e.Name, ID: id, Streams: append([]string(nil), e.Streams...), verifier: v})
	}
	return cfg, nil
}

// loadVerifier loads pub the way cosign verifies blobs: the key type's default hash, and
// Ed25519ph for Ed25519 keys (what cosign signs with).
func loadVerifier(pub crypto.PublicKey) (signature.Verifier, error) {
	return signature.LoadDefaultVerifier(pub, options.WithED25519ph())
}

// Binds reports whether the key may sign stream.
func (k Key) Binds(stream string) bool {
	for _, p := range k.Streams {
		if ok, _ := path.Match(p, stream); ok {
			return true
		}
	}
	return false
}

// Verify checks sig over message with the key.
func (k Key) Verify(message, sig []byte) error {
	return k.verifier.VerifySignature(bytesReader(sig), bytesReader(message))
}

// KeysFor returns the keys bound to stream, in config order.
func (c *Config) KeysFor(stream string) []Key {
	if c == nil {
		return nil
	}
	var out []Key
	for _, k := range c.Keys {
		if k.Binds(stream) {
			out = append(out, k)
		}
	}
	return out
}

// Verify returns the name of the first key bound to stream whose signature sig over message
// verifies. ok is false when none does: no key is bound to stream, or the signature is from a key
// the config does not list, or it is not a valid signature of message.
func (c *Config) Verify(stream string, message, sig []byte) (name string, ok bool) {
	for _, k := range c.KeysFor(stream) {
		if k.Verify(message, sig) == nil {
			return k.Name, true
		}
	}
	return "", false
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
