package install

import (
	"context"
	"os"
	"sort"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// applyOrder puts Namespaces first and CRDs next, as kubectl's apply would need them.
func applyOrder(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	rank := func(o *unstructured.Unstructured) int {
		switch o.GetKind() {
		case "Namespace":
			return 0
		case "CustomResourceDefinition":
			return 1
		}
		return 2
	}
	out := append([]*unstructured.Unstructured(nil), objs...)
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i]) < rank(out[j]) })
	return out
}

func apply(ctx context.Context, c client.Client, o *unstructured.Unstructured, opts ...client.ApplyOption) error {
	opts = append(opts, client.ForceOwnership, client.FieldOwner("stagecoach-install-test"))
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), opts...)
}

// TestApplyOnAPIServer applies the kustomize install (install.yaml's objects) and the chart's output
// to a real kube-apiserver: first as a server-side dry run, then for real.
func TestApplyOnAPIServer(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run 'make test', or export KUBEBUILDER_ASSETS=$(test/envbin/build.sh)")
	}
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("failed to start kube-apiserver and etcd from %s: %v", os.Getenv("KUBEBUILDER_ASSETS"), err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	chart, err := renderChart("stagecoach-helm", map[string]any{"image": map[string]any{"digest": testDigest}})
	if err != nil {
		t.Fatal(err)
	}
	// The API server must be able to refuse: a chart rendered with a value it rejects.
	bad, err := renderChart("stagecoach-bad", map[string]any{"replicas": -1})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		namespace string // created first when the objects do not hold it (Helm's --create-namespace)
		objs      []*unstructured.Unstructured
		wantErr   string // the dry run must refuse an object with this in its error
	}{
		{name: "kustomize install", objs: kustomizeInstall(t, "registry.example/stagecoach")},
		{name: "Helm chart", namespace: "stagecoach-helm", objs: chart},
		{name: "an invalid object fails the dry run", namespace: "stagecoach-bad", objs: bad, wantErr: "spec.replicas"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := t.Context()
			if tt.namespace != "" {
				g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tt.namespace}})).To(Succeed())
			}
			objs := applyOrder(tt.objs)
			// The dry run needs the namespace to exist, as `kubectl apply --dry-run=server` does.
			for _, o := range objs {
				if o.GetKind() == "Namespace" {
					g.Expect(apply(ctx, c, o)).To(Succeed(), key(o))
				}
			}
			var refused []string
			for _, o := range objs {
				if err := apply(ctx, c, o, client.DryRunAll); err != nil {
					refused = append(refused, err.Error())
				}
			}
			if tt.wantErr != "" {
				g.Expect(refused).To(ContainElement(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(refused).To(BeEmpty(), "the dry run refused objects")
			for _, o := range objs {
				if o.GetKind() == "Namespace" {
					continue
				}
				probe := &unstructured.Unstructured{}
				probe.SetGroupVersionKind(o.GroupVersionKind())
				err := c.Get(ctx, client.ObjectKeyFromObject(o), probe)
				if o.GetKind() != "CustomResourceDefinition" && o.GetKind() != "ClusterRole" && o.GetKind() != "ClusterRoleBinding" &&
					o.GetKind() != "ValidatingAdmissionPolicy" && o.GetKind() != "ValidatingAdmissionPolicyBinding" {
					// Namespaced objects are new in this test's namespace: the dry run wrote none.
					g.Expect(err).To(HaveOccurred(), "the dry run created %s", key(o))
				}
			}
			for _, o := range objs {
				g.Expect(apply(ctx, c, o)).To(Succeed(), key(o))
			}
			for _, o := range objs {
				got := &unstructured.Unstructured{}
				got.SetGroupVersionKind(o.GroupVersionKind())
				g.Expect(c.Get(ctx, client.ObjectKeyFromObject(o), got)).To(Succeed(), key(o))
			}
		})
	}
}
