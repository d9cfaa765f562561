package applier

import (
	"unique"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// LastAppliedAnnotation is kubectl's copy of the last applied object: often the largest field of
// an engine object, and nothing in Stagecoach reads it.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// keep is a tree of the fields to keep: a nil subtree keeps the whole value under its key.
type keep map[string]keep

// applicationStatusRead is every field of an Argo CD Application's status that Observe and the
// wave observer read (ArgoCDApplication.Observe, waves.ObserveTarget). The rest of the status
// (resources, history, summary, conditions, sync results per resource) can be much larger than
// the object's spec and is never read: a cache keeps only this.
var applicationStatusRead = keep{
	"sync":         {"status": nil, "revision": nil, "comparedTo": {"source": {"plugin": {"env": nil}}}},
	"health":       {"status": nil, "message": nil},
	"reconciledAt": nil,
	"operationState": {
		"phase": nil, "message": nil, "startedAt": nil, "finishedAt": nil,
		"operation":  {"sync": {"revision": nil}},
		"syncResult": {"revision": nil, "source": {"plugin": {"env": nil}}},
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
