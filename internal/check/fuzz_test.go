package check

import (
	"net/url"
	"testing"

	"github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// FuzzHTTPCheckURL: a check's URL template, rendered with any version, either is refused before a
// request or is an http(s) URL with a host the target guard lets through.
func FuzzHTTPCheckURL(f *testing.F) {
	f.Add("https://tickets.example/ok/{{.Version}}", "1.4.2")
	f.Add("http://{{.Service}}.example/{{.Digest}}", "v1")
	f.Add("https://x.example/{{.Tag}}", "v1")
	f.Add("https://x.example/{{.Version", "v1")
	f.Add("http://{{.Version}}/", "127.0.0.1")
	f.Add("http://{{.Version}}/", "evil.svc")
	f.Add("http://a.example{{.Version}}/", "@169.254.169.254")
	f.Add("{{.Version}}://x.example/", "file")
	f.Fuzz(func(t *testing.T, rawURL, version string) {
		in := testInput()
		in.Version = version
		r := &Runner{}
		h, err := r.prepareHTTP(&v1alpha1.HTTPCheck{URL: rawURL}, in)
		if err != nil {
			return
		}
		u, err := url.Parse(h.url)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			t.Fatalf("prepared %q from %q, not an http(s) URL with a host", h.url, rawURL)
		}
		if err := (&targetGuard{}).checkHost(u.Hostname()); err != nil {
			t.Fatalf("prepared %q, whose host the guard refuses: %v", h.url, err)
		}
	})
}
