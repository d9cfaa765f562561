// Package api is Stagecoach's HTTP API for the Argo CD UI extension (/api/v1, JSON). Requests
// come through Argo CD's proxy extension: a shared secret proves that, Argo CD's user headers say
// who asks, and actions are taken as that user (impersonation) so that Kubernetes RBAC and the
// admission policies decide. The contract, shared with ui-extension/, is in contract.md beside this file.
package api

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Defaults of Options.
const (
	DefaultMaxBody = 64 << 10
	DefaultTimeout = 30 * time.Second
	// MinTokenLength is the shortest proxy token New accepts.
	MinTokenLength = 16
)

// Options configure the API.
type Options struct {
	// Reader reads Stages and Promotions for pipelines (the controller's cached client).
	Reader client.Reader
	// Config is the controller's; actions impersonate the Argo CD user with a copy of it.
	Config *rest.Config
	// Scheme knows the Stagecoach kinds.
	Scheme *runtime.Scheme
	// Mapper is shared by the impersonating clients; one is built from Config when nil.
	Mapper meta.RESTMapper
	// ProxyToken is the secret Argo CD's proxy extension sends as "Authorization: Bearer <token>"
	// (argocd-secret key stagecoach.proxy.token). Required.
	ProxyToken string
	// MaxBody bounds a request body (DefaultMaxBody when 0); Timeout one request (DefaultTimeout when 0).
	MaxBody int64
	Timeout time.Duration
	Log     logr.Logger
	// Clock is the time pipelines are explained at; the real clock when nil.
	Clock clock.PassiveClock
}

// Server serves the API. New builds it; Handler is its http.Handler.
type Server struct {
	opts Options
	mux  *http.ServeMux
}

// New checks the options and builds the API. It is the stable entry point with Handler.
func New(opts Options) (*Server, error) {
	// argocd-secret's value carries the scheme ("Bearer <token>"); a token file may too.
	opts.ProxyToken = strings.TrimSpace(opts.ProxyToken)
	if after, ok := strings.CutPrefix(opts.ProxyToken, "Bearer"); ok && (after == "" || after[0] == ' ') {
		opts.ProxyToken = strings.TrimSpace(after)
	}
	if opts.ProxyToken == "" {
		return nil, errors.New("the API needs a proxy token (--api-proxy-token-file): without one anyone could claim to be any Argo CD user")
	}
	// The manifests ship a placeholder; a guessable token is as good as none.
	if opts.ProxyToken == "CHANGE-ME" || len(opts.ProxyToken) < MinTokenLength {
		return nil, fmt.Errorf("the API's proxy token is the placeholder or shorter than %d characters: set a long random one (openssl rand -hex 32) in argocd-secret and the API's token file", MinTokenLength)
	}
	if opts.Reader == nil || opts.Config == nil || opts.Scheme == nil {
		return nil, errors.New("the API needs a Reader, a rest.Config and a Scheme")
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Mapper == nil {
		httpClient, err := rest.HTTPClientFor(opts.Config)
		if err != nil {
			return nil, fmt.Errorf("failed to build an HTTP client for the API server: %w", err)
		}
		if opts.Mapper, err = apiutil.NewDynamicRESTMapper(opts.Config, httpClient); err != nil {
			return nil, fmt.Errorf("failed to build a REST mapper: %w", err)
		}
	}
	s := &Server{opts: opts, mux: http.NewServeMux()}
	s.route("GET", "/api/v1/whoami", s.whoami)
	s.route("GET", "/api/v1/apps/{namespace}/{name}/pipeline", s.appPipeline)
	s.route("GET", "/api/v1/pipelines/{service}", s.servicePipeline)
	for action, do := range map[string]actionFunc{"promote": s.promote, "rollback": s.rollback, "approve": s.approve,
		"freeze": s.freeze, "unfreeze": s.unfreeze} {
		s.route("POST", "/api/v1/stages/{namespace}/{name}/"+action, s.action(do))
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &Error{Code: http.StatusNotFound, Reason: "NotFound", Message: fmt.Sprintf("no such API route: %s %s", r.Method, r.URL.Path)})
	})
	return s, nil
}

// Handler returns the API's handler: authenticate, bound, then route.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if !s.authentic(r) {
			writeError(w, &Error{Code: http.StatusUnauthorized, Reason: "Unauthorized",
				Message: "missing or wrong proxy token: requests must come through Argo CD's proxy extension, configured with the argocd-secret key stagecoach.proxy.token"})
			return
		}
		if r.ContentLength > s.opts.MaxBody {
			writeError(w, tooLarge(s.opts.MaxBody))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBody)
		ctx, cancel := context.WithTimeout(r.Context(), s.opts.Timeout)
		defer cancel()
		s.mux.ServeHTTP(w, r.WithContext(ctx))
	})
}

// authentic compares the Authorization header with the proxy token in constant time.
func (s *Server) authentic(r *http.Request) bool {
	got := []byte(r.Header.Get("Authorization"))
	want := []byte("Bearer " + s.opts.ProxyToken)
	return subtle.ConstantTimeCompare(got, want) == 1
}

// handler serves one route for a caller.
type handler func(w http.ResponseWriter, r *http.Request, who Viewer) error

// route registers a handler for one method; other methods get a JSON 405.
func (s *Server) route(method, pattern string, h handler) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method {
			w.Header().Set("Allow", method)
			writeError(w, &Error{Code: http.StatusMethodNotAllowed, Reason: "MethodNotAllowed",
				Message: fmt.Sprintf("%s takes %s, not %s", r.URL.Path, method, r.Method)})
			return
		}
		who, err := viewer(r)
		if err == nil {
			err = h(w, r, who)
		}
		if err != nil {
			e := toError(r.Context(), err)
			if e.Code >= 500 {
				s.opts.Log.Error(err, "API request failed", "method", r.Method, "path", r.URL.Path, "user", who.User)
			}
			writeError(w, e)
		}
	})
}

// Viewer is who asks, from Argo CD's headers.
type Viewer struct {
	User     string   `json:"user"`
	Groups   []string `json:"groups"`
	ReadOnly bool     `json:"readOnly"`
}

// viewer reads Argocd-Username and Argocd-User-Groups. An empty user is anonymous and may only
// read. Names Kubernetes reserves (system:) are refused: an identity provider's user or group
// named system:masters must not become one through impersonation.
func viewer(r *http.Request) (Viewer, error) {
	v := Viewer{User: strings.TrimSpace(r.Header.Get("Argocd-Username")), Groups: []string{}}
	for _, g := range strings.Split(r.Header.Get("Argocd-User-Groups"), ",") {
		if g = strings.TrimSpace(g); g != "" {
			v.Groups = append(v.Groups, g)
		}
	}
	if v.User == "" {
		return Viewer{Groups: []string{}, ReadOnly: true}, nil
	}
	for _, name := range append([]string{v.User}, v.Groups...) {
		if strings.HasPrefix(name, "system:") {
			return Viewer{Groups: []string{}, ReadOnly: true}, &Error{Code: http.StatusForbidden, Reason: "Forbidden",
				Message: fmt.Sprintf("the Argo CD user or group %q uses the prefix system:, which Kubernetes reserves: Stagecoach does not act as it", name)}
		}
	}
	return v, nil
}

func (s *Server) whoami(w http.ResponseWriter, _ *http.Request, who Viewer) error {
	writeJSON(w, http.StatusOK, who)
	return nil
}
