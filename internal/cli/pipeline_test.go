package cli

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

func TestPromotionOrder(t *testing.T) {
	stage := func(ns, name, upNS, up string) stagecoachv1.Stage {
		s := stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if up != "" {
			s.Spec.Source.Upstream = &stagecoachv1.UpstreamSource{Stage: up, Namespace: upNS}
		} else {
			s.Spec.Source.Registry = &stagecoachv1.RegistrySource{Repository: "registry.example/x"}
		}
		return s
	}
	names := func(stages []stagecoachv1.Stage) []string {
		out := []string{}
		for _, s := range stages {
			out = append(out, s.Namespace+"/"+s.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		stages []stagecoachv1.Stage
		want   []string
	}{
		{name: "upstream first across namespaces, whatever the names",
			stages: []stagecoachv1.Stage{stage("a", "prod", "z", "staging"), stage("z", "staging", "m", "dev"), stage("m", "dev", "", "")},
			want:   []string{"m/dev", "z/staging", "a/prod"}},
		{name: "an upstream in the same namespace by default",
			stages: []stagecoachv1.Stage{stage("a", "prod", "", "dev"), stage("a", "dev", "", "")},
			want:   []string{"a/dev", "a/prod"}},
		{name: "two Stages from one upstream, by name",
			stages: []stagecoachv1.Stage{stage("a", "prod-us", "", "dev"), stage("a", "prod-eu", "", "dev"), stage("a", "dev", "", "")},
			want:   []string{"a/dev", "a/prod-eu", "a/prod-us"}},
		{name: "an upstream outside the pipeline counts as none",
			stages: []stagecoachv1.Stage{stage("a", "prod", "other", "staging"), stage("a", "canary", "", "")},
			want:   []string{"a/canary", "a/prod"}},
		{name: "a cycle ends",
			stages: []stagecoachv1.Stage{stage("a", "x", "", "y"), stage("a", "y", "", "x")},
			want:   []string{"a/x", "a/y"}},
		{name: "none", stages: nil, want: []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(names(PromotionOrder(tc.stages))).To(Equal(tc.want))
		})
	}
}
