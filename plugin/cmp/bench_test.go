package cmp

import (
	"path/filepath"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// BenchmarkRenderKustomize renders the Kustomize fixture as `stagecoach cmp generate` does:
// checks, build, pinning, annotations, ordering and YAML output.
func BenchmarkRenderKustomize(b *testing.B) {
	opts := Options{Dir: filepath.Join(fixtureRepo, "apps/kustomize"),
		Env: lookup(argoEnv("apps/kustomize", map[string]string{EnvDigest: testDigest}))}
	for b.Loop() {
		if _, err := Render(b.Context(), opts); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKustomizeBuild is `kustomize build` of the same fixture with the same library: the
// baseline BenchmarkRenderKustomize is compared with (test/bench/cmp prints the ratio).
func BenchmarkKustomizeBuild(b *testing.B) {
	dir := filepath.Join(fixtureRepo, "apps/kustomize")
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
