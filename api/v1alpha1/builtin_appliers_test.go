package v1alpha1

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// The CEL rules name the built-in kinds in lists of their own (a CRD rule cannot call Go): each
// list, and the message naming them, must be the table's.
func TestCELKindListsAreTheBuiltinAppliers(t *testing.T) {
	var want []string
	for _, b := range BuiltinAppliers() {
		want = append(want, "'"+b.Kind+"'")
	}
	slices.Sort(want)
	// The Stage's API is split by concern (stage_types.go, stage_applier_types.go, ...).
	files, err := filepath.Glob("stage*_types.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no stage*_types.go here: %v", err)
	}
	var src []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	lists := regexp.MustCompile(`kind in \[([^\]]*)\]`).FindAllStringSubmatch(string(src), -1)
	if len(lists) < 4 {
		t.Fatalf("found %d kind lists in the CEL rules of stage*_types.go, want at least 4: has the rule's spelling changed?", len(lists))
	}
	for i, l := range lists {
		t.Run(l[0], func(t *testing.T) {
			g := NewWithT(t)
			got := strings.Split(strings.ReplaceAll(l[1], " ", ""), ",")
			slices.Sort(got)
			g.Expect(got).To(Equal(want), "kind list %d of the CEL rules", i)
		})
	}
	t.Run("the apiVersion message names every kind", func(t *testing.T) {
		g := NewWithT(t)
		msg := regexp.MustCompile(`only ([A-Za-z, ]+) are known without it`).FindStringSubmatch(string(src))
		g.Expect(msg).To(HaveLen(2))
		named := strings.FieldsFunc(strings.ReplaceAll(msg[1], " and ", ","), func(r rune) bool { return r == ',' || r == ' ' })
		var kinds []string
		for _, b := range BuiltinAppliers() {
			kinds = append(kinds, b.Kind)
		}
		g.Expect(named).To(ConsistOf(kinds))
	})
}
