package check

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// The runner with its own client (no HTTPClient): what the controller runs.
func TestHTTPCheckRefusesInternalTargets(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, url string
		allow     bool
		// refused: the message says why and names the flag; else the check passes.
		refused []string
	}{
		{name: "loopback address", url: srv.URL + "/healthz", refused: []string{"127.0.0.1", "loopback address"}},
		// localhost is refused by name; a name that resolves to loopback is refused at dial time.
		{name: "localhost", url: "http://localhost:" + port + "/healthz", refused: []string{"controller's own host"}},
		{name: "IPv6 loopback", url: "http://[::1]:" + port, refused: []string{"::1", "loopback address"}},
		{name: "IPv4-mapped loopback", url: "http://[::ffff:127.0.0.1]:" + port, refused: []string{"127.0.0.1", "loopback"}},
		{name: "cloud metadata", url: "http://169.254.169.254/latest/meta-data/", refused: []string{"169.254.169.254", "link-local"}},
		{name: "unspecified", url: "http://0.0.0.0:" + port, refused: []string{"unspecified"}},
		{name: "service name", url: "http://payments.team-a.svc:8080/", refused: []string{"cluster-internal Service name"}},
		{name: "service FQDN", url: "http://payments.team-a.svc.cluster.local./", refused: []string{"cluster-internal Service name"}},
		{name: "single label", url: "http://payments/", refused: []string{"without a domain"}},
		{name: "templated to loopback", url: "http://{{.Service}}.svc/", refused: []string{"payments.svc"}},
		{name: "allowed by the flag", url: srv.URL + "/healthz", allow: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			before := hits.Load()
			r := &Runner{Backoff: noBackoff, AllowInternalTargets: tt.allow}
			res := r.Run(t.Context(), v1alpha1.Check{Name: "smoke", HTTP: &v1alpha1.HTTPCheck{URL: tt.url}, Retries: 3}, testInput())
			t.Log(res.Message)
			if tt.refused == nil {
				g.Expect(res.Passed).To(BeTrue(), res.Message)
				return
			}
			g.Expect(res.Passed).To(BeFalse())
			g.Expect(res.Attempts).To(BeNumerically("<=", 1), "a refused target is not retried")
			g.Expect(res.Message).To(ContainSubstring(AllowInternalTargetsFlag))
			for _, m := range tt.refused {
				g.Expect(res.Message).To(ContainSubstring(m))
			}
			g.Expect(hits.Load()).To(Equal(before), "the server was not called")
		})
	}
}

// A name that passed the name check but resolves to an internal address is refused when the
// connection is made, whatever DNS answered before (rebinding).
func TestTargetGuardChecksTheDialedAddress(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(srv.Close)
	g := NewWithT(t)
	guard := &targetGuard{}
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	// localhost passes no name check here: only the resolved address is judged.
	_, err := guard.dialChecked(t.Context(), "tcp", "localhost", port)
	g.Expect(err).To(MatchError(ContainSubstring("loopback address")))
	var refused *refusedTargetError
	g.Expect(errors.As(err, &refused)).To(BeTrue(), "the runner can tell a refusal from a network error")
	conn, err := (&targetGuard{allowInternal: true}).dialChecked(t.Context(), "tcp", "localhost", port)
	g.Expect(err).NotTo(HaveOccurred())
	_ = conn.Close()
	d := &targetGuard{}
	g.Expect(d.checkIP(mustAddr("10.0.0.1"))).To(Succeed(), "private ranges are not cluster-internal by themselves")
	g.Expect(d.checkIP(mustAddr("fe80::1"))).To(MatchError(ContainSubstring("link-local")))
}

func TestHTTPCheckRedirects(t *testing.T) {
	tests := []struct {
		name        string
		follow      bool
		allow       bool
		wantPassed  bool
		wantMessage string
	}{
		{name: "not followed by default", wantMessage: "answered 302 (a redirect, not followed: set followRedirects: true"},
		{name: "followed when the check allows it", follow: true, allow: true, wantPassed: true, wantMessage: "answered 200"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			mux := http.NewServeMux()
			mux.HandleFunc("/old", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/new", http.StatusFound) })
			mux.HandleFunc("/new", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)
			r := &Runner{Backoff: noBackoff, AllowInternalTargets: true}
			res := r.Run(t.Context(), v1alpha1.Check{Name: "smoke", HTTP: &v1alpha1.HTTPCheck{URL: srv.URL + "/old", FollowRedirects: tt.follow}}, testInput())
			g.Expect(res.Passed).To(Equal(tt.wantPassed), res.Message)
			g.Expect(res.Message).To(ContainSubstring(tt.wantMessage))
		})
	}
}

// A followed redirect to an internal target is refused like a first request to it.
func TestHTTPCheckRedirectToInternalTargetIsRefused(t *testing.T) {
	g := NewWithT(t)
	h := &httpCheck{guard: &targetGuard{}, follow: true}
	req, err := http.NewRequest(http.MethodGet, "http://169.254.169.254/latest/meta-data/", nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h.checkRedirect(req, nil)).To(MatchError(ContainSubstring("link-local")))
	req, err = http.NewRequest(http.MethodGet, "http://db.team-b.svc.cluster.local/", nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h.checkRedirect(req, nil)).To(MatchError(ContainSubstring("cluster-internal")))
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
