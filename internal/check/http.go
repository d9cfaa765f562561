package check

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/subst"
)

// maxBodyBytes bounds how much of a response is read: a health endpoint answering megabytes is
// a misconfigured check, not something to buffer.
const maxBodyBytes = 1 << 20

// httpCheck is an HTTP check ready to run: URL rendered, defaults applied.
type httpCheck struct {
	client  *http.Client
	guard   *targetGuard
	follow  bool
	method  string
	url     string
	status  int
	body    *v1alpha1.FieldMatch
	payload []byte // the JSON document a POST sends
	what    string // method and URL (without credentials), as messages name the call
}

// urlData is what a URL template sees: {{.Stage}}, {{.Version}}, {{.Digest}}, …
type urlData struct {
	Stage, Namespace, Environment, Service, Version, Digest, Phase string
}

func (r *Runner) prepareHTTP(spec *v1alpha1.HTTPCheck, in Input) (*httpCheck, error) {
	h := &httpCheck{
		guard:  &targetGuard{allowInternal: r.AllowInternalTargets},
		follow: spec.FollowRedirects,
		method: spec.Method,
		url:    spec.URL,
		status: int(spec.ExpectedStatus),
		body:   spec.Body,
	}
	// A copy of the client, so that this check's redirect policy is its own.
	client := r.httpClient()
	client.CheckRedirect = h.checkRedirect
	h.client = &client
	if h.method == "" {
		h.method = http.MethodGet
	}
	if h.status == 0 {
		h.status = http.StatusOK
	}
	if h.body != nil {
		// Refused here, before any request: the path is the Stage's, not the answer's, so
		// retrying cannot help.
		if err := plainPath(h.body.Key); err != nil {
			return nil, fmt.Errorf("body.key %q is not allowed: %v; %s", h.body.Key, err, bodyPathHelp)
		}
	}
	data := urlData{Stage: in.Stage, Namespace: in.Namespace, Environment: in.Environment, Service: in.Service,
		Version: in.Version, Digest: in.Digest, Phase: string(in.Phase)}
	// Only URLs with an action are templates, so a literal URL is never misread.
	if strings.Contains(h.url, "{{") {
		const fields = "use {{.Version}}, {{.Digest}}, {{.Stage}}, {{.Namespace}}, {{.Environment}}, {{.Service}} or {{.Phase}}"
		tmpl, err := subst.Parse("url", h.url, fields)
		if err != nil {
			return nil, fmt.Errorf("url %q is not a valid template: %v; %s", spec.URL, err, fields)
		}
		rendered, err := tmpl.Execute(data)
		if err != nil {
			return nil, fmt.Errorf("url %q: %v; the fields are .Version, .Digest, .Stage, .Namespace, .Environment, .Service and .Phase", spec.URL, err)
		}
		h.url = rendered
	}
	u, err := url.Parse(h.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("url %q is not an http(s) URL with a host", redactURL(h.url))
	}
	if err := h.guard.checkHost(u.Hostname()); err != nil {
		return nil, fmt.Errorf("url %q: %w", u.Redacted(), err)
	}
	h.url = u.String()
	h.what = h.method + " " + u.Redacted()
	if h.method == http.MethodPost {
		payload, err := json.Marshal(map[string]string{
			"stage": data.Stage, "namespace": data.Namespace, "environment": data.Environment,
			"service": data.Service, "version": data.Version, "digest": data.Digest, "phase": data.Phase,
		})
		if err != nil {
			return nil, err
		}
		h.payload = payload
	}
	return h, nil
}

func (h *httpCheck) try(ctx context.Context, timeout time.Duration) attempt {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	what := h.what
	var body io.Reader
	if h.payload != nil {
		body = bytes.NewReader(h.payload)
	}
	req, err := http.NewRequestWithContext(ctx, h.method, h.url, body)
	if err != nil {
		return attempt{message: fmt.Sprintf("%s: %v", what, err), permanent: true}
	}
	req.Header.Set("User-Agent", "stagecoach-check")
	if h.payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if h.body != nil {
		req.Header.Set("Accept", "application/json")
	}

	resp, err := h.client.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return attempt{message: fmt.Sprintf("%s: no answer within %s", what, timeout)}
		}
		var refused *refusedTargetError
		if errors.As(err, &refused) {
			return attempt{message: fmt.Sprintf("%s: %v", what, refused), permanent: true}
		}
		return attempt{message: fmt.Sprintf("%s: %v", what, err)}
	}
	defer func() { _ = resp.Body.Close() }()
	got, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes+1))
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return attempt{message: fmt.Sprintf("%s: answered %d but the body did not arrive within %s", what, resp.StatusCode, timeout)}
		}
		return attempt{message: fmt.Sprintf("%s: answered %d, reading the body: %v", what, resp.StatusCode, err)}
	}

	if resp.StatusCode != h.status {
		hint := ""
		if !h.follow && resp.StatusCode >= 300 && resp.StatusCode < 400 && resp.Header.Get("Location") != "" {
			hint = " (a redirect, not followed: set followRedirects: true on the check to follow it)"
		}
		return attempt{message: fmt.Sprintf("%s answered %d%s, want %d", what, resp.StatusCode, hint, h.status)}
	}
	if h.body == nil {
		return attempt{passed: true, message: fmt.Sprintf("%s answered %d", what, resp.StatusCode)}
	}
	if len(got) > maxBodyBytes {
		return attempt{message: fmt.Sprintf("%s answered a body over %d bytes; point the check at a smaller endpoint", what, maxBodyBytes)}
	}
	if !gjson.ValidBytes(got) {
		return attempt{message: fmt.Sprintf("%s answered %d with a body that is not JSON, so body.key %q cannot be read", what, resp.StatusCode, h.body.Key)}
	}
	field := gjson.GetBytes(got, h.body.Key)
	if !field.Exists() {
		return attempt{message: fmt.Sprintf("%s answered %d, but its body has no %q (want %q)", what, resp.StatusCode, h.body.Key, h.body.Value)}
	}
	if field.String() != h.body.Value {
		// The value found is not quoted: a check must not be a way to read another service's
		// answers into a Stage's status.
		return attempt{message: fmt.Sprintf("%s answered %d, but its body's %q is not %q", what, resp.StatusCode, h.body.Key, h.body.Value)}
	}
	return attempt{passed: true, message: fmt.Sprintf("%s answered %d with %s = %q", what, resp.StatusCode, h.body.Key, field.String())}
}

// checkRedirect follows a redirect only when the check allows it, and only to a target the
// controller may call (the dial-time guard checks the address again).
func (h *httpCheck) checkRedirect(req *http.Request, via []*http.Request) error {
	if !h.follow {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	return h.guard.checkHost(req.URL.Hostname())
}

const maxRedirects = 10

// redactURL hides the password of a URL that may not parse.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	if i := strings.LastIndex(raw, "@"); i >= 0 {
		if j := strings.Index(raw, "://"); j >= 0 && j < i {
			return raw[:j+3] + "xxxxx" + raw[i:]
		}
	}
	return raw
}
