package cmp

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// kindRank puts the objects others depend on first, the way kubectl and Helm order an install.
func kindRank(kind string) int {
	switch kind {
	case "Namespace":
		return 0
	case "CustomResourceDefinition":
		return 1
	default:
		return 2
	}
}

// sortKey orders objects: Namespaces, CRDs, then by API group, kind, namespace and name.
type sortKey struct {
	rank                         int
	group, kind, namespace, name string
}

func keyOf(n *yaml.Node) sortKey {
	group, _, _ := strings.Cut(scalarAt(n, "apiVersion"), "/")
	if !strings.Contains(scalarAt(n, "apiVersion"), "/") {
		group = "" // the core group: "v1"
	}
	kind := scalarAt(n, "kind")
	return sortKey{rank: kindRank(kind), group: group, kind: kind,
		namespace: scalarAt(n, "metadata", "namespace"), name: scalarAt(n, "metadata", "name")}
}

func (a sortKey) less(b sortKey) bool {
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	for _, p := range [][2]string{{a.group, b.group}, {a.kind, b.kind}, {a.namespace, b.namespace}, {a.name, b.name}} {
		if p[0] != p[1] {
			return p[0] < p[1]
		}
	}
	return false
}

// encode writes the objects as one YAML stream in a deterministic order.
func encode(docs []document) ([]byte, error) {
	keys := make([]sortKey, len(docs))
	order := make([]int, len(docs))
	for i, d := range docs {
		keys[i], order[i] = keyOf(d.node), i
	}
	sort.SliceStable(order, func(i, j int) bool { return keys[order[i]].less(keys[order[j]]) })
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	for _, i := range order {
		blockStyle(docs[i].node)
		if err := enc.Encode(docs[i].node); err != nil {
			return nil, fmt.Errorf("failed to write the object from %s as YAML: %w", docs[i].source, err)
		}
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("failed to write the rendered objects: %w", err)
	}
	return buf.Bytes(), nil
}

// blockStyle writes mappings and sequences in block style, so that every object reads the same
// whichever renderer (or JSON file) it came from. Scalars keep their quoting: it carries meaning.
func blockStyle(n *yaml.Node) {
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		n.Style &^= yaml.FlowStyle
		for _, child := range n.Content {
			blockStyle(child)
		}
	}
}
