package check

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// AllowInternalTargetsFlag is the controller flag that lets HTTP checks call internal targets;
// messages name it so that an operator knows what to set.
const AllowInternalTargetsFlag = "--allow-internal-check-targets"

// refusedTargetError is an HTTP check target the controller may not call.
type refusedTargetError struct {
	target, why string
}

func (e *refusedTargetError) Error() string {
	return fmt.Sprintf("refused to call %s: %s; HTTP checks call such targets only when the controller runs with %s",
		e.target, e.why, AllowInternalTargetsFlag)
}

// targetGuard keeps HTTP checks away from the controller's own host and the cluster's inside:
// a Stage author must not be able to probe what only the controller can reach (its loopback,
// the cloud metadata address, in-cluster Services). The cluster's Service CIDR cannot be known
// here, so cluster-internal means the names that resolve to it.
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

// checkIP refuses loopback, link-local (cloud metadata lives there) and unspecified addresses.
func (g *targetGuard) checkIP(ip netip.Addr) error {
	if g.allowInternal {
		return nil
	}
	ip = ip.Unmap()
	var why string
	switch {
	case ip.IsLoopback():
		why = "it is a loopback address"
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
		why = "it is a link-local address"
	case ip.IsUnspecified():
		why = "it is the unspecified address"
	case ip.IsInterfaceLocalMulticast():
		why = "it is an interface-local address"
	default:
		return nil
	}
	return &refusedTargetError{target: ip.String(), why: why}
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

// httpClient returns the client HTTP checks use (a copy, for the caller to set its redirect
// policy on): the Runner's HTTPClient when set (tests), else one whose every connection passes
// the target guard.
func (r *Runner) httpClient() http.Client {
	if r.HTTPClient != nil {
		return *r.HTTPClient
	}
	r.clientOnce.Do(func() {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DialContext = (&targetGuard{allowInternal: r.AllowInternalTargets}).dialContext
		r.client = &http.Client{Transport: t}
	})
	return *r.client
}
