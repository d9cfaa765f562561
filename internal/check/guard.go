package check

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// AllowInternalTargetsFlag is the controller flag that lets HTTP checks call internal targets;
// messages name it so that an operator knows what to set.
const allowInternalTargetsFlag = "--allow-internal-check-targets"

// refusedTargetError is an HTTP check target the controller may not call.
type refusedTargetError struct {
	target, why string
}

func (e *refusedTargetError) Error() string {
	return fmt.Sprintf("refused to call %s: %s; HTTP checks call such targets only when the controller runs with %s",
		e.target, e.why, allowInternalTargetsFlag)
}

// targetGuard keeps HTTP checks away from the controller's own host and the cluster's inside:
// a Stage author must not be able to probe what only the controller can reach (its loopback,
// the cloud metadata address, in-cluster Services and pods, the private networks around the
// cluster). The cluster's Service CIDR cannot be known here: it is refused as the private or
// shared range it lies in, and by the names that resolve to it.
type targetGuard struct {
	allowInternal bool
}

// checkHost refuses a URL host by name (or literal address) before any request is made.
func (g *targetGuard) checkHost(host string) error {
	if g.allowInternal {
		return nil
	}
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return g.checkIP(ip)
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	switch {
	case name == "":
		return &refusedTargetError{target: "an empty host", why: "the URL names no host"}
	case name == "localhost" || strings.HasSuffix(name, ".localhost"):
		return &refusedTargetError{target: host, why: "it is the controller's own host"}
	case !strings.Contains(name, "."):
		// A single label resolves through the pod's search list to a Service.
		return &refusedTargetError{target: host, why: "a name without a domain is a cluster-internal Service name"}
	case strings.HasSuffix(name, ".svc") || strings.HasSuffix(name, ".cluster.local") || strings.HasSuffix(name, ".svc.cluster.local"):
		return &refusedTargetError{target: host, why: "it is a cluster-internal Service name"}
	}
	return nil
}

// refusedRange is an address range HTTP checks may not call, and what it is, as messages name it.
type refusedRange struct {
	prefix netip.Prefix
	what   string
}

// refusedRanges are what the controller may reach but a Stage author should not make it call:
// its own host, the pod and node networks (private and shared ranges), cloud metadata, and the
// special-purpose ranges no service a check looks at lives in (RFC 6890 and its successors). The
// first match names the address, so more specific ranges come first.
var refusedRanges = func() []refusedRange {
	ranges := []struct{ prefix, what string }{
		// IPv4.
		{"0.0.0.0/32", "the unspecified address"},
		{"0.0.0.0/8", `a "this network" address (0.0.0.0/8)`},
		{"10.0.0.0/8", "a private address (RFC 1918, 10.0.0.0/8)"},
		{"100.64.0.0/10", "a shared address (carrier-grade NAT, 100.64.0.0/10)"},
		{"127.0.0.0/8", "a loopback address (127.0.0.0/8)"},
		{"169.254.0.0/16", "a link-local address (169.254.0.0/16, where cloud metadata services answer)"},
		{"172.16.0.0/12", "a private address (RFC 1918, 172.16.0.0/12)"},
		{"192.0.0.0/24", "an IETF protocol assignment (192.0.0.0/24)"},
		{"192.0.2.0/24", "a documentation address (192.0.2.0/24)"},
		{"192.88.99.0/24", "a 6to4 relay anycast address (192.88.99.0/24)"},
		{"192.168.0.0/16", "a private address (RFC 1918, 192.168.0.0/16)"},
		{"198.18.0.0/15", "a benchmarking address (198.18.0.0/15)"},
		{"198.51.100.0/24", "a documentation address (198.51.100.0/24)"},
		{"203.0.113.0/24", "a documentation address (203.0.113.0/24)"},
		{"224.0.0.0/4", "a multicast address (224.0.0.0/4)"},
		{"255.255.255.255/32", "the broadcast address (255.255.255.255)"},
		{"240.0.0.0/4", "a reserved address (240.0.0.0/4)"},
		// IPv6. IPv4-mapped addresses (::ffff:0:0/96) are judged as the IPv4 address they are.
		{"::/128", "the unspecified address"},
		{"::1/128", "a loopback address (::1)"},
		{"::/96", "an IPv4-compatible address (::/96, deprecated)"},
		{"::ffff:0:0:0/96", "an IPv4-translated address (::ffff:0:0:0/96)"},
		{"64:ff9b:1::/48", "a local-use NAT64 address (64:ff9b:1::/48): its translator is inside the operator's network"},
		{"::/8", "a reserved address (::/8)"},
		{"100::/64", "a discard-only address (100::/64)"},
		{"2001:2::/48", "a benchmarking address (2001:2::/48)"},
		{"2001:db8::/32", "a documentation address (2001:db8::/32)"},
		{"3fff::/20", "a documentation address (3fff::/20)"},
		{"fc00::/7", "a unique-local address (fc00::/7)"},
		{"fe80::/10", "a link-local address (fe80::/10)"},
		{"fec0::/10", "a site-local address (fec0::/10, deprecated)"},
		{"ff01::/16", "an interface-local multicast address (ff01::/16)"},
		{"ff02::/16", "a link-local multicast address (ff02::/16)"},
		{"ff00::/8", "a multicast address (ff00::/8)"},
	}
	out := make([]refusedRange, len(ranges))
	for i, r := range ranges {
		out[i] = refusedRange{prefix: netip.MustParsePrefix(r.prefix), what: r.what}
	}
	return out
}()

// embedded is an IPv6 range whose addresses carry an IPv4 address that a gateway connects to:
// the address is judged as that IPv4 address.
var embedded = []struct {
	prefix netip.Prefix
	what   string
	ipv4   func(b [16]byte) netip.Addr
}{
	// NAT64 well-known prefix (RFC 6052): the IPv4 address is the last 32 bits.
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64, 64:ff9b::/96",
		func(b [16]byte) netip.Addr { return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}) }},
	// 6to4 (RFC 3056): the IPv4 address follows the 16-bit prefix.
	{netip.MustParsePrefix("2002::/16"), "6to4, 2002::/16",
		func(b [16]byte) netip.Addr { return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}) }},
	// Teredo (RFC 4380): the client's IPv4 address is the last 32 bits, inverted.
	{netip.MustParsePrefix("2001::/32"), "Teredo, 2001::/32",
		func(b [16]byte) netip.Addr { return netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}) }},
}

// checkIP refuses the addresses of refusedRanges, and IPv6 addresses that embed one of them.
func (g *targetGuard) checkIP(ip netip.Addr) error {
	if g.allowInternal {
		return nil
	}
	if why := refusedIP(ip); why != "" {
		return &refusedTargetError{target: ip.String(), why: why}
	}
	return nil
}

// refusedIP says why ip may not be called, or "" when it may.
func refusedIP(ip netip.Addr) string {
	// A zone (fe80::1%eth0) matches no prefix; the address without it is what is judged.
	ip = ip.WithZone("").Unmap()
	// The embedding ranges lie in no refused range but ::/8 (which holds 64:ff9b::/96): they
	// are judged by the address they carry alone.
	for _, e := range embedded {
		if e.prefix.Contains(ip) {
			v4 := e.ipv4(ip.As16())
			if why := refusedIP(v4); why != "" {
				return fmt.Sprintf("it embeds the IPv4 address %s (%s), and %s", v4, e.what, why)
			}
			return ""
		}
	}
	for _, r := range refusedRanges {
		if r.prefix.Contains(ip) {
			return "it is " + r.what
		}
	}
	return ""
}

// dialContext checks every address it connects to, after name resolution: a name that passed
// checkHost but resolves (or is re-bound) to an internal address is refused here.
func (g *targetGuard) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if err := g.checkHost(host); err != nil {
		return nil, err
	}
	return g.dialChecked(ctx, network, host, port)
}

// dialChecked resolves host and refuses every resolved address checkIP refuses, in the
// dialer's Control hook, which sees the address actually connected to.
func (g *targetGuard) dialChecked(ctx context.Context, network, host, port string) (net.Conn, error) {
	if _, err := netip.ParseAddr(host); err != nil && !g.allowInternal && strings.Contains(host, ".") && !strings.HasSuffix(host, ".") {
		// Resolved as an absolute name, so that the pod's DNS search list cannot turn
		// "payments.team-a" into payments.team-a.svc.cluster.local. (A name without a dot is
		// refused by checkHost before.)
		host += "."
	}
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			h, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			ip, err := netip.ParseAddr(h)
			if err != nil {
				return fmt.Errorf("dialing %q: not an IP address", address)
			}
			return g.checkIP(ip)
		}}
	return d.DialContext(ctx, network, net.JoinHostPort(host, port))
}

// refuseProxied refuses the requests that proxy would send through a proxy (HTTP_PROXY,
// HTTPS_PROXY): the proxy resolves and connects, so the guard would judge only the proxy's address,
// never the target's.
func (g *targetGuard) refuseProxied(proxy func(*http.Request) (*url.URL, error)) func(*http.Request) (*url.URL, error) {
	return func(req *http.Request) (*url.URL, error) {
		u, err := proxy(req)
		if err != nil || u == nil {
			return u, err
		}
		return nil, &refusedTargetError{target: req.URL.Host, why: fmt.Sprintf(
			"the controller's proxy %s would connect to it, so the address it reaches cannot be checked "+
				"(list the host in NO_PROXY to have it called directly and checked)", u.Redacted())}
	}
}

// httpClient returns the client HTTP checks use (a copy, for the caller to set its redirect
// policy on): the Runner's HTTPClient when set (tests), else one whose every connection passes
// the target guard.
func (r *Runner) httpClient() http.Client {
	if r.HTTPClient != nil {
		return *r.HTTPClient
	}
	r.clientOnce.Do(func() {
		t := http.DefaultTransport.(*http.Transport).Clone()
		g := &targetGuard{allowInternal: r.AllowInternalTargets}
		t.DialContext = g.dialContext
		if !g.allowInternal {
			t.Proxy = g.refuseProxied(t.Proxy)
		}
		r.client = &http.Client{Transport: t}
	})
	return *r.client
}
