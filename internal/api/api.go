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
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
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
	// TrustGroupsHeader takes the user's groups from Argocd-User-Groups. Argo CD sets that header
	// only for a user who has groups and forwards a header the caller sent otherwise, so a user
	// without groups could name any group: turn this on only where Argo CD lets no session without
	// groups invoke the extension (contract.md, "Who the API acts as"). Off, the API acts as the
	// user alone and Kubernetes RBAC must bind users.
	TrustGroupsHeader bool
}

// Server serves the API. New builds it; Handler is its http.Handler.
type Server struct {
	opts    Options
	mux     *http.ServeMux
	reviews authorizationv1client.SubjectAccessReviewInterface
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
	reviews, err := authorizationv1client.NewForConfig(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("failed to build a client for SubjectAccessReviews: %w", err)
	}
	s := &Server{opts: opts, mux: http.NewServeMux(), reviews: reviews.SubjectAccessReviews()}
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
		who, err := viewer(r, s.opts.TrustGroupsHeader)
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

// Viewer is who asks, as Argo CD vouches for them.
type Viewer struct {
	User     string   `json:"user"`
	Groups   []string `json:"groups"`
	ReadOnly bool     `json:"readOnly"`
}

// The headers Argo CD's proxy extension sets (server/extension/extension.go, prepareRequest).
// It sets each only when it has a value, and forwards whatever the caller sent otherwise.
const (
	headerUsername = "Argocd-Username"
	headerUserID   = "Argocd-User-Id"
	headerGroups   = "Argocd-User-Groups"
)

// viewer reads who asks from Argo CD's headers, taking only what Argo CD vouches for:
//   - a logged-in session always has both a user id and a user name (Argo CD's user name falls
//     back to the id), so Argo CD sets both: one without the other was not set by Argo CD and
//     is refused; neither is an anonymous session, which may only read;
//   - groups are taken only with trustGroups: Argo CD sets Argocd-User-Groups only for a user
//     who has groups, so a user without any could send her own;
//   - names Kubernetes reserves (system:) are refused: an identity provider's user or group named
//     system:masters must not become one through impersonation.
func viewer(r *http.Request, trustGroups bool) (Viewer, error) {
	anonymous := Viewer{Groups: []string{}, ReadOnly: true}
	user, id := strings.TrimSpace(r.Header.Get(headerUsername)), strings.TrimSpace(r.Header.Get(headerUserID))
	switch {
	case user == "" && id == "":
		return anonymous, nil
	case user == "" || id == "":
		return anonymous, &Error{Code: http.StatusForbidden, Reason: "Forbidden",
			Message: fmt.Sprintf("the request names a user in only one of %s and %s: Argo CD sets both for every logged-in session, so this one was not forwarded as Argo CD forwards it",
				headerUsername, headerUserID)}
	}
	v := Viewer{User: user, Groups: []string{}}
	if trustGroups {
		for _, g := range strings.Split(r.Header.Get(headerGroups), ",") {
			if g = strings.TrimSpace(g); g != "" {
				v.Groups = append(v.Groups, g)
			}
		}
	}
	for _, name := range append([]string{v.User}, v.Groups...) {
		if strings.HasPrefix(name, "system:") {
			return anonymous, &Error{Code: http.StatusForbidden, Reason: "Forbidden",
				Message: fmt.Sprintf("the Argo CD user or group %q uses the prefix system:, which Kubernetes reserves: Stagecoach does not act as it", name)}
		}
	}
	return v, nil
}

func (s *Server) whoami(w http.ResponseWriter, _ *http.Request, who Viewer) error {
	writeJSON(w, http.StatusOK, who)
	return nil
}
