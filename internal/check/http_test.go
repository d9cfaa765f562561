package check

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	plugincheck "github.com/stagecoach-dev/stagecoach/plugin/check"
)

func testInput() Input {
	return Input{
		Stage: "payments-prod", Namespace: "delivery", Environment: "prod", Service: "payments",
		Version: "1.4.2", Digest: "sha256:" + strings.Repeat("ab", 32), Phase: plugincheck.PhasePostApply,
	}
}

func noBackoff(int) time.Duration { return 0 }

// answer writes status and body.
func answer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func TestHTTPCheck(t *testing.T) {
	healthy := `{"status":"ok","checks":[{"name":"db","status":"up"},{"name":"cache","status":"down"}],"version":"1.4.2"}`
	tests := []struct {
		name string
		// handler gets a counter of the requests it saw, 1 for the first.
		handler      func(n int64, w http.ResponseWriter, r *http.Request)
		http         v1alpha1.HTTPCheck // URL is a path on the test server
		timeout      time.Duration
		retries      int32
		wantPassed   bool
		wantAttempts int
		wantMessage  []string
		// noMessage must not appear: a response body never goes into a message.
		noMessage []string
	}{
		{
			name:         "200 passes by default",
			handler:      func(_ int64, w http.ResponseWriter, r *http.Request) { answer(200, "")(w, r) },
			http:         v1alpha1.HTTPCheck{URL: "/healthz"},
			wantPassed:   true,
			wantAttempts: 1,
			wantMessage:  []string{`check "smoke" passed`, "GET ", "/healthz answered 200"},
		},
		{
			name:         "status mismatch fails and does not quote the body",
			handler:      func(_ int64, w http.ResponseWriter, r *http.Request) { answer(503, "database down\n")(w, r) },
			http:         v1alpha1.HTTPCheck{URL: "/healthz"},
			wantAttempts: 1,
			wantMessage:  []string{`check "smoke" failed`, "answered 503, want 200"},
			noMessage:    []string{"database down", "body:"},
		},
		{
			name:         "expected status other than 200",
			handler:      func(_ int64, w http.ResponseWriter, r *http.Request) { answer(204, "")(w, r) },
			http:         v1alpha1.HTTPCheck{URL: "/ready", ExpectedStatus: 204},
			wantPassed:   true,
			wantAttempts: 1,
			wantMessage:  []string{"answered 204"},
		},
		{
			name:         "200 is a mismatch when another status is expected",
			handler:      func(_ int64, w http.ResponseWriter, r *http.Request) { answer(200, "")(w, r) },
			http:         v1alpha1.HTTPCheck{URL: "/ready", ExpectedStatus: 204},
			wantAttempts: 1,
			wantMessage:  []string{"answered 200, want 204"},
		},
		{
			name:         "body gjson path matches",
			handler:      func(_ int64, w http.ResponseWriter, r *http.Request) { answer(200, healthy)(w, r) },
			http:         v1alpha1.HTTPCheck{URL: "/health", Body: &v1alpha1.FieldMatch{Key: "checks.0.status", Value: "up"}},
			wantPassed:   true,
			wantAttempts: 1,
			wantMessage:  []string{`checks.0.status = "up"`},
		},
		{
			name:         "body gjson path reads another value",
			handler:      func(_ int64, w http.ResponseWriter, r *http.Request) { answer(200, healthy)(w, r) },
			http:         v1alpha1.HTTPCheck{URL: "/health", Body: &v1alpha1.FieldMatch{Key: "checks.1.status", Value: "up"}},
			wantAttempts: 1,
			wantMessage:  []string{`check "smoke" failed`, `its body's "checks.1.status" is not "up"`},
			noMessage:    []string{"down"},
		},
		{
			name: "body gjson path with an escaped dot",
			handler: func(_ int64, w http.ResponseWriter, r *http.Request) {
				answer(200, `{"app.kubernetes.io/version":"1.4.2"}`)(w, r)
			},
			http:         v1alpha1.HTTPCheck{URL: "/health", Body: &v1alpha1.FieldMatch{Key: `app\.kubernetes\.io/version`, Value: "1.4.2"}},
			wantPassed:   true,
			wantAttempts: 1,
		},
		{
			// A query could test a secret a character at a time ("missing" or "different").
			name:         "body gjson query is not run",
			handler:      func(_ int64, w http.ResponseWriter, r *http.Request) { answer(200, `{"token":"s3cret"}`)(w, r) },
			http:         v1alpha1.HTTPCheck{URL: "/health", Body: &v1alpha1.FieldMatch{Key: `..#(token%"s*")`, Value: "s3cret"}},
			retries:      3,
			wantAttempts: 0,
			wantMessage:  []string{`check "smoke" cannot run: body.key "..#(token%\"s*\")" is not allowed`, "empty key", "use a plain path"},
		},
		{
			name:         "body gjson query on a key is not run",
			handler:      func(_ int64, w http.ResponseWriter, r *http.Request) { answer(200, healthy)(w, r) },
			http:         v1alpha1.HTTPCheck{URL: "/health", Body: &v1alpha1.FieldMatch{Key: `checks.#(name=="db").status`, Value: "up"}},
			wantAttempts: 0,
			wantMessage:  []string{`body.key "checks.#(name==\"db\").status" is not allowed: it has a query (#(...)) at position 8`, "checks.0.status"},
		},
		{
			name:         "body gjson modifier is not run",
			handler:      func(_ int64, w http.ResponseWriter, r *http.Request) { answer(200, `{"token":"s3cret"}`)(w, r) },
			http:         v1alpha1.HTTPCheck{URL: "/health", Body: &v1alpha1.FieldMatch{Key: `@this.token`, Value: "s3cret"}},
			wantAttempts: 0,
			wantMessage:  []string{`body.key "@this.token" is not allowed: it has a modifier (@) at position 1`},
		},
		{
			name:         "body gjson path missing",
			handler:      func(_ int64, w http.ResponseWriter, r *http.Request) { answer(200, healthy)(w, r) },
			http:         v1alpha1.HTTPCheck{URL: "/health", Body: &v1alpha1.FieldMatch{Key: "build.commit", Value: "abc"}},
			wantAttempts: 1,
			wantMessage:  []string{`its body has no "build.commit" (want "abc")`},
			noMessage:    []string{"1.4.2", "cache"},
		},
		{
			name:         "body is not JSON",
			handler:      func(_ int64, w http.ResponseWriter, r *http.Request) { answer(200, "<html>ok</html>")(w, r) },
			http:         v1alpha1.HTTPCheck{URL: "/health", Body: &v1alpha1.FieldMatch{Key: "status", Value: "ok"}},
			wantAttempts: 1,
			wantMessage:  []string{"body that is not JSON", `body.key "status"`},
			noMessage:    []string{"html"},
		},
		{
			name: "no answer within the timeout",
			handler: func(_ int64, w http.ResponseWriter, r *http.Request) {
				<-r.Context().Done() // until the runner gives up
			},
			http:         v1alpha1.HTTPCheck{URL: "/slow"},
			timeout:      50 * time.Millisecond,
			wantAttempts: 1,
			wantMessage:  []string{"/slow: no answer within 50ms"},
		},
		{
			name: "retries until it passes",
			handler: func(n int64, w http.ResponseWriter, r *http.Request) {
				if n < 3 {
					answer(502, "warming up")(w, r)
					return
				}
				answer(200, `{"status":"ok"}`)(w, r)
			},
			http:         v1alpha1.HTTPCheck{URL: "/health", Body: &v1alpha1.FieldMatch{Key: "status", Value: "ok"}},
			retries:      5,
			wantPassed:   true,
			wantAttempts: 3,
			wantMessage:  []string{`check "smoke" passed`},
		},
		{
			name:         "retries exhausted",
			handler:      func(_ int64, w http.ResponseWriter, r *http.Request) { answer(500, "")(w, r) },
			http:         v1alpha1.HTTPCheck{URL: "/health"},
			retries:      2,
			wantAttempts: 3,
			wantMessage:  []string{`check "smoke" failed 3 attempts; last: GET `, "answered 500, want 200"},
		},
		{
			name: "URL template sees the version",
			handler: func(_ int64, w http.ResponseWriter, r *http.Request) {
				want := "/delivery/payments-prod/versions/1.4.2/sha256:" + strings.Repeat("ab", 32)
				if r.URL.Path != want || r.URL.Query().Get("env") != "prod" {
					answer(404, r.URL.String())(w, r)
					return
				}
				answer(200, "")(w, r)
			},
			http:         v1alpha1.HTTPCheck{URL: "/{{.Namespace}}/{{.Stage}}/versions/{{.Version}}/{{.Digest}}?env={{.Environment}}"},
			wantPassed:   true,
			wantAttempts: 1,
		},
		{
			name:         "URL template naming an unknown field is not attempted",
			handler:      func(_ int64, w http.ResponseWriter, r *http.Request) { answer(200, "")(w, r) },
			http:         v1alpha1.HTTPCheck{URL: "/versions/{{.Tag}}"},
			retries:      3,
			wantAttempts: 0,
			wantMessage:  []string{`check "smoke" cannot run: url`, "can't evaluate field Tag", ".Version"},
		},
		{
			name:         "a URL template that loops is not attempted",
			handler:      func(_ int64, w http.ResponseWriter, r *http.Request) { answer(200, "")(w, r) },
			http:         v1alpha1.HTTPCheck{URL: "/versions/{{ range 3 }}{{.Version}}{{ end }}"},
			wantAttempts: 0,
			wantMessage:  []string{`check "smoke" cannot run: url`, "is not a substitution"},
		},
		{
			name:         "URL template that does not parse is not attempted",
			handler:      func(_ int64, w http.ResponseWriter, r *http.Request) { answer(200, "")(w, r) },
			http:         v1alpha1.HTTPCheck{URL: "/versions/{{.Version"},
			wantAttempts: 0,
			wantMessage:  []string{`check "smoke" cannot run: url`, "not a valid template"},
		},
		{
			name: "POST sends the version as JSON",
			handler: func(_ int64, w http.ResponseWriter, r *http.Request) {
				var got map[string]string
				if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" ||
					json.NewDecoder(r.Body).Decode(&got) != nil {
					answer(400, "")(w, r)
					return
				}
				_ = json.NewEncoder(w).Encode(got)
			},
			http: v1alpha1.HTTPCheck{URL: "/gate", Method: http.MethodPost,
				Body: &v1alpha1.FieldMatch{Key: "digest", Value: "sha256:" + strings.Repeat("ab", 32)}},
			wantPassed:   true,
			wantAttempts: 1,
			wantMessage:  []string{"POST "},
		},
		{
			name: "HEAD",
			handler: func(_ int64, w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodHead {
					answer(405, "")(w, r)
					return
				}
				answer(200, "")(w, r)
			},
			http:         v1alpha1.HTTPCheck{URL: "/", Method: http.MethodHead},
			wantPassed:   true,
			wantAttempts: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var requests atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tt.handler(requests.Add(1), w, r)
			}))
			t.Cleanup(srv.Close)
			g.Expect(srv.URL).To(HavePrefix("http://127.0.0.1:"))

			spec := tt.http
			spec.URL = srv.URL + spec.URL
			c := v1alpha1.Check{Name: "smoke", HTTP: &spec, Retries: tt.retries}
			if tt.timeout > 0 {
				c.Timeout = &metav1.Duration{Duration: tt.timeout}
			}
			r := &Runner{HTTPClient: srv.Client(), Backoff: noBackoff, AllowInternalTargets: true}

			res := r.Run(t.Context(), c, testInput())
			t.Log(res.Message)
			g.Expect(res.Name).To(Equal("smoke"))
			g.Expect(res.Passed).To(Equal(tt.wantPassed), res.Message)
			g.Expect(res.Attempts).To(Equal(tt.wantAttempts), res.Message)
			g.Expect(requests.Load()).To(BeEquivalentTo(tt.wantAttempts), "one request per attempt")
			for _, m := range tt.wantMessage {
				g.Expect(res.Message).To(ContainSubstring(m))
			}
			for _, m := range tt.noMessage {
				g.Expect(res.Message).NotTo(ContainSubstring(m))
			}
		})
	}
}

func TestRetriesWaitTheBackoff(t *testing.T) {
	tests := []struct {
		name        string
		retries     int32
		wantWaitsOn []int
	}{
		{name: "no retries, no wait", retries: 0, wantWaitsOn: nil},
		{name: "a wait before every retry", retries: 3, wantWaitsOn: []int{1, 2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := httptest.NewServer(answer(500, ""))
			t.Cleanup(srv.Close)
			var waits []int
			r := &Runner{AllowInternalTargets: true, Backoff: func(retry int) time.Duration { waits = append(waits, retry); return 0 }}

			res := r.Run(t.Context(), v1alpha1.Check{Name: "smoke", HTTP: &v1alpha1.HTTPCheck{URL: srv.URL}, Retries: tt.retries}, testInput())
			g.Expect(res.Passed).To(BeFalse())
			g.Expect(waits).To(Equal(tt.wantWaitsOn))
		})
	}
}

func TestRunStopsWhenTheCallerGivesUp(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(answer(500, ""))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancelCause(t.Context())
	// The caller gives up during the first wait: the retries are not made.
	r := &Runner{AllowInternalTargets: true, Backoff: func(int) time.Duration {
		cancel(errors.New("stage deleted"))
		return time.Hour
	}}

	res := r.Run(ctx, v1alpha1.Check{Name: "smoke", HTTP: &v1alpha1.HTTPCheck{URL: srv.URL}, Retries: 5}, testInput())
	g.Expect(res.Passed).To(BeFalse())
	g.Expect(res.Attempts).To(Equal(1))
	g.Expect(res.Message).To(And(ContainSubstring(`check "smoke" stopped after 1 attempt(s)`), ContainSubstring("stage deleted"), ContainSubstring("answered 500")))
}

func TestMalformedChecks(t *testing.T) {
	tests := []struct {
		name        string
		check       v1alpha1.Check
		wantMessage string
	}{
		{name: "no kind", check: v1alpha1.Check{Name: "empty"}, wantMessage: `check "empty" sets none of http, plugin and run`},
		{name: "two kinds", check: v1alpha1.Check{Name: "both", HTTP: &v1alpha1.HTTPCheck{URL: "http://127.0.0.1:1"}, Plugin: &v1alpha1.PluginCheck{Name: "x"}},
			wantMessage: `check "both" sets more than one of http, plugin and run`},
		{name: "a run where the controller creates no runs", check: v1alpha1.Check{Name: "job", Run: &v1alpha1.RunCheck{}},
			wantMessage: `check "job" cannot run: this controller creates no run objects`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			res := (&Runner{}).Run(t.Context(), tt.check, testInput())
			g.Expect(res.Name).To(Equal(tt.check.Name))
			g.Expect(res.Passed).To(BeFalse())
			g.Expect(res.Attempts).To(BeZero())
			g.Expect(res.Message).To(HavePrefix(tt.wantMessage))
		})
	}
}

func TestDefaultBackoff(t *testing.T) {
	tests := []struct {
		retry int
		want  time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {4, 8 * time.Second}, {5, 10 * time.Second}, {10, 10 * time.Second}}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.retry), func(t *testing.T) {
			NewWithT(t).Expect(defaultBackoff(tt.retry)).To(Equal(tt.want))
		})
	}
}

func BenchmarkHTTPCheckBodyMatch(b *testing.B) {
	srv := httptest.NewServer(answer(200, `{"status":"ok","checks":[{"name":"db","status":"up"}]}`))
	b.Cleanup(srv.Close)
	c := v1alpha1.Check{Name: "smoke", HTTP: &v1alpha1.HTTPCheck{URL: srv.URL + "/v/{{.Version}}",
		Body: &v1alpha1.FieldMatch{Key: "checks.0.status", Value: "up"}}}
	r := &Runner{HTTPClient: srv.Client(), AllowInternalTargets: true}
	in := testInput()
	for b.Loop() {
		if res := r.Run(b.Context(), c, in); !res.Passed {
			b.Fatal(res.Message)
		}
	}
}
