package ociclient

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// A registry that accepts the connection and then never answers (or stops halfway through the
// body) costs one call timeout, not forever.
func TestTransportDeadlines(t *testing.T) {
	for _, tc := range []struct {
		name        string
		handler     http.HandlerFunc
		readAll     bool
		callTimeout time.Duration // 300ms when 0
		within      time.Duration // 10s when 0
	}{
		{name: "no response header", handler: func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }},
		// The default call timeout (30s) is for bodies: headers come within HeaderTimeout or never.
		{name: "no response header with the default call timeout", callTimeout: defaultCallTimeout, within: headerTimeout + 2*time.Second,
			handler: func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }},
		{name: "a body that never ends", readAll: true, handler: func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte("{"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			callTimeout, within := cmp.Or(tc.callTimeout, 300*time.Millisecond), cmp.Or(tc.within, 10*time.Second)
			client := &http.Client{Transport: NewTransport(callTimeout)}
			done := make(chan error, 1)
			go func() {
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/v2/", nil)
				resp, err := client.Do(req)
				if err == nil {
					defer resp.Body.Close()
					if tc.readAll {
						_, err = io.ReadAll(resp.Body)
					}
				}
				done <- err
			}()
			var err error
			g.Eventually(done, within).Should(Receive(&err))
			g.Expect(errors.Is(err, context.DeadlineExceeded) || isTimeout(err)).To(BeTrue(), "got %v", err)
		})
	}
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}
