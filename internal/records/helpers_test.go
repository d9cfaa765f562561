package records

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
	"github.com/stagecoach-dev/stagecoach/internal/records/trust"
)

// testRegistry is go-containerregistry's in-memory registry on 127.0.0.1, with a switch that
// makes it answer 503 (down) and a count of manifest GETs per tag.
type testRegistry struct {
	srv  *httptest.Server
	down atomic.Bool
	// failTag, when set, makes GETs of that tag's manifest answer 503 (an outage mid-read).
	failTag atomic.Pointer[string]
	mu      sync.Mutex
	gets    map[string]int
}

func newRegistry(t testing.TB) *testRegistry {
	t.Helper()
	r := &testRegistry{gets: map[string]int{}}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.down.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		if req.Method == http.MethodGet {
			if i := strings.Index(req.URL.Path, "/manifests/"); i >= 0 {
				if ft := r.failTag.Load(); ft != nil && req.URL.Path[i+len("/manifests/"):] == *ft {
					http.Error(w, "backend timeout", http.StatusServiceUnavailable)
					return
				}
				r.mu.Lock()
				r.gets[req.URL.Path[i+len("/manifests/"):]]++
				r.mu.Unlock()
			}
		}
		inner.ServeHTTP(w, req)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *testRegistry) repository() string {
	return strings.TrimPrefix(r.srv.URL, "http://") + "/delivery/streams"
}

func (r *testRegistry) resetGets() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gets = map[string]int{}
}

func (r *testRegistry) getsOf(tag string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gets[tag]
}

func (r *testRegistry) store(t testing.TB) *Store {
	t.Helper()
	return r.storeIn(t, r.repository())
}

// storeIn is a store of another repository of the registry.
func (r *testRegistry) storeIn(t testing.TB, repository string) *Store {
	t.Helper()
	s, err := NewStore(repository, ociclient.Options{
		// One try: a down registry must fail the read at once, not after backoff.
		Extra: []remote.Option{remote.WithRetryBackoff(remote.Backoff{Duration: time.Millisecond, Steps: 1})},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// deleteTag removes a record's tag (the manifest under it) from the registry.
func (r *testRegistry) deleteTag(t testing.TB, tag string) {
	t.Helper()
	ref, err := name.ParseReference(r.repository() + ":" + tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Delete(ref); err != nil {
		t.Fatalf("delete %s: %v", ref, err)
	}
}

// testKey is a cosign key pair as `cosign generate-key-pair` writes it, loaded as a Signer.
type testKey struct {
	signer *Signer
	pub    string
}

var (
	keysOnce sync.Once
	keys     [3]testKey // old, new, evil
)

// testdata/cosign.key and cosign.pub were written by cosign.GenerateKeyPair with this password;
// the file is what `cosign generate-key-pair` writes ("ENCRYPTED SIGSTORE PRIVATE KEY").
const keyPassword = "correct horse"

// cosignKeys loads the cosign key pair from testdata (the "old" key: LoadSigner must read
// cosign's format) and makes two more P-256 keys in memory, once per test binary: scrypt makes
// generating or opening encrypted keys slow, above all under -race.
func cosignKeys(t testing.TB) (oldKey, newKey, evil testKey) {
	t.Helper()
	keysOnce.Do(func() {
		priv, err := os.ReadFile("testdata/cosign.key")
		if err != nil {
			panic(err)
		}
		pub, err := os.ReadFile("testdata/cosign.pub")
		if err != nil {
			panic(err)
		}
		s, err := LoadSigner(priv, []byte(keyPassword))
		if err != nil {
			panic(err)
		}
		keys[0] = testKey{signer: s, pub: string(pub)}
		for i := 1; i < len(keys); i++ {
			k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				panic(err)
			}
			sv, err := signature.LoadECDSASignerVerifier(k, crypto.SHA256)
			if err != nil {
				panic(err)
			}
			s, err := NewSigner(sv)
			if err != nil {
				panic(err)
			}
			pem, err := cryptoutils.MarshalPublicKeyToPEM(k.Public())
			if err != nil {
				panic(err)
			}
			keys[i] = testKey{signer: s, pub: string(pem)}
		}
	})
	return keys[0], keys[1], keys[2]
}

// testRepositories matches the records repository of every test registry.
const testRepositories = "127.0.0.1:*/delivery/streams"

// trustOf is a trust config with one entry per key, each bound to patterns in the test
// registries' records repository.
func trustOf(t testing.TB, entries map[string]testKey, patterns ...string) *trust.Config {
	t.Helper()
	return trustIn(t, entries, []string{testRepositories}, patterns...)
}

// trustIn is a trust config with one entry per key, each bound to patterns in repositories.
func trustIn(t testing.TB, entries map[string]testKey, repositories []string, patterns ...string) *trust.Config {
	t.Helper()
	var b strings.Builder
	b.WriteString("keys:\n")
	for name, k := range entries {
		b.WriteString("- name: " + name + "\n  publicKey: |\n")
		for _, l := range strings.Split(strings.TrimSpace(k.pub), "\n") {
			b.WriteString("    " + l + "\n")
		}
		b.WriteString("  repositories:\n")
		for _, r := range repositories {
			b.WriteString("  - \"" + r + "\"\n")
		}
		b.WriteString("  streams:\n")
		for _, p := range patterns {
			b.WriteString("  - \"" + p + "\"\n")
		}
	}
	cfg, err := trust.Parse([]byte(b.String()))
	if err != nil {
		t.Fatalf("trust config: %v\n%s", err, b.String())
	}
	return cfg
}

// upstream appends records to one stream the way a recorder would.
type upstream struct {
	t      testing.TB
	w      *Writer
	stream string
	seq    int64
	head   string
	clock  time.Time
}

func newUpstream(t testing.TB, s *Store, k testKey, stream string) *upstream {
	return &upstream{t: t, w: NewWriter(s, k.signer), stream: stream, clock: t0}
}

func (u *upstream) record(action Action, verdict Verdict, digest string) *Record {
	u.clock = u.clock.Add(time.Minute)
	r := &Record{
		APIVersion: APIVersion, Stream: u.stream, Seq: u.seq + 1, Prev: u.head,
		Stage: StageRef{Namespace: "staging", Name: "payments"}, Service: "payments", Environment: "staging",
		Action: action, Verdict: verdict, Actor: "stagecoach", Times: Times{Recorded: NewTime(u.clock)},
	}
	if digest != "" {
		r.Version = &Version{Digest: digest, Tag: "v-" + digest[7:11]}
	}
	return r
}

// add writes the next record and advances the stream.
func (u *upstream) add(action Action, verdict Verdict, digest string) *Written {
	u.t.Helper()
	w, err := u.w.Write(u.t.Context(), u.record(action, verdict, digest))
	if err != nil {
		u.t.Fatalf("write record %d: %v", u.seq+1, err)
	}
	u.seq, u.head = w.Seq, w.Digest
	return w
}

// release records a promote that succeeded and was verified.
func (u *upstream) release(digest string) {
	u.add(ActionPromote, VerdictSucceeded, digest)
	u.add(ActionVerify, VerdictVerified, digest)
}

func digestOf(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }

func offered(v *View) []string {
	var out []string
	for _, o := range v.Offers() {
		out = append(out, o.Version.Digest)
	}
	return out
}

// pushJunk puts something that is not a record (a random image) under tag: what anyone with
// push access to the repository can do.
func (r *testRegistry) pushJunk(t testing.TB, tag string) {
	t.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(r.repository() + ":" + tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithContext(t.Context())); err != nil {
		t.Fatalf("push junk %s: %v", ref, err)
	}
}

// pushUnsigned puts a well-formed record artifact with no signature under the record's tag.
func (r *testRegistry) pushUnsigned(t testing.TB, rec *Record) {
	t.Helper()
	b, err := Encode(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.store(t).push(t.Context(), Tag(rec.Stream, rec.Seq), b, rec.Stream, rec.Seq, nil, ""); err != nil {
		t.Fatalf("push unsigned record %d: %v", rec.Seq, err)
	}
}

// copyTag puts the manifest under tag from under tag to as well (a replay).
func (r *testRegistry) copyTag(t testing.TB, from, to string) {
	t.Helper()
	src, err := name.NewTag(r.repository() + ":" + from)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(src, remote.WithContext(t.Context()))
	if err != nil {
		t.Fatalf("get %s: %v", src, err)
	}
	dst, err := name.NewTag(r.repository() + ":" + to)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Put(dst, desc, remote.WithContext(t.Context())); err != nil {
		t.Fatalf("put %s: %v", dst, err)
	}
}
