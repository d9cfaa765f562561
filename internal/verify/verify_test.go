package verify

import (
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	. "github.com/onsi/gomega"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
	"github.com/stagecoach-dev/stagecoach/internal/verify/verifytest"
)

// testRegistry is an in-memory OCI 1.1 registry (referrers API on) on 127.0.0.1 that counts requests.
type testRegistry struct {
	srv      *httptest.Server
	host     string
	requests atomic.Int64
}

func newTestRegistry(tb testing.TB, wrap func(http.Handler) http.Handler) *testRegistry {
	tb.Helper()
	r := &testRegistry{}
	var h http.Handler = ggcrregistry.New(
		ggcrregistry.Logger(log.New(io.Discard, "", 0)),
		ggcrregistry.WithReferrersSupport(true),
	)
	if wrap != nil {
		h = wrap(h)
	}
	inner := h
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		inner.ServeHTTP(w, req)
	}))
	tb.Cleanup(r.srv.Close)
	u, err := url.Parse(r.srv.URL)
	if err != nil {
		tb.Fatal(err)
	}
	r.host = u.Host
	return r
}

func mustNew(tb testing.TB, opts Options) *Verifier {
	tb.Helper()
	v, err := New(opts)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return v
}

func TestVerify(t *testing.T) {
	signer := verifytest.NewKeyPair(t)
	other := verifytest.NewKeyPair(t)
	signerID, err := KeyIDFromPEM(signer.PublicPEM)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		// setup pushes what the case needs and returns the reference to verify.
		setup      func(t *testing.T, repo string) string
		keys       [][]byte
		wantReason string
		wantFormat string
		wantKeyID  string
		wantInMsg  []string
	}{
		{
			name: "legacy signature verifies",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				verifytest.SignLegacy(t, t.Context(), ref, signer)
				return ref
			},
			keys:       [][]byte{signer.PublicPEM},
			wantReason: ReasonSignatureVerified, wantFormat: FormatLegacy, wantKeyID: signerID,
		},
		{
			name: "bundle signature verifies",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				verifytest.SignBundle(t, t.Context(), ref, signer)
				return ref
			},
			keys:       [][]byte{signer.PublicPEM},
			wantReason: ReasonSignatureVerified, wantFormat: FormatBundle, wantKeyID: signerID,
		},
		{
			name: "unsigned is missing",
			setup: func(t *testing.T, repo string) string {
				return verifytest.PushRandomImage(t, repo, "v1")
			},
			keys:       [][]byte{signer.PublicPEM},
			wantReason: ReasonSignatureMissing,
			wantInMsg:  []string{"has no cosign signature", ".sig"},
		},
		{
			name: "other referrers (an SBOM) are not signatures",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				d, err := name.NewDigest(ref)
				if err != nil {
					t.Fatal(err)
				}
				sbom := static.NewLayer([]byte(`{"spdxVersion":"SPDX-2.3"}`), "application/spdx+json")
				err = ociremote.WriteReferrer(d, "application/spdx+json", []v1.Layer{sbom}, nil,
					ociremote.WithRemoteOptions(remote.WithContext(t.Context())))
				if err != nil {
					t.Fatal(err)
				}
				return ref
			},
			keys:       [][]byte{signer.PublicPEM},
			wantReason: ReasonSignatureMissing,
		},
		{
			name: "legacy signature by an untrusted key is invalid",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				verifytest.SignLegacy(t, t.Context(), ref, other)
				return ref
			},
			keys:       [][]byte{signer.PublicPEM},
			wantReason: ReasonSignatureInvalid, wantFormat: FormatLegacy,
			wantInMsg: []string{"none verifies", signerID},
		},
		{
			name: "bundle by an untrusted key is invalid",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				verifytest.SignBundle(t, t.Context(), ref, other)
				return ref
			},
			keys:       [][]byte{signer.PublicPEM},
			wantReason: ReasonSignatureInvalid, wantFormat: FormatBundle,
		},
		{
			name: "legacy signature copied from another digest is invalid",
			setup: func(t *testing.T, repo string) string {
				a := verifytest.PushRandomImage(t, repo, "a")
				b := verifytest.PushRandomImage(t, repo, "b")
				verifytest.SignLegacy(t, t.Context(), a, signer)
				verifytest.CopyLegacySignature(t, a, b)
				return b
			},
			keys:       [][]byte{signer.PublicPEM},
			wantReason: ReasonSignatureInvalid, wantFormat: FormatLegacy,
			wantInMsg: []string{"invalid or missing digest in claim"},
		},
		{
			name: "bundle of another digest attached as referrer is invalid",
			setup: func(t *testing.T, repo string) string {
				a := verifytest.PushRandomImage(t, repo, "a")
				b := verifytest.PushRandomImage(t, repo, "b")
				bundleA := verifytest.SignBundle(t, t.Context(), a, signer)
				verifytest.AttachBundle(t, t.Context(), b, bundleA)
				return b
			},
			keys:       [][]byte{signer.PublicPEM},
			wantReason: ReasonSignatureInvalid, wantFormat: FormatBundle,
			wantInMsg: []string{"bundle signs another digest"},
		},
		{
			name: "second of two trusted keys signed",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				verifytest.SignLegacy(t, t.Context(), ref, signer)
				return ref
			},
			keys:       [][]byte{other.PublicPEM, signer.PublicPEM},
			wantReason: ReasonSignatureVerified, wantFormat: FormatLegacy, wantKeyID: signerID,
		},
		{
			name: "second of two trusted keys signed a bundle",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				verifytest.SignBundle(t, t.Context(), ref, signer)
				return ref
			},
			keys:       [][]byte{other.PublicPEM, signer.PublicPEM},
			wantReason: ReasonSignatureVerified, wantFormat: FormatBundle, wantKeyID: signerID,
		},
		{
			name: "a bad signature does not hide a good one",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				verifytest.SignBundle(t, t.Context(), ref, other)
				verifytest.SignLegacy(t, t.Context(), ref, other)
				verifytest.SignLegacy(t, t.Context(), ref, signer)
				return ref
			},
			keys:       [][]byte{signer.PublicPEM},
			wantReason: ReasonSignatureVerified, wantFormat: FormatLegacy, wantKeyID: signerID,
		},
		{
			name: "digest that does not exist",
			setup: func(t *testing.T, repo string) string {
				verifytest.PushRandomImage(t, repo, "v1")
				return repo + "@sha256:0000000000000000000000000000000000000000000000000000000000000000"
			},
			keys:       [][]byte{signer.PublicPEM},
			wantReason: ReasonImageNotFound,
			wantInMsg:  []string{"does not exist"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			reg := newTestRegistry(t, nil)
			ref := tt.setup(t, reg.host+"/team/app")
			v := mustNew(t, Options{Keys: tt.keys})

			verdict, err := v.Verify(t.Context(), ref)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(verdict.Reason).To(Equal(tt.wantReason), verdict.Message)
			g.Expect(verdict.Verified).To(Equal(tt.wantReason == ReasonSignatureVerified))
			g.Expect(verdict.Format).To(Equal(tt.wantFormat))
			g.Expect(verdict.KeyID).To(Equal(tt.wantKeyID))
			g.Expect(verdict.Message).To(ContainSubstring(ref[len(ref)-71:]), "message names the digest")
			for _, s := range tt.wantInMsg {
				g.Expect(verdict.Message).To(ContainSubstring(s))
			}
		})
	}
}

func TestVerifyCache(t *testing.T) {
	kp := verifytest.NewKeyPair(t)

	t.Run("second verify does not touch the registry", func(t *testing.T) {
		g := NewWithT(t)
		reg := newTestRegistry(t, nil)
		ref := verifytest.PushRandomImage(t, reg.host+"/team/app", "v1")
		verifytest.SignBundle(t, t.Context(), ref, kp)
		v := mustNew(t, Options{Keys: [][]byte{kp.PublicPEM}})

		first, err := v.Verify(t.Context(), ref)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(first.Verified).To(BeTrue(), first.Message)
		before := reg.requests.Load()
		second, err := v.Verify(t.Context(), ref)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(second).To(Equal(first))
		g.Expect(reg.requests.Load()).To(Equal(before))
	})

	t.Run("cache is bounded and evicts the least recently used", func(t *testing.T) {
		g := NewWithT(t)
		reg := newTestRegistry(t, nil)
		refs := make([]string, 3)
		for i, tag := range []string{"a", "b", "c"} {
			refs[i] = verifytest.PushRandomImage(t, reg.host+"/team/app", tag)
			verifytest.SignLegacy(t, t.Context(), refs[i], kp)
		}
		v := mustNew(t, Options{Keys: [][]byte{kp.PublicPEM}, CacheSize: 2})
		for _, ref := range refs {
			_, err := v.Verify(t.Context(), ref)
			g.Expect(err).NotTo(HaveOccurred())
		}
		g.Expect(v.cache.Len()).To(Equal(2))

		before := reg.requests.Load()
		_, err := v.Verify(t.Context(), refs[2]) // newest: cached
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(reg.requests.Load()).To(Equal(before))
		_, err = v.Verify(t.Context(), refs[0]) // oldest: evicted
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(reg.requests.Load()).To(BeNumerically(">", before))
	})

	t.Run("different trusted keys do not share verdicts", func(t *testing.T) {
		g := NewWithT(t)
		reg := newTestRegistry(t, nil)
		ref := verifytest.PushRandomImage(t, reg.host+"/team/app", "v1")
		verifytest.SignLegacy(t, t.Context(), ref, kp)
		cache := NewCache(10)
		trusting := mustNew(t, Options{Keys: [][]byte{kp.PublicPEM}, Cache: cache})
		other := mustNew(t, Options{Keys: [][]byte{verifytest.NewKeyPair(t).PublicPEM}, Cache: cache})

		ok, err := trusting.Verify(t.Context(), ref)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok.Verified).To(BeTrue())
		no, err := other.Verify(t.Context(), ref)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(no.Reason).To(Equal(ReasonSignatureInvalid))
		g.Expect(cache.Len()).To(Equal(2))
	})

	t.Run("missing verdict expires so a later signature is seen", func(t *testing.T) {
		g := NewWithT(t)
		reg := newTestRegistry(t, nil)
		ref := verifytest.PushRandomImage(t, reg.host+"/team/app", "v1")
		clk := clocktesting.NewFakePassiveClock(time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC))
		v := mustNew(t, Options{Keys: [][]byte{kp.PublicPEM}, Clock: clk, NegativeTTL: time.Minute})

		verdict, err := v.Verify(t.Context(), ref)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(verdict.Reason).To(Equal(ReasonSignatureMissing))
		verifytest.SignLegacy(t, t.Context(), ref, kp)

		verdict, err = v.Verify(t.Context(), ref)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(verdict.Reason).To(Equal(ReasonSignatureMissing), "still cached within the TTL")

		clk.SetTime(clk.Now().Add(time.Minute))
		verdict, err = v.Verify(t.Context(), ref)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(verdict.Verified).To(BeTrue(), verdict.Message)
	})

	t.Run("negative TTL below zero never caches misses", func(t *testing.T) {
		g := NewWithT(t)
		reg := newTestRegistry(t, nil)
		ref := verifytest.PushRandomImage(t, reg.host+"/team/app", "v1")
		v := mustNew(t, Options{Keys: [][]byte{kp.PublicPEM}, NegativeTTL: -1})
		_, err := v.Verify(t.Context(), ref)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(v.cache.Len()).To(Equal(0))
	})
}

func TestVerifyCouldNotCheck(t *testing.T) {
	kp := verifytest.NewKeyPair(t)

	t.Run("registry down is an error, not a verdict, and is not cached", func(t *testing.T) {
		g := NewWithT(t)
		reg := newTestRegistry(t, nil)
		ref := verifytest.PushRandomImage(t, reg.host+"/team/app", "v1")
		reg.srv.Close()
		v := mustNew(t, Options{Keys: [][]byte{kp.PublicPEM}})

		_, err := v.Verify(t.Context(), ref)
		g.Expect(err).To(HaveOccurred())
		g.Expect(errors.Is(err, ociclient.ErrUnreachable)).To(BeTrue(), "got %v", err)
		g.Expect(err.Error()).To(ContainSubstring(reg.host + "/team/app"))
		g.Expect(v.cache.Len()).To(Equal(0))
	})

	t.Run("credentials refused is an error naming the secret fix", func(t *testing.T) {
		g := NewWithT(t)
		reg := newTestRegistry(t, requireBasicAuth)
		ref := verifytest.PushRandomImage(t, reg.host+"/team/app", "v1", remote.WithAuth(testAuth))
		verifytest.SignLegacy(t, t.Context(), ref, kp, remote.WithAuth(testAuth))

		_, err := mustNew(t, Options{Keys: [][]byte{kp.PublicPEM}}).Verify(t.Context(), ref)
		g.Expect(errors.Is(err, ociclient.ErrUnauthorized)).To(BeTrue(), "got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("secretRef"))

		kc, err := ociclient.KeychainFromDockerConfig(dockerConfig(reg.host))
		g.Expect(err).NotTo(HaveOccurred())
		verdict, err := mustNew(t, Options{Keys: [][]byte{kp.PublicPEM}, Keychain: kc}).Verify(t.Context(), ref)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(verdict.Verified).To(BeTrue(), verdict.Message)
	})

	t.Run("a reference without digest is refused", func(t *testing.T) {
		g := NewWithT(t)
		_, err := mustNew(t, Options{Keys: [][]byte{kp.PublicPEM}}).Verify(t.Context(), "127.0.0.1:1/team/app:v1")
		g.Expect(err).To(MatchError(ContainSubstring("want repository@sha256:<digest>")))
	})
}

func TestNew(t *testing.T) {
	kp := verifytest.NewKeyPair(t)
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{name: "keys", opts: Options{Keys: [][]byte{kp.PublicPEM}}},
		{name: "keys and identities: both trusted", opts: Options{Keys: [][]byte{kp.PublicPEM}, Identities: []Identity{{Issuer: "^https://x$", Subject: ".*"}}}},
		{name: "identities without keys: keyless, public Sigstore root", opts: Options{Identities: []Identity{{Issuer: "^https://x$", Subject: ".*"}}}},
		{name: "nothing to trust", opts: Options{}, wantErr: "no trusted public keys"},
		{name: "trusted root without identities", opts: Options{Keys: [][]byte{kp.PublicPEM}, TrustedRoot: PublicGoodTrustedRoot()}, wantErr: "set verify.matchOIDCIdentity too"},
		{name: "trusted root that does not parse", opts: Options{Identities: []Identity{{Issuer: "x", Subject: "y"}}, TrustedRoot: []byte("{}")}, wantErr: "trusted root: "},
		{name: "empty subject", opts: Options{Identities: []Identity{{Issuer: "x", Subject: ""}}}, wantErr: "identity 1: subject is empty"},
		{name: "bad key", opts: Options{Keys: [][]byte{kp.PublicPEM, []byte("not a key")}}, wantErr: "trusted key 2 of 2"},
		{name: "bad identity", opts: Options{Keys: [][]byte{kp.PublicPEM}, Identities: []Identity{{Issuer: "(", Subject: ".*"}}}, wantErr: `identity 1: issuer "("`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			v, err := New(tt.opts)
			if tt.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(v.KeyIDs()).To(HaveLen(len(tt.opts.Keys)))
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
		})
	}
}

func TestKeysFromSecretData(t *testing.T) {
	a, b := verifytest.NewKeyPair(t), verifytest.NewKeyPair(t)
	tests := []struct {
		name    string
		data    map[string][]byte
		want    [][]byte
		wantErr string
	}{
		{name: "every .pub entry in name order", data: map[string][]byte{"z.pub": a.PublicPEM, "cosign.pub": b.PublicPEM, "README": []byte("x")}, want: [][]byte{b.PublicPEM, a.PublicPEM}},
		{name: "no .pub entry", data: map[string][]byte{"cosign.key": []byte("x")}, wantErr: "no *.pub entry"},
		{name: "empty secret", data: nil, wantErr: "no *.pub entry"},
		{name: "unparsable key is named", data: map[string][]byte{"good.pub": a.PublicPEM, "bad.pub": []byte("-----BEGIN NOPE-----")}, wantErr: `secret entry "bad.pub"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := KeysFromSecretData(tt.data)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

const (
	testUser     = "ci"
	testPassword = "s3cret"
)

var testAuth = &authn.Basic{Username: testUser, Password: testPassword}

func requireBasicAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if user, pass, ok := req.BasicAuth(); !ok || user != testUser || pass != testPassword {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, req)
	})
}

func dockerConfig(host string) []byte {
	return []byte(`{"auths":{"` + host + `":{"username":"` + testUser + `","password":"` + testPassword + `"}}}`)
}

func BenchmarkVerifyCold(b *testing.B) {
	for _, format := range []string{FormatLegacy, FormatBundle} {
		b.Run(format, func(b *testing.B) {
			reg := newTestRegistry(b, nil)
			kp := verifytest.NewKeyPair(b)
			ref := verifytest.PushRandomImage(b, reg.host+"/team/app", "v1")
			if format == FormatLegacy {
				verifytest.SignLegacy(b, b.Context(), ref, kp)
			} else {
				verifytest.SignBundle(b, b.Context(), ref, kp)
			}
			keys := [][]byte{kp.PublicPEM}
			for b.Loop() {
				v, err := New(Options{Keys: keys})
				if err != nil {
					b.Fatal(err)
				}
				verdict, err := v.Verify(b.Context(), ref)
				if err != nil || !verdict.Verified {
					b.Fatalf("verdict %+v, err %v", verdict, err)
				}
			}
		})
	}
}

func BenchmarkVerifyCached(b *testing.B) {
	reg := newTestRegistry(b, nil)
	kp := verifytest.NewKeyPair(b)
	ref := verifytest.PushRandomImage(b, reg.host+"/team/app", "v1")
	verifytest.SignLegacy(b, b.Context(), ref, kp)
	v, err := New(Options{Keys: [][]byte{kp.PublicPEM}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := v.Verify(b.Context(), ref); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		verdict, err := v.Verify(b.Context(), ref)
		if err != nil || !verdict.Verified {
			b.Fatalf("verdict %+v, err %v", verdict, err)
		}
	}
}

// The verdict cache is keyed by the whole SHA-256 of the key set, not a prefix of it.
func TestKeySetFingerprintIsTheWholeHash(t *testing.T) {
	g := NewWithT(t)
	a, b := verifytest.NewKeyPair(t), verifytest.NewKeyPair(t)
	one, err := New(Options{Keys: [][]byte{a.PublicPEM}})
	g.Expect(err).NotTo(HaveOccurred())
	both, err := New(Options{Keys: [][]byte{b.PublicPEM, a.PublicPEM}})
	g.Expect(err).NotTo(HaveOccurred())
	bothAgain, err := New(Options{Keys: [][]byte{a.PublicPEM, b.PublicPEM}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(one.fingerprint).To(MatchRegexp(`^[0-9a-f]{64}$`))
	g.Expect(both.fingerprint).To(MatchRegexp(`^[0-9a-f]{64}$`))
	g.Expect(both.fingerprint).NotTo(Equal(one.fingerprint))
	g.Expect(bothAgain.fingerprint).To(Equal(both.fingerprint), "the order of the keys does not matter")
}
