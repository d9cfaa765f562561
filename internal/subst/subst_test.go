package subst

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

type data struct{ Digest, Version string }

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, text, want, wantErr string
	}{
		{name: "a field", text: "ghcr.io/acme/web@{{ .Digest }}", want: "ghcr.io/acme/web@sha256:0123"},
		{name: "fields and trim markers", text: "{{- .Version -}} / {{.Digest}}", want: "v1/ sha256:0123"},
		{name: "plain text", text: "v1", want: "v1"},
		{name: "an unknown field", text: "{{ .Nope }}", wantErr: "can't evaluate field Nope"},
		{name: "a loop (range 1e12 would hold the controller)", text: "{{ range 3 }}x{{ end }}", wantErr: "is not a substitution"},
		{name: "a function", text: `{{ printf "%s" .Digest }}`, wantErr: "is not a substitution"},
		{name: "a pipeline", text: "{{ .Digest | print }}", wantErr: "is not a substitution"},
		{name: "a variable", text: "{{ $x := .Digest }}{{ $x }}", wantErr: "is not a substitution"},
		{name: "a nested field", text: "{{ .Digest.Len }}", wantErr: "is not a substitution"},
		{name: "a constant", text: `{{ "x" }}`, want: "x"},
		{name: "a condition on a comparison", text: `{{ if eq .Version "v1" }}--fail{{ else }}--pass{{ end }}`, want: "--fail"},
		{name: "a condition on a field, nested", text: `{{ if .Digest }}{{ if and (ne .Version "v2") (not false) }}{{ .Version }}{{ end }}{{ end }}`, want: "v1"},
		{name: "a condition calling a function", text: `{{ if eq (printf "%s" .Version) "v1" }}x{{ end }}`, wantErr: "is not a substitution"},
		{name: "a loop inside a condition", text: `{{ if .Digest }}{{ range 3 }}x{{ end }}{{ end }}`, wantErr: "is not a substitution"},
		{name: "a length", text: `{{ if eq (len .Digest) 11 }}x{{ end }}`, wantErr: "is not a substitution"},
		{name: "a with", text: `{{ with .Digest }}x{{ end }}`, wantErr: "is not a substitution"},
		{name: "a template call", text: `{{ define "a" }}{{ template "a" }}{{ end }}{{ template "a" }}`, wantErr: "is not a substitution"},
		{name: "the data itself", text: "{{ . }}", wantErr: "is not a substitution"},
		{name: "a comment", text: "v{{/* note */}}1", want: "v1"},
		{name: "does not parse", text: "{{", wantErr: "unclosed action"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			tmpl, err := Parse("value", tc.text, "use .Digest or .Version")
			if err == nil {
				var out string
				out, err = tmpl.Execute(data{Digest: "sha256:0123", Version: "v1"})
				if tc.wantErr == "" {
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(out).To(Equal(tc.want))
					return
				}
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

// What a Stage's author writes is parsed by the controller that serves every namespace: any text
// either fails to parse or substitutes in time and space bounded by its length.
func FuzzParse(f *testing.F) {
	f.Add("ghcr.io/acme/web@{{ .Digest }}")
	f.Add("{{ range 3 }}{{ .Digest }}{{ end }}")
	f.Add("{{- .Version -}}")
	f.Add(`{{ if eq .Version "v1" }}--fail{{ else }}{{ .Digest }}{{ end }}`)
	f.Add("{{")
	f.Fuzz(func(t *testing.T, text string) {
		tmpl, err := Parse("value", text, "")
		if err != nil {
			return
		}
		out, err := tmpl.Execute(data{Digest: "sha256:0123", Version: "v1"})
		if err != nil {
			return
		}
		// Each action prints at most a field, a constant from the text, or nothing.
		if len(out) > len(text)+len("sha256:0123")*strings.Count(text, "{{") {
			t.Fatalf("%q rendered %d bytes", text, len(out))
		}
	})
}
