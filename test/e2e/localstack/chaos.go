package localstack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// RestartAPIServer kills kube-apiserver (SIGKILL, as a crash would) and starts it again with the
// same flags, on the same port and etcd, and waits for its /readyz. Every client (the controller,
// the engines, the tests) sees its connections drop and must come back on its own.
func (s *Stack) RestartAPIServer(ctx context.Context) error {
	old := s.Process(KubeAPIServer)
	if old == nil {
		return fmt.Errorf("kube-apiserver is not running in this stack")
	}
	old.Kill()
	<-old.done
	p, err := startProcess(s.LogDir, old.spec)
	if err != nil {
		return err
	}
	s.procs = append(s.procs, p)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.pki.caPEM)
	authed := &http.Client{Transport: &bearer{token: s.pki.adminToken, rt: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}}
	return p.waitReady(ctx, 60*time.Second, "GET /readyz", httpOK(authed, "https://"+s.APIServer+"/readyz"))
}

// HungRegistry accepts TCP connections on loopback and never answers on them: the registry that
// stalls whoever waits for it without a deadline.
type HungRegistry struct {
	Addr string

	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	done  chan struct{}
}

// StartHungRegistry listens on a free loopback port.
func StartHungRegistry() (*HungRegistry, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &HungRegistry{Addr: ln.Addr().String(), ln: ln, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.conns = append(h.conns, c)
			h.mu.Unlock()
		}
	}()
	return h, nil
}

// Accepted is how many connections it has taken (and left hanging).
func (h *HungRegistry) Accepted() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}

// Close stops listening and drops every connection.
func (h *HungRegistry) Close() {
	_ = h.ln.Close()
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		_ = c.Close()
	}
}
