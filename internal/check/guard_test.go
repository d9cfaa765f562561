package check

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
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
		{name: "unique-local", url: "http://[fd00::2]:8080/verdict", refused: []string{"fd00::2", "unique-local address (fc00::/7)"}},
		{name: "unique-local with a zone", url: "http://[fd00::2%25eth0]:8080/verdict", refused: []string{"fd00::2", "fc00::/7"}},
		{name: "private", url: "http://10.0.0.1:8080/", refused: []string{"10.0.0.1", "10.0.0.0/8"}},
		{name: "IPv4-mapped private", url: "http://[::ffff:192.168.1.1]/", refused: []string{"192.168.1.1", "192.168.0.0/16"}},
		{name: "NAT64 private", url: "http://[64:ff9b::a00:1]/", refused: []string{"64:ff9b::a00:1", "10.0.0.1", "10.0.0.0/8"}},
		{name: "broadcast", url: "http://255.255.255.255/", refused: []string{"broadcast"}},
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
			g.Expect(res.Message).To(ContainSubstring(allowInternalTargetsFlag))
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
}

// Every refused range and embedding, one address each: the message names the range and the flag,
// and the flag lets the address through. Public addresses, also embedded, pass.
func TestTargetGuardRefusesInternalAndSpecialPurposeAddresses(t *testing.T) {
	tests := []struct {
		addr string
		// want are parts of the reason; nil: the address may be called.
		want []string
	}{
		{addr: "10.1.2.3", want: []string{"private address", "10.0.0.0/8"}},
		{addr: "172.16.0.1", want: []string{"private address", "172.16.0.0/12"}},
		{addr: "172.31.255.254", want: []string{"private address", "172.16.0.0/12"}},
		{addr: "192.168.1.1", want: []string{"private address", "192.168.0.0/16"}},
		{addr: "100.64.0.1", want: []string{"shared address", "100.64.0.0/10"}},
		{addr: "100.127.255.254", want: []string{"100.64.0.0/10"}},
		{addr: "127.0.0.1", want: []string{"loopback address", "127.0.0.0/8"}},
		{addr: "127.8.9.10", want: []string{"loopback address"}},
		{addr: "169.254.169.254", want: []string{"link-local address", "169.254.0.0/16"}},
		{addr: "0.0.0.0", want: []string{"unspecified address"}},
		{addr: "0.1.2.3", want: []string{"0.0.0.0/8"}},
		{addr: "192.0.0.8", want: []string{"192.0.0.0/24"}},
		{addr: "192.0.2.10", want: []string{"documentation", "192.0.2.0/24"}},
		{addr: "198.51.100.7", want: []string{"documentation", "198.51.100.0/24"}},
		{addr: "203.0.113.9", want: []string{"documentation", "203.0.113.0/24"}},
		{addr: "192.88.99.1", want: []string{"6to4 relay", "192.88.99.0/24"}},
		{addr: "198.18.0.1", want: []string{"benchmarking", "198.18.0.0/15"}},
		{addr: "198.19.255.1", want: []string{"benchmarking", "198.18.0.0/15"}},
		{addr: "224.0.0.1", want: []string{"multicast", "224.0.0.0/4"}},
		{addr: "239.255.255.250", want: []string{"multicast", "224.0.0.0/4"}},
		{addr: "240.0.0.1", want: []string{"reserved", "240.0.0.0/4"}},
		{addr: "255.255.255.255", want: []string{"broadcast address"}},
		{addr: "::", want: []string{"unspecified address"}},
		{addr: "::1", want: []string{"loopback address", "::1"}},
		{addr: "::ffff:10.0.0.1", want: []string{"10.0.0.1", "private address", "10.0.0.0/8"}},
		{addr: "::ffff:127.0.0.1", want: []string{"127.0.0.1", "loopback address"}},
		{addr: "::ffff:169.254.169.254", want: []string{"169.254.169.254", "link-local"}},
		{addr: "::a00:1", want: []string{"IPv4-compatible", "::/96"}},
		{addr: "::ffff:0:a00:1", want: []string{"IPv4-translated", "::ffff:0:0:0/96"}},
		{addr: "1::", want: []string{"reserved", "::/8"}},
		{addr: "fd00::2", want: []string{"unique-local address", "fc00::/7"}},
		{addr: "fc00::1", want: []string{"unique-local address", "fc00::/7"}},
		{addr: "fe80::1", want: []string{"link-local address", "fe80::/10"}},
		{addr: "fe80::1%eth0", want: []string{"link-local address", "fe80::/10"}},
		{addr: "fd00::2%eth0", want: []string{"unique-local address", "fc00::/7"}},
		{addr: "fec0::1", want: []string{"site-local", "fec0::/10"}},
		{addr: "ff01::1", want: []string{"interface-local multicast"}},
		{addr: "ff02::1", want: []string{"link-local multicast"}},
		{addr: "ff05::2", want: []string{"multicast address", "ff00::/8"}},
		{addr: "100::1", want: []string{"discard-only", "100::/64"}},
		{addr: "2001:2::1", want: []string{"benchmarking", "2001:2::/48"}},
		{addr: "2001:db8::1", want: []string{"documentation", "2001:db8::/32"}},
		{addr: "3fff::1", want: []string{"documentation", "3fff::/20"}},
		{addr: "64:ff9b::a00:1", want: []string{"embeds the IPv4 address 10.0.0.1", "NAT64, 64:ff9b::/96", "10.0.0.0/8"}},
		{addr: "64:ff9b::7f00:1", want: []string{"embeds the IPv4 address 127.0.0.1", "loopback"}},
		{addr: "64:ff9b::a9fe:a9fe", want: []string{"embeds the IPv4 address 169.254.169.254", "link-local"}},
		{addr: "64:ff9b:1::a00:1", want: []string{"local-use NAT64", "64:ff9b:1::/48"}},
		{addr: "64:ff9b:1::808:808", want: []string{"local-use NAT64", "64:ff9b:1::/48"}},
		{addr: "2002:c0a8:101::1", want: []string{"embeds the IPv4 address 192.168.1.1", "6to4, 2002::/16", "192.168.0.0/16"}},
		{addr: "2001:0:4136:e378:8000:63bf:f5ff:fffe", want: []string{"embeds the IPv4 address 10.0.0.1", "Teredo, 2001::/32"}},
		// Public addresses, bare and embedded.
		{addr: "8.8.8.8"},
		{addr: "1.1.1.1"},
		{addr: "100.128.0.1"},
		{addr: "172.32.0.1"},
		{addr: "198.20.0.1"},
		{addr: "::ffff:8.8.8.8"},
		{addr: "2606:4700:4700::1111"},
		{addr: "64:ff9b::808:808"},
		{addr: "2002:808:808::1"},
		{addr: "2001:0:4136:e378:8000:63bf:f7f7:f7f7"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			g := NewWithT(t)
			err := (&targetGuard{}).checkIP(mustAddr(tt.addr))
			if tt.want == nil {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(HaveOccurred())
			t.Log(err)
			g.Expect(err.Error()).To(ContainSubstring(allowInternalTargetsFlag))
			for _, w := range tt.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
			var refused *refusedTargetError
			g.Expect(errors.As(err, &refused)).To(BeTrue())
			g.Expect((&targetGuard{allowInternal: true}).checkIP(mustAddr(tt.addr))).To(Succeed(), "the flag lets it through")
		})
	}
}

// The address actually dialed is judged (the dialer's Control hook, after name resolution), so a
// name that passed checkHost but resolves to a private address is refused too. Literal addresses
// stand in for resolved names here: the hook sees the same address either way, and refuses it
// before any packet is sent.
func TestTargetGuardRefusesPrivateAddressesWhenDialing(t *testing.T) {
	tests := []struct{ host, want string }{
		{host: "10.0.0.1", want: "10.0.0.0/8"},
		{host: "172.16.5.4", want: "172.16.0.0/12"},
		{host: "192.168.0.1", want: "192.168.0.0/16"},
		{host: "100.64.1.1", want: "100.64.0.0/10"},
		{host: "224.0.0.1", want: "224.0.0.0/4"},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			g := NewWithT(t)
			_, err := (&targetGuard{}).dialChecked(t.Context(), "tcp", tt.host, "80")
			g.Expect(err).To(MatchError(And(ContainSubstring(tt.want), ContainSubstring(allowInternalTargetsFlag))))
			var refused *refusedTargetError
			g.Expect(errors.As(err, &refused)).To(BeTrue())
		})
	}
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

// A proxy would resolve and connect on the check's behalf, out of the guard's sight: a request it
// would carry is refused (unless the flag allows internal targets), one it would not is dialed.
func TestTargetGuardRefusesProxiedRequests(t *testing.T) {
	tests := []struct {
		name  string
		proxy string // "" when the request is not proxied (NO_PROXY, no proxy set)
		want  []string
	}{
		{name: "proxied", proxy: "http://user:secret@proxy.corp.example:3128",
			want: []string{"tickets.example", "proxy.corp.example:3128", "NO_PROXY", allowInternalTargetsFlag}},
		{name: "not proxied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			proxy := func(*http.Request) (*url.URL, error) {
				if tt.proxy == "" {
					return nil, nil
				}
				return url.Parse(tt.proxy)
			}
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://tickets.example/ok", nil)
			g.Expect(err).NotTo(HaveOccurred())
			u, err := (&targetGuard{}).refuseProxied(proxy)(req)
			g.Expect(u).To(BeNil())
			if tt.want == nil {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			var refused *refusedTargetError
			g.Expect(errors.As(err, &refused)).To(BeTrue())
			for _, w := range tt.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
			g.Expect(err.Error()).NotTo(ContainSubstring("secret"), "the proxy's password is not shown")
		})
	}
}
