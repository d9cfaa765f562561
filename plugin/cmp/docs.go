package cmp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// document is one rendered Kubernetes object.
type document struct {
	node   *yaml.Node // a mapping node
	source string     // file (and line) it came from, for messages
}

var (
	yamlLinePrefix = regexp.MustCompile(`^(yaml: )?(unmarshal errors:\s*)?(line \d+: )?`)
	yamlLine       = regexp.MustCompile(`line (\d+)`)
)

// yamlError names the file and the line the parser's error points at (else fallback).
func yamlError(name, fallback string, err error) error {
	where := fallback
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		where = name + ":" + m[1]
	}
	return fmt.Errorf("%s: %s", where, oneLine(yamlLinePrefix.ReplaceAllString(err.Error(), "")))
}

// parseManifests parses a YAML (or JSON) stream of Kubernetes objects. name is how errors name the
// stream; errors carry the line where the parser gives one. Lists (kind: *List) are flattened.
func parseManifests(data []byte, name string) ([]document, error) {
	var docs []document
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, yamlError(name, name, err)
		}
		if len(doc.Content) == 0 || doc.Content[0].Kind == yaml.ScalarNode && doc.Content[0].Tag == "!!null" {
			continue // an empty document, e.g. a template that rendered nothing
		}
		obj := doc.Content[0]
		where := fmt.Sprintf("%s:%d", name, obj.Line)
		if obj.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s: not a Kubernetes object: expected a mapping with apiVersion and kind", where)
		}
		// Decoding catches what the node parser lets through (duplicate keys, bad merges).
		var probe map[string]any
		if err := obj.Decode(&probe); err != nil {
			return nil, yamlError(name, where, err)
		}
		found, err := objectDocuments(obj, where)
		if err != nil {
			return nil, err
		}
		docs = append(docs, found...)
	}
}

// objectDocuments checks that obj is a Kubernetes object and flattens a List into its items.
func objectDocuments(obj *yaml.Node, where string) ([]document, error) {
	apiVersion, kind := scalarAt(obj, "apiVersion"), scalarAt(obj, "kind")
	if apiVersion == "" || kind == "" {
		return nil, fmt.Errorf("%s: not a Kubernetes object: apiVersion and kind are required", where)
	}
	items := mapValue(obj, "items")
	if !strings.HasSuffix(kind, "List") || items == nil || items.Kind != yaml.SequenceNode {
		return []document{{node: obj, source: where}}, nil
	}
	var docs []document
	for _, item := range items.Content {
		found, err := objectDocuments(item, fmt.Sprintf("%s (line %d)", where, item.Line))
		if err != nil {
			return nil, err
		}
		docs = append(docs, found...)
	}
	return docs, nil
}

// mapValue returns the value of key in a mapping node, or nil.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// scalarAt returns the scalar at a path of mapping keys, or "".
func scalarAt(n *yaml.Node, path ...string) string {
	for _, key := range path {
		n = mapValue(n, key)
	}
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

// ensureMapping returns the mapping under key, creating (or replacing a null with) one.
func ensureMapping(n *yaml.Node, key string) *yaml.Node {
	if v := mapValue(n, key); v != nil && v.Kind == yaml.MappingNode {
		return v
	}
	m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	setValue(n, key, m)
	return m
}

// setValue sets key in a mapping node.
func setValue(n *yaml.Node, key string, value *yaml.Node) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			n.Content[i+1] = value
			return
		}
	}
	n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, value)
}

func stringNode(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

// oneLine folds a multi-line library error into one line: Argo CD shows the plugin's stderr.
func oneLine(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		line = strings.Join(strings.Fields(line), " ")
		if line == "" {
			continue
		}
		if b.Len() > 0 {
			if !strings.HasSuffix(b.String(), ":") {
				b.WriteString(";")
			}
			b.WriteString(" ")
		}
		b.WriteString(line)
	}
	return b.String()
}
