package trust

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

func newKey(t testing.TB) (signature.SignerVerifier, string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sv, err := signature.LoadECDSASignerVerifier(priv, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	return sv, string(pem)
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n    ")
}

func TestParseRefuses(t *testing.T) {
	_, pub := newKey(t)
	cases := []struct {
		name    string
		in      string
		wantErr string
	}{
		{name: "empty", in: ``, wantErr: "lists no keys"},
		{name: "not YAML", in: "keys: [", wantErr: "not valid YAML"},
		{name: "unknown field", in: "keys:\n- name: a\n  stream: [x]\n", wantErr: `unknown field "stream"`},
		{name: "no name", in: "keys:\n- streams: [x]\n  publicKey: |\n" + indent(pub) + "\n", wantErr: "keys[0]: name must be"},
		{name: "bad name", in: "keys:\n- name: Bad Name\n", wantErr: `keys[0] (name "Bad Name"): name must be`},
		{name: "no key", in: "keys:\n- name: a\n  streams: [x]\n", wantErr: `keys[0] (name "a"): publicKey is empty`},
		{name: "key not PEM", in: "keys:\n- name: a\n  publicKey: nope\n  streams: [x]\n", wantErr: `keys[0] (name "a"): publicKey is not a PEM public key`},
		{name: "no streams", in: "keys:\n- name: a\n  publicKey: |\n" + indent(pub) + "\n", wantErr: `keys[0] (name "a"): streams is empty`},
		{name: "bad pattern", in: "keys:\n- name: a\n  publicKey: |\n" + indent(pub) + "\n  streams: [\"c1/[staging\"]\n", wantErr: `keys[0] (name "a"): streams[0] "c1/[staging" is not a valid pattern`},
		{name: "duplicate name", in: "keys:\n- name: a\n  publicKey: |\n" + indent(pub) + "\n  repositories: [r.example/s]\n  streams: [x]\n- name: a\n  publicKey: |\n" + indent(pub) + "\n  streams: [y]\n", wantErr: `keys[1] (name "a"): name is already used by keys[0]`},
		// The old form: a key bound to stream names alone would vouch for a copy anywhere.
		{name: "no repositories", in: "keys:\n- name: a\n  publicKey: |\n" + indent(pub) + "\n  streams: [\"c1/staging/*\"]\n",
			wantErr: `keys[0] (name "a"): repositories is empty; a key is bound to the repositories its streams are read from as well as to the streams: add repositories: [`},
		{name: "bad repository", in: "keys:\n- name: a\n  publicKey: |\n" + indent(pub) + "\n  repositories: [\"Registry.Example/UPPER\"]\n  streams: [x]\n",
			wantErr: `keys[0] (name "a"): repositories[0] "Registry.Example/UPPER" is not an OCI repository name`},
		{name: "bad repository pattern", in: "keys:\n- name: a\n  publicKey: |\n" + indent(pub) + "\n  repositories: [\"r.example/[x\"]\n  streams: [x]\n",
			wantErr: `keys[0] (name "a"): repositories[0] "r.example/[x" is not a valid pattern`},
		{name: "repository pattern without a registry", in: "keys:\n- name: a\n  publicKey: |\n" + indent(pub) + "\n  repositories: [\"*\"]\n  streams: [x]\n",
			wantErr: `keys[0] (name "a"): repositories[0] "*" is not a repository pattern`},
		{name: "too large", in: strings.Repeat("#", maxConfigBytes+1), wantErr: "more than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in))
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

func TestVerifyBindsKeysToStreams(t *testing.T) {
	oldSV, oldPub := newKey(t)
	newSV, newPub := newKey(t)
	otherSV, _ := newKey(t)
	cfg, err := Parse([]byte("keys:\n" +
		"- name: staging-old\n  publicKey: |\n" + indent(oldPub) + "\n  repositories: [" + repoA + "]\n  streams: [\"c1/staging/*\"]\n" +
		"- name: staging-new\n  publicKey: |\n" + indent(newPub) + "\n  repositories: [" + repoA + "]\n  streams: [\"c1/staging/*\", \"c2/staging/payments\"]\n"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	msg := []byte(`{"seq":1}`)
	sign := func(sv signature.SignerVerifier) []byte {
		s, err := sv.SignMessage(strings.NewReader(string(msg)))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	cases := []struct {
		name    string
		stream  string
		sig     []byte
		message []byte
		wantKey string
	}{
		{name: "old key, rotation keeps it valid", stream: "c1/staging/payments", sig: sign(oldSV), message: msg, wantKey: "staging-old"},
		{name: "new key", stream: "c1/staging/payments", sig: sign(newSV), message: msg, wantKey: "staging-new"},
		{name: "new key, second pattern", stream: "c2/staging/payments", sig: sign(newSV), message: msg, wantKey: "staging-new"},
		{name: "old key not bound to that stream", stream: "c2/staging/payments", sig: sign(oldSV), message: msg},
		{name: "star does not cross a slash", stream: "c1/staging/payments/x", sig: sign(oldSV), message: msg},
		{name: "other namespace", stream: "c1/prod/payments", sig: sign(oldSV), message: msg},
		{name: "unlisted key", stream: "c1/staging/payments", sig: sign(otherSV), message: msg},
		{name: "message changed", stream: "c1/staging/payments", sig: sign(oldSV), message: []byte(`{"seq":2}`)},
		{name: "garbage signature", stream: "c1/staging/payments", sig: []byte("xx"), message: msg},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			name, ok := cfg.Verify(repoA, tc.stream, tc.message, tc.sig)
			g.Expect(ok).To(Equal(tc.wantKey != ""))
			g.Expect(name).To(Equal(tc.wantKey))
		})
	}
}

const repoA = "registry-a.example/delivery/streams"

// TestVerifyBindsKeysToRepositories: a key trusted for a stream in one repository does not
// vouch for the same signed records read from another.
func TestVerifyBindsKeysToRepositories(t *testing.T) {
	sv, pub := newKey(t)
	cfg, err := Parse([]byte("keys:\n" +
		"- name: staging\n  publicKey: |\n" + indent(pub) + "\n  repositories: [\"oci://" + repoA + "\", \"mirror.example/delivery/*\", \"docker.io/acme/streams\"]\n" +
		"  streams: [\"c1/staging/*\"]\n"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	msg := []byte(`{"seq":1}`)
	sig, err := sv.SignMessage(strings.NewReader(string(msg)))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	cases := []struct {
		name       string
		repository string
		want       bool
		wantErr    string // of Binds
	}{
		{name: "the upstream's repository", repository: repoA, want: true},
		{name: "a mirror the pattern names", repository: "mirror.example/delivery/streams", want: true},
		{name: "normalized as the store names it", repository: "index.docker.io/acme/streams", want: true},
		{name: "another repository", repository: "registry-b.example/delivery/streams", wantErr: "binds stream \"c1/staging/payments\" to key(s) staging, but not in repository registry-b.example/delivery/streams: add registry-b.example/delivery/streams to their repositories"},
		{name: "star does not cross a slash", repository: "mirror.example/delivery/x/streams", wantErr: "but not in repository"},
		{name: "a prefix of the repository", repository: "registry-a.example/delivery", wantErr: "but not in repository"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			name, ok := cfg.Verify(tc.repository, "c1/staging/payments", msg, sig)
			g.Expect(ok).To(Equal(tc.want))
			err := cfg.Binds(tc.repository, "c1/staging/payments")
			if tc.want {
				g.Expect(name).To(Equal("staging"))
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
	t.Run("a stream no key names", func(t *testing.T) {
		NewWithT(t).Expect(cfg.Binds(repoA, "c1/prod/payments")).To(MatchError(ContainSubstring(
			"no key in the upstream trust config is bound to stream \"c1/prod/payments\" in repository " + repoA)))
	})
	t.Run("no config", func(t *testing.T) {
		var none *Config
		NewWithT(t).Expect(none.Binds(repoA, "c1/staging/payments")).To(MatchError(ContainSubstring("there is no upstream trust config")))
	})
}

// FuzzParse: a config Parse accepts has named keys, each bound to at least one valid pattern.
func FuzzParse(f *testing.F) {
	_, pub := newKey(f)
	f.Add([]byte("keys:\n- name: a\n  publicKey: |\n" + indent(pub) + "\n  repositories: [r.example/s]\n  streams: [\"c1/staging/*\"]\n"))
	f.Add([]byte("keys: []"))
	f.Add([]byte("keys:\n- name: a\n  publicKey: x\n"))
	f.Add([]byte("{\"keys\":[{\"name\":\"a\",\"streams\":[\"[\"]}]}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := Parse(b)
		if err != nil {
			return
		}
		if len(cfg.Keys) == 0 {
			t.Fatal("Parse accepted a config without keys")
		}
		for _, k := range cfg.Keys {
			byKey := k.verifier != nil && strings.HasPrefix(k.ID, "sha256:")
			byIdentity := k.keyless != nil && k.ID == "keyless" && len(k.Identities) > 0
			if k.Name == "" || len(k.Streams) == 0 || len(k.Repositories) == 0 || byKey == byIdentity {
				t.Fatalf("Parse accepted an incomplete key %+v", k)
			}
			k.Binds("r.example/s", "c1/staging/payments") // must not panic on any accepted pattern
		}
	})
}
