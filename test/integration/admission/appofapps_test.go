package admission

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

// gitCopy is a labelled Application as an app-of-apps parent's Git declares it: without the
// fields Stagecoach writes (targetRevision, the plugin's env) unless mutate puts some in.
func gitCopy(name string, plugin bool, mutate func(source map[string]any)) *unstructured.Unstructured {
	u := application(name, plugin)
	source, _, _ := unstructured.NestedMap(u.Object, "spec", "source")
	delete(source, "targetRevision")
	if plugin {
		source["targetRevision"] = "main" // the Git revision of the rendered manifests, not the digest
		source["plugin"] = map[string]any{"name": "stagecoach"}
	}
	if mutate != nil {
		mutate(source)
	}
	_ = unstructured.SetNestedMap(u.Object, source, "spec", "source")
	return u
}

// An app-of-apps parent's application-controller creates and prunes labelled Applications from
// Git, as Flux's kustomize-controller does for Flux objects; re-applying a Git copy that leaves out
// what Stagecoach writes keeps Stagecoach's digest, and nothing but Stagecoach (and break-glass)
// changes what a live one runs.
func TestApplicationGuardAppOfApps(t *testing.T) {
	g := NewWithT(t)
	grantEveryone(t, "app-of-apps-writer", rbacv1.PolicyRule{APIGroups: []string{"argoproj.io"}, Resources: []string{"applications"},
		Verbs: []string{"get", "list", "create", "update", "patch", "delete"}})
	applyManifests(t, filepath.Join(testenv.RepoRoot(), "manifests", "policies", "application-guard.yaml"))

	alice := as(t, "alice", "developers")
	stagecoach := as(t, controllerSA, "system:serviceaccounts")
	parent := as(t, argoCDSA, "system:serviceaccounts")
	argoServer := as(t, argoServerSA, "system:serviceaccounts")

	probes := 0
	g.Eventually(func() error {
		probes++
		return alice.Create(t.Context(), application(fmt.Sprintf("aoa-probe-%d", probes), false))
	}, 10*time.Second, 100*time.Millisecond).Should(MatchError(MatchRegexp(
		`only Stagecoach may create Stagecoach-managed Application aoa-probe-\d+ \(user alice\)`)))

	digest := func(n int) string { return "sha256:" + fmt.Sprintf("%064d", n) }
	get := func(g Gomega, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("argoproj.io/v1alpha1")
		u.SetKind("Application")
		g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, u)).To(Succeed())
		return u
	}
	revisionOf := func(u *unstructured.Unstructured) string {
		rev, _, _ := unstructured.NestedString(u.Object, "spec", "source", "targetRevision")
		return rev
	}
	pluginDigestOf := func(u *unstructured.Unstructured) string {
		env, _, _ := unstructured.NestedSlice(u.Object, "spec", "source", "plugin", "env")
		for _, e := range env {
			if m, _ := e.(map[string]any); m["name"] == "STAGECOACH_DIGEST" {
				return m["value"].(string)
			}
		}
		return ""
	}
	// Stagecoach's write, as the controller's applier makes it (a merge patch).
	promote := func(name string, plugin bool, d string) func(g Gomega) {
		return func(g Gomega) {
			u := get(g, name)
			patch := client.MergeFrom(u.DeepCopy())
			if plugin {
				_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "STAGECOACH_DIGEST", "value": d}}, "spec", "source", "plugin", "env")
			} else {
				_ = unstructured.SetNestedField(u.Object, d, "spec", "source", "targetRevision")
			}
			g.Expect(stagecoach.Patch(t.Context(), u, patch)).To(Succeed())
		}
	}
	// The parent re-applies its Git copy: client-side (kubectl apply's merge patch of the copy) or
	// server-side (Argo CD's ServerSideApply=true), as the application-controller.
	clientSide := func(copy *unstructured.Unstructured) error {
		return parent.Patch(t.Context(), copy.DeepCopy(), client.Merge)
	}
	serverSide := func(copy *unstructured.Unstructured) error {
		return parent.Patch(t.Context(), copy.DeepCopy(), client.Apply, client.FieldOwner("argocd-controller"), client.ForceOwnership)
	}

	cases := []struct {
		name string
		// write is the request; check what must hold afterwards.
		write   func(g Gomega) error
		wantErr string
		check   func(g Gomega)
	}{
		{name: "the parent creates a labelled child from Git", write: func(Gomega) error { return parent.Create(t.Context(), gitCopy("child", false, nil)) }},
		{name: "the parent creates a labelled plugin child from Git", write: func(Gomega) error { return parent.Create(t.Context(), gitCopy("plugin-child", true, nil)) }},
		{name: "argocd-server still may not create one", write: func(Gomega) error { return argoServer.Create(t.Context(), gitCopy("by-server", false, nil)) },
			wantErr: "only Stagecoach may create Stagecoach-managed Application by-server (user " + argoServerSA + ")"},
		{name: "Stagecoach promotes the child", write: func(g Gomega) error {
			promote("child", false, digest(1))(g)
			promote("plugin-child", true, digest(1))(g)
			return nil
		}, check: func(g Gomega) {
			g.Expect(revisionOf(get(g, "child"))).To(Equal(digest(1)))
			g.Expect(pluginDigestOf(get(g, "plugin-child"))).To(Equal(digest(1)))
		}},
		{name: "the parent re-applies the Git copy client-side and the digest stays", write: func(Gomega) error { return clientSide(gitCopy("child", false, nil)) },
			check: func(g Gomega) { g.Expect(revisionOf(get(g, "child"))).To(Equal(digest(1))) }},
		{name: "the parent re-applies the Git copy server-side and the digest stays", write: func(Gomega) error { return serverSide(gitCopy("child", false, nil)) },
			check: func(g Gomega) { g.Expect(revisionOf(get(g, "child"))).To(Equal(digest(1))) }},
		{name: "the parent re-applies the plugin child's Git copy and the digest stays", write: func(Gomega) error { return clientSide(gitCopy("plugin-child", true, nil)) },
			check: func(g Gomega) { g.Expect(pluginDigestOf(get(g, "plugin-child"))).To(Equal(digest(1))) }},
		{name: "a Git copy pinning another digest is refused", write: func(Gomega) error {
			return clientSide(gitCopy("child", false, func(s map[string]any) { s["targetRevision"] = digest(2) }))
		}, wantErr: "targetRevision of Stagecoach-managed Application child may only be changed by Stagecoach; " + argoCDSA + " tried " + digest(1) + " -> " + digest(2),
			check: func(g Gomega) { g.Expect(revisionOf(get(g, "child"))).To(Equal(digest(1))) }},
		{name: "a Git copy with its own plugin env replaces Stagecoach's and is refused", write: func(Gomega) error {
			return clientSide(gitCopy("plugin-child", true, func(s map[string]any) {
				s["plugin"] = map[string]any{"name": "stagecoach", "env": []any{map[string]any{"name": "REGION", "value": "eu"}}}
			}))
		}, wantErr: "the Stagecoach plugin env of Application plugin-child may only be changed by Stagecoach",
			check: func(g Gomega) { g.Expect(pluginDigestOf(get(g, "plugin-child"))).To(Equal(digest(1))) }},
		{name: "a Git copy pointing elsewhere is refused", write: func(Gomega) error {
			return clientSide(gitCopy("child", false, func(s map[string]any) { s["repoURL"] = "oci://evil.example/payments" }))
		}, wantErr: "spec.source of Stagecoach-managed Application child decide what runs and may only be changed by Stagecoach (user " + argoCDSA + ")"},
		{name: "a Git copy relabelling it is refused", write: func(Gomega) error {
			u := gitCopy("child", false, nil)
			u.SetLabels(map[string]string{"stagecoach.dev/stage": "other"})
			return clientSide(u)
		}, wantErr: "the stagecoach.dev/stage label of Application child may only be removed or changed by Stagecoach (user " + argoCDSA + ")"},
		{name: "the parent prunes the child", write: func(Gomega) error { return parent.Delete(t.Context(), gitCopy("child", false, nil)) }},
		{name: "a user still may not delete one", write: func(Gomega) error { return alice.Delete(t.Context(), gitCopy("plugin-child", true, nil)) },
			wantErr: "Stagecoach-managed Application plugin-child may only be deleted by Stagecoach or a break-glass member (user alice)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := tc.write(g)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			}
			if tc.check != nil {
				tc.check(g)
			}
		})
	}
}
