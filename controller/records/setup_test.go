package records

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// A follower's default apply repository is where its applier pulls from: for a Helm chart, the
// chart's own repository (repoURL plus the chart's name), where the records' digests are found.
func TestApplyRepositoryOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind string
		spec map[string]any
		want string
	}{
		{name: "an OCI source", kind: "Application", spec: map[string]any{"source": map[string]any{"repoURL": "oci://registry.example/deploy/payments"}},
			want: "registry.example/deploy/payments"},
		{name: "a Helm chart from an OCI registry", kind: "Application",
			spec: map[string]any{"source": map[string]any{"repoURL": "oci://registry.example/charts/", "chart": "payments", "targetRevision": "1.2.3"}},
			want: "registry.example/charts/payments"},
		{name: "a Flux OCIRepository", kind: "OCIRepository", spec: map[string]any{"url": "oci://registry.example/deploy/payments"},
			want: "registry.example/deploy/payments"},
		{name: "nothing to tell", kind: "Application", spec: map[string]any{"sources": []any{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			apiVersion := "argoproj.io/v1alpha1"
			if tc.kind == "OCIRepository" {
				apiVersion = "source.toolkit.fluxcd.io/v1"
			}
			obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": tc.kind,
				"metadata": map[string]any{"namespace": "prod", "name": "payments"}, "spec": tc.spec}}
			repositoryOf := applyRepositoryOf(fake.NewClientBuilder().WithObjects(obj).Build())
			stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "payments"},
				Status: stagecoachv1.StageStatus{Applier: &stagecoachv1.ObjectReference{APIVersion: apiVersion, Kind: tc.kind, Name: "payments"}}}
			g.Expect(repositoryOf(t.Context(), stage)).To(Equal(tc.want))
		})
	}
}
