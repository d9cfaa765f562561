package runcheck

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/applier"
	"github.com/stagecoach-dev/stagecoach/internal/check"
)

func testInput() check.Input {
	return check.Input{Stage: "web-staging", Namespace: "shop", Environment: "staging", Service: "web",
		Version: "v1.2.0", Digest: "sha256:" + "ab12" + "00000000000000000000000000000000000000000000000000000000000000"[:60],
		Promotion: "web-staging-7x2", PromotionUID: "uid-1"}
}

func TestRender(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		want    map[string]any
		wantErr string
	}{
		{name: "every name, in strings at any depth; keys and other values as written",
			raw: `{"apiVersion":"batch/v1","kind":"Job","metadata":{"labels":{"{{.Stage}}":"{{.Environment}}"}},"spec":{"backoffLimit":0,
				"template":{"spec":{"containers":[{"name":"t","image":"registry.example/tests@{{.Digest}}",
				"args":["--version={{.Version}}","{{.Revision}}","{{.Service}}/{{.Namespace}}/{{.Promotion}}"]}]}}}}`,
			want: map[string]any{"apiVersion": "batch/v1", "kind": "Job",
				"metadata": map[string]any{"labels": map[string]any{"{{.Stage}}": "staging"}},
				"spec": map[string]any{"backoffLimit": float64(0), "template": map[string]any{"spec": map[string]any{"containers": []any{
					map[string]any{"name": "t", "image": "registry.example/tests@" + testInput().Digest,
						"args": []any{"--version=v1.2.0", testInput().Digest, "web/shop/web-staging-7x2"}}}}}}}},
		{name: "an unknown name names where it is", raw: `{"spec":{"args":["ok","{{.Versoin}}"]}}`,
			wantErr: `spec.args[1]: template: spec.args[1]:1:2: executing "spec.args[1]" at <.Versoin>: can't evaluate field Versoin`},
		{name: "a malformed template", raw: `{"spec":{"image":"{{.Digest"}}`, wantErr: `spec.image: template: spec.image:1: unclosed action`},
		{name: "a loop is not a substitution", raw: `{"spec":{"args":["{{ range 3 }}{{ .Digest }}{{ end }}"]}}`, wantErr: `spec.args[0]: "{{range 3}}{{.Digest}}{{end}}" is not a substitution`},
		{name: "not an object", raw: `[1]`, wantErr: "it is not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := Render([]byte(tt.raw), testInput())
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Object).To(Equal(tt.want))
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		obj     map[string]any
		wantErr string
	}{
		{name: "a Job with a prefix", obj: map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"generateName": "smoke-"}}},
		{name: "the Stage's own namespace", obj: map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"namespace": "shop"}}},
		{name: "no kind", obj: map[string]any{"apiVersion": "batch/v1"}, wantErr: "sets no apiVersion or kind"},
		{name: "a fixed name", obj: map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": "smoke"}},
			wantErr: `sets metadata.name "smoke", but every attempt creates a new run: remove it`},
		{name: "another namespace", obj: map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"namespace": "kube-system"}},
			wantErr: `sets metadata.namespace "kube-system", but a run is created in the Stage's namespace (shop)`},
		{name: "an owner of its own", obj: map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{
			"ownerReferences": []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u"}}}},
			wantErr: "sets metadata.ownerReferences or finalizers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := validate(&unstructured.Unstructured{Object: tt.obj}, "shop")
			if tt.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
		})
	}
}

// The default rules judge runs the way their controllers report them: a Job's Complete or Failed
// condition (no observedGeneration: a Job has none), a Tekton run's Succeeded condition; failure
// wins; other kinds have none.
func TestDefaultRulesJudgeRuns(t *testing.T) {
	job := schema.GroupKind{Group: "batch", Kind: "Job"}
	pipelineRun := schema.GroupKind{Group: "tekton.dev", Kind: "PipelineRun"}
	conditions := func(pairs ...string) map[string]any {
		var list []any
		for i := 0; i < len(pairs); i += 2 {
			list = append(list, map[string]any{"type": pairs[i], "status": pairs[i+1]})
		}
		return map[string]any{"conditions": list}
	}
	tests := []struct {
		name   string
		kind   schema.GroupKind
		status map[string]any
		want   applier.Phase
	}{
		{name: "a Job running", kind: job, status: map[string]any{"active": int64(1)}, want: applier.Progressing},
		{name: "a Job complete", kind: job, status: conditions("SuccessCriteriaMet", "True", "Complete", "True"), want: applier.Landed},
		{name: "a Job failing", kind: job, status: conditions("FailureTarget", "True"), want: applier.Progressing},
		{name: "a Job failed", kind: job, status: conditions("FailureTarget", "True", "Failed", "True"), want: applier.Failed},
		{name: "failure wins over success", kind: job, status: conditions("Complete", "True", "Failed", "True"), want: applier.Failed},
		{name: "a PipelineRun running", kind: pipelineRun, status: conditions("Succeeded", "Unknown"), want: applier.Progressing},
		{name: "a PipelineRun succeeded", kind: pipelineRun, status: conditions("Succeeded", "True"), want: applier.Landed},
		{name: "a TaskRun failed", kind: schema.GroupKind{Group: "tekton.dev", Kind: "TaskRun"}, status: conditions("Succeeded", "False"), want: applier.Failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			rules := DefaultRules(tt.kind)
			g.Expect(rules).NotTo(BeNil())
			obj := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"generation": int64(1)}, "status": tt.status}}
			g.Expect(applier.ObserveRun("Job shop/smoke-x", rules, obj).Phase).To(Equal(tt.want))
		})
	}
	t.Run("other kinds have none", func(t *testing.T) {
		NewWithT(t).Expect(DefaultRules(schema.GroupKind{Group: "argoproj.io", Kind: "Workflow"})).To(BeNil())
	})
	t.Run("a kind that reports observedGeneration is judged at its generation only", func(t *testing.T) {
		g := NewWithT(t)
		rules := &stagecoachv1.CompletionRules{ObservedCompletion: &stagecoachv1.ObservedCompletion{
			Succeeded: &stagecoachv1.FieldMatch{Key: "status.phase", Value: "Succeeded"}}}
		obj := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"generation": int64(2)},
			"status": map[string]any{"observedGeneration": int64(1), "phase": "Succeeded"}}}
		g.Expect(applier.ObserveRun("Widget shop/w", rules, obj).Phase).To(Equal(applier.Progressing))
		obj.Object["status"].(map[string]any)["observedGeneration"] = int64(2)
		g.Expect(applier.ObserveRun("Widget shop/w", rules, obj).Phase).To(Equal(applier.Landed))
	})
}

// A Job run gets the check's timeout as its deadline unless its template sets one, so a run the
// check stopped reading is stopped by the Job controller; other kinds are left as written.
func TestBoundJob(t *testing.T) {
	for _, tc := range []struct {
		name    string
		raw     string
		timeout time.Duration
		want    any
	}{
		{name: "a Job without a deadline", raw: `{"apiVersion":"batch/v1","kind":"Job","spec":{}}`, timeout: 10 * time.Minute, want: int64(600)},
		{name: "a part second rounds up", raw: `{"apiVersion":"batch/v1","kind":"Job","spec":{}}`, timeout: 1500 * time.Millisecond, want: int64(2)},
		{name: "a Job's own deadline stays", raw: `{"apiVersion":"batch/v1","kind":"Job","spec":{"activeDeadlineSeconds":30}}`, timeout: time.Hour, want: float64(30)},
		{name: "another kind is left alone", raw: `{"apiVersion":"tekton.dev/v1","kind":"PipelineRun","spec":{}}`, timeout: time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			obj, err := Render([]byte(tc.raw), testInput())
			g.Expect(err).NotTo(HaveOccurred())
			boundJob(obj, tc.timeout)
			got, set, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "activeDeadlineSeconds")
			if tc.want == nil {
				g.Expect(set).To(BeFalse())
				return
			}
			g.Expect(got).To(Equal(tc.want))
		})
	}
}
