// Package ociclient holds what every Stagecoach registry client shares: credentials from a
// docker-config Secret, the plain-HTTP policy (loopback or explicit insecure only), remote
// options for go-containerregistry, and errors that say what to fix.
package ociclient

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// UserAgent identifies Stagecoach to registries.
const userAgent = "stagecoach"

// Sentinel errors; every error from ClassifyError wraps one of them and the cause.
var (
	// ErrUnauthorized: the registry answered 401 or 403.
	ErrUnauthorized = errors.New("registry denied access")
	// ErrNotFound: the repository, tag or manifest does not exist.
	ErrNotFound = errors.New("not found in registry")
	// ErrUnreachable: the registry could not be reached or failed (network, TLS, 5xx, 429).
	ErrUnreachable = errors.New("registry unreachable")
)

// Options say how to reach one registry.
type Options struct {
	// Keychain supplies credentials; nil means anonymous (never the controller's own docker config).
	Keychain authn.Keychain
	// Insecure allows plain HTTP to a registry that is not on loopback.
	Insecure bool
	// Transport is the base round tripper; nil means one with DefaultCallTimeout (NewTransport).
	Transport http.RoundTripper
	// Extra options appended last (retry tuning in tests, for example).
	Extra []remote.Option
}

// NameOptions are the name.Options for parsing references: name.Insecure only when insecure.
func NameOptions(insecure bool) []name.Option {
	if insecure {
		return []name.Option{name.Insecure}
	}
	return nil
}

// RemoteOptions builds go-containerregistry options that enforce the scheme policy.
func RemoteOptions(ctx context.Context, o Options) []remote.Option {
	kc := o.Keychain
	if kc == nil {
		kc = anonymousKeychain{}
	}
	opts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(kc),
		remote.WithTransport(Transport(o.Transport, o.Insecure)),
		remote.WithUserAgent(userAgent),
	}
	return append(opts, o.Extra...)
}

type anonymousKeychain struct{}

func (anonymousKeychain) Resolve(authn.Resource) (authn.Authenticator, error) {
	return authn.Anonymous, nil
}

// SchemeFor decides the scheme for a registry host ("host", "host:port", "[::1]:port"):
// plain HTTP only for loopback (localhost, 127.0.0.0/8, ::1) or when insecure is set.
// go-containerregistry on its own also speaks HTTP to private (RFC 1918) and ".local" hosts;
// Transport upgrades those requests to HTTPS.
func SchemeFor(host string, insecure bool) string {
	if insecure || IsLoopback(host) {
		return "http"
	}
	return "https"
}

// IsLoopback reports whether a registry host (with or without port) is on loopback.
func IsLoopback(host string) bool {
	h := host
	if sh, _, err := net.SplitHostPort(host); err == nil {
		h = sh
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// Transport wraps base so that a plain-HTTP request is sent over HTTPS unless SchemeFor allows HTTP.
func Transport(base http.RoundTripper, insecure bool) http.RoundTripper {
	if base == nil {
		base = defaultTransport
	}
	return &schemeTransport{base: base, insecure: insecure}
}

type schemeTransport struct {
	base     http.RoundTripper
	insecure bool
}

func (t *schemeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && SchemeFor(req.URL.Host, t.insecure) == "https" {
		upgraded := req.Clone(req.Context())
		upgraded.URL.Scheme = "https"
		return t.base.RoundTrip(upgraded)
	}
	return t.base.RoundTrip(req)
}

// ClassifyError wraps err from a registry call on repository with one of the sentinel errors and
// a message that says what to fix. It returns nil for nil and leaves context errors recognisable.
func ClassifyError(repository string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("registry request for repository %q stopped: %w", repository, err)
	}
	host := registryHost(repository)
	if errors.Is(err, context.DeadlineExceeded) {
		// A registry that accepts connections and does not answer in time is as good as down.
		return fmt.Errorf("%w: registry %q did not answer in time for repository %q: %w", ErrUnreachable, host, repository, err)
	}
	var terr *transport.Error
	if errors.As(err, &terr) {
		switch {
		case terr.StatusCode == http.StatusUnauthorized || terr.StatusCode == http.StatusForbidden:
			return fmt.Errorf("%w: repository %q answered HTTP %d; point secretRef at a docker-config Secret "+
				"with credentials for %q (auths.%s.auth or username/password) and check they may pull: %w",
				ErrUnauthorized, repository, terr.StatusCode, host, host, err)
		case terr.StatusCode == http.StatusNotFound || hasCode(terr, transport.NameUnknownErrorCode, transport.ManifestUnknownErrorCode):
			return fmt.Errorf("%w: repository %q (or the requested manifest) does not exist; check the repository name: %w",
				ErrNotFound, repository, err)
		case terr.StatusCode >= 500 || terr.StatusCode == http.StatusTooManyRequests:
			return fmt.Errorf("%w: registry %q failed with HTTP %d for repository %q: %w",
				ErrUnreachable, host, terr.StatusCode, repository, err)
		}
		return fmt.Errorf("registry %q rejected a request for repository %q (HTTP %d): %w", host, repository, terr.StatusCode, err)
	}
	var uerr *url.Error
	var nerr net.Error
	if errors.As(err, &uerr) || errors.As(err, &nerr) {
		return fmt.Errorf("%w: cannot reach registry %q for repository %q (is it running, and is the scheme right? "+
			"plain HTTP needs a loopback host or insecure: true): %w", ErrUnreachable, host, repository, err)
	}
	return fmt.Errorf("registry request for repository %q failed: %w", repository, err)
}

// IsInfrastructure reports whether err means "could not check" (network, auth, server trouble)
// rather than a definite answer about content.
func IsInfrastructure(err error) bool {
	if IsNotFound(err) {
		return false
	}
	if errors.Is(err, ErrUnreachable) || errors.Is(err, ErrUnauthorized) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var terr *transport.Error
	if errors.As(err, &terr) {
		return true
	}
	var uerr *url.Error
	var nerr net.Error
	return errors.As(err, &uerr) || errors.As(err, &nerr)
}

// IsNotFound reports whether err is a registry 404 (or NAME_UNKNOWN / MANIFEST_UNKNOWN).
func IsNotFound(err error) bool {
	if errors.Is(err, ErrNotFound) {
		return true
	}
	var terr *transport.Error
	return errors.As(err, &terr) &&
		(terr.StatusCode == http.StatusNotFound || hasCode(terr, transport.NameUnknownErrorCode, transport.ManifestUnknownErrorCode))
}

func hasCode(terr *transport.Error, codes ...transport.ErrorCode) bool {
	for _, d := range terr.Errors {
		for _, c := range codes {
			if d.Code == c {
				return true
			}
		}
	}
	return false
}

func registryHost(repository string) string {
	if r, err := name.NewRepository(repository, name.WeakValidation); err == nil {
		return r.RegistryStr()
	}
	host, _, _ := strings.Cut(repository, "/")
	return host
}

// KeychainFromDockerConfig builds a keychain from docker-config JSON (the .dockerconfigjson of a
// kubernetes.io/dockerconfigjson Secret, or the older .dockercfg map). Each entry may carry
// "auth" (base64 of user:password), "username"/"password", "identitytoken" or "registrytoken".
// Hosts without an entry get anonymous access. Errors name the host but never the credentials.
func KeychainFromDockerConfig(data []byte) (authn.Keychain, error) {
	var cfg struct {
		Auths map[string]dockerAuth `json:"auths"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("docker-config JSON is not valid: %w", err)
	}
	entries := cfg.Auths
	if entries == nil {
		// The legacy .dockercfg format is the auths map itself.
		if err := json.Unmarshal(data, &entries); err != nil {
			return nil, fmt.Errorf("docker-config JSON has no \"auths\" map: %w", err)
		}
	}
	kc := dockerKeychain{}
	for host, e := range entries {
		cfg, err := e.authConfig(host)
		if err != nil {
			return nil, err
		}
		kc[normalizeHost(host)] = cfg
	}
	return kc, nil
}

type dockerAuth struct {
	Auth          string `json:"auth"`
	Username      string `json:"username"`
	Password      string `json:"password"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

func (e dockerAuth) authConfig(host string) (authn.AuthConfig, error) {
	cfg := authn.AuthConfig{
		Username:      e.Username,
		Password:      e.Password,
		IdentityToken: e.IdentityToken,
		RegistryToken: e.RegistryToken,
	}
	if e.Auth != "" {
		raw, err := base64.StdEncoding.DecodeString(e.Auth)
		if err != nil {
			return authn.AuthConfig{}, fmt.Errorf("docker-config entry auths.%s.auth is not base64: %w", host, err)
		}
		user, pass, ok := strings.Cut(string(raw), ":")
		if !ok {
			return authn.AuthConfig{}, fmt.Errorf("docker-config entry auths.%s.auth must encode \"username:password\"", host)
		}
		cfg.Username, cfg.Password = user, pass
	}
	if cfg == (authn.AuthConfig{}) {
		return authn.AuthConfig{}, fmt.Errorf("docker-config entry auths.%s has no auth, username/password or token", host)
	}
	return cfg, nil
}

// normalizeHost turns "https://registry.example/v1/" into "registry.example".
func normalizeHost(host string) string {
	h := host
	if i := strings.Index(h, "://"); i >= 0 {
		h = h[i+3:]
	}
	h, _, _ = strings.Cut(h, "/")
	h = strings.ToLower(h)
	if h == "docker.io" || h == "registry-1.docker.io" {
		return name.DefaultRegistry
	}
	return h
}

type dockerKeychain map[string]authn.AuthConfig

func (k dockerKeychain) Resolve(target authn.Resource) (authn.Authenticator, error) {
	if cfg, ok := k[normalizeHost(target.RegistryStr())]; ok {
		return authn.FromConfig(cfg), nil
	}
	return authn.Anonymous, nil
}
