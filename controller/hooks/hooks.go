// Package hooks receives the engines' notifications (Flux's generic-hmac provider, Argo CD's
// notifications webhook): it authenticates them, bounds them, and wakes the Stages an event
// names through the functions it is given. It decides nothing and imports no reconciler.
package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// MaxBody is the largest hook payload accepted; Flux events are a few KiB.
const MaxBody = 64 << 10

// DefaultMaxRequests bounds the requests the hooks serve at once; more are answered 503.
const DefaultMaxRequests = 32

// DefaultMaxRequestsPerSource bounds the requests one source has in flight at once; more are
// answered 429, so that one slow or hostile client cannot hold every slot of
// DefaultMaxRequests. Engines send an event in milliseconds: a few at once is plenty.
const DefaultMaxRequestsPerSource = 4

// DefaultRequestTimeout bounds the whole of a hook request, headers and body (the server's
// read timeout, see Receiver.ConfigureServer): a client that sends slowly holds its slot no longer.
// Engines send a few KiB at once.
const DefaultRequestTimeout = 10 * time.Second

// Event is what a hook payload tells: which object the engine reported on. The decision is
// always made again from the objects themselves; the payload only says whom to wake.
type Event struct {
	Group, Kind, Namespace, Name string
}

// fluxEvent is the part of a Flux notification-controller event (fluxcd/pkg/apis/event) a hook reads.
type fluxEvent struct {
	InvolvedObject struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Namespace  string `json:"namespace"`
		Name       string `json:"name"`
	} `json:"involvedObject"`
	Reason string `json:"reason"`
}

// DecodeFluxEvent reads a Flux event and names the object it is about.
func DecodeFluxEvent(body []byte) (Event, error) {
	var e fluxEvent
	if err := json.Unmarshal(body, &e); err != nil {
		return Event{}, fmt.Errorf("not a Flux event: %w", err)
	}
	o := e.InvolvedObject
	if o.Kind == "" || o.Name == "" || o.Namespace == "" {
		return Event{}, errors.New("not a Flux event: involvedObject needs kind, name and namespace")
	}
	gv, err := schema.ParseGroupVersion(o.APIVersion)
	if err != nil {
		return Event{}, fmt.Errorf("not a Flux event: involvedObject.apiVersion %q: %w", o.APIVersion, err)
	}
	return Event{Group: gv.Group, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name}, nil
}

// argoCDEvent is the body of the webhook template in manifests/argocd/notifications.
type argoCDEvent struct {
	App       string `json:"app"`
	Namespace string `json:"namespace"`
}

// DecodeArgoCDEvent reads an Argo CD notification and names the Application it is about.
func DecodeArgoCDEvent(body []byte) (Event, error) {
	var e argoCDEvent
	if err := json.Unmarshal(body, &e); err != nil {
		return Event{}, fmt.Errorf("not a Stagecoach Argo CD notification: %w", err)
	}
	if e.App == "" || e.Namespace == "" {
		return Event{}, errors.New("not a Stagecoach Argo CD notification: app and namespace are required")
	}
	return Event{Group: "argoproj.io", Kind: "Application", Namespace: e.Namespace, Name: e.App}, nil
}

// SecretReader returns a secret value (a hook token); implementations cache it.
type SecretReader func(ctx context.Context) ([]byte, error)

// Receiver serves /hooks/flux and /hooks/argocd. A verified event wakes the Stages that apply
// through the object it names; nothing else happens on the request path.
type Receiver struct {
	FluxToken   SecretReader // HMAC key of the generic-hmac Provider; nil disables /hooks/flux
	ArgoCDToken SecretReader // bearer token of the notifications webhook; nil disables /hooks/argocd
	// Lookup finds the Stages whose applier is the object.
	Lookup func(ctx context.Context, e Event) []reconcile.Request
	// Wake enqueues Stages.
	Wake func(reqs []reconcile.Request)
	// MaxInFlight bounds concurrent requests (DefaultMaxRequests when 0).
	MaxInFlight int
	// MaxInFlightPerSource bounds the concurrent requests of one source
	// (DefaultMaxRequestsPerSource when 0). A source is the TCP peer's address (an IPv6
	// peer's /64), never a header such as X-Forwarded-For that the client writes: behind a
	// proxy every request comes from the proxy, and shares its bound.
	MaxInFlightPerSource int
	// RequestTimeout bounds reading a whole request, headers and body
	// (DefaultRequestTimeout when 0); ConfigureServer sets it on the server.
	RequestTimeout time.Duration
	// Leading reports whether this replica runs the Stage controller and so can act on a hook;
	// nil means always. Every replica serves the hooks, a replica not leading answers 503 so that
	// the sender's retry reaches another one.
	Leading func() bool

	inFlight chan struct{}
	sources  *sourceLimit
}

// ConfigureServer makes the server that serves Handler read each request, headers and body,
// within RequestTimeout: past it the connection is cut and a handler reading the body answers 408.
func (h *Receiver) ConfigureServer(s *http.Server) {
	d := h.requestTimeout()
	s.ReadTimeout = d
	if s.ReadHeaderTimeout <= 0 || s.ReadHeaderTimeout > d {
		s.ReadHeaderTimeout = d
	}
}

// Handler returns the hooks' HTTP handler.
func (h *Receiver) Handler() http.Handler {
	n := h.MaxInFlight
	if n <= 0 {
		n = DefaultMaxRequests
	}
	h.inFlight = make(chan struct{}, n)
	perSource := h.MaxInFlightPerSource
	if perSource <= 0 {
		perSource = DefaultMaxRequestsPerSource
	}
	h.sources = &sourceLimit{max: perSource, held: map[string]int{}}
	mux := http.NewServeMux()
	if h.FluxToken != nil {
		mux.HandleFunc("/hooks/flux", h.serve(h.checkFluxHeader, h.verifyFlux, DecodeFluxEvent))
	}
	if h.ArgoCDToken != nil {
		mux.HandleFunc("/hooks/argocd", h.serve(h.verifyArgoCD, nil, DecodeArgoCDEvent))
	}
	return mux
}

// headerCheck authenticates what it can from the headers alone, before the body is read.
type headerCheck func(r *http.Request) (ok bool, status int, msg string)

// bodyCheck authenticates the body (Flux signs it).
type bodyCheck func(r *http.Request, body []byte) (ok bool, status int, msg string)

// serve bounds, authenticates, then reads: a request that is not from the engine costs no more
// than its headers (and, for Flux, whose signature covers the body, at most MaxBody).
func (h *Receiver) serve(headers headerCheck, body bodyCheck, decode func([]byte) (Event, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			refuse(w, "use POST", http.StatusMethodNotAllowed)
			return
		}
		// The source's bound first: a source past it takes none of the shared slots.
		source := sourceOf(r.RemoteAddr)
		if !h.sources.acquire(source) {
			w.Header().Set("Retry-After", "1")
			refuse(w, fmt.Sprintf("too many hook requests from %s at once (at most %d); retry", source, h.sources.max),
				http.StatusTooManyRequests)
			return
		}
		defer h.sources.release(source)
		select {
		case h.inFlight <- struct{}{}:
			defer func() { <-h.inFlight }()
		default:
			w.Header().Set("Retry-After", "1")
			refuse(w, "too many hook requests at once; retry", http.StatusServiceUnavailable)
			return
		}
		if h.Leading != nil && !h.Leading() {
			w.Header().Set("Retry-After", "1")
			refuse(w, "this replica is not the leader and does not act on hooks; retry", http.StatusServiceUnavailable)
			return
		}
		if r.ContentLength > MaxBody {
			refuse(w, fmt.Sprintf("body over %d bytes", MaxBody), http.StatusRequestEntityTooLarge)
			return
		}
		if ok, status, msg := headers(r); !ok {
			refuse(w, msg, status)
			return
		}
		payload, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				http.Error(w, fmt.Sprintf("body over %d bytes", MaxBody), http.StatusRequestEntityTooLarge)
				return
			}
			var netErr net.Error
			if errors.As(err, &netErr) && netErr.Timeout() {
				// The server's read timeout (ConfigureServer) cut a request sent too slowly.
				refuse(w, fmt.Sprintf("the request was not received within %s; send it at once", h.requestTimeout()),
					http.StatusRequestTimeout)
				return
			}
			http.Error(w, "cannot read body", http.StatusBadRequest)
			return
		}
		if body != nil {
			if ok, status, msg := body(r, payload); !ok {
				http.Error(w, msg, status)
				return
			}
		}
		event, err := decode(payload)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		reqs := h.Lookup(r.Context(), event)
		h.Wake(reqs)
		w.WriteHeader(http.StatusAccepted)
		_, _ = fmt.Fprintf(w, "woke %d Stage(s) applying through %s %s/%s\n", len(reqs), event.Kind, event.Namespace, event.Name)
	}
}

func (h *Receiver) requestTimeout() time.Duration {
	if h.RequestTimeout > 0 {
		return h.RequestTimeout
	}
	return DefaultRequestTimeout
}

// sourceLimit counts the requests in flight per source.
type sourceLimit struct {
	max  int
	mu   sync.Mutex
	held map[string]int
}

func (l *sourceLimit) acquire(source string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[source] >= l.max {
		return false
	}
	l.held[source]++
	return true
}

func (l *sourceLimit) release(source string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[source]--; l.held[source] <= 0 {
		delete(l.held, source) // the map holds only sources with requests in flight
	}
}

// sourceOf is the source a request counts against: the TCP peer's IP address, or its /64 for
// IPv6, where one client commonly holds a whole /64.
func sourceOf(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.WithZone("").Unmap()
	if ip.Is6() {
		return netip.PrefixFrom(ip, 64).Masked().String()
	}
	return ip.String()
}

// refuse answers a request whose body was not read, and closes the connection: otherwise the
// server would first wait for the unread body (to reuse the connection), up to its read timeout,
// so a refused sender would still hold a connection and its goroutine that long.
func refuse(w http.ResponseWriter, msg string, status int) {
	w.Header().Set("Connection", "close")
	http.Error(w, msg, status)
}
