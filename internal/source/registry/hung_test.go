package registry

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
)

// A registry that accepts connections and never answers costs a bounded time, not forever.
func TestListGivesUpOnAHungRegistry(t *testing.T) {
	g := NewWithT(t)
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer hung.Close()
	defer close(release)
	l := &Lister{Transport: ociclient.NewTransport(200 * time.Millisecond)}
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := l.List(t.Context(), Request{Repository: strings.TrimPrefix(hung.URL, "http://") + "/deploy/payments"})
		done <- err
	}()
	var err error
	g.Eventually(done, time.Minute).Should(Receive(&err))
	g.Expect(err).To(MatchError(ociclient.ErrUnreachable))
	t.Logf("gave up after %s", time.Since(start).Round(time.Millisecond))
}
