package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// serverVersionReader reads the API server's version for spec.prerequisites.kubernetesVersion. The
// answer is kept for a while: a cluster upgrade is rare, and the gate runs on every reconcile of a
// Stage that asks for it.
type serverVersionReader struct {
	client discovery.ServerVersionInterface
	ttl    time.Duration

	mu      sync.Mutex
	version string
	readAt  time.Time
}

func newServerVersionReader(cfg *rest.Config, ttl time.Duration) (*serverVersionReader, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create the discovery client: %w", err)
	}
	return &serverVersionReader{client: dc, ttl: ttl}, nil
}

// Read returns the API server's git version, such as v1.35.4.
func (s *serverVersionReader) Read(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.version != "" && time.Since(s.readAt) < s.ttl {
		return s.version, nil
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	info, err := s.client.ServerVersion()
	if err != nil {
		return "", err
	}
	s.version, s.readAt = info.GitVersion, time.Now()
	return s.version, nil
}
