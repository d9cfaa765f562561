package applier

import (
	"time"

	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

const (
	genericDigest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	otherDigest   = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	succeededKey  = `status.conditions.#(type=="ReconcileSucceeded").status`
)

func widget(generation int64, status map[string]any) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "shop", "generation": generation},
		"spec": map[string]any{
			"image": "registry.example/shop@" + genericDigest,
			"template": map[string]any{"containers": []any{
				map[string]any{"name": "app", "image": "old"},
				map[string]any{"image": "nameless"},
			}},
		},
	}}
	if status != nil {
		obj.Object["status"] = status
	}
	return obj
}

func condition(status string) []any {
	return []any{map[string]any{"type": "ReconcileSucceeded", "status": status}}
}

// completionCase is one object and rules, and what ObserveCompletion says of them.
type completionCase struct {
	name    string
	rules   *stagecoachv1.CompletionRules
	obj     *unstructured.Unstructured
	phase   Phase
	reason  string
	message string
}

// completionCases are TestObserveCompletion's cases; TestObserveCompletionThroughTheCache reads
// each object as the controller does, on every kind.
func completionCases() []completionCase {
	succeeded := &stagecoachv1.FieldMatch{Key: succeededKey, Value: "True"}
	failed := &stagecoachv1.FieldMatch{Key: succeededKey, Value: "False"}
	completion := func(s, f *stagecoachv1.FieldMatch) *stagecoachv1.CompletionRules {
		return &stagecoachv1.CompletionRules{ObservedCompletion: &stagecoachv1.ObservedCompletion{Succeeded: s, Failed: f}}
	}
	matches := &stagecoachv1.CompletionRules{ObservedMatches: []stagecoachv1.ObservedMatch{
		{Input: "spec.replicas", Output: "status.readyReplicas"}, {Input: "spec.image", Output: "status.image"}}}
	notMet := "Resource 'deployer' is waiting for the specified condition of observedCompletion."
	// A status field no built-in observer reads (Argo CD's summary), and a label.
	summary := &stagecoachv1.CompletionRules{ObservedMatches: []stagecoachv1.ObservedMatch{
		{Input: "spec.image", Output: "status.summary.images.0"}, {Input: "metadata.labels.app", Output: "status.app"}}}
	return []completionCase{
		{name: "succeeded at the observed generation", rules: completion(succeeded, failed),
			obj: widget(2, map[string]any{"observedGeneration": int64(2), "conditions": condition("True")}), phase: Landed, reason: "Landed"},
		{name: "generation not observed yet", rules: completion(succeeded, failed),
			obj:   widget(3, map[string]any{"observedGeneration": int64(2), "conditions": condition("True")}),
			phase: Progressing, reason: "ConditionNotMet", message: notMet},
		{name: "observed but not met", rules: completion(succeeded, failed),
			obj:   widget(2, map[string]any{"observedGeneration": int64(2), "conditions": condition("Unknown")}),
			phase: Progressing, reason: "ConditionNotMet", message: notMet},
		{name: "condition absent", rules: completion(succeeded, failed),
			obj: widget(2, map[string]any{"observedGeneration": int64(2)}), phase: Progressing, reason: "ConditionNotMet", message: notMet},
		{name: "failed", rules: completion(succeeded, failed),
			obj:   widget(2, map[string]any{"observedGeneration": int64(2), "conditions": condition("False")}),
			phase: Failed, reason: "CompletionFailed", message: "Resource 'deployer' failed"},
		{name: "failure overrides success", rules: completion(succeeded, &stagecoachv1.FieldMatch{Key: succeededKey, Value: "True"}),
			obj:   widget(2, map[string]any{"observedGeneration": int64(2), "conditions": condition("True")}),
			phase: Failed, reason: "CompletionFailed"},
		{name: "failure of an unobserved generation does not count", rules: completion(succeeded, failed),
			obj:   widget(3, map[string]any{"observedGeneration": int64(2), "conditions": condition("False")}),
			phase: Progressing, reason: "ConditionNotMet"},
		{name: "status without observedGeneration", rules: completion(succeeded, failed),
			obj:   widget(2, map[string]any{"conditions": condition("True")}),
			phase: Progressing, reason: "TemplateStampFailure",
			message: "Resource 'deployer' cannot satisfy observedCompletion without observedGeneration in object status"},
		{name: "no status yet", rules: completion(succeeded, failed), obj: widget(1, nil), phase: Progressing, reason: "ConditionNotMet"},
		{name: "observedMatches all equal", rules: matches,
			obj: func() *unstructured.Unstructured {
				o := widget(1, map[string]any{"readyReplicas": int64(2), "image": "registry.example/shop@" + genericDigest})
				o.Object["spec"].(map[string]any)["replicas"] = int64(2)
				return o
			}(), phase: Landed, reason: "Landed"},
		{name: "observedMatches with one unmet pair", rules: matches,
			obj: func() *unstructured.Unstructured {
				o := widget(1, map[string]any{"readyReplicas": int64(2), "image": "registry.example/shop@" + otherDigest})
				o.Object["spec"].(map[string]any)["replicas"] = int64(2)
				return o
			}(), phase: Progressing, reason: "ConditionNotMet", message: "spec.image"},
		{name: "observedMatches with an absent output", rules: matches, obj: widget(1, map[string]any{"image": "x"}),
			phase: Progressing, reason: "ConditionNotMet"},
		{name: "observedMatches on a status field no built-in observer reads", rules: summary,
			obj: func() *unstructured.Unstructured {
				o := widget(1, map[string]any{"app": "shop", "summary": map[string]any{"images": []any{"registry.example/shop@" + genericDigest}}})
				o.SetLabels(map[string]string{"app": "shop"})
				return o
			}(), phase: Landed, reason: "Landed"},
		{name: "observedMatches on a status field no built-in observer reads, not there yet", rules: summary,
			obj: func() *unstructured.Unstructured {
				o := widget(1, map[string]any{"app": "shop"})
				o.SetLabels(map[string]string{"app": "shop"})
				return o
			}(), phase: Progressing, reason: "ConditionNotMet", message: `status.summary.images.0 ("")`},
	}
}

func TestObserveCompletion(t *testing.T) {
	for _, tc := range completionCases() {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			obs := ObserveCompletion("deployer", tc.rules, tc.obj)
			g.Expect(obs.Phase).To(Equal(tc.phase))
			g.Expect(obs.Reason).To(Equal(tc.reason))
			g.Expect(obs.Message).To(ContainSubstring(tc.message))
			if tc.phase == Failed {
				g.Expect(obs.Message).NotTo(ContainSubstring("waiting"))
			}
		})
	}
}

func TestGenericValidate(t *testing.T) {
	rules := &stagecoachv1.CompletionRules{ObservedCompletion: &stagecoachv1.ObservedCompletion{
		Succeeded: &stagecoachv1.FieldMatch{Key: succeededKey, Value: "True"}}}
	set := func(path, value string) []stagecoachv1.FieldSetting {
		return []stagecoachv1.FieldSetting{{Path: path, Value: value}}
	}
	for _, tc := range []struct {
		name   string
		g      Generic
		obj    *unstructured.Unstructured
		reason string
		msg    string
	}{
		{name: "image by digest", g: Generic{Set: set("/spec/image", "{{ .Image }}"), Repository: "registry.example/shop"}, obj: widget(1, nil)},
		{name: "a field that does not exist yet", g: Generic{Set: set("/spec/version", "{{ .Version }}")}, obj: widget(1, nil)},
		{name: "a named list item", g: Generic{Set: set("/spec/template/containers/0/image", "{{ .Image }}"), Repository: "r"}, obj: widget(1, nil)},
		{name: "an annotation", g: Generic{Set: set("/metadata/annotations/example.dev~1digest", "{{ .Digest }}")}, obj: widget(1, nil)},
		{name: "unknown template field", g: Generic{Set: set("/spec/image", "{{ .Tag }}")}, obj: widget(1, nil),
			reason: "ApplierSetInvalid", msg: "does not render"},
		{name: "template that does not parse", g: Generic{Set: set("/spec/image", "{{ .Digest")}, obj: widget(1, nil),
			reason: "ApplierSetInvalid", msg: "does not parse"},
		{name: "a loop is not a substitution", g: Generic{Set: set("/spec/image", "{{ range 3 }}{{ .Digest }}{{ end }}")}, obj: widget(1, nil),
			reason: "ApplierSetInvalid", msg: "is not a substitution"},
		{name: "status is never written", g: Generic{Set: set("/status/image", "{{ .Digest }}")}, obj: widget(1, nil),
			reason: "ApplierSetInvalid", msg: "never writes status"},
		{name: "other metadata is never written", g: Generic{Set: set("/metadata/name", "{{ .Digest }}")}, obj: widget(1, nil),
			reason: "ApplierSetInvalid", msg: "never writes status or other metadata"},
		{name: "an index past the list", g: Generic{Set: set("/spec/template/containers/5/image", "{{ .Digest }}")}, obj: widget(1, nil),
			reason: "ApplierSetInvalid", msg: "is not an index of it"},
		{name: "a list item without a name", g: Generic{Set: set("/spec/template/containers/1/image", "{{ .Digest }}")}, obj: widget(1, nil),
			reason: "ApplierSetInvalid", msg: "has no name"},
		{name: "repository without a registry source", g: Generic{Set: set("/spec/image", "{{ .Image }}")}, obj: widget(1, nil),
			reason: "ApplierSetInvalid", msg: "uses the repository"},
		{name: "observedCompletion without observedGeneration in status", g: Generic{Stage: "deployer", Set: set("/spec/image", "{{ .Digest }}"), Completion: rules},
			obj: widget(1, map[string]any{"conditions": condition("True")}), reason: "TemplateStampFailure",
			msg: "Resource 'deployer' cannot satisfy observedCompletion without observedGeneration in object status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			blocking, unmediated := tc.g.Validate(tc.obj)
			g.Expect(unmediated).To(BeNil())
			if tc.reason == "" {
				g.Expect(blocking).To(BeNil())
				return
			}
			g.Expect(blocking).NotTo(BeNil())
			g.Expect(blocking.Reason).To(Equal(tc.reason))
			g.Expect(blocking.Message).To(ContainSubstring(tc.msg))
		})
	}
}

func TestGenericApplyConfiguration(t *testing.T) {
	g := NewWithT(t)
	gen := Generic{Repository: "registry.example/shop", Set: []stagecoachv1.FieldSetting{
		{Path: "/spec/template/containers/0/image", Value: "{{ .Image }}"},
		{Path: "/metadata/labels/version", Value: "{{ .Version }}"},
	}}
	cfg, err := gen.ApplyConfiguration(widget(1, nil), Version{Digest: otherDigest, Tag: "v1.2.0"})
	g.Expect(err).NotTo(HaveOccurred())
	// Exactly the fields set, and the list item by its name only: nothing else is claimed.
	g.Expect(cfg.Object).To(Equal(map[string]any{
		"apiVersion": "example.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "shop", "labels": map[string]any{"version": "v1.2.0"}},
		"spec": map[string]any{"template": map[string]any{"containers": []any{
			map[string]any{"name": "app", "image": "registry.example/shop@" + otherDigest}}}},
	}))

	// Revision reads the digest back from the field that carries it.
	obj := widget(1, nil)
	g.Expect(gen.SetRevision(obj, Version{Digest: otherDigest, Tag: "v1.2.0"}, time.Unix(0, 0))).To(Succeed())
	g.Expect(gen.Revision(obj)).To(Equal(otherDigest))
	g.Expect(gen.Observe(obj, genericDigest).Reason).To(Equal("WaitingForRevision"))
}

// succeededRules: the object's Succeeded condition decides, True or False.
func succeededRules() *stagecoachv1.CompletionRules {
	return &stagecoachv1.CompletionRules{ObservedCompletion: &stagecoachv1.ObservedCompletion{
		Succeeded: &stagecoachv1.FieldMatch{Key: succeededKey, Value: "True"},
		Failed:    &stagecoachv1.FieldMatch{Key: succeededKey, Value: "False"}}}
}

func TestWithCompletion(t *testing.T) {
	rules := succeededRules()
	for _, tc := range []struct {
		name   string
		engine Observation
		status string
		phase  Phase
		reason string
	}{
		{name: "both hold", engine: Observation{Phase: Landed, Reason: "Landed"}, status: "True", phase: Landed, reason: "Landed"},
		{name: "the engine has not landed", engine: Observation{Phase: Progressing, Reason: "WaitingForSync"}, status: "True", phase: Progressing, reason: "WaitingForSync"},
		{name: "the rules do not hold yet", engine: Observation{Phase: Landed, Reason: "Landed"}, status: "Unknown", phase: Progressing, reason: "ConditionNotMet"},
		{name: "a failed rule fails it even while the engine waits", engine: Observation{Phase: Progressing}, status: "False", phase: Failed, reason: "CompletionFailed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			w := WithCompletion{Applier: fixedObservation{obs: tc.engine}, Stage: "s", Rules: rules}
			obs := w.Observe(widget(1, map[string]any{"observedGeneration": int64(1), "conditions": condition(tc.status)}), genericDigest)
			g.Expect(obs.Phase).To(Equal(tc.phase))
			g.Expect(obs.Reason).To(Equal(tc.reason))
		})
	}
}

// An engine's proof that a version is already live (a rollback Argo CD found running) counts
// only when the Stage's completion rules hold too (a Stage's rules were skipped once the wrapper
// answered for every capability).
func TestWithCompletionAlreadyLive(t *testing.T) {
	rules := succeededRules()
	for _, tc := range []struct {
		name   string
		live   bool
		status string
		want   bool
	}{
		{name: "live and the rules hold", live: true, status: "True", want: true},
		{name: "live, the rules do not hold yet", live: true, status: "Unknown"},
		{name: "live, a rule failed", live: true, status: "False"},
		{name: "not live", status: "True"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			w := WithCompletion{Applier: liveEngine{live: tc.live}, Stage: "s", Rules: rules}
			at, ok := w.AlreadyLive(widget(1, map[string]any{"observedGeneration": int64(1), "conditions": condition(tc.status)}), genericDigest, time.Unix(0, 0))
			g.Expect(ok).To(Equal(tc.want))
			if tc.want {
				g.Expect(at).To(Equal("2026-12-06T10:00:00Z"))
			}
		})
	}
}

// liveEngine proves any version live when live is set.
type liveEngine struct {
	fixedObservation
	live bool
}

func (l liveEngine) AlreadyLive(*unstructured.Unstructured, string, time.Time) (string, bool) {
	return "2026-12-06T10:00:00Z", l.live
}

// fixedObservation is an engine whose observation the test decides.
type fixedObservation struct {
	Defaults
	obs Observation
}

func (f fixedObservation) Validate(*unstructured.Unstructured) (*Problem, *Problem) { return nil, nil }
func (f fixedObservation) Revision(*unstructured.Unstructured) string               { return "" }
func (f fixedObservation) SetRevision(*unstructured.Unstructured, Version, time.Time) error {
	return nil
}
func (f fixedObservation) Observe(*unstructured.Unstructured, string) Observation { return f.obs }
