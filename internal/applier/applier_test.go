package applier

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime/schema"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// Every built-in kind has an applier here (but the ApplicationSet, a fleet), and nothing else does.
func TestForServesEveryBuiltinKind(t *testing.T) {
	for _, b := range stagecoachv1.BuiltinAppliers() {
		t.Run(b.Kind, func(t *testing.T) {
			g := NewWithT(t)
			got := For(b.GroupKind(), Options{})
			if b.Kind == "ApplicationSet" {
				g.Expect(got).To(BeNil(), "an ApplicationSet is promoted per Application, never as one object")
				return
			}
			g.Expect(got).NotTo(BeNil(), "no applier for built-in kind %s", b.Kind)
			g.Expect(For(schema.GroupKind{Group: "example.com", Kind: b.Kind}, Options{})).To(BeNil(), "the same kind in another group is not built in")
		})
	}
	t.Run("no applier outside the table", func(t *testing.T) {
		g := NewWithT(t)
		for kind := range builders {
			_, ok := stagecoachv1.LookupBuiltinApplier(kind)
			g.Expect(ok).To(BeTrue(), "applier for %s, which stagecoachv1.BuiltinAppliers does not list", kind)
		}
	})
}
