package ociclient

import (
	"context"
	"io"
	"net"
	"net/http"
	"time"
)

// DefaultCallTimeout bounds one registry request, from dialing to the end of its body. A registry
// that accepts connections and never answers must not hold a reconcile (and with it the Stage)
// for longer.
const defaultCallTimeout = 30 * time.Second

// HeaderTimeout bounds dialing, the TLS handshake and the wait for a response header.
const headerTimeout = 10 * time.Second

// NewTransport is the base transport of registry calls: dial, TLS handshake and response header
// each have a deadline (callTimeout, at most HeaderTimeout), and the whole call (body included)
// ends after callTimeout (0 means DefaultCallTimeout). The header deadline is the shorter one
// because a registry answers headers at once whatever the blob's size: with the client's retries,
// a hung registry is given up on well within a minute.
func NewTransport(callTimeout time.Duration) http.RoundTripper {
	if callTimeout <= 0 {
		callTimeout = defaultCallTimeout
	}
	step := min(callTimeout, headerTimeout)
	base := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: step, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   step,
		ResponseHeaderTimeout: step,
		ExpectContinueTimeout: time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   4,
		ForceAttemptHTTP2:     true,
	}
	return &deadlineTransport{base: base, timeout: callTimeout}
}

// defaultTransport serves calls whose caller gave no transport.
var defaultTransport = NewTransport(defaultCallTimeout)

type deadlineTransport struct {
	base    http.RoundTripper
	timeout time.Duration
}

func (t *deadlineTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(req.Context(), t.timeout)
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose ends the call's deadline when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
