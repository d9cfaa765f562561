package applier

import (
	"strings"
	"unique"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// LastAppliedAnnotation is kubectl's copy of the last applied object: often the largest field of
// an engine object, and nothing in Stagecoach reads it.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// keep is a tree of the fields to keep: a nil subtree keeps the whole value under its key.
type keep map[string]keep

// applicationStatusRead is every field of an Argo CD Application's status that Observe and the
// wave observer read (ArgoCDApplication.Observe, waves.ObserveTarget). The rest of the status
// (resources, history, summary, conditions, sync results per resource) can be much larger than
// the object's spec: a cache keeps only this. A Stage's completion rules that read more read the
// Application live (SlimKeeps).
// A multi-source Application's lists (revisions, sources) are kept whole: one entry per source.
var applicationStatusRead = keep{
	"sync": {"status": nil, "revision": nil, "revisions": nil,
		"comparedTo": {"source": {"plugin": {"env": nil}}, "sources": nil}},
	"health":       {"status": nil, "message": nil},
	"reconciledAt": nil,
	"operationState": {
		"phase": nil, "message": nil, "startedAt": nil, "finishedAt": nil,
		"operation":  {"sync": {"revision": nil, "revisions": nil}},
		"syncResult": {"revision": nil, "revisions": nil, "source": {"plugin": {"env": nil}}, "sources": nil},
	},
}

var applicationGroupKind = schema.GroupKind{Group: "argoproj.io", Kind: "Application"}

// Slim returns the engine object as a cache should hold it: without managedFields and kubectl's
// last-applied annotation, an Argo CD Application's status cut to what Stagecoach reads, and
// every map key and string value interned (5,000 Applications repeat the same keys, repository
// URLs, digests and phases). Spec and metadata otherwise stay whole: writes are patches computed
// against the cached object, so a field missing from it must also be one no write touches.
// Objects of other types are returned as they are.
func Slim(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.Object == nil {
		return obj, nil
	}
	if md, ok := u.Object["metadata"].(map[string]any); ok {
		delete(md, "managedFields")
		if annotations, ok := md["annotations"].(map[string]any); ok {
			delete(annotations, lastAppliedAnnotation)
			if len(annotations) == 0 {
				delete(md, "annotations")
			}
		}
	}
	if u.GroupVersionKind().GroupKind() == applicationGroupKind {
		if status, ok := u.Object["status"].(map[string]any); ok {
			u.Object["status"] = pruned(status, applicationStatusRead)
		}
	}
	u.Object = internedObject(u.Object)
	return u, nil
}

// SlimKeeps reports whether Slim keeps, on an object of kind gk, every field the completion rules
// read (with observedCompletion, status.observedGeneration and metadata.generation too), so that
// the rules may read the cached object. A rule path reads within the value its plain dotted
// prefix names (the part before any query, wildcard, modifier, escape or multipath): that value
// must be kept whole. When it is not, the caller reads the object live for its rules rather
// than keep more in the cache: a Stage's rules are not known when an object is cached, and
// thousands of Applications would otherwise keep their whole status.
func SlimKeeps(gk schema.GroupKind, rules *stagecoachv1.CompletionRules) bool {
	if rules == nil {
		return true
	}
	var paths []string
	if oc := rules.ObservedCompletion; oc != nil {
		paths = append(paths, "status.observedGeneration", "metadata.generation")
		for _, m := range []*stagecoachv1.FieldMatch{oc.Succeeded, oc.Failed} {
			if m != nil {
				paths = append(paths, m.Key)
			}
		}
	}
	for _, m := range rules.ObservedMatches {
		paths = append(paths, m.Input, m.Output)
	}
	for _, p := range paths {
		if !keptWhole(gk, plainPrefix(p)) {
			return false
		}
	}
	return true
}

// plainPrefix is the keys a gjson path names before its first token with gjson syntax in it.
func plainPrefix(path string) []string {
	var prefix []string
	for _, t := range strings.Split(path, ".") {
		if t == "" || strings.ContainsFunc(t, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '/')
		}) {
			break
		}
		prefix = append(prefix, t)
	}
	return prefix
}

// keptWhole reports whether the value at the path is the same on Slim's copy, whatever is in it.
func keptWhole(gk schema.GroupKind, path []string) bool {
	if len(path) == 0 {
		return false // the whole object
	}
	switch path[0] {
	case "metadata":
		switch {
		case len(path) == 1, path[1] == "managedFields":
			return false
		case path[1] == "annotations":
			// One annotation, by a plain key: never the last-applied one, whose key has dots.
			return len(path) > 2
		}
	case "status":
		if gk != applicationGroupKind {
			return true
		}
		tree := applicationStatusRead
		for _, key := range path[1:] {
			sub, ok := tree[key]
			switch {
			case !ok:
				return false
			case sub == nil:
				return true
			}
			tree = sub
		}
		return false // a map the slim cuts
	}
	return true
}

// ownMetadata are the metadata fields whose values no other object shares: interning them would
// only add an entry of the interning table to each.
var ownMetadata = map[string]bool{"name": true, "uid": true, "resourceVersion": true, "creationTimestamp": true}

// internedObject interns an object's keys and values (interned), but not its own metadata values.
func internedObject(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		if md, ok := v.(map[string]any); ok && k == "metadata" {
			m := make(map[string]any, len(md))
			for mk, mv := range md {
				if !ownMetadata[mk] {
					mv = interned(mv)
				}
				m[unique.Make(mk).Value()] = mv
			}
			v = m
		} else {
			v = interned(v)
		}
		out[unique.Make(k).Value()] = v
	}
	return out
}

// pruned keeps of m the keys the tree names (all of a value whose subtree is nil), leaving out
// maps that keep nothing.
func pruned(m map[string]any, tree keep) map[string]any {
	out := make(map[string]any, len(tree))
	for key, sub := range tree {
		v, ok := m[key]
		if !ok {
			continue
		}
		if child, isMap := v.(map[string]any); isMap && sub != nil {
			if v = pruned(child, sub); len(v.(map[string]any)) == 0 {
				continue
			}
		}
		out[key] = v
	}
	return out
}

// interned rebuilds maps with canonical copies of their keys and string values, which many
// cached objects then share instead of holding one copy each.
func interned(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[unique.Make(k).Value()] = interned(e)
		}
		return m
	case []any:
		for i := range x {
			x[i] = interned(x[i])
		}
		return x
	case string:
		return unique.Make(x).Value()
	}
	return v
}
