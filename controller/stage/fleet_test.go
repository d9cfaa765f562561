package stage

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

func TestWavesMayMatch(t *testing.T) {
	eu := &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}}
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "region", Operator: "Bogus"}}}
	cases := []struct {
		name   string
		waves  []stagecoachv1.Wave
		labels map[string]string
		want   bool
	}{
		{name: "absent selector takes every cluster", waves: []stagecoachv1.Wave{{Name: "all"}}, labels: map[string]string{"region": "us"}, want: true},
		{name: "a wave matches", waves: []stagecoachv1.Wave{{Name: "eu", Selector: eu}}, labels: map[string]string{"region": "eu"}, want: true},
		{name: "no wave matches", waves: []stagecoachv1.Wave{{Name: "eu", Selector: eu}}, labels: map[string]string{"region": "us"}, want: false},
		{name: "an invalid selector counts, so the Stage says what is wrong", waves: []stagecoachv1.Wave{{Name: "bad", Selector: bad}}, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(wavesMayMatch(tc.waves, tc.labels)).To(Equal(tc.want))
		})
	}
}

func TestApplicationSetOwners(t *testing.T) {
	cases := []struct {
		name string
		refs []metav1.OwnerReference
		want []string
	}{
		{name: "owned by an ApplicationSet", refs: []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "ApplicationSet", Name: "payments"}},
			want: []string{"payments"}},
		{name: "another group's ApplicationSet", refs: []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "ApplicationSet", Name: "x"}}},
		{name: "not owned", refs: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{OwnerReferences: tc.refs}}
			NewWithT(t).Expect(applicationSetOwners(o)).To(Equal(tc.want))
		})
	}
}

func TestUnlabelledTargets(t *testing.T) {
	app := func(name string, labels map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetName(name)
		u.SetLabels(labels)
		return u
	}
	labelled := func(name string) *unstructured.Unstructured {
		return app(name, map[string]string{stagecoachv1.StageLabel: "fleet"})
	}
	const described = "ApplicationSet 'shop/fleet'"
	cases := []struct {
		name        string
		apps        []*unstructured.Unstructured
		wantMessage []string // nil: mediated
	}{
		{name: "every target labelled", apps: []*unstructured.Unstructured{labelled("eu1"), labelled("us1")}},
		{name: "one target without the label", apps: []*unstructured.Unstructured{labelled("eu1"), app("us1", map[string]string{"team": "shop"})},
			wantMessage: []string{"1 of the 2 Applications of ApplicationSet 'shop/fleet' lack the label stagecoach.dev/stage=fleet (us1): the Application guard does not cover them",
				"add stagecoach.dev/stage: fleet to the ApplicationSet's spec.template.metadata.labels"}},
		{name: "a target labelled for another Stage", apps: []*unstructured.Unstructured{app("eu1", map[string]string{stagecoachv1.StageLabel: "other"})},
			wantMessage: []string{`(eu1 (labelled for Stage "other"))`}},
		{name: "many: the first five by name, then how many more", apps: []*unstructured.Unstructured{
			app("g", nil), app("b", nil), app("f", nil), labelled("x"), app("a", nil), app("e", nil), app("d", nil), app("c", nil)},
			wantMessage: []string{"7 of the 8 Applications", "(a, b, c, d, e and 2 more)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := unlabelledTargets("fleet", described, tc.apps)
			if tc.wantMessage == nil {
				g.Expect(p).To(BeNil())
				return
			}
			g.Expect(p).NotTo(BeNil())
			g.Expect(p.Reason).To(Equal(stagecoachv1.ReasonTargetsUnlabelled))
			for _, want := range tc.wantMessage {
				g.Expect(p.Message).To(ContainSubstring(want))
			}
		})
	}
}
