package runcheck

import (
	"testing"

	"github.com/stagecoach-dev/stagecoach/internal/check"
)

// A run's template comes from a Stage's spec: rendering any bytes never panics, and what renders
// is an object with the values substituted, never a template left half done.
func FuzzRender(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"generateName":"smoke-"},"spec":{"template":{"spec":{"containers":[{"name":"t","image":"busybox","args":["{{ .Version }}","{{ .Digest }}"]}]}}}}`))
	f.Add([]byte(`{"kind":"Job","metadata":{"name":"{{ .Stage }}-{{ .Promotion }}"}}`))
	f.Add([]byte(`{"kind":"Job","spec":{"x":"{{ .Nope }}"}}`))
	f.Add([]byte(`{"kind":"Job","spec":{"x":"{{"}}`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte(`{"a":[{"b":["{{ .Service }}",1,true,null]}]}`))
	in := check.Input{Stage: "prod", Namespace: "shop", Environment: "prod", Service: "web", Version: "v1.2.3",
		Digest: "sha256:0123", Revision: "0123", Promotion: "prod-0123"}
	f.Fuzz(func(t *testing.T, raw []byte) {
		u, err := Render(raw, in)
		if err != nil {
			return
		}
		if u == nil || u.Object == nil {
			t.Fatal("Render returned neither an object nor an error")
		}
	})
}
