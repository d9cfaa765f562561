package gitwrite_test

import (
	"fmt"
	"testing"

	"github.com/stagecoach-dev/stagecoach/internal/gitedit"
	"github.com/stagecoach-dev/stagecoach/internal/gitwrite"
	"github.com/stagecoach-dev/stagecoach/internal/source/git/gittest"
)

// One promotion written to a 200-commit repository's environment branch: with the clone kept and
// fetched (what the controller does, one Writer for its life), beside a clone made afresh for each
// promotion (a Writer per write). Compare them with benchstat.
func BenchmarkWrite(b *testing.B) {
	srv := gittest.NewServer(b, gittest.Options{})
	srv.Commit("base", map[string]string{"README.md": "config\n"}, nil)
	srv.Branch("env/staging")
	for i := range 200 {
		srv.Commit(fmt.Sprintf("commit %d", i), map[string]string{
			fmt.Sprintf("overlays/env-%d/values.yaml", i%10): fmt.Sprintf("v: %d\n", i)}, nil)
	}
	srv.Commit("staging values", map[string]string{"overlays/staging/values.yaml": "image:\n  digest: none # Stagecoach\n"}, nil)
	srv.Checkout("main")
	n := 0
	write := func(b *testing.B, w *gitwrite.Writer) {
		n++
		req := gitwrite.Request{Key: srv.URL, URL: srv.URL, Branch: "env/staging", Message: "promote", Author: gitwrite.Author{Name: "b", Email: "b@b"},
			Edits: []gitwrite.Edit{{Path: "overlays/staging/values.yaml", Apply: func(c []byte) ([]byte, error) {
				return gitedit.Value(c, "image.digest", fmt.Sprintf("sha256:%064x", n))
			}}}}
		if _, err := w.Write(b.Context(), req); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("kept-clone", func(b *testing.B) {
		w := gitwrite.New()
		write(b, w)
		for b.Loop() {
			write(b, w)
		}
	})
	b.Run("clone-per-promotion", func(b *testing.B) {
		for b.Loop() {
			write(b, gitwrite.New())
		}
	})
}
