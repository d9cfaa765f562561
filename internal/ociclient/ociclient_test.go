package ociclient

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	. "github.com/onsi/gomega"
)

func TestKeychainFromDockerConfig(t *testing.T) {
	tests := []struct {
		name     string
		config   string
		resolve  string
		wantUser string
		wantPass string
		wantAnon bool
		wantErr  string
	}{
		{name: "auth field", config: `{"auths":{"reg.example":{"auth":"dXNlcjpwYTpzcw=="}}}`, resolve: "reg.example", wantUser: "user", wantPass: "pa:ss"},
		{name: "username and password", config: `{"auths":{"reg.example:5000":{"username":"u","password":"p"}}}`, resolve: "reg.example:5000", wantUser: "u", wantPass: "p"},
		{name: "host given as URL", config: `{"auths":{"https://Reg.Example/v2/":{"username":"u","password":"p"}}}`, resolve: "reg.example", wantUser: "u", wantPass: "p"},
		{name: "docker hub aliases", config: `{"auths":{"https://index.docker.io/v1/":{"username":"u","password":"p"}}}`, resolve: "docker.io", wantUser: "u", wantPass: "p"},
		{name: "legacy dockercfg", config: `{"reg.example":{"username":"u","password":"p"}}`, resolve: "reg.example", wantUser: "u", wantPass: "p"},
		{name: "other host is anonymous", config: `{"auths":{"reg.example":{"username":"u","password":"p"}}}`, resolve: "other.example", wantAnon: true},
		{name: "invalid JSON", config: `{"auths":`, wantErr: "docker-config JSON is not valid"},
		{name: "auth not base64", config: `{"auths":{"reg.example":{"auth":"%%%"}}}`, wantErr: "auths.reg.example.auth is not base64"},
		{name: "auth without colon", config: `{"auths":{"reg.example":{"auth":"dXNlcg=="}}}`, wantErr: `must encode "username:password"`},
		{name: "empty entry", config: `{"auths":{"reg.example":{}}}`, wantErr: "auths.reg.example has no auth"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			kc, err := KeychainFromDockerConfig([]byte(tt.config))
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			reg, err := name.NewRegistry(tt.resolve)
			g.Expect(err).NotTo(HaveOccurred())
			a, err := kc.Resolve(reg)
			g.Expect(err).NotTo(HaveOccurred())
			if tt.wantAnon {
				g.Expect(a).To(Equal(authn.Anonymous))
				return
			}
			cfg, err := a.Authorization()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cfg.Username).To(Equal(tt.wantUser))
			g.Expect(cfg.Password).To(Equal(tt.wantPass))
		})
	}
}

func TestClassifyError(t *testing.T) {
	const repo = "reg.example/team/app"
	tests := []struct {
		name     string
		err      error
		sentinel error
		infra    bool
		notFound bool
		contains string
	}{
		{name: "401", err: &transport.Error{StatusCode: http.StatusUnauthorized}, sentinel: ErrUnauthorized, infra: true, contains: "secretRef"},
		{name: "403", err: &transport.Error{StatusCode: http.StatusForbidden}, sentinel: ErrUnauthorized, infra: true, contains: `credentials for "reg.example"`},
		{name: "404", err: &transport.Error{StatusCode: http.StatusNotFound}, sentinel: ErrNotFound, notFound: true, contains: "does not exist"},
		{name: "NAME_UNKNOWN", err: &transport.Error{StatusCode: http.StatusBadRequest, Errors: []transport.Diagnostic{{Code: transport.NameUnknownErrorCode}}}, sentinel: ErrNotFound, notFound: true},
		{name: "503", err: &transport.Error{StatusCode: http.StatusServiceUnavailable}, sentinel: ErrUnreachable, infra: true, contains: "HTTP 503"},
		{name: "connection refused", err: &url.Error{Op: "Get", URL: "https://reg.example/v2/", Err: errors.New("connection refused")}, sentinel: ErrUnreachable, infra: true, contains: "cannot reach registry"},
		{name: "other", err: errors.New("boom"), contains: "failed: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := ClassifyError(repo, tt.err)
			g.Expect(got.Error()).To(ContainSubstring(repo))
			g.Expect(errors.Is(got, tt.err)).To(BeTrue(), "cause stays reachable")
			if tt.sentinel != nil {
				g.Expect(errors.Is(got, tt.sentinel)).To(BeTrue())
			}
			g.Expect(got.Error()).To(ContainSubstring(tt.contains))
			g.Expect(IsInfrastructure(got)).To(Equal(tt.infra))
			g.Expect(IsNotFound(got)).To(Equal(tt.notFound))
		})
	}
	t.Run("nil stays nil", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(ClassifyError(repo, nil)).To(Succeed())
	})
}

type captureTransport struct{ last *http.Request }

func (c *captureTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.last = req
	return nil, fmt.Errorf("captured")
}

func TestTransportUpgradesPlainHTTP(t *testing.T) {
	tests := []struct {
		url      string
		insecure bool
		want     string
	}{
		{"http://10.0.0.1:5000/v2/", false, "https"},
		{"http://registry.local/v2/", false, "https"},
		{"http://127.0.0.1:5000/v2/", false, "http"},
		{"http://localhost:5000/v2/", false, "http"},
		{"http://10.0.0.1:5000/v2/", true, "http"},
		{"https://registry.example/v2/", false, "https"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s insecure=%v", tt.url, tt.insecure), func(t *testing.T) {
			g := NewWithT(t)
			c := &captureTransport{}
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, tt.url, nil)
			g.Expect(err).NotTo(HaveOccurred())
			_, _ = Transport(c, tt.insecure).RoundTrip(req)
			g.Expect(c.last.URL.Scheme).To(Equal(tt.want))
			orig, err := url.Parse(tt.url)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(req.URL.Scheme).To(Equal(orig.Scheme), "caller's request is not mutated")
		})
	}
}
