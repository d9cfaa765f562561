package registry

import (
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// testRegistry is an in-memory OCI registry on 127.0.0.1 that counts requests by method.
type testRegistry struct {
	srv   *httptest.Server
	host  string
	heads atomic.Int64
	gets  atomic.Int64
}

// newTestRegistry starts a registry; wrap (optional) sits in front of it, e.g. for auth.
func newTestRegistry(tb testing.TB, wrap func(http.Handler) http.Handler) *testRegistry {
	tb.Helper()
	r := &testRegistry{}
	var h http.Handler = ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	counted := h
	h = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.Method {
		case http.MethodHead:
			r.heads.Add(1)
		case http.MethodGet:
			r.gets.Add(1)
		}
		counted.ServeHTTP(w, req)
	})
	r.srv = httptest.NewServer(h)
	tb.Cleanup(r.srv.Close)
	u, err := url.Parse(r.srv.URL)
	if err != nil {
		tb.Fatal(err)
	}
	r.host = u.Host
	return r
}

func (r *testRegistry) repo(path string) string { return r.host + "/" + path }

// push writes a fresh random image under each tag and returns its digest.
func (r *testRegistry) push(tb testing.TB, repo string, tags ...string) string {
	tb.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		tb.Fatal(err)
	}
	return r.pushImage(tb, repo, img, tags...)
}

func (r *testRegistry) pushImage(tb testing.TB, repo string, img v1.Image, tags ...string) string {
	tb.Helper()
	opts := []remote.Option{remote.WithContext(tb.Context()), remote.WithAuth(basicUser)}
	pusher, err := remote.NewPusher(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	for i, tag := range tags {
		ref, err := name.NewTag(repo + ":" + tag)
		if err != nil {
			tb.Fatal(err)
		}
		if i == 0 {
			err = remote.Write(ref, img, remote.Reuse(pusher))
		} else {
			err = remote.Tag(ref, img, remote.Reuse(pusher))
		}
		if err != nil {
			tb.Fatalf("push %s: %v", ref, err)
		}
	}
	d, err := img.Digest()
	if err != nil {
		tb.Fatal(err)
	}
	return d.String()
}

const (
	testUser     = "ci"
	testPassword = "s3cret"
)

// basicUser is what test pushes authenticate with; registries without auth ignore it.
var basicUser = &authn.Basic{Username: testUser, Password: testPassword}

// requireBasicAuth answers 401 with a Basic challenge unless the request carries testUser's credentials.
func requireBasicAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		user, pass, ok := req.BasicAuth()
		if !ok || user != testUser || pass != testPassword {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// hideManifest answers 404 to HEAD/GET of one tag, as if it was deleted after listing.
func hideManifest(tag string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.Method != http.MethodPut && strings.HasSuffix(req.URL.Path, "/manifests/"+tag) {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			next.ServeHTTP(w, req)
		})
	}
}

func dockerConfig(host, user, pass string) []byte {
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	return []byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, auth))
}
