package applier

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// A multi-source Application (spec.sources) renders every source together: a chart and its
// values from Git, say. Stagecoach promotes one of them, the one applyRef.source names (its
// sources[].name, or its repoURL), and the digest alone decides what runs only when every other
// source is pinned to a revision nobody can move (a commit SHA or a digest). Argo CD reports a
// multi-source Application's revisions as lists, one entry per source in spec order
// (status.sync.revisions, status.operationState.syncResult.revisions, comparedTo.sources,
// syncResult.sources, operation.sync.revisions), so landed proof reads the promoted source's index.

// promoted is the source Stagecoach writes the version into.
type promoted struct {
	// index in spec.sources; -1 for spec.source.
	index int
	// source is the source as the object holds it (not a copy: read only).
	source map[string]any
}

// path is where the source sits in the object, for messages and JSON pointers.
func (p promoted) path() string {
	if p.index < 0 {
		return "spec.source"
	}
	return fmt.Sprintf("spec.sources[%d]", p.index)
}

// pointer is the source's JSON pointer.
func (p promoted) pointer() string {
	if p.index < 0 {
		return "/spec/source"
	}
	return "/spec/sources/" + strconv.Itoa(p.index)
}

// chart is the Helm chart of a source from a chart registry ("" for any other source): Argo CD
// pulls the chart version its targetRevision names.
func (p promoted) chart() string {
	chart, _ := p.source["chart"].(string)
	return chart
}

// git is a plain Git source: no plugin, no chart, not OCI (Argo CD renders the commit its
// targetRevision names).
func (p promoted) git() bool {
	repoURL, _ := p.source["repoURL"].(string)
	return !p.plugin() && p.chart() == "" && !strings.HasPrefix(repoURL, "oci://")
}

func (p promoted) plugin() bool {
	_, ok := p.source["plugin"].(map[string]any)
	return ok
}

// promotedSource finds the source applyRef.source names; ok is false when there is none to
// write (Validate says why).
func (a ArgoCDApplication) promotedSource(obj *unstructured.Unstructured) (promoted, bool) {
	p, problem := a.findSource(obj)
	return p, problem == nil
}

// findSource finds the promoted source, or says why it cannot (blocking).
func (a ArgoCDApplication) findSource(obj *unstructured.Unstructured) (promoted, *Problem) {
	name := describe(obj)
	sources, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "sources")
	list, _ := sources.([]any)
	if len(list) == 0 {
		source, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "source")
		m, _ := source.(map[string]any)
		if !ok || m == nil {
			return promoted{index: -1}, &Problem{Reason: stagecoachv1.ReasonApplierNotOCI, Message: fmt.Sprintf(
				"%s has no spec.source: set an OCI source (repoURL oci://...) or a Git source using the %s plugin", name, PluginName)}
		}
		if a.Source != "" && !namesSource(m, a.Source) {
			return promoted{index: -1}, &Problem{Reason: stagecoachv1.ReasonApplierSourceNotFound, Message: fmt.Sprintf(
				"applyRef.source is %q, but the only source of %s is %s: fix applyRef.source or leave it out",
				a.Source, name, sourceLabel(m))}
		}
		return promoted{index: -1, source: m}, nil
	}
	if a.Source == "" {
		return promoted{}, &Problem{Reason: stagecoachv1.ReasonApplierMultiSource, Message: fmt.Sprintf(
			"%s has %d entries in spec.sources (%s): set applyRef.source to the name (sources[].name) or repoURL of the one Stagecoach promotes",
			name, len(list), sourceLabels(list))}
	}
	found := -1
	for i, s := range list {
		m, _ := s.(map[string]any)
		if m == nil || !namesSource(m, a.Source) {
			continue
		}
		if found >= 0 {
			return promoted{}, &Problem{Reason: stagecoachv1.ReasonApplierSourceNotFound, Message: fmt.Sprintf(
				"applyRef.source %q names spec.sources[%d] and spec.sources[%d] of %s: give the sources names (sources[].name) and name one",
				a.Source, found, i, name)}
		}
		found = i
	}
	if found < 0 {
		return promoted{}, &Problem{Reason: stagecoachv1.ReasonApplierSourceNotFound, Message: fmt.Sprintf(
			"applyRef.source %q names none of the sources of %s (%s): use a sources[].name or a repoURL",
			a.Source, name, sourceLabels(list))}
	}
	m := list[found].(map[string]any)
	return promoted{index: found, source: m}, nil
}

// namesSource: the source's name, or its repoURL, is ref.
func namesSource(source map[string]any, ref string) bool {
	name, _ := source["name"].(string)
	repoURL, _ := source["repoURL"].(string)
	return name == ref || repoURL == ref
}

func sourceLabel(source map[string]any) string {
	repoURL, _ := source["repoURL"].(string)
	if name, _ := source["name"].(string); name != "" {
		return fmt.Sprintf("%q (%s)", name, repoURL)
	}
	return strconv.Quote(repoURL)
}

func sourceLabels(list []any) string {
	labels := make([]string, 0, len(list))
	for _, s := range list {
		m, _ := s.(map[string]any)
		labels = append(labels, sourceLabel(m))
	}
	return strings.Join(labels, ", ")
}

// Revisions nobody can move, by the kind of source that reads them: a registry resolves a tag
// (even one of 40 hex digits) at every render, so an OCI source (a chart from an OCI registry
// too) is pinned only by its digest; Argo CD takes a 40-hex Git revision as a commit, but looks
// a 64-hex one up among the repository's refs first (a branch or tag of that name wins), so a Git
// source is pinned only by a SHA-1 commit. A chart version from a chart repository can be pushed
// again: never a pin.
var (
	ociPinned = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	gitPinned = regexp.MustCompile(`^[0-9a-f]{40}$`)
)

// pinned reports whether the source's revision cannot move, and why not when it can.
func pinned(source map[string]any) (string, bool) {
	repoURL, _ := source["repoURL"].(string)
	rev, _ := source["targetRevision"].(string)
	chart, _ := source["chart"].(string)
	switch {
	case strings.HasPrefix(repoURL, "oci://"):
		return "an OCI source is pinned only by a digest (sha256:...)", ociPinned.MatchString(rev)
	case chart != "":
		return "a chart version from a chart repository can be pushed again", false
	default:
		return "a Git source is pinned only by a 40-hex commit SHA", gitPinned.MatchString(rev)
	}
}

// remoteValueFiles names a source's Helm value files read from a URL: what the URL serves can
// change at any render, whatever the revision.
func remoteValueFiles(source map[string]any) []string {
	files, _, _ := unstructured.NestedFieldNoCopy(source, "helm", "valueFiles")
	list, _ := files.([]any)
	var remote []string
	for _, f := range list {
		s, _ := f.(string)
		if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
			remote = append(remote, s)
		}
	}
	return remote
}

// unpinnedSources names what a multi-source Application renders besides the promoted source that
// can move: another source's revision, or its Helm value files from a URL (each decides
// what runs as much as the digest does); none when nothing can.
func unpinnedSources(obj *unstructured.Unstructured, p promoted) []string {
	if p.index < 0 {
		return nil
	}
	sources, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "sources")
	var unpinned []string
	for i, s := range sources.([]any) {
		if i == p.index {
			// Its own value files are judged with its other render fields (Validate).
			continue
		}
		m, _ := s.(map[string]any)
		for _, url := range remoteValueFiles(m) {
			unpinned = append(unpinned, fmt.Sprintf("spec.sources[%d] %s value file %s (a URL serves what it likes)", i, sourceLabel(m), url))
		}
		rev, _ := m["targetRevision"].(string)
		if why, ok := pinned(m); !ok {
			if rev == "" {
				rev = "HEAD"
			}
			unpinned = append(unpinned, fmt.Sprintf("spec.sources[%d] %s at %q (%s)", i, sourceLabel(m), rev, why))
		}
	}
	return unpinned
}

// valueFilesFromRefs: every Helm value file of a multi-source promoted source is read through
// another source's ref ($ref/path), which unpinnedSources judges: the value files are then as
// fixed as that source's revision.
func valueFilesFromRefs(obj *unstructured.Unstructured, p promoted, files any) bool {
	list, ok := files.([]any)
	if p.index < 0 || !ok {
		return false
	}
	sources, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "sources")
	refs := map[string]bool{}
	for _, s := range sources.([]any) {
		m, _ := s.(map[string]any)
		if ref, _ := m["ref"].(string); ref != "" {
			refs[ref] = true
		}
	}
	for _, f := range list {
		s, _ := f.(string)
		ref, _, found := strings.Cut(strings.TrimPrefix(s, "$"), "/")
		if !strings.HasPrefix(s, "$") || !found || !refs[ref] {
			return false
		}
	}
	return true
}

// statusRevision reads the digest a sync result or comparison names for the promoted source:
// the revision for an OCI source, the plugin's STAGECOACH_DIGEST for a Git source (whose revision
// is a commit). sync keeps the rendered source under comparedTo, a sync result beside it.
func statusRevision(status map[string]any, p promoted, path ...string) string {
	at := append([]string{}, path...)
	if p.plugin() {
		if path[0] == "sync" {
			at = append(at, "comparedTo")
		}
		var source any
		if p.index < 0 {
			source, _, _ = unstructured.NestedFieldNoCopy(status, append(at, "source")...)
		} else {
			source = nth(status, p.index, append(at, "sources")...)
		}
		m, _ := source.(map[string]any)
		env, _, _ := unstructured.NestedSlice(m, "plugin", "env")
		return envValue(env, digestEnv)
	}
	if p.index < 0 {
		rev, _, _ := unstructured.NestedString(status, append(at, "revision")...)
		return rev
	}
	rev, _ := nth(status, p.index, append(at, "revisions")...).(string)
	return rev
}

// nth is the i-th item of the list at path; nil when there is none.
func nth(obj map[string]any, i int, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(obj, path...)
	list, _ := v.([]any)
	if i < 0 || i >= len(list) {
		return nil
	}
	return list[i]
}

// requestedRevision is the revision the current or last sync operation asked for, for the
// promoted source ("" when it asked for the spec's).
func requestedRevision(status map[string]any, p promoted) string {
	if p.index < 0 {
		rev, _, _ := unstructured.NestedString(status, "operationState", "operation", "sync", "revision")
		return rev
	}
	rev, _ := nth(status, p.index, "operationState", "operation", "sync", "revisions").(string)
	return rev
}

// chartVersion is the chart version a registry tag names: Helm pushes version 1.2.3+build as the
// tag 1.2.3_build, since OCI tags have no "+".
func chartVersion(tag string) string {
	return strings.ReplaceAll(tag, "_", "+")
}

// PinsTag implements Applier: a Helm chart from a chart registry is given a chart version.
func (a ArgoCDApplication) PinsTag(obj *unstructured.Unstructured) bool {
	p, ok := a.promotedSource(obj)
	return ok && p.chart() != ""
}
