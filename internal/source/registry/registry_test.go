package registry

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"

	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
)

func tagsOf(res Result) []string {
	out := make([]string, 0, len(res.Candidates))
	for _, c := range res.Candidates {
		out = append(out, c.Tag)
	}
	return out
}

const sigHex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestListSelection(t *testing.T) {
	tests := []struct {
		name        string
		tags        []string
		req         Request
		wantTags    []string
		wantSkipped int
	}{
		{
			name:        "semver picks versions in range, newest first, no prereleases",
			tags:        []string{"v0.9.0", "v1.0.0", "v1.2.0", "v1.10.0", "v2.0.0-rc.1", "latest", "sha256-" + sigHex + ".sig"},
			req:         Request{Semver: ">=1.0.0"},
			wantTags:    []string{"v1.10.0", "v1.2.0", "v1.0.0"},
			wantSkipped: 4,
		},
		{
			name:     "semver constraint naming a prerelease admits prereleases",
			tags:     []string{"1.0.0", "2.0.0-rc.1", "2.0.0-rc.2", "1.1.0-beta"},
			req:      Request{Semver: ">=2.0.0-rc.1"},
			wantTags: []string{"2.0.0-rc.2", "2.0.0-rc.1"}, wantSkipped: 2,
		},
		{
			name:     "semver OR and AND",
			tags:     []string{"1.4.0", "1.5.0", "2.0.0", "3.1.0", "3.2.0"},
			req:      Request{Semver: ">=1.0.0, <1.5.0 || ~3.1"},
			wantTags: []string{"3.1.0", "1.4.0"}, wantSkipped: 3,
		},
		{
			name:     "pattern orders non-versions reverse lexically",
			tags:     []string{"main-20260101-abc", "main-20260301-def", "main-20260201-012", "feature-x", "sha256-" + sigHex + ".att"},
			req:      Request{Pattern: `^main-\d{8}-[0-9a-f]+$`},
			wantTags: []string{"main-20260301-def", "main-20260201-012", "main-20260101-abc"}, wantSkipped: 2,
		},
		{
			name:     "pattern orders versions by semver, not lexically",
			tags:     []string{"v1.9.0", "v1.10.0", "v1.2.0", "nightly"},
			req:      Request{Pattern: `^v`},
			wantTags: []string{"v1.10.0", "v1.9.0", "v1.2.0"}, wantSkipped: 1,
		},
		{
			name:     "pattern mixing versions and names ranks versions first",
			tags:     []string{"stable", "1.0.0", "edge"},
			req:      Request{Pattern: `.`},
			wantTags: []string{"1.0.0", "stable", "edge"},
		},
		{
			name:     "no filter takes every tag but signature tags",
			tags:     []string{"a", "b", "sha256-" + sigHex, "sha256-" + sigHex + ".sbom"},
			req:      Request{},
			wantTags: []string{"b", "a"}, wantSkipped: 2,
		},
		{
			name:     "limit keeps the newest",
			tags:     []string{"1.0.0", "1.1.0", "1.2.0", "1.3.0"},
			req:      Request{Semver: "1.x", Limit: 2},
			wantTags: []string{"1.3.0", "1.2.0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			reg := newTestRegistry(t, nil)
			repo := reg.repo("team/app")
			digests := map[string]string{}
			for _, tag := range tt.tags {
				digests[tag] = reg.push(t, repo, tag)
			}
			req := tt.req
			req.Repository = repo
			res, err := (&Lister{}).List(t.Context(), req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(tagsOf(res)).To(Equal(tt.wantTags))
			g.Expect(res.Skipped).To(Equal(tt.wantSkipped))
			for _, c := range res.Candidates {
				g.Expect(c.Digest).To(Equal(digests[c.Tag]), "digest of %s", c.Tag)
				if req.Semver != "" {
					g.Expect(c.Version).NotTo(BeNil())
				}
			}
		})
	}
}

func TestList1000TagsResolvesOnlyTheNewest(t *testing.T) {
	g := NewWithT(t)
	reg := newTestRegistry(t, nil)
	repo := reg.repo("team/big")
	tags := make([]string, 1000)
	for i := range tags {
		tags[i] = fmt.Sprintf("1.%d.0", i)
	}
	reg.push(t, repo, tags...)
	reg.heads.Store(0)

	res, err := (&Lister{}).List(t.Context(), Request{Repository: repo, Semver: ">=1.0.0", Limit: 5})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tagsOf(res)).To(Equal([]string{"1.999.0", "1.998.0", "1.997.0", "1.996.0", "1.995.0"}))
	g.Expect(res.Eligible).To(Equal(1000))
	g.Expect(reg.heads.Load()).To(Equal(int64(5)), "one HEAD per resolved candidate, none for the rest")
}

func TestListFollowsTagChanges(t *testing.T) {
	t.Run("tag moved to a new digest", func(t *testing.T) {
		g := NewWithT(t)
		reg := newTestRegistry(t, nil)
		repo := reg.repo("team/app")
		first := reg.push(t, repo, "v1.0.0")
		res, err := (&Lister{}).List(t.Context(), Request{Repository: repo, Semver: "1.x"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Candidates).To(HaveLen(1))
		g.Expect(res.Candidates[0].Digest).To(Equal(first))

		second := reg.push(t, repo, "v1.0.0")
		g.Expect(second).NotTo(Equal(first))
		res, err = (&Lister{}).List(t.Context(), Request{Repository: repo, Semver: "1.x"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Candidates[0].Digest).To(Equal(second))
	})
	t.Run("deleted tag is gone", func(t *testing.T) {
		g := NewWithT(t)
		reg := newTestRegistry(t, nil)
		repo := reg.repo("team/app")
		reg.push(t, repo, "v1.0.0")
		reg.push(t, repo, "v1.1.0")
		ref, err := name.NewTag(repo + ":v1.1.0")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(remote.Delete(ref, remote.WithContext(t.Context()))).To(Succeed())

		res, err := (&Lister{}).List(t.Context(), Request{Repository: repo, Semver: "1.x"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tagsOf(res)).To(Equal([]string{"v1.0.0"}))
	})
	t.Run("tag deleted between listing and lookup is skipped", func(t *testing.T) {
		g := NewWithT(t)
		reg := newTestRegistry(t, hideManifest("v1.1.0"))
		repo := reg.repo("team/app")
		reg.push(t, repo, "v1.0.0", "v1.1.0")
		res, err := (&Lister{}).List(t.Context(), Request{Repository: repo, Semver: "1.x"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tagsOf(res)).To(Equal([]string{"v1.0.0"}))
		g.Expect(res.Skipped).To(Equal(1))
	})
}

// Resolve reads where a tag points now: after a push, the new digest; a deleted tag, none; an
// unreachable registry, an error.
func TestResolve(t *testing.T) {
	reg := newTestRegistry(t, nil)
	repo := reg.repo("charts/payments")
	first := reg.push(t, repo, "1.0.0")
	for _, tc := range []struct {
		name    string
		req     Request
		tag     string
		prepare func(t *testing.T) string
		wantErr string
	}{
		{name: "the tag as pushed", req: Request{Repository: repo}, tag: "1.0.0", prepare: func(*testing.T) string { return first }},
		{name: "the tag pushed again", req: Request{Repository: repo}, tag: "1.1.0", prepare: func(t *testing.T) string {
			reg.push(t, repo, "1.1.0")
			return reg.push(t, repo, "1.1.0")
		}},
		{name: "a tag that is gone", req: Request{Repository: repo}, tag: "9.9.9", prepare: func(*testing.T) string { return "" }},
		{name: "a registry that does not answer", req: Request{Repository: "127.0.0.1:1/charts/payments"}, tag: "1.0.0",
			prepare: func(*testing.T) string { return "" }, wantErr: "127.0.0.1:1/charts/payments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			want := tc.prepare(t)
			l := &Lister{RemoteOptions: []remote.Option{remote.WithRetryBackoff(remote.Backoff{Steps: 1})}}
			got, err := l.Resolve(t.Context(), tc.req, tc.tag)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(want))
		})
	}
}

func TestListErrors(t *testing.T) {
	down := newTestRegistry(t, nil)
	down.srv.Close()
	authReg := newTestRegistry(t, requireBasicAuth)
	authReg.push(t, authReg.repo("private/app"), "1.0.0")
	open := newTestRegistry(t, nil)
	open.push(t, open.repo("team/app"), "1.0.0")

	tests := []struct {
		name     string
		req      Request
		sentinel error
		contains []string
	}{
		{
			name:     "registry down",
			req:      Request{Repository: down.repo("team/app")},
			sentinel: ociclient.ErrUnreachable,
			contains: []string{down.repo("team/app"), "cannot reach registry", "connection refused"},
		},
		{
			name:     "repository not found",
			req:      Request{Repository: open.repo("team/missing")},
			sentinel: ociclient.ErrNotFound,
			contains: []string{open.repo("team/missing"), "does not exist"},
		},
		{
			name:     "auth required and no credentials",
			req:      Request{Repository: authReg.repo("private/app")},
			sentinel: ociclient.ErrUnauthorized,
			contains: []string{authReg.repo("private/app"), "HTTP 401", "secretRef", authReg.host},
		},
		{
			name:     "semver and pattern together",
			req:      Request{Repository: open.repo("team/app"), Semver: "1.x", Pattern: "."},
			contains: []string{"sets both semver and pattern"},
		},
		{
			name:     "bad constraint",
			req:      Request{Repository: open.repo("team/app"), Semver: ">=banana"},
			contains: []string{open.repo("team/app"), `invalid semver constraint ">=banana"`},
		},
		{
			name:     "bad pattern",
			req:      Request{Repository: open.repo("team/app"), Pattern: "(("},
			contains: []string{`invalid pattern "(("`},
		},
		{
			name:     "bad repository",
			req:      Request{Repository: "Not A Repo"},
			contains: []string{`invalid repository "Not A Repo"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := (&Lister{}).List(t.Context(), tt.req)
			g.Expect(err).To(HaveOccurred())
			if tt.sentinel != nil {
				g.Expect(errors.Is(err, tt.sentinel)).To(BeTrue(), "want %v, got %v", tt.sentinel, err)
			}
			for _, s := range tt.contains {
				g.Expect(err.Error()).To(ContainSubstring(s))
			}
		})
	}
}

func TestListWithDockerConfigKeychain(t *testing.T) {
	reg := newTestRegistry(t, requireBasicAuth)
	repo := reg.repo("private/app")
	digest := reg.push(t, repo, "1.0.0")

	tests := []struct {
		name    string
		config  []byte
		wantErr error
	}{
		{name: "auths.<host>.auth", config: dockerConfig(reg.host, testUser, testPassword)},
		{name: "username and password", config: fmt.Appendf(nil, `{"auths":{%q:{"username":%q,"password":%q}}}`, "http://"+reg.host+"/v2/", testUser, testPassword)},
		{name: "wrong password", config: dockerConfig(reg.host, testUser, "nope"), wantErr: ociclient.ErrUnauthorized},
		{name: "credentials for another host", config: dockerConfig("other.example", testUser, testPassword), wantErr: ociclient.ErrUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			kc, err := KeychainFromDockerConfig(tt.config)
			g.Expect(err).NotTo(HaveOccurred())
			res, err := (&Lister{}).List(t.Context(), Request{Repository: repo, Semver: "1.x", Keychain: kc})
			if tt.wantErr != nil {
				g.Expect(errors.Is(err, tt.wantErr)).To(BeTrue(), "got %v", err)
				g.Expect(err.Error()).NotTo(ContainSubstring(testPassword), "errors never carry secrets")
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Candidates).To(HaveLen(1))
			g.Expect(res.Candidates[0].Digest).To(Equal(digest))
		})
	}
}

func TestSchemeFor(t *testing.T) {
	tests := []struct {
		host     string
		insecure bool
		want     string
	}{
		{"127.0.0.1:5000", false, "http"},
		{"127.3.2.1", false, "http"},
		{"localhost:5000", false, "http"},
		{"LOCALHOST", false, "http"},
		{"[::1]:5000", false, "http"},
		{"::1", false, "http"},
		{"10.0.0.5:5000", false, "https"},
		{"192.168.1.10", false, "https"},
		{"registry.local", false, "https"},
		{"registry.example", false, "https"},
		{"localhost.example.com", false, "https"},
		{"registry.example", true, "http"},
		{"10.0.0.5:5000", true, "http"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s insecure=%v", tt.host, tt.insecure), func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(SchemeFor(tt.host, tt.insecure)).To(Equal(tt.want))
		})
	}
}

// recordingTransport records request URLs and fails every request, so no traffic leaves the process.
type recordingTransport struct {
	mu   sync.Mutex
	urls []string
}

func (r *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.urls = append(r.urls, req.URL.Scheme+"://"+req.URL.Host)
	return nil, errors.New("recording transport: no network in tests")
}

func TestListRefusesPlainHTTPToNonLoopbackHosts(t *testing.T) {
	tests := []struct {
		name       string
		repository string
		insecure   bool
		wantHTTP   bool
	}{
		// go-containerregistry alone would use plain HTTP for private addresses.
		{"private address gets https only", "10.1.2.3:5000/app", false, false},
		{"public name gets https only", "registry.example/app", false, false},
		{"insecure allows http", "10.1.2.3:5000/app", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			rt := &recordingTransport{}
			_, err := (&Lister{Transport: rt}).List(t.Context(), Request{Repository: tt.repository, Insecure: tt.insecure})
			g.Expect(errors.Is(err, ociclient.ErrUnreachable)).To(BeTrue(), "got %v", err)
			rt.mu.Lock()
			defer rt.mu.Unlock()
			g.Expect(rt.urls).NotTo(BeEmpty())
			usedHTTP := slices.ContainsFunc(rt.urls, func(u string) bool { return strings.HasPrefix(u, "http://") })
			g.Expect(usedHTTP).To(Equal(tt.wantHTTP), "requests: %v", rt.urls)
		})
	}
}

func TestEligibleOrderIsStable(t *testing.T) {
	g := NewWithT(t)
	s, err := newSelector(Request{Semver: "1.x"})
	g.Expect(err).NotTo(HaveOccurred())
	got := s.eligible([]string{"1.0.0", "v1.0.0", "1.1.0"})
	tags := make([]string, 0, len(got))
	for _, c := range got {
		tags = append(tags, c.Tag)
	}
	g.Expect(tags).To(Equal([]string{"1.1.0", "v1.0.0", "1.0.0"}))
	g.Expect(slices.IsSortedFunc(got, newestFirst)).To(BeTrue())
}

func BenchmarkList1000Tags(b *testing.B) {
	reg := newTestRegistry(b, nil)
	repo := reg.repo("team/big")
	tags := make([]string, 1000)
	for i := range tags {
		tags[i] = fmt.Sprintf("v1.%d.%d", i/10, i%10)
	}
	reg.push(b, repo, tags...)
	l := &Lister{}
	req := Request{Repository: repo, Semver: ">=1.0.0"}
	b.ResetTimer()
	for b.Loop() {
		res, err := l.List(b.Context(), req)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Candidates) != DefaultLimit {
			b.Fatalf("got %d candidates", len(res.Candidates))
		}
	}
}
