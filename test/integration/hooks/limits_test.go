package hooks

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/stagecoach-dev/stagecoach/controller"
)

// send posts body (a reader the test may hold open) and returns the status, within a deadline:
// an answer that needs the body would not come while the body is held.
func send(t *testing.T, path string, body io.Reader, header map[string]string) (int, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, hooksURL+path, body)
	if err != nil {
		return 0, err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// holdPost opens a connection and sends a request's headers announcing a body of 1000 bytes, and
// none of the body: a handler that reads the body waits until the connection closes.
func holdPost(t *testing.T, path string, header map[string]string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(hooksURL, "http://"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = conn.Close() })
	var b strings.Builder
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: hooks\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n", path)
	for k, v := range header {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	_, err = conn.Write([]byte(b.String()))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return conn
}

// answerWithoutBody is the status the hook answers to holdPost's request within 3 s, which it
// can only do without reading the body.
func answerWithoutBody(t *testing.T, path string, header map[string]string) (int, error) {
	conn := holdPost(t, path, header)
	if err := conn.SetReadDeadline(time.Now().Add(3 * time.Second)); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}

// The hooks' limits, served by the manager on the API server: refusals come from the headers
// before any body is read, bodies are capped at 64 KiB (declared or streamed), each hook takes only
// its own Secret's key, and requests beyond the bound are answered 503 at once.
func TestHooksLimits(t *testing.T) {
	// The hooks listen once the manager has started.
	NewWithT(t).Eventually(func() error {
		_, err := send(t, "/hooks/argocd", strings.NewReader(`{}`), nil)
		return err
	}, 20*time.Second, 50*time.Millisecond).Should(Succeed())
	big := strings.Repeat("x", controller.MaxHookBody+1)
	sign := func(body string) string {
		mac := hmac.New(sha256.New, []byte(fluxKey))
		mac.Write([]byte(body))
		return "sha256=" + hex.EncodeToString(mac.Sum(nil))
	}
	tests := []struct {
		name   string
		path   string
		body   func(t *testing.T) io.Reader // nil: headers only, the body never sent
		header map[string]string
		want   int
	}{
		{name: "a wrong bearer token is refused before the body is read", path: "/hooks/argocd",
			header: map[string]string{"Authorization": "Bearer nope"}, want: http.StatusUnauthorized},
		{name: "no bearer token is refused before the body is read", path: "/hooks/argocd",
			want: http.StatusUnauthorized},
		{name: "no X-Signature is refused before the body is read", path: "/hooks/flux",
			want: http.StatusUnauthorized},
		{name: "a malformed X-Signature is refused before the body is read", path: "/hooks/flux",
			header: map[string]string{"X-Signature": "sha256=zz"}, want: http.StatusUnauthorized},
		{name: "the Flux key does not open the Argo CD hook", path: "/hooks/argocd",
			body:   func(*testing.T) io.Reader { return strings.NewReader(`{"app":"prod","namespace":"default"}`) },
			header: map[string]string{"Authorization": "Bearer " + fluxKey}, want: http.StatusUnauthorized},
		{name: "the Argo CD token does not sign for the Flux hook", path: "/hooks/flux",
			body: func(*testing.T) io.Reader { return strings.NewReader(`{}`) },
			header: map[string]string{"X-Signature": func() string {
				mac := hmac.New(sha256.New, []byte(argoToken))
				mac.Write([]byte(`{}`))
				return "sha256=" + hex.EncodeToString(mac.Sum(nil))
			}()}, want: http.StatusUnauthorized},
		{name: "a declared body over 64 KiB is refused", path: "/hooks/argocd",
			body:   func(*testing.T) io.Reader { return bytes.NewReader([]byte(big)) },
			header: map[string]string{"Authorization": "Bearer " + argoToken}, want: http.StatusRequestEntityTooLarge},
		{name: "a streamed body over 64 KiB is refused", path: "/hooks/argocd",
			body:   func(*testing.T) io.Reader { return io.MultiReader(strings.NewReader(big)) }, // no length: chunked
			header: map[string]string{"Authorization": "Bearer " + argoToken}, want: http.StatusRequestEntityTooLarge},
		{name: "a signed body over 64 KiB is refused", path: "/hooks/flux",
			body:   func(*testing.T) io.Reader { return io.MultiReader(strings.NewReader(big)) },
			header: map[string]string{"X-Signature": sign(big)}, want: http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var status int
			var err error
			if tt.body == nil {
				status, err = answerWithoutBody(t, tt.path, tt.header)
			} else {
				status, err = send(t, tt.path, tt.body(t), tt.header)
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(status).To(Equal(tt.want))
		})
	}

	t.Run("requests beyond the bound are answered 503 at once", func(t *testing.T) {
		g := NewWithT(t)
		auth := map[string]string{"Authorization": "Bearer " + argoToken}
		// Authenticated requests whose bodies are held occupy every slot. A probe that reaches the
		// server before a held request is dispatched takes that request's slot, and the held one
		// is refused instead: such ones are replaced until the probe finds every slot held.
		var held []net.Conn
		release := func() {
			for _, c := range held {
				_ = c.Close()
			}
		}
		defer release()
		g.Eventually(func(g Gomega) {
			held = unanswered(t, held)
			for len(held) < controller.DefaultMaxHookRequests {
				held = append(held, holdPost(t, "/hooks/argocd", auth))
			}
			status, err := send(t, "/hooks/argocd", strings.NewReader(`{}`), auth)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(status).To(Equal(http.StatusServiceUnavailable))
		}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
		// Exactly the bound is held: with fewer slots one held request would have been refused.
		g.Expect(unanswered(t, held)).To(HaveLen(controller.DefaultMaxHookRequests))
		release()
		// The slots free again once the held requests end.
		g.Eventually(func() (int, error) {
			return send(t, "/hooks/argocd", strings.NewReader(`{"app":"none","namespace":"default"}`), auth)
		}, 5*time.Second, 50*time.Millisecond).Should(Equal(http.StatusAccepted))
	})
}

// unanswered returns the held connections the server has not answered within 300 ms, and closes
// the others.
func unanswered(t *testing.T, conns []net.Conn) []net.Conn {
	t.Helper()
	answered := make([]bool, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			_, err := c.Read(make([]byte, 1))
			var netErr net.Error
			answered[i] = !errors.As(err, &netErr) || !netErr.Timeout()
		})
	}
	wg.Wait()
	var open []net.Conn
	for i, c := range conns {
		if answered[i] {
			_ = c.Close()
			continue
		}
		open = append(open, c)
	}
	return open
}
