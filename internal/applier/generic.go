package applier

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/subst"
)

// Generic applies versions to any kind: spec.applyRef.set names the fields that carry the version
// (written by server-side apply of exactly those fields), and spec.completion says how to read
// from the object's status that it has finished.
type Generic struct {
	Defaults
	// Stage names the Stage in messages (the seed's "Resource '<stage>'").
	Stage string
	// Set lists the fields that carry the version.
	Set []stagecoachv1.FieldSetting
	// Repository is the OCI repository of the versions, for {{ .Repository }} and {{ .Image }}.
	Repository string
	// Completion reads the object's completion from its status.
	Completion *stagecoachv1.CompletionRules
}

// TemplateData is what a spec.applyRef.set value may use.
type TemplateData struct {
	Digest     string
	Version    string
	Repository string
	// Image is Repository@Digest.
	Image string
	// Revision is what a Git-aware field takes: a commit's 40-hex SHA for a git source's version
	// (its digest is sha1:<SHA>), the digest otherwise.
	Revision string
}

// SampleDigest renders templates when a Stage is checked, before any version exists.
const SampleDigest = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

var (
	digestPattern = regexp.MustCompile(`sha256:[0-9a-f]{64}|sha1:[0-9a-f]{40}`)
	commitPattern = regexp.MustCompile(`\b[0-9a-f]{40}\b`)
)

// Validate checks that every field setting parses, renders and can be applied on its own, and
// that the completion rules can be read from the object's status.
func (g Generic) Validate(obj *unstructured.Unstructured) (*Problem, *Problem) {
	if _, err := g.render(obj, Version{Digest: SampleDigest, Tag: "v0.0.0"}); err != nil {
		return &Problem{Reason: stagecoachv1.ReasonApplierSetInvalid, Message: err.Error()}, nil
	}
	if p := g.stampProblem(obj); p != nil {
		return p, nil
	}
	return nil, nil
}

// stampProblem is the seed's TemplateStampFailure: observedCompletion is only meaningful against
// status.observedGeneration, so an object whose status lacks it can never complete.
func (g Generic) stampProblem(obj *unstructured.Unstructured) *Problem {
	if g.Completion == nil || g.Completion.ObservedCompletion == nil {
		return nil
	}
	status, ok := obj.Object["status"].(map[string]any)
	if !ok || len(status) == 0 {
		return nil // not reconciled yet: nothing to tell
	}
	if _, ok := status["observedGeneration"]; ok {
		return nil
	}
	return &Problem{Reason: stagecoachv1.ReasonTemplateStampFailure,
		Message: fmt.Sprintf("Resource '%s' cannot satisfy observedCompletion without observedGeneration in object status", g.Stage)}
}

// Revision returns the digest the object carries in the first field whose value names the digest.
func (g Generic) Revision(obj *unstructured.Unstructured) string {
	for _, s := range g.Set {
		byRevision := strings.Contains(s.Value, ".Revision")
		if !strings.Contains(s.Value, ".Digest") && !strings.Contains(s.Value, ".Image") && !byRevision {
			continue
		}
		tokens, err := parsePointer(s.Path)
		if err != nil {
			continue
		}
		v, ok := valueAt(obj.Object, tokens)
		if !ok {
			continue
		}
		if str, ok := v.(string); ok {
			if d := digestPattern.FindString(str); d != "" || !byRevision {
				return d
			}
			if sha := commitPattern.FindString(str); sha != "" {
				return "sha1:" + sha
			}
			return ""
		}
	}
	return ""
}

// SetRevision writes the rendered fields into obj (for callers that patch the whole object).
func (g Generic) SetRevision(obj *unstructured.Unstructured, v Version, _ time.Time) error {
	fields, err := g.render(obj, v)
	if err != nil {
		return err
	}
	for _, f := range fields {
		if err := setAt(obj.Object, f.tokens, f.value); err != nil {
			return fmt.Errorf("spec.applyRef.set path %s: %w", f.path, err)
		}
	}
	return nil
}

// ApplyConfiguration is the object to server-side apply for version v: apiVersion, kind, name,
// namespace and exactly the fields of spec.applyRef.set. A list on the way is sent with the item's
// name only, so that the API server merges it into the list by its key.
func (g Generic) ApplyConfiguration(obj *unstructured.Unstructured, v Version) (*unstructured.Unstructured, error) {
	fields, err := g.render(obj, v)
	if err != nil {
		return nil, err
	}
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(obj.GetAPIVersion())
	out.SetKind(obj.GetKind())
	out.SetName(obj.GetName())
	out.SetNamespace(obj.GetNamespace())
	for _, f := range fields {
		if err := applyAt(out.Object, obj.Object, f.tokens, f.value); err != nil {
			return nil, fmt.Errorf("spec.applyRef.set path %s: %w", f.path, err)
		}
	}
	return out, nil
}

// Takes implements Applier: the set templates choose ({{ .Digest }}, {{ .Revision }}).
func (Generic) Takes(*unstructured.Unstructured) VersionKind { return AnyVersion }

// Observe reads completion from the status through spec.completion: the version has landed when
// the object carries it (Revision) and the rules say it completed; a failed rule fails it.
func (g Generic) Observe(obj *unstructured.Unstructured, digest string) Observation {
	if got := g.Revision(obj); got != "" && got != digest {
		return Observation{Phase: Progressing, Reason: stagecoachv1.ReasonWaitingForRevision,
			Message: fmt.Sprintf("Resource '%s' carries %s, not %s", g.Stage, got, digest)}
	}
	return ObserveCompletion(g.Stage, g.Completion, obj)
}

// ObserveCompletion applies completion rules to an object as seed 000 specifies: observedCompletion
// counts only once status.observedGeneration equals metadata.generation, and a matching failed rule
// overrides succeeded (and is the only thing reported); observedMatches needs every pair equal.
func ObserveCompletion(stage string, rules *stagecoachv1.CompletionRules, obj *unstructured.Unstructured) Observation {
	return observeCompletion(stage, rules, obj, true)
}

// ObserveRun applies completion rules to a check's run object, named by name in the messages. A
// run is created once and never written again by the controller, so observedCompletion waits for
// status.observedGeneration to equal metadata.generation only where the kind reports one (a Job
// does not).
func ObserveRun(name string, rules *stagecoachv1.CompletionRules, obj *unstructured.Unstructured) Observation {
	return observeCompletion(name, rules, obj, false)
}

func observeCompletion(stage string, rules *stagecoachv1.CompletionRules, obj *unstructured.Unstructured, needGeneration bool) Observation {
	notMet := Observation{Phase: Progressing, Reason: stagecoachv1.ReasonConditionNotMet,
		Message: fmt.Sprintf("Resource '%s' is waiting for the specified condition of observedCompletion.", stage)}
	if rules == nil {
		return Observation{Phase: Landed, Reason: stagecoachv1.ReasonLanded, Message: "no completion rules"}
	}
	raw, err := json.Marshal(obj.Object)
	if err != nil {
		return notMet
	}
	if oc := rules.ObservedCompletion; oc != nil {
		observed, found, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
		if !found && !needGeneration {
			observed, found = obj.GetGeneration(), true
		}
		if !found {
			if _, ok := obj.Object["status"].(map[string]any); ok {
				return Observation{Phase: Progressing, Reason: stagecoachv1.ReasonTemplateStampFailure,
					Message: fmt.Sprintf("Resource '%s' cannot satisfy observedCompletion without observedGeneration in object status", stage)}
			}
			return notMet
		}
		if observed != obj.GetGeneration() {
			return notMet
		}
		if oc.Failed != nil && gjsonEquals(raw, oc.Failed.Key, oc.Failed.Value) {
			return Observation{Phase: Failed, Reason: stagecoachv1.ReasonCompletionFailed,
				Message: fmt.Sprintf("Resource '%s' failed: %s is %q", stage, oc.Failed.Key, oc.Failed.Value)}
		}
		if oc.Succeeded != nil && gjsonEquals(raw, oc.Succeeded.Key, oc.Succeeded.Value) {
			return Observation{Phase: Landed, Reason: stagecoachv1.ReasonLanded,
				Message: fmt.Sprintf("Resource '%s' completed: %s is %q at generation %d", stage, oc.Succeeded.Key, oc.Succeeded.Value, observed)}
		}
		return notMet
	}
	for _, m := range rules.ObservedMatches {
		in, out := gjsonRead(raw, m.Input), gjsonRead(raw, m.Output)
		if !in.Exists() || !out.Exists() || in.String() != out.String() {
			return Observation{Phase: Progressing, Reason: stagecoachv1.ReasonConditionNotMet,
				Message: fmt.Sprintf("Resource '%s' is waiting for observedMatches: %s (%q) does not equal %s (%q)",
					stage, m.Input, in.String(), m.Output, out.String())}
		}
	}
	return Observation{Phase: Landed, Reason: stagecoachv1.ReasonLanded,
		Message: fmt.Sprintf("Resource '%s' completed: all %d observedMatches hold", stage, len(rules.ObservedMatches))}
}

// WithCompletion is a built-in applier whose Stage added completion rules: both the built-in proof
// and the rules must hold; a failed rule fails the version.
type WithCompletion struct {
	Applier
	Stage string
	Rules *stagecoachv1.CompletionRules
}

// Observe combines the engine's proof with the rules.
func (w WithCompletion) Observe(obj *unstructured.Unstructured, digest string) Observation {
	rules := ObserveCompletion(w.Stage, w.Rules, obj)
	if rules.Phase == Failed {
		return rules
	}
	engine := w.Applier.Observe(obj, digest)
	if engine.Phase != Landed {
		return engine
	}
	return rules
}

// AlreadyLive holds only when the rules hold too: the engine's comparison proves the version
// live, not what the rules ask of it.
func (w WithCompletion) AlreadyLive(obj *unstructured.Unstructured, digest string, written time.Time) (string, bool) {
	at, ok := w.Applier.AlreadyLive(obj, digest, written)
	if !ok || ObserveCompletion(w.Stage, w.Rules, obj).Phase != Landed {
		return "", false
	}
	return at, true
}

// RendersRepository says whether a value renders the repository ({{ .Repository }}, {{ .Image }}).
func (g Generic) RendersRepository() bool {
	return slices.ContainsFunc(g.Set, func(s stagecoachv1.FieldSetting) bool { return usesRepository(s.Value) })
}

func usesRepository(value string) bool {
	return strings.Contains(value, ".Repository") || strings.Contains(value, ".Image")
}

type renderedField struct {
	path   string
	tokens []string
	value  string
}

func (g Generic) render(obj *unstructured.Unstructured, v Version) ([]renderedField, error) {
	data := TemplateData{Digest: v.Digest, Version: v.Tag, Repository: g.Repository, Revision: v.Digest}
	if sha, ok := strings.CutPrefix(v.Digest, "sha1:"); ok {
		data.Revision = sha
	}
	if g.Repository != "" {
		data.Image = g.Repository + "@" + v.Digest
	}
	var out []renderedField
	for _, s := range g.Set {
		tokens, err := parsePointer(s.Path)
		if err != nil {
			return nil, fmt.Errorf("spec.applyRef.set path %q: %v", s.Path, err)
		}
		const fields = "use {{ .Digest }}, {{ .Version }}, {{ .Repository }} or {{ .Image }}"
		tmpl, err := subst.Parse(s.Path, s.Value, fields)
		if err != nil {
			return nil, fmt.Errorf("spec.applyRef.set value for %s does not parse: %v; %s", s.Path, err, fields)
		}
		value, err := tmpl.Execute(data)
		if err != nil {
			return nil, fmt.Errorf("spec.applyRef.set value for %s does not render: %v; %s", s.Path, err, fields)
		}
		if usesRepository(s.Value) && g.Repository == "" {
			return nil, fmt.Errorf("spec.applyRef.set value for %s uses the repository, but the Stage's own source names none: a Stage renders only a repository "+
				"its own spec names (spec.source.registry.repository, or spec.source.upstream.repository for a Stage taking an upstream Stage's versions), "+
				"never one an upstream Stage chose; set it, or write the repository into the value (repository@{{ .Digest }})", s.Path)
		}
		if err := checkListItems(obj.Object, tokens); err != nil {
			return nil, fmt.Errorf("spec.applyRef.set path %s: %v", s.Path, err)
		}
		out = append(out, renderedField{path: s.Path, tokens: tokens, value: value})
	}
	return out, nil
}

// parsePointer splits a JSON pointer (RFC 6901) into its reference tokens and checks that it
// points into the spec, the labels or the annotations.
func parsePointer(p string) ([]string, error) {
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("a JSON pointer starts with /")
	}
	tokens := strings.Split(p[1:], "/")
	for i, t := range tokens {
		if t == "" {
			return nil, fmt.Errorf("empty reference token at position %d", i+1)
		}
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	switch {
	case tokens[0] == "spec" && len(tokens) > 1:
	case tokens[0] == "metadata" && len(tokens) == 3 && (tokens[1] == "labels" || tokens[1] == "annotations"):
	default:
		return nil, fmt.Errorf("must point into /spec/, /metadata/labels/ or /metadata/annotations/; Stagecoach never writes status or other metadata")
	}
	return tokens, nil
}

// checkListItems refuses a path that crosses a list at an index that is absent or whose item has
// no name: server-side apply merges list items by key, and without one the item cannot be named.
func checkListItems(obj map[string]any, tokens []string) error {
	var cur any = obj
	for i, t := range tokens {
		switch node := cur.(type) {
		case map[string]any:
			next, ok := node[t]
			if !ok {
				return nil // the rest does not exist yet: apply creates it
			}
			cur = next
		case []any:
			idx, err := strconv.Atoi(t)
			if err != nil || idx < 0 || idx >= len(node) {
				return fmt.Errorf("/%s is a list of %d items; %q is not an index of it", strings.Join(tokens[:i], "/"), len(node), t)
			}
			item, ok := node[idx].(map[string]any)
			if _, named := item["name"].(string); !ok || !named {
				return fmt.Errorf("item %d of /%s has no name, so it cannot be applied on its own; point at a field outside the list", idx, strings.Join(tokens[:i], "/"))
			}
			cur = item
		default:
			return fmt.Errorf("/%s is a %T, not an object or a list", strings.Join(tokens[:i], "/"), node)
		}
	}
	return nil
}

func valueAt(obj map[string]any, tokens []string) (any, bool) {
	var cur any = obj
	for _, t := range tokens {
		switch node := cur.(type) {
		case map[string]any:
			next, ok := node[t]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			idx, err := strconv.Atoi(t)
			if err != nil || idx < 0 || idx >= len(node) {
				return nil, false
			}
			cur = node[idx]
		default:
			return nil, false
		}
	}
	return cur, true
}

func setAt(obj map[string]any, tokens []string, value string) error {
	var cur any = obj
	for i, t := range tokens {
		last := i == len(tokens)-1
		switch node := cur.(type) {
		case map[string]any:
			if last {
				node[t] = value
				return nil
			}
			next, ok := node[t]
			if !ok {
				next = map[string]any{}
				node[t] = next
			}
			cur = next
		case []any:
			idx, err := strconv.Atoi(t)
			if err != nil || idx < 0 || idx >= len(node) {
				return fmt.Errorf("no list item %q", t)
			}
			if last {
				node[idx] = value
				return nil
			}
			cur = node[idx]
		default:
			return fmt.Errorf("cannot descend into a %T", node)
		}
	}
	return nil
}

// applyAt builds in out the path to value, taking list items' names from live.
func applyAt(out, live map[string]any, tokens []string, value string) error {
	curOut, curLive := out, any(live)
	for i := 0; i < len(tokens); i++ {
		t := tokens[i]
		last := i == len(tokens)-1
		liveMap, _ := curLive.(map[string]any)
		var liveNext any
		if liveMap != nil {
			liveNext = liveMap[t]
		}
		if last {
			curOut[t] = value
			return nil
		}
		if list, ok := liveNext.([]any); ok && i+1 < len(tokens) {
			idx, err := strconv.Atoi(tokens[i+1])
			if err != nil || idx < 0 || idx >= len(list) {
				return fmt.Errorf("no list item %q", tokens[i+1])
			}
			item, _ := list[idx].(map[string]any)
			name, _ := item["name"].(string)
			if name == "" {
				return fmt.Errorf("list item %d has no name", idx)
			}
			items, _ := curOut[t].([]any)
			var entry map[string]any
			for _, it := range items {
				if m := it.(map[string]any); m["name"] == name {
					entry = m
				}
			}
			if entry == nil {
				entry = map[string]any{"name": name}
				curOut[t] = append(items, entry)
			}
			if i+2 == len(tokens) {
				return fmt.Errorf("a list item itself cannot be set; point at one of its fields")
			}
			curOut, curLive = entry, item
			i++ // the index token is consumed
			continue
		}
		next, ok := curOut[t].(map[string]any)
		if !ok {
			next = map[string]any{}
			curOut[t] = next
		}
		curOut, curLive = next, liveNext
	}
	return nil
}

func gjsonRead(raw []byte, path string) gjson.Result {
	return gjson.GetBytes(raw, path)
}

func gjsonEquals(raw []byte, path, value string) bool {
	r := gjsonRead(raw, path)
	return r.Exists() && r.String() == value
}
