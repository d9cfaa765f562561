package hooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

const fluxBody = `{"involvedObject":{"kind":"Kustomization","namespace":"dev","name":"payments","apiVersion":"kustomize.toolkit.fluxcd.io/v1"},` +
	`"severity":"info","reason":"ReconciliationSucceeded","message":"Reconciliation finished","metadata":{"revision":"latest@sha256:abc"},` +
	`"reportingController":"kustomize-controller"}`

func sign(key, body string) string {
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// recorder stands in for the Stage index and queue: it records what the hooks woke.
type recorder struct {
	mu     sync.Mutex
	looked []Event
	woken  []reconcile.Request
}

func (r *recorder) hooks() *Receiver {
	return &Receiver{
		FluxToken:   func(context.Context) ([]byte, error) { return []byte("flux-key"), nil },
		ArgoCDToken: func(context.Context) ([]byte, error) { return []byte("argo-token"), nil },
		Lookup: func(_ context.Context, e Event) []reconcile.Request {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.looked = append(r.looked, e)
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: e.Namespace, Name: "stage-of-" + e.Name}}}
		},
		Wake: func(reqs []reconcile.Request) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.woken = append(r.woken, reqs...)
		},
	}
}

func TestHooks(t *testing.T) {
	big := strings.Repeat("x", 2<<20)
	justOver := strings.Repeat("x", MaxBody+1)
	cases := []struct {
		name       string
		method     string
		path       string
		body       string
		header     map[string]string
		wantStatus int
		wantWoken  []string
		wantEvent  Event
	}{
		{name: "signed Flux event", path: "/hooks/flux", body: fluxBody, header: map[string]string{"X-Signature": sign("flux-key", fluxBody)},
			wantStatus: http.StatusAccepted, wantWoken: []string{"dev/stage-of-payments"},
			wantEvent: Event{Group: "kustomize.toolkit.fluxcd.io", Kind: "Kustomization", Namespace: "dev", Name: "payments"}},
		{name: "signed with another key", path: "/hooks/flux", body: fluxBody, header: map[string]string{"X-Signature": sign("other", fluxBody)},
			wantStatus: http.StatusUnauthorized},
		{name: "no signature", path: "/hooks/flux", body: fluxBody, wantStatus: http.StatusUnauthorized},
		{name: "signature not hex", path: "/hooks/flux", body: fluxBody, header: map[string]string{"X-Signature": "sha256=zz"}, wantStatus: http.StatusUnauthorized},
		{name: "unknown algorithm", path: "/hooks/flux", body: fluxBody, header: map[string]string{"X-Signature": "md5=00"}, wantStatus: http.StatusUnauthorized},
		{name: "truncated body", path: "/hooks/flux", body: fluxBody[:len(fluxBody)/2], header: map[string]string{"X-Signature": sign("flux-key", fluxBody)},
			wantStatus: http.StatusUnauthorized},
		{name: "2 MiB body", path: "/hooks/flux", body: big, header: map[string]string{"X-Signature": sign("flux-key", big)},
			wantStatus: http.StatusRequestEntityTooLarge},
		{name: "64 KiB and one byte", path: "/hooks/flux", body: justOver, header: map[string]string{"X-Signature": sign("flux-key", justOver)},
			wantStatus: http.StatusRequestEntityTooLarge},
		{name: "Argo CD body over the cap, even unauthenticated", path: "/hooks/argocd", body: justOver, wantStatus: http.StatusRequestEntityTooLarge},
		{name: "signature of the wrong length", path: "/hooks/flux", body: fluxBody, header: map[string]string{"X-Signature": "sha256=00ff"},
			wantStatus: http.StatusUnauthorized},
		{name: "signed but not JSON", path: "/hooks/flux", body: "{not json", header: map[string]string{"X-Signature": sign("flux-key", "{not json")},
			wantStatus: http.StatusBadRequest},
		{name: "signed but names no object", path: "/hooks/flux", body: `{"reason":"x"}`, header: map[string]string{"X-Signature": sign("flux-key", `{"reason":"x"}`)},
			wantStatus: http.StatusBadRequest},
		{name: "GET", method: http.MethodGet, path: "/hooks/flux", wantStatus: http.StatusMethodNotAllowed},
		{name: "Argo CD notification", path: "/hooks/argocd", body: `{"app":"payments","namespace":"prod","phase":"Succeeded"}`,
			header: map[string]string{"Authorization": "Bearer argo-token"}, wantStatus: http.StatusAccepted, wantWoken: []string{"prod/stage-of-payments"},
			wantEvent: Event{Group: "argoproj.io", Kind: "Application", Namespace: "prod", Name: "payments"}},
		{name: "Argo CD wrong token", path: "/hooks/argocd", body: `{"app":"payments","namespace":"prod"}`,
			header: map[string]string{"Authorization": "Bearer guess"}, wantStatus: http.StatusUnauthorized},
		{name: "Argo CD no token", path: "/hooks/argocd", body: `{"app":"payments","namespace":"prod"}`, wantStatus: http.StatusUnauthorized},
		{name: "Argo CD basic auth", path: "/hooks/argocd", body: `{"app":"payments","namespace":"prod"}`,
			header: map[string]string{"Authorization": "Basic YXJnbzp0b2tlbg=="}, wantStatus: http.StatusUnauthorized},
		{name: "Argo CD invalid JSON", path: "/hooks/argocd", body: `[1,2`, header: map[string]string{"Authorization": "Bearer argo-token"},
			wantStatus: http.StatusBadRequest},
		{name: "Argo CD 2 MiB body", path: "/hooks/argocd", body: big, header: map[string]string{"Authorization": "Bearer argo-token"},
			wantStatus: http.StatusRequestEntityTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			rec := &recorder{}
			server := httptest.NewServer(rec.hooks().Handler())
			defer server.Close()
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			req, err := http.NewRequestWithContext(t.Context(), method, server.URL+tc.path, bytes.NewBufferString(tc.body))
			g.Expect(err).NotTo(HaveOccurred())
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := server.Client().Do(req)
			g.Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			g.Expect(resp.StatusCode).To(Equal(tc.wantStatus))
			var woken []string
			for _, r := range rec.woken {
				woken = append(woken, r.String())
			}
			if tc.wantWoken == nil {
				g.Expect(woken).To(BeEmpty(), "a refused request must wake nothing")
				g.Expect(rec.looked).To(BeEmpty())
				return
			}
			g.Expect(woken).To(Equal(tc.wantWoken))
			g.Expect(rec.looked).To(Equal([]Event{tc.wantEvent}))
		})
	}
}

func TestHooksDisabledWithoutSecret(t *testing.T) {
	g := NewWithT(t)
	h := (&recorder{}).hooks()
	h.ArgoCDToken = nil
	server := httptest.NewServer(h.Handler())
	defer server.Close()
	resp, err := server.Client().Post(server.URL+"/hooks/argocd", "application/json", strings.NewReader(`{}`))
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusNotFound))
}

func FuzzDecodeFluxEvent(f *testing.F) {
	f.Add([]byte(fluxBody))
	f.Add([]byte(`{"involvedObject":{"kind":"K","namespace":"n","name":"x","apiVersion":"a/b/c"}}`))
	f.Add([]byte(`{"involvedObject":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		e, err := DecodeFluxEvent(body)
		if err == nil && (e.Kind == "" || e.Name == "" || e.Namespace == "") {
			t.Fatalf("decoded an event that names no object: %+v", e)
		}
	})
}

func FuzzDecodeArgoCDEvent(f *testing.F) {
	f.Add([]byte(`{"app":"payments","namespace":"prod"}`))
	f.Add([]byte(`{"app":1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		e, err := DecodeArgoCDEvent(body)
		if err == nil && (e.Name == "" || e.Namespace == "") {
			t.Fatalf("decoded a notification that names no Application: %+v", e)
		}
	})
}

// countingBody records whether the handler read the body.
type countingBody struct {
	io.Reader
	read bool
}

func (b *countingBody) Read(p []byte) (int, error) { b.read = true; return b.Reader.Read(p) }
func (b *countingBody) Close() error               { return nil }

// A request that fails what the headers can show is refused before its body is read.
func TestHooksAuthenticateBeforeReadingTheBody(t *testing.T) {
	cases := []struct {
		name, path string
		header     map[string]string
		token      func(context.Context) ([]byte, error)
		wantStatus int
	}{
		{name: "Argo CD wrong token", path: "/hooks/argocd", header: map[string]string{"Authorization": "Bearer guess"}, wantStatus: http.StatusUnauthorized},
		{name: "Argo CD no token", path: "/hooks/argocd", wantStatus: http.StatusUnauthorized},
		{name: "Flux no signature", path: "/hooks/flux", wantStatus: http.StatusUnauthorized},
		{name: "Flux malformed signature", path: "/hooks/flux", header: map[string]string{"X-Signature": "sha256=abc"}, wantStatus: http.StatusUnauthorized},
		{name: "Flux secret unreadable", path: "/hooks/flux", header: map[string]string{"X-Signature": sign("flux-key", fluxBody)},
			token: func(context.Context) ([]byte, error) { return nil, errors.New("forbidden") }, wantStatus: http.StatusServiceUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			h := (&recorder{}).hooks()
			if tc.token != nil {
				h.FluxToken = tc.token
			}
			body := &countingBody{Reader: strings.NewReader(fluxBody)}
			req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, tc.path, nil)
			req.Body = body
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.Handler().ServeHTTP(rec, req)
			g.Expect(rec.Code).To(Equal(tc.wantStatus))
			g.Expect(body.read).To(BeFalse(), "the body was read before the request was authenticated")
		})
	}
}

func TestHooksBoundConcurrentRequests(t *testing.T) {
	g := NewWithT(t)
	rec := &recorder{}
	h := rec.hooks()
	h.MaxInFlight = 1
	entered, release := make(chan struct{}), make(chan struct{})
	h.Lookup = func(context.Context, Event) []reconcile.Request {
		close(entered)
		<-release
		return nil
	}
	handler := h.Handler()
	post := func() *httptest.ResponseRecorder {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/hooks/argocd", strings.NewReader(`{"app":"payments","namespace":"prod"}`))
		req.Header.Set("Authorization", "Bearer argo-token")
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, req)
		return w
	}
	first := make(chan int)
	go func() { first <- post().Code }()
	<-entered
	second := post()
	g.Expect(second.Code).To(Equal(http.StatusServiceUnavailable))
	g.Expect(second.Header().Get("Retry-After")).NotTo(BeEmpty())
	close(release)
	g.Expect(<-first).To(Equal(http.StatusAccepted))
	h.Lookup = func(context.Context, Event) []reconcile.Request { return nil }
	g.Expect(post().Code).To(Equal(http.StatusAccepted), "the slot is free again")
}

func TestHooksOnAReplicaNotLeading(t *testing.T) {
	g := NewWithT(t)
	rec := &recorder{}
	h := rec.hooks()
	h.Leading = func() bool { return false }
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/hooks/argocd", strings.NewReader(`{"app":"payments","namespace":"prod"}`))
	req.Header.Set("Authorization", "Bearer argo-token")
	w := httptest.NewRecorder()
	h.Handler().ServeHTTP(w, req)
	g.Expect(w.Code).To(Equal(http.StatusServiceUnavailable))
	g.Expect(w.Body.String()).To(ContainSubstring("not the leader"))
	g.Expect(rec.woken).To(BeEmpty())
}

// failingReader counts reads of a Secret that cannot be read.
type failingReader struct {
	client.Reader
	gets atomic.Int32
}

func (f *failingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	f.gets.Add(1)
	return apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, "hooks")
}

func TestCachedSecretKeyRemembersAFailureBriefly(t *testing.T) {
	g := NewWithT(t)
	reader := &failingReader{}
	token := CachedSecretKey(reader, client.ObjectKey{Namespace: "stagecoach-system", Name: "hooks"}, "token", time.Minute)
	for range 100 {
		_, err := token(t.Context())
		g.Expect(err).To(MatchError(ContainSubstring("failed to read Secret stagecoach-system/hooks")))
	}
	g.Expect(reader.gets.Load()).To(BeEquivalentTo(1), "a flood of requests reads a missing Secret once per %s", SecretFailureTTL)
}

func FuzzParseSignature(f *testing.F) {
	f.Add(sign("flux-key", fluxBody))
	f.Add("sha512=" + strings.Repeat("ab", 64))
	f.Add("sha1=" + strings.Repeat("0", 40))
	f.Add("sha256=")
	f.Add("=")
	f.Add("md5=00")
	f.Add("sha256=zz")
	f.Fuzz(func(t *testing.T, header string) {
		newHash, mac, err := ParseSignature(header)
		if err != nil {
			return
		}
		if newHash == nil || len(mac) != newHash().Size() {
			t.Fatalf("accepted %q with a MAC of %d bytes", header, len(mac))
		}
	})
}

// One source holds at most MaxInFlightPerSource requests (answered 429 beyond it) while another
// source still gets through; X-Forwarded-For, written by the client, does not change the source.
func TestHooksBoundRequestsPerSource(t *testing.T) {
	g := NewWithT(t)
	h := (&recorder{}).hooks()
	h.MaxInFlightPerSource = 1
	entered, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	h.Lookup = func(context.Context, Event) []reconcile.Request {
		if first.CompareAndSwap(false, true) { // the first request is held until released
			close(entered)
			<-release
		}
		return nil
	}
	handler := h.Handler()
	post := func(remote, forwardedFor string) *httptest.ResponseRecorder {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/hooks/argocd", strings.NewReader(`{"app":"payments","namespace":"prod"}`))
		req.RemoteAddr = remote
		req.Header.Set("Authorization", "Bearer argo-token")
		if forwardedFor != "" {
			req.Header.Set("X-Forwarded-For", forwardedFor)
		}
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, req)
		return w
	}
	held := make(chan int)
	go func() { held <- post("198.51.100.7:40000", "").Code }()
	<-entered
	second := post("198.51.100.7:40001", "203.0.113.9")
	g.Expect(second.Code).To(Equal(http.StatusTooManyRequests))
	g.Expect(second.Header().Get("Retry-After")).NotTo(BeEmpty())
	g.Expect(second.Body.String()).To(ContainSubstring("from 198.51.100.7"))
	g.Expect(post("[2001:db8:1:2::7]:40000", "").Code).To(Equal(http.StatusAccepted), "another source gets through")
	close(release)
	g.Expect(<-held).To(Equal(http.StatusAccepted))
	g.Expect(post("198.51.100.7:40002", "").Code).To(Equal(http.StatusAccepted), "the source's slot is free again")
}

func TestHookSourceOf(t *testing.T) {
	tests := []struct{ remote, want string }{
		{remote: "198.51.100.7:40000", want: "198.51.100.7"},
		{remote: "[::ffff:198.51.100.7]:40000", want: "198.51.100.7"},
		// A client commonly holds a whole IPv6 /64.
		{remote: "[2001:db8:1:2::7]:40000", want: "2001:db8:1:2::/64"},
		{remote: "[2001:db8:1:2:aaaa:bbbb:cccc:dddd]:1", want: "2001:db8:1:2::/64"},
		{remote: "[fe80::1%eth0]:40000", want: "fe80::/64"},
		{remote: "not an address", want: "not an address"},
	}
	for _, tt := range tests {
		t.Run(tt.remote, func(t *testing.T) {
			NewWithT(t).Expect(sourceOf(tt.remote)).To(Equal(tt.want))
		})
	}
}

func TestHooksConfigureServerBoundsTheWholeRequest(t *testing.T) {
	tests := []struct {
		name              string
		timeout           time.Duration
		header, wantRead  time.Duration
		wantHeaderTimeout time.Duration
	}{
		{name: "default", header: 10 * time.Second, wantRead: DefaultRequestTimeout, wantHeaderTimeout: DefaultRequestTimeout},
		{name: "shorter than the header timeout", timeout: 2 * time.Second, header: 10 * time.Second, wantRead: 2 * time.Second, wantHeaderTimeout: 2 * time.Second},
		{name: "header timeout kept when shorter", timeout: 8 * time.Second, header: time.Second, wantRead: 8 * time.Second, wantHeaderTimeout: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := &http.Server{ReadHeaderTimeout: tt.header, ReadTimeout: 30 * time.Second}
			(&Receiver{RequestTimeout: tt.timeout}).ConfigureServer(s)
			g.Expect(s.ReadTimeout).To(Equal(tt.wantRead))
			g.Expect(s.ReadHeaderTimeout).To(Equal(tt.wantHeaderTimeout))
		})
	}
}
