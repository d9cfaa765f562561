package cmp

import (
	"fmt"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// Annotations stamped on every rendered object.
const (
	VersionAnnotation = "stagecoach.dev/version"
	StageAnnotation   = "stagecoach.dev/stage"
)

// containerListKeys are the pod spec fields holding containers. The walk is generic so that any
// object embedding a pod spec (Deployments, CronJobs, Argo Rollouts, ...) is covered.
var containerListKeys = map[string]bool{"containers": true, "initContainers": true, "ephemeralContainers": true}

// imageRef is a container image reference split into its parts.
type imageRef struct {
	repository string // as written, without tag or digest
	normalized string // registry/path with Docker Hub defaults filled in, for comparison
	tag        string
	digest     string
}

// parseImage splits an image reference; it checks only what pinning needs.
func parseImage(ref string) (imageRef, error) {
	if ref == "" || strings.ContainsAny(ref, " \t\n") {
		return imageRef{}, fmt.Errorf("image %q is not an image reference", ref)
	}
	var r imageRef
	rest := ref
	if at := strings.Index(rest, "@"); at >= 0 {
		r.digest, rest = rest[at+1:], rest[:at]
	}
	if colon := strings.LastIndex(rest, ":"); colon > strings.LastIndex(rest, "/") {
		r.tag, rest = rest[colon+1:], rest[:colon]
	}
	if rest == "" || strings.HasPrefix(rest, "/") || strings.HasSuffix(rest, "/") || strings.Contains(rest, "//") {
		return imageRef{}, fmt.Errorf("image %q has no repository", ref)
	}
	r.repository = rest
	r.normalized = normalizeRepository(rest)
	return r, nil
}

// normalizeRepository fills in Docker Hub's defaults, so that "nginx", "docker.io/nginx" and
// "index.docker.io/library/nginx" compare equal.
func normalizeRepository(repo string) string {
	domain, path, found := strings.Cut(repo, "/")
	if !found || (!strings.ContainsAny(domain, ".:") && domain != "localhost") {
		domain, path = "docker.io", repo
	}
	if domain == "index.docker.io" {
		domain = "docker.io"
	}
	if domain == "docker.io" && !strings.Contains(path, "/") {
		path = "library/" + path
	}
	return domain + "/" + path
}

// declaredImages parses the repositories the app asks to pin.
func declaredImages(names []string) (map[string]string, error) {
	out := make(map[string]string, len(names))
	for _, name := range names {
		r, err := parseImage(name)
		if err != nil {
			return nil, err
		}
		if r.tag != "" || r.digest != "" {
			return nil, fmt.Errorf("image %q names a tag or digest: list the repository only (%s); the digest comes from STAGECOACH_DIGEST", name, r.repository)
		}
		out[r.normalized] = name
	}
	return out, nil
}

// pinImages rewrites every container image whose repository is declared to repository@digest,
// recording in pinned the declared names it pinned. Other images are left alone.
func pinImages(n *yaml.Node, declared map[string]string, digest string, pinned map[string]bool) error {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, value := n.Content[i], n.Content[i+1]
			if containerListKeys[key.Value] && value.Kind == yaml.SequenceNode {
				for _, c := range value.Content {
					if err := pinContainer(c, declared, digest, pinned); err != nil {
						return err
					}
				}
			}
			if err := pinImages(value, declared, digest, pinned); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for _, child := range n.Content {
			if err := pinImages(child, declared, digest, pinned); err != nil {
				return err
			}
		}
	}
	return nil
}

func pinContainer(c *yaml.Node, declared map[string]string, digest string, pinned map[string]bool) error {
	image := mapValue(c, "image")
	if image == nil || image.Kind != yaml.ScalarNode || image.Value == "" {
		return nil
	}
	ref, err := parseImage(image.Value)
	if err != nil {
		return fmt.Errorf("container %q: %w", scalarAt(c, "name"), err)
	}
	name, ok := declared[ref.normalized]
	if !ok {
		return nil
	}
	image.Value, image.Tag, image.Style = ref.repository+"@"+digest, "!!str", 0
	pinned[name] = true
	return nil
}

// stamp sets the Stagecoach annotations on the object's metadata.
func stamp(obj *yaml.Node, stage, version string) {
	annotations := ensureMapping(ensureMapping(obj, "metadata"), "annotations")
	setValue(annotations, StageAnnotation, stringNode(stage))
	if version != "" {
		setValue(annotations, VersionAnnotation, stringNode(version))
	}
}
