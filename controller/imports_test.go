package controller

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// The controller's packages import each other one way only (docs/architecture.md): most of it the
// compiler enforces (a step of a Promotion importing the Stage's reconciler is a cycle); this test
// holds the rest, so that, say, the notification receiver never grows a dependency on a reconciler.
func TestControllerImportsRunOneWay(t *testing.T) {
	const module = "github.com/stagecoach-dev/stagecoach/"
	allowed := map[string][]string{
		"controller":           {"controller/freeze", "controller/hooks", "controller/records", "controller/stage"},
		"controller/stage":     {"controller/chart", "controller/freeze", "controller/hooks", "controller/promotion", "controller/records"},
		"controller/records":   {"controller/promotion"},
		"controller/promotion": {"controller/chart"},
		"controller/chart":     nil,
		"controller/freeze":    nil,
		"controller/hooks":     nil,
	}
	dirs, err := filepath.Glob("*")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	packages := []string{"controller"}
	for _, d := range dirs {
		if info, err := os.Stat(d); err == nil && info.IsDir() && d != "testdata" {
			packages = append(packages, "controller/"+d)
		}
	}
	for _, pkg := range packages {
		t.Run(pkg, func(t *testing.T) {
			g := NewWithT(t)
			want, known := allowed[pkg]
			g.Expect(known).To(BeTrue(), "package %s is new: add it to this test and to docs/architecture.md", pkg)
			files, err := filepath.Glob(filepath.Join(strings.TrimPrefix(strings.TrimPrefix(pkg, "controller"), "/"), "*.go"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(files).NotTo(BeEmpty())
			for _, f := range files {
				parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
				g.Expect(err).NotTo(HaveOccurred())
				for _, imp := range parsed.Imports {
					path, _ := strconv.Unquote(imp.Path.Value)
					inner, ok := strings.CutPrefix(path, module)
					if !ok || !strings.HasPrefix(inner, "controller") {
						continue
					}
					g.Expect(slices.Contains(want, inner)).To(BeTrue(), "%s imports %s, which runs against the one way the controller's packages import each other", f, inner)
				}
			}
		})
	}
}
