// Package gitedit writes a version into the files of a config repository as a person would edit
// them: kustomize's kyaml changes the node tree, so comments, key order, sequence indentation and
// the other documents of a file stay as written. It is the editing half of promotion by Git
// (issue 40: promotion.git set); cloning, committing, signing and pushing are not here.
package gitedit

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// ErrNotFound: the file has no place for the version (no document, no images entry of that name).
var ErrNotFound = errors.New("not found")

// KustomizationImage sets the digest of the images entry named image in a kustomization file
// (kustomize edit set image name@digest): its digest, without the newTag the digest replaces; a
// newName stays. The entry must exist: the file says which image the version is.
func KustomizationImage(content []byte, image, digest string) ([]byte, error) {
	return editDocuments(content, func(doc *yaml.RNode) (bool, error) {
		images, err := doc.Pipe(yaml.Lookup("images"))
		if err != nil || images == nil {
			return false, err
		}
		entry, err := images.Pipe(yaml.MatchElement("name", image))
		if err != nil || entry == nil {
			return false, err
		}
		if err := setString(entry, "digest", digest); err != nil {
			return false, err
		}
		return true, entry.PipeE(yaml.Clear("newTag"))
	}, fmt.Sprintf("an images entry named %q", image))
}

// Value sets the string at a dotted key path (a Helm values key such as image.digest, or any
// field path of a YAML file), creating the maps on the way; a path that runs into a value that is
// not a map is an error. In a file of several documents, the first document that has the path's
// first key is edited (the first document when none has it).
func Value(content []byte, dotted, value string) ([]byte, error) {
	path := strings.Split(dotted, ".")
	for _, p := range path {
		if p == "" {
			return nil, fmt.Errorf("the key path %q has an empty key", dotted)
		}
	}
	edited := false
	set := func(doc *yaml.RNode) (bool, error) {
		parent, err := doc.Pipe(yaml.LookupCreate(yaml.MappingNode, path[:len(path)-1]...))
		if err != nil {
			return false, fmt.Errorf("%s: %w", dotted, err)
		}
		if parent == nil || parent.YNode().Kind != yaml.MappingNode {
			return false, fmt.Errorf("%s: %s is not a map", dotted, strings.Join(path[:len(path)-1], "."))
		}
		edited = true
		return true, setString(parent, path[len(path)-1], value)
	}
	out, err := editDocuments(content, func(doc *yaml.RNode) (bool, error) {
		if edited || doc.Field(path[0]) == nil {
			return false, nil
		}
		return set(doc)
	}, "")
	if err == nil || !errors.Is(err, ErrNotFound) {
		return out, err
	}
	// No document has the first key: it goes into the first document.
	first := true
	return editDocuments(content, func(doc *yaml.RNode) (bool, error) {
		if !first {
			return false, nil
		}
		first = false
		return set(doc)
	}, "a document")
}

// setString sets a map's key to a string: in place when it holds a scalar already, so that its
// comments and quoting stay.
func setString(m *yaml.RNode, key, value string) error {
	if field := m.Field(key); field != nil && field.Value.YNode().Kind == yaml.ScalarNode {
		node := field.Value.YNode()
		node.Value, node.Tag = value, yaml.NodeTagString
		return nil
	}
	return m.PipeE(yaml.SetField(key, yaml.NewStringRNode(value)))
}

// editDocuments applies edit to each document of content and writes them back as they were,
// apart from the edit. It is an error wrapping ErrNotFound when no document was edited.
func editDocuments(content []byte, edit func(doc *yaml.RNode) (bool, error), what string) ([]byte, error) {
	var out bytes.Buffer
	rw := &kio.ByteReadWriter{Reader: bytes.NewReader(content), Writer: &out, PreserveSeqIndent: true, OmitReaderAnnotations: false,
		NoWrap: true}
	docs, err := rw.Read()
	if err != nil {
		return nil, fmt.Errorf("it is not YAML: %w", err)
	}
	edited := false
	for _, doc := range docs {
		ok, err := edit(doc)
		if err != nil {
			return nil, err
		}
		edited = edited || ok
	}
	if !edited {
		if what == "" {
			what = "the key"
		}
		return nil, fmt.Errorf("%w: no document has %s", ErrNotFound, what)
	}
	if err := rw.Write(docs); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
