package check

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/template"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// maxBodyBytes bounds how much of a response is read: a health endpoint answering megabytes is
// a misconfigured check, not something to buffer.
const maxBodyBytes = 1 << 20

// httpCheck is an HTTP check ready to run: URL rendered, defaults applied.
type httpCheck struct {
	client  *http.Client
	method  string
	url     string
	status  int
	body    *v1alpha1.FieldMatch
	payload []byte // the JSON document a POST sends
}

// urlData is what a URL template sees: {{.Stage}}, {{.Version}}, {{.Digest}}, …
type urlData struct {
	Stage, Namespace, Environment, Service, Version, Digest, Phase string
}

func (r *Runner) prepareHTTP(spec *v1alpha1.HTTPCheck, in Input) (*httpCheck, error) {
	h := &httpCheck{
		client: r.HTTPClient,
		method: spec.Method,
		url:    spec.URL,
		status: int(spec.ExpectedStatus),
		body:   spec.Body,
	}
	if h.client == nil {
		h.client = &http.Client{}
	}
	if h.method == "" {
		h.method = http.MethodGet
	}
	if h.status == 0 {
		h.status = http.StatusOK
	}
	data := urlData{Stage: in.Stage, Namespace: in.Namespace, Environment: in.Environment, Service: in.Service,
		Version: in.Version, Digest: in.Digest, Phase: string(in.Phase)}
	// Only URLs with an action are templates, so a literal URL is never misread.
	if strings.Contains(h.url, "{{") {
		tmpl, err := template.New("url").Option("missingkey=error").Parse(h.url)
		if err != nil {
			return nil, fmt.Errorf("url %q is not a valid template: %v; use {{.Version}}, {{.Digest}}, {{.Stage}}, {{.Namespace}}, {{.Environment}}, {{.Service}} or {{.Phase}}", spec.URL, err)
		}
		var b strings.Builder
		if err := tmpl.Execute(&b, data); err != nil {
			return nil, fmt.Errorf("url %q: %v; the fields are .Version, .Digest, .Stage, .Namespace, .Environment, .Service and .Phase", spec.URL, err)
		}
		h.url = b.String()
	}
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

	what := h.method + " " + h.url
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
		return attempt{message: fmt.Sprintf("%s answered %d, want %d%s", what, resp.StatusCode, h.status, excerpt(got))}
	}
	if h.body == nil {
		return attempt{passed: true, message: fmt.Sprintf("%s answered %d", what, resp.StatusCode)}
	}
	if len(got) > maxBodyBytes {
		return attempt{message: fmt.Sprintf("%s answered a body over %d bytes; point the check at a smaller endpoint", what, maxBodyBytes)}
	}
	if !gjson.ValidBytes(got) {
		return attempt{message: fmt.Sprintf("%s answered %d with a body that is not JSON, so body.key %q cannot be read%s", what, resp.StatusCode, h.body.Key, excerpt(got))}
	}
	field := gjson.GetBytes(got, h.body.Key)
	if !field.Exists() {
		return attempt{message: fmt.Sprintf("%s answered %d, but its body has no %q (want %q)%s", what, resp.StatusCode, h.body.Key, h.body.Value, excerpt(got))}
	}
	if field.String() != h.body.Value {
		return attempt{message: fmt.Sprintf("%s answered %d with %s = %q, want %q", what, resp.StatusCode, h.body.Key, field.String(), h.body.Value)}
	}
	return attempt{passed: true, message: fmt.Sprintf("%s answered %d with %s = %q", what, resp.StatusCode, h.body.Key, field.String())}
}

// excerpt quotes the start of a body, so a failed check shows what the endpoint said.
func excerpt(body []byte) string {
	const maxExcerpt = 200
	if len(bytes.TrimSpace(body)) == 0 {
		return ""
	}
	s := string(bytes.TrimSpace(body))
	if len(s) > maxExcerpt {
		s = s[:maxExcerpt]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return fmt.Sprintf(" (body: %q)", s)
}
