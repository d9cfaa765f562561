package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
