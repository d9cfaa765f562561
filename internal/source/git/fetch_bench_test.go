package git

import (
	"fmt"
	"testing"

	"github.com/stagecoach-dev/stagecoach/internal/source/git/gittest"
)

// benchRepository is a served repository with n commits of a small config tree.
func benchRepository(b *testing.B, n int) *gittest.Server {
	b.Helper()
	srv := gittest.NewServer(b, gittest.Options{})
	for i := range n {
		srv.Commit(fmt.Sprintf("commit %d", i), map[string]string{
			fmt.Sprintf("overlays/env-%d/kustomization.yaml", i%10): fmt.Sprintf("v: %d", i)}, nil)
	}
	return srv
}

// A first fetch of a 200-commit repository (a clone), beside the incremental fetch each interval
// makes once the clone is kept: one new commit, then nothing new. Compare them with benchstat.
func BenchmarkGitFetch(b *testing.B) {
	srv := benchRepository(b, 200)
	b.Run("clone", func(b *testing.B) {
		for b.Loop() {
			r := &repository{}
			if err := r.fetch(b.Context(), srv.URL, Credentials{}, mainRefspec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("one-new-commit", func(b *testing.B) {
		r := &repository{}
		if err := r.fetch(b.Context(), srv.URL, Credentials{}, mainRefspec); err != nil {
			b.Fatal(err)
		}
		i := 0
		for b.Loop() {
			b.StopTimer()
			i++
			srv.Commit(fmt.Sprintf("more %d", i), map[string]string{"overlays/env-0/kustomization.yaml": fmt.Sprintf("more: %d", i)}, nil)
			b.StartTimer()
			if err := r.fetch(b.Context(), srv.URL, Credentials{}, mainRefspec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("up-to-date", func(b *testing.B) {
		r := &repository{}
		if err := r.fetch(b.Context(), srv.URL, Credentials{}, mainRefspec); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := r.fetch(b.Context(), srv.URL, Credentials{}, mainRefspec); err != nil {
				b.Fatal(err)
			}
		}
	})
}
