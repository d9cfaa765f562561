package cmp

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// renderPlain reads the YAML and JSON files of the app directory, like an Argo CD directory source
// without recursion. Hidden files (.stagecoach.yaml among them) are not manifests.
func renderPlain(appDir, root string) ([]document, error) {
	entries, err := os.ReadDir(appDir)
	if err != nil {
		return nil, fmt.Errorf("failed to read the app directory %s: %w", relTo(root, appDir), err)
	}
	var names []string
	for _, e := range entries {
		switch strings.ToLower(filepath.Ext(e.Name())) {
		case ".yaml", ".yml", ".json":
			if !strings.HasPrefix(e.Name(), ".") {
				names = append(names, e.Name())
			}
		}
	}
	sort.Strings(names)
	var docs []document
	for _, name := range names {
		path := filepath.Join(appDir, name)
		real, err := resolveInside(path, root)
		if err != nil {
			return nil, err
		}
		if info, err := os.Stat(real); err == nil && info.IsDir() {
			continue
		}
		data, err := os.ReadFile(real)
		if err != nil {
			return nil, fmt.Errorf("failed to read %s: %w", relTo(root, path), err)
		}
		found, err := parseManifests(data, relTo(root, path))
		if err != nil {
			return nil, err
		}
		docs = append(docs, found...)
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("%s holds no Kubernetes objects in .yaml, .yml or .json files: refusing to render an empty app, which Argo CD would prune to nothing", relTo(root, appDir))
	}
	return docs, nil
}
