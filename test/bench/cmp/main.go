// Command cmp compares the config management plugin's render of the Kustomize fixture (what
// `stagecoach cmp generate` does, in-process) with a plain `kustomize build` of the same fixture
// through the same library, and prints both times and their ratio (target ≤ 1.10); it exits 1 above
// the target. The two run in alternating rounds and the fastest round of each is compared: other
// work on the machine only ever adds time, so the fastest round is the least disturbed.
// Run it from the repository root with `go run ./test/bench/cmp` (part of `make bench`).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/stagecoach-dev/stagecoach/plugin/cmp"
)

const target = 1.10

func main() {
	repo := flag.String("repo", "plugin/cmp/testdata/repo", "Fixture repository.")
	app := flag.String("app", "apps/kustomize", "Kustomize app inside the fixture repository.")
	rounds := flag.Int("rounds", 7, "Alternating rounds of each benchmark.")
	flag.Parse()
	testing.Init()

	dir := filepath.Join(*repo, *app)
	env := map[string]string{
		cmp.EnvAppName: "web", cmp.EnvAppNamespace: "web-prod", cmp.EnvAppSourcePath: *app,
		cmp.EnvDigest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	}
	opts := cmp.Options{Dir: dir, Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	ctx := context.Background()

	render := func(b *testing.B) {
		for b.Loop() {
			if _, err := cmp.Render(ctx, opts); err != nil {
				b.Fatal(err)
			}
		}
	}
	build := func(b *testing.B) {
		for b.Loop() {
			resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := resources.AsYaml(); err != nil {
				b.Fatal(err)
			}
		}
	}
	if _, err := cmp.Render(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, "render of the fixture failed:", err)
		os.Exit(1)
	}

	var renderNs, buildNs []float64
	for range *rounds {
		renderNs = append(renderNs, float64(testing.Benchmark(render).NsPerOp()))
		buildNs = append(buildNs, float64(testing.Benchmark(build).NsPerOp()))
	}
	r, k := slices.Min(renderNs), slices.Min(buildNs)
	ratio := r / k
	fmt.Printf("cmp generate (render) %s: %.2f ms/op\n", dir, r/1e6)
	fmt.Printf("kustomize build       %s: %.2f ms/op\n", dir, k/1e6)
	fmt.Printf("ratio %.3f (target ≤ %.2f, fastest of %d alternating rounds each)\n", ratio, target, *rounds)
	if ratio > target {
		os.Exit(1)
	}
}
