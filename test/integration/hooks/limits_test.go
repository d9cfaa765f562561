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

	"github.com/stagecoach-dev/stagecoach/controller/hooks"
)

// send posts body (a reader the test may hold open) and returns the status, within a deadline:
// an answer that needs the body would not come while the body is held.
func send(t *testing.T, path string, body io.Reader, header map[string]string) (int, error) {
	t.Helper()
	resp, err := sendFrom(t, "", path, body, header)
	if err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

// sendFrom is send from the source address src (a loopback address other than 127.0.0.1: all of
// 127.0.0.0/8 routes on Linux loopback), "" for any; it returns the answer, its body read.
func sendFrom(t *testing.T, src, path string, body io.Reader, header map[string]string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, hooksURL+path, body)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dialerFrom(src).DialContext}}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp, nil
}

// dialerFrom dials from the source address src, "" for any.
func dialerFrom(src string) *net.Dialer {
	d := &net.Dialer{}
	if src != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	return d
}

// holdPost opens a connection and sends a request's headers announcing a body of 1000 bytes, and
// none of the body: a handler that reads the body waits until the connection closes (or the
// request deadline passes).
func holdPost(t *testing.T, path string, header map[string]string) net.Conn {
	t.Helper()
	return holdPostFrom(t, "", path, header)
}

// holdPostFrom is holdPost from the source address src.
func holdPostFrom(t *testing.T, src, path string, header map[string]string) net.Conn {
	t.Helper()
	conn, err := dialerFrom(src).DialContext(t.Context(), "tcp", strings.TrimPrefix(hooksURL, "http://"))
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
// its own Secret's key, requests beyond the bound are answered 503 at once, one source (the TCP
// peer) holds at most its own bound, and a request must arrive within the request deadline.
func TestHooksLimits(t *testing.T) {
	// The hooks listen once the manager has started.
	NewWithT(t).Eventually(func() error {
		_, err := send(t, "/hooks/argocd", strings.NewReader(`{}`), nil)
		return err
	}, 20*time.Second, 50*time.Millisecond).Should(Succeed())
	big := strings.Repeat("x", hooks.MaxBody+1)
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
		// Authenticated requests whose bodies are held occupy every slot, from as many sources as
		// their own bound takes. A probe that reaches the server before a held request is
		// dispatched takes that request's slot, and the held one is refused instead: such ones
		// are replaced until the probe finds every slot held.
		sources := hooks.DefaultMaxRequests / hooks.DefaultMaxRequestsPerSource
		var held []net.Conn
		release := func() {
			for _, c := range held {
				_ = c.Close()
			}
		}
		defer release()
		g.Eventually(func(g Gomega) {
			held = unanswered(t, held)
			perSource := map[string]int{}
			for _, c := range held {
				perSource[c.LocalAddr().(*net.TCPAddr).IP.String()]++
			}
			for i := range sources {
				src := fmt.Sprintf("127.0.0.%d", 10+i)
				for ; perSource[src] < hooks.DefaultMaxRequestsPerSource; perSource[src]++ {
					held = append(held, holdPostFrom(t, src, "/hooks/argocd", auth))
				}
			}
			resp, err := sendFrom(t, fmt.Sprintf("127.0.0.%d", 10+sources), "/hooks/argocd", strings.NewReader(`{}`), auth)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(resp.StatusCode).To(Equal(http.StatusServiceUnavailable))
		}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
		// Exactly the bound is held: with fewer slots one held request would have been refused.
		g.Expect(unanswered(t, held)).To(HaveLen(hooks.DefaultMaxRequests))
		release()
		// The slots free again once the held requests end.
		g.Eventually(func() (int, error) {
			return send(t, "/hooks/argocd", strings.NewReader(`{"app":"none","namespace":"default"}`), auth)
		}, 5*time.Second, 50*time.Millisecond).Should(Equal(http.StatusAccepted))
	})

	t.Run("one source holds at most its own bound, and another source still gets through", func(t *testing.T) {
		g := NewWithT(t)
		auth := map[string]string{"Authorization": "Bearer " + argoToken}
		const greedy, other = "127.0.0.2", "127.0.0.3"
		var held []net.Conn
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		// As above, a held request the probe overtook was refused in its place, and is replaced.
		var refused *http.Response
		g.Eventually(func(g Gomega) {
			held = unanswered(t, held)
			for len(held) < hooks.DefaultMaxRequestsPerSource {
				held = append(held, holdPostFrom(t, greedy, "/hooks/argocd", auth))
			}
			var err error
			refused, err = sendFrom(t, greedy, "/hooks/argocd", strings.NewReader(`{}`), auth)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(refused.StatusCode).To(Equal(http.StatusTooManyRequests))
		}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
		g.Expect(refused.Header.Get("Retry-After")).NotTo(BeEmpty())
		// Exactly the source's bound is held, well under the shared bound.
		g.Expect(unanswered(t, held)).To(HaveLen(hooks.DefaultMaxRequestsPerSource))
		// Another source is served while the first one holds its requests; X-Forwarded-For,
		// written by the client, does not make it count as the first one.
		resp, err := sendFrom(t, other, "/hooks/argocd", strings.NewReader(`{"app":"none","namespace":"default"}`),
			map[string]string{"Authorization": "Bearer " + argoToken, "X-Forwarded-For": greedy})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.StatusCode).To(Equal(http.StatusAccepted))
		// Nor does X-Forwarded-For let the first source past its bound.
		resp, err = sendFrom(t, greedy, "/hooks/argocd", strings.NewReader(`{}`),
			map[string]string{"Authorization": "Bearer " + argoToken, "X-Forwarded-For": other})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.StatusCode).To(Equal(http.StatusTooManyRequests))
	})

	t.Run("a request sent too slowly is cut off at the request deadline", func(t *testing.T) {
		g := NewWithT(t)
		const src = "127.0.0.4"
		conn := holdPostFrom(t, src, "/hooks/argocd", map[string]string{"Authorization": "Bearer " + argoToken})
		// The body trickles, a byte at a time: it would take 100 s to arrive, and every byte
		// keeps the connection busy, so only a deadline for the whole request cuts it off.
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := conn.Write([]byte("x")); err != nil {
						return
					}
				}
			}
		}()
		// Twice the deadline: generous, and still short of the 30 s read timeout the hooks had.
		g.Expect(conn.SetReadDeadline(time.Now().Add(2 * hooks.DefaultRequestTimeout))).To(Succeed())
		reader := bufio.NewReader(conn)
		resp, err := http.ReadResponse(reader, nil)
		g.Expect(err).NotTo(HaveOccurred(), "the server answers a request cut off at its deadline")
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusRequestTimeout), string(body))
		g.Expect(string(body)).To(ContainSubstring("not received within " + hooks.DefaultRequestTimeout.String()))
		// And closes the connection (EOF, or a reset once the trickle writes to the closed socket),
		// rather than waiting for more.
		_, err = reader.ReadByte()
		var netErr net.Error
		g.Expect(err).To(HaveOccurred())
		g.Expect(errors.As(err, &netErr) && netErr.Timeout()).To(BeFalse(), "the connection is closed, not idle: %v", err)
		// The source's slot is free again.
		resp, err = sendFrom(t, src, "/hooks/argocd", strings.NewReader(`{"app":"none","namespace":"default"}`),
			map[string]string{"Authorization": "Bearer " + argoToken})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.StatusCode).To(Equal(http.StatusAccepted))
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
