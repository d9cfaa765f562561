package controller

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// certReloader serves a server's certificate (the hooks', the API's) from files, re-reading them when they change (a
// mounted Secret is updated in place when cert-manager renews it).
type certReloader struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	modTime time.Time
}

// GetCertificate is tls.Config.GetCertificate.
func (c *certReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	info, err := os.Stat(c.certFile)
	if err != nil {
		return nil, fmt.Errorf("failed to read the TLS certificate %s: %w", c.certFile, err)
	}
	if c.cert != nil && info.ModTime().Equal(c.modTime) {
		return c.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		if c.cert != nil {
			return c.cert, nil // keep serving the last good pair while a rotation is half written
		}
		return nil, fmt.Errorf("failed to load the TLS certificate %s and key %s: %w", c.certFile, c.keyFile, err)
	}
	c.cert, c.modTime = &cert, info.ModTime()
	return c.cert, nil
}
