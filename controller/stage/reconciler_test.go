package stage

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

func TestOldestStage(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Second))
	gone := metav1.NewTime(t0.Add(time.Hour))
	stage := func(name string, created metav1.Time, deleting bool) stagecoachv1.Stage {
		s := stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: created}}
		if deleting {
			s.DeletionTimestamp = &gone
		}
		return s
	}
	cases := []struct {
		name   string
		stages []stagecoachv1.Stage
		want   string
	}{
		{name: "only one", stages: []stagecoachv1.Stage{stage("a", t0, false)}, want: "a"},
		{name: "older wins whatever its name", stages: []stagecoachv1.Stage{stage("a", t1, false), stage("z", t0, false)}, want: "z"},
		{name: "same second: name decides", stages: []stagecoachv1.Stage{stage("b", t0, false), stage("a", t0, false)}, want: "a"},
		{name: "a Stage being deleted gives up its claim", stages: []stagecoachv1.Stage{stage("z", t0, true), stage("a", t1, false)}, want: "a"},
		{name: "none left", stages: []stagecoachv1.Stage{stage("z", t0, true)}, want: ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(oldestStage(tc.stages)).To(Equal(tc.want))
		})
	}
}

func TestLabelProblem(t *testing.T) {
	cases := []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{name: "labelled for the Stage", labels: map[string]string{stagecoachv1.StageLabel: "payments"}, want: ""},
		{name: "no label", labels: nil,
			want: "Application 'prod/payments' lacks the label stagecoach.dev/stage=payments: add it to mark the object as applied by this Stage"},
		{name: "labelled for another Stage", labels: map[string]string{stagecoachv1.StageLabel: "billing"},
			want: "Application 'prod/payments' is labelled stagecoach.dev/stage=billing, not payments: set the label to this Stage's name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{}
			obj.SetLabels(tc.labels)
			NewWithT(t).Expect(labelProblem(obj, "payments", "Application 'prod/payments'")).To(Equal(tc.want))
		})
	}
}

func TestStageApplierKey(t *testing.T) {
	cases := []struct {
		name string
		ref  stagecoachv1.ApplierReference
		want string
	}{
		{name: "built-in kind", ref: stagecoachv1.ApplierReference{Kind: "Application", Name: "payments"}, want: "argoproj.io/Application/payments"},
		{name: "built-in kind, explicit version", ref: stagecoachv1.ApplierReference{APIVersion: "kustomize.toolkit.fluxcd.io/v1", Kind: "Kustomization", Name: "app"}, want: "kustomize.toolkit.fluxcd.io/Kustomization/app"},
		{name: "other kind", ref: stagecoachv1.ApplierReference{APIVersion: "kappctrl.k14s.io/v1alpha1", Kind: "App", Name: "x"}, want: "kappctrl.k14s.io/App/x"},
		{name: "unresolvable", ref: stagecoachv1.ApplierReference{Kind: "App", Name: "x"}, want: "?/App/x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &stagecoachv1.Stage{Spec: stagecoachv1.StageSpec{ApplyRef: tc.ref}}
			NewWithT(t).Expect(stageApplierKey(s)).To(Equal(tc.want))
			NewWithT(t).Expect(stageApplierKeys(s)[0]).To(Equal(tc.want))
		})
	}
}

func TestStageApplierKeysIncludeTheKustomization(t *testing.T) {
	s := &stagecoachv1.Stage{Spec: stagecoachv1.StageSpec{ApplyRef: stagecoachv1.ApplierReference{
		Kind: "OCIRepository", Name: "dev", Kustomization: "dev-apply"}}}
	NewWithT(t).Expect(stageApplierKeys(s)).To(Equal([]string{
		"source.toolkit.fluxcd.io/OCIRepository/dev", "kustomize.toolkit.fluxcd.io/Kustomization/dev-apply"}))
}
