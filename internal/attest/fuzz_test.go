package attest_test

import (
	"testing"

	"github.com/stagecoach-dev/stagecoach/internal/attest"
)

// A condition comes from a Stage's spec: compiling any text never panics, and a condition that
// compiled evaluates any statement to a verdict or an error, bounded by its cost limit.
func FuzzCompile(f *testing.F) {
	f.Add(`predicate.buildDefinition.buildType == "https://actions.github.io/buildtypes/workflow/v1"`, `{"predicate":{"buildDefinition":{"buildType":"x"}}}`)
	f.Add(`subject.exists(s, s.digest.sha256 != "")`, `{"subject":[{"digest":{"sha256":"ab"}}]}`)
	f.Add(`predicateType.startsWith("https://slsa.dev/")`, `{"predicateType":"https://slsa.dev/provenance/v1"}`)
	f.Add(`1 + 1`, `{}`)
	f.Add(`predicate.a.b.c`, `[]`)
	f.Add(`[1,2,3].map(x, [1,2,3].map(y, x*y)).size() > 0`, `{}`)
	f.Fuzz(func(t *testing.T, source, statement string) {
		c, err := attest.Compile(source)
		if err != nil {
			return
		}
		if c == nil {
			t.Fatal("Compile returned neither a condition nor an error")
		}
		_, _ = c.Holds(t.Context(), []byte(statement))
	})
}
