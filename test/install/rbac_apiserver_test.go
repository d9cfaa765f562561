package install

import (
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestWatchNamespacesSecretsOnAPIServer installs the chart with watchNamespaces on a real
// kube-apiserver (RBAC on) and acts as the controller's service account: it reads Secrets in a
// watched namespace and is refused them everywhere else, while its cluster-wide rules still hold.
func TestWatchNamespacesSecretsOnAPIServer(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run 'make test', or export KUBEBUILDER_ASSETS=$(test/envbin/build.sh)")
	}
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("failed to start kube-apiserver and etcd from %s: %v", os.Getenv("KUBEBUILDER_ASSETS"), err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	g := NewWithT(t)
	ctx := t.Context()
	admin, err := client.New(cfg, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	const release = "stagecoach-scoped"
	for _, ns := range []string{release, "team-a", "team-b"} {
		g.Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		g.Expect(admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cosign-keys"},
			Data: map[string][]byte{"cosign.pub": []byte("key")}})).To(Succeed())
	}
	objs, err := renderChart(release, map[string]any{"watchNamespaces": []any{"team-a"}, "image": map[string]any{"digest": testDigest}})
	g.Expect(err).NotTo(HaveOccurred())
	for _, o := range applyOrder(objs) {
		g.Expect(apply(ctx, admin, o)).To(Succeed(), key(o))
	}

	asController := rest.CopyConfig(cfg)
	asController.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + release + ":stagecoach-controller"}
	sa, err := client.New(asController, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	tests := []struct {
		name      string
		do        func() error
		forbidden bool
	}{
		{name: "get a key Secret in the watched namespace", do: func() error {
			return sa.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "cosign-keys"}, &corev1.Secret{})
		}},
		{name: "list Secrets in the watched namespace (fleet cluster Secrets)", do: func() error {
			return sa.List(ctx, &corev1.SecretList{}, client.InNamespace("team-a"))
		}},
		{name: "get a Secret in a namespace not watched", forbidden: true, do: func() error {
			return sa.Get(ctx, client.ObjectKey{Namespace: "team-b", Name: "cosign-keys"}, &corev1.Secret{})
		}},
		{name: "list every namespace's Secrets", forbidden: true, do: func() error {
			return sa.List(ctx, &corev1.SecretList{})
		}},
		{name: "the cluster-wide rules still hold: list Stages everywhere", do: func() error {
			u := &unstructured.UnstructuredList{}
			u.SetAPIVersion("stagecoach.dev/v1alpha1")
			u.SetKind("StageList")
			return sa.List(ctx, u)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			// RBAC objects reach the authorizer's cache shortly after they are written.
			g.Eventually(func(g Gomega) {
				err := tt.do()
				if tt.forbidden {
					g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
					return
				}
				g.Expect(err).NotTo(HaveOccurred())
			}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
		})
	}
}
