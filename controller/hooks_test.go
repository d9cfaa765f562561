package controller

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
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
	looked []HookEvent
	woken  []reconcile.Request
}

func (r *recorder) hooks() *Hooks {
	return &Hooks{
		FluxToken:   func(context.Context) ([]byte, error) { return []byte("flux-key"), nil },
		ArgoCDToken: func(context.Context) ([]byte, error) { return []byte("argo-token"), nil },
		Lookup: func(_ context.Context, e HookEvent) []reconcile.Request {
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
	cases := []struct {
		name       string
		method     string
		path       string
		body       string
		header     map[string]string
		wantStatus int
		wantWoken  []string
		wantEvent  HookEvent
	}{
		{name: "signed Flux event", path: "/hooks/flux", body: fluxBody, header: map[string]string{"X-Signature": sign("flux-key", fluxBody)},
			wantStatus: http.StatusAccepted, wantWoken: []string{"dev/stage-of-payments"},
			wantEvent: HookEvent{Group: "kustomize.toolkit.fluxcd.io", Kind: "Kustomization", Namespace: "dev", Name: "payments"}},
		{name: "signed with another key", path: "/hooks/flux", body: fluxBody, header: map[string]string{"X-Signature": sign("other", fluxBody)},
			wantStatus: http.StatusUnauthorized},
		{name: "no signature", path: "/hooks/flux", body: fluxBody, wantStatus: http.StatusUnauthorized},
		{name: "signature not hex", path: "/hooks/flux", body: fluxBody, header: map[string]string{"X-Signature": "sha256=zz"}, wantStatus: http.StatusUnauthorized},
		{name: "unknown algorithm", path: "/hooks/flux", body: fluxBody, header: map[string]string{"X-Signature": "md5=00"}, wantStatus: http.StatusUnauthorized},
		{name: "truncated body", path: "/hooks/flux", body: fluxBody[:len(fluxBody)/2], header: map[string]string{"X-Signature": sign("flux-key", fluxBody)},
			wantStatus: http.StatusUnauthorized},
		{name: "2 MiB body", path: "/hooks/flux", body: big, header: map[string]string{"X-Signature": sign("flux-key", big)},
			wantStatus: http.StatusRequestEntityTooLarge},
		{name: "signed but not JSON", path: "/hooks/flux", body: "{not json", header: map[string]string{"X-Signature": sign("flux-key", "{not json")},
			wantStatus: http.StatusBadRequest},
		{name: "signed but names no object", path: "/hooks/flux", body: `{"reason":"x"}`, header: map[string]string{"X-Signature": sign("flux-key", `{"reason":"x"}`)},
			wantStatus: http.StatusBadRequest},
		{name: "GET", method: http.MethodGet, path: "/hooks/flux", wantStatus: http.StatusMethodNotAllowed},
		{name: "Argo CD notification", path: "/hooks/argocd", body: `{"app":"payments","namespace":"prod","phase":"Succeeded"}`,
			header: map[string]string{"Authorization": "Bearer argo-token"}, wantStatus: http.StatusAccepted, wantWoken: []string{"prod/stage-of-payments"},
			wantEvent: HookEvent{Group: "argoproj.io", Kind: "Application", Namespace: "prod", Name: "payments"}},
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
			g.Expect(rec.looked).To(Equal([]HookEvent{tc.wantEvent}))
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
