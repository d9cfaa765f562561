package cmp

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	yaml "go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// renderKustomize builds the kustomization in appDir with the kustomize library (what `kustomize
// build` does), reading only files inside root and fetching nothing remote.
func renderKustomize(appDir, root string) ([]document, error) {
	fsys := boundedFS{FileSystem: filesys.MakeFsOnDisk(), root: root, checked: map[string]error{}}
	if err := checkKustomization(appDir, root, map[string]bool{}); err != nil {
		return nil, err
	}
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(&fsys, appDir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build of %s failed: %s", relTo(root, appDir), oneLine(err.Error()))
	}
	docs := make([]document, 0, resources.Size())
	for _, r := range resources.Resources() {
		docs = append(docs, document{node: r.YNode(), source: fmt.Sprintf("%s (%s)", relTo(root, appDir), r.CurId())})
	}
	return docs, nil
}

// kustomizationFile returns the kustomization file in dir, or "".
func kustomizationFile(dir string) string {
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		if info, err := os.Stat(filepath.Join(dir, name)); err == nil && !info.IsDir() {
			return filepath.Join(dir, name)
		}
	}
	return ""
}

// kustomizationRefs are the fields of a kustomization that name other files or kustomizations.
type kustomizationRefs struct {
	Resources             []string          `yaml:"resources"`
	Bases                 []string          `yaml:"bases"`
	Components            []string          `yaml:"components"`
	Generators            []string          `yaml:"generators"`
	Transformers          []string          `yaml:"transformers"`
	Validators            []string          `yaml:"validators"`
	Configurations        []string          `yaml:"configurations"`
	Crds                  []string          `yaml:"crds"`
	OpenAPI               map[string]string `yaml:"openapi"`
	PatchesStrategicMerge []string          `yaml:"patchesStrategicMerge"`
	Patches               []pathRef         `yaml:"patches"`
	PatchesJSON6902       []pathRef         `yaml:"patchesJson6902"`
	Replacements          []pathRef         `yaml:"replacements"`
	ConfigMapGenerator    []generatorRefs   `yaml:"configMapGenerator"`
	SecretGenerator       []generatorRefs   `yaml:"secretGenerator"`
	HelmCharts            []any             `yaml:"helmCharts"`
}

type pathRef struct {
	Path string `yaml:"path"`
}

type generatorRefs struct {
	Files []string `yaml:"files"`
	Envs  []string `yaml:"envs"`
	Env   string   `yaml:"env"`
}

// checkKustomization refuses what would make kustomize reach the network (remote bases, which it
// clones with git, and http(s) files, which it downloads) in dir's kustomization and every local
// kustomization it includes. Kustomize itself reports everything else wrong with the file.
func checkKustomization(dir, root string, seen map[string]bool) error {
	if seen[dir] {
		return nil
	}
	seen[dir] = true
	file := kustomizationFile(dir)
	if file == "" {
		return nil // kustomize reports the missing file itself
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("failed to read %s: %w", relTo(root, file), err)
	}
	var k kustomizationRefs
	if err := yaml.Unmarshal(data, &k); err != nil {
		return yamlError(relTo(root, file), relTo(root, file), err)
	}
	remote := func(field, ref string) error {
		return fmt.Errorf("%s: %s entry %q is remote: the stagecoach plugin does not fetch from the network, vendor it into the repository", relTo(root, file), field, ref)
	}
	// Entries that may name another kustomization: each must be a local file or directory.
	for _, entries := range []struct {
		field string
		refs  []string
	}{{"resources", k.Resources}, {"bases", k.Bases}, {"components", k.Components},
		{"generators", k.Generators}, {"transformers", k.Transformers}, {"validators", k.Validators}} {
		for _, ref := range entries.refs {
			if strings.Contains(ref, "\n") || strings.HasPrefix(strings.TrimSpace(ref), "apiVersion") {
				continue // an inline plugin configuration, not a path
			}
			if isURL(ref) {
				return remote(entries.field, ref)
			}
			path := filepath.Join(dir, ref)
			info, err := os.Stat(path)
			if err != nil {
				return fmt.Errorf("%s: %s entry %q is not a file or directory in the repository (remote bases are not fetched: vendor them into the repository)", relTo(root, file), entries.field, ref)
			}
			if info.IsDir() {
				real, err := resolveInside(path, root)
				if err != nil {
					return fmt.Errorf("%s: %s entry %q: %w", relTo(root, file), entries.field, ref, err)
				}
				if err := checkKustomization(real, root, seen); err != nil {
					return err
				}
			}
		}
	}
	// Entries that name a file, which kustomize would download when given a URL.
	files := append(append(append([]string{}, k.Configurations...), k.Crds...), k.OpenAPI["path"])
	files = append(files, k.PatchesStrategicMerge...)
	for _, p := range append(append(append([]pathRef{}, k.Patches...), k.PatchesJSON6902...), k.Replacements...) {
		files = append(files, p.Path)
	}
	for _, g := range append(append([]generatorRefs{}, k.ConfigMapGenerator...), k.SecretGenerator...) {
		files = append(append(append(files, g.Files...), g.Envs...), g.Env)
	}
	for _, f := range files {
		if _, value, ok := strings.Cut(f, "="); ok && isURL(value) {
			f = value // a generator's key=path
		}
		if isURL(f) {
			return remote("file", f)
		}
	}
	if len(k.HelmCharts) > 0 {
		return fmt.Errorf("%s: helmCharts needs the helm binary and the network; render the chart with renderer: helm in its own app directory instead", relTo(root, file))
	}
	return nil
}

func isURL(s string) bool {
	s = strings.TrimSpace(s)
	return strings.Contains(s, "://") || strings.HasPrefix(s, "git@")
}

// boundedFS is the disk file system kustomize reads through, refusing every path whose symlinks
// lead outside root. One build asks about the same paths many times, so answers are remembered
// (the tree does not change during a render).
type boundedFS struct {
	filesys.FileSystem
	root    string
	mu      sync.Mutex
	checked map[string]error
}

func (b *boundedFS) check(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	err, ok := b.checked[abs]
	if !ok {
		_, err = resolveInside(abs, b.root)
		b.checked[abs] = err
	}
	return abs, err
}

func (b *boundedFS) Open(path string) (filesys.File, error) {
	if _, err := b.check(path); err != nil {
		return nil, err
	}
	return b.FileSystem.Open(path)
}

func (b *boundedFS) ReadFile(path string) ([]byte, error) {
	if _, err := b.check(path); err != nil {
		return nil, err
	}
	return b.FileSystem.ReadFile(path)
}

func (b *boundedFS) ReadDir(path string) ([]string, error) {
	if _, err := b.check(path); err != nil {
		return nil, err
	}
	return b.FileSystem.ReadDir(path)
}

func (b *boundedFS) IsDir(path string) bool {
	_, err := b.check(path)
	return err == nil && b.FileSystem.IsDir(path)
}

func (b *boundedFS) Exists(path string) bool {
	_, err := b.check(path)
	return err == nil && b.FileSystem.Exists(path)
}

// CleanedAbs resolves the directory's symlinks itself (kustomize calls it for every path it
// touches), so only the directory's containment and a symlinked file name remain to check.
func (b *boundedFS) CleanedAbs(path string) (filesys.ConfirmedDir, string, error) {
	dir, file, err := b.FileSystem.CleanedAbs(path)
	if err != nil {
		return "", "", err
	}
	if !within(string(dir), b.root) {
		return "", "", fmt.Errorf("%s resolves to %s, outside the repository root %s: the stagecoach plugin reads only files inside the repository, replace the symlink with the files", relTo(b.root, path), dir, b.root)
	}
	if file != "" {
		if _, err := b.check(dir.Join(file)); err != nil {
			return "", "", err
		}
	}
	return dir, file, nil
}

func (b *boundedFS) Walk(path string, walkFn filepath.WalkFunc) error {
	if _, err := b.check(path); err != nil {
		return err
	}
	return b.FileSystem.Walk(path, func(p string, info os.FileInfo, err error) error {
		if err == nil {
			if _, cerr := b.check(p); cerr != nil {
				return cerr
			}
		}
		return walkFn(p, info, err)
	})
}

func (b *boundedFS) Glob(pattern string) ([]string, error) {
	matches, err := b.FileSystem.Glob(pattern)
	if err != nil {
		return nil, err
	}
	for _, m := range matches {
		if _, err := b.check(m); err != nil {
			return nil, err
		}
	}
	return matches, nil
}
