package admission

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

const kustomizeControllerSA = "system:serviceaccount:flux-system:kustomize-controller"

// guarded builds a labelled object of apiVersion/kind from its spec.
func guarded(apiVersion, kind, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(map[string]string{"stagecoach.dev/stage": name})
	return u
}

// guardCase is one write to a guarded object: an update by mutate, or a delete.
type guardCase struct {
	name    string
	who     client.Client
	obj     *unstructured.Unstructured // which object (read fresh before the write)
	mutate  func(u *unstructured.Unstructured)
	delete  bool
	status  bool // through the status subresource
	wantErr string
}

func runGuardCases(t *testing.T, cases []guardCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(tc.obj.GroupVersionKind())
			g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(tc.obj), u)).To(Succeed())
			before := u.DeepCopy()
			var err error
			switch {
			case tc.delete:
				err = tc.who.Delete(t.Context(), u)
			case tc.status:
				tc.mutate(u)
				err = tc.who.Status().Update(t.Context(), u)
			default:
				tc.mutate(u)
				err = tc.who.Update(t.Context(), u)
			}
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			after := before.DeepCopy()
			g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(before), after)).To(Succeed())
			g.Expect(after.Object["spec"]).To(Equal(before.Object["spec"]))
			g.Expect(after.GetLabels()).To(Equal(before.GetLabels()))
		})
	}
}

func set(value any, path ...string) func(u *unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) { _ = unstructured.SetNestedField(u.Object, value, path...) }
}

// The fields that decide what a labelled Flux object runs change only through Stagecoach (or
// break-glass); Flux's status writes and everyone's other fields pass.
func TestFluxGuard(t *testing.T) {
	g := NewWithT(t)
	grantEveryone(t, "flux-writer", rbacv1.PolicyRule{
		APIGroups: []string{"source.toolkit.fluxcd.io", "kustomize.toolkit.fluxcd.io", "helm.toolkit.fluxcd.io"},
		Resources: []string{"ocirepositories", "gitrepositories", "kustomizations", "helmreleases", "ocirepositories/status", "kustomizations/status", "helmreleases/status"},
		Verbs:     []string{"get", "list", "create", "update", "patch", "delete"}})
	applyManifests(t, filepath.Join(testenv.RepoRoot(), "manifests", "policies", "flux-guard.yaml"))

	alice := as(t, "alice", "developers")
	stagecoach := as(t, controllerSA, "system:serviceaccounts")
	breakGlass := as(t, "bob", "stagecoach:break-glass")
	kustomizeController := as(t, kustomizeControllerSA, "system:serviceaccounts")
	sourceController := as(t, "system:serviceaccount:flux-system:source-controller", "system:serviceaccounts")

	oci := func(name string) *unstructured.Unstructured {
		return guarded("source.toolkit.fluxcd.io/v1", "OCIRepository", name, map[string]any{
			"url": "oci://registry.example/manifests/payments", "interval": "5m", "ref": map[string]any{"digest": anyDigest}})
	}
	gitRepo := func(name string) *unstructured.Unstructured {
		return guarded("source.toolkit.fluxcd.io/v1", "GitRepository", name, map[string]any{
			"url": "https://git.example/org/config.git", "interval": "5m", "ref": map[string]any{"branch": "main", "commit": strings.Repeat("a", 40)}})
	}
	// One policy per kind, each enforced once the API server has read it and its binding: wait for
	// all of them, not only the first.
	probes := 0
	for _, kind := range []struct {
		name   string
		object func(name string) *unstructured.Unstructured
	}{
		{"OCIRepository", oci},
		{"GitRepository", gitRepo},
		{"Kustomization", func(name string) *unstructured.Unstructured {
			return guarded("kustomize.toolkit.fluxcd.io/v1", "Kustomization", name, map[string]any{
				"interval": "5m", "prune": true, "sourceRef": map[string]any{"kind": "GitRepository", "name": "payments"}})
		}},
		{"HelmRelease", func(name string) *unstructured.Unstructured {
			return guarded("helm.toolkit.fluxcd.io/v2", "HelmRelease", name, map[string]any{"interval": "5m",
				"chart": map[string]any{"spec": map[string]any{"chart": "payments", "sourceRef": map[string]any{"kind": "HelmRepository", "name": "charts"}}}})
		}},
	} {
		g.Eventually(func() error {
			probes++
			return alice.Create(t.Context(), kind.object(fmt.Sprintf("probe-%d", probes)))
		}, 10*time.Second, 100*time.Millisecond).Should(MatchError(MatchRegexp(
			`only Stagecoach may create Stagecoach-managed ` + kind.name + ` probe-\d+ \(user alice\)`)))
	}

	repo := oci("payments-oci")
	ks := guarded("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "payments-ks", map[string]any{
		"interval": "5m", "prune": true, "path": "./deploy",
		"sourceRef": map[string]any{"kind": "GitRepository", "name": "payments"},
		"postBuild": map[string]any{"substitute": map[string]any{"STAGECOACH_DIGEST": anyDigest}},
		"images":    []any{map[string]any{"name": "app", "digest": anyDigest}},
	})
	hr := guarded("helm.toolkit.fluxcd.io/v2", "HelmRelease", "payments-hr", map[string]any{
		"interval": "5m",
		"chart": map[string]any{"spec": map[string]any{"chart": "payments", "version": "1.0.0",
			"sourceRef": map[string]any{"kind": "HelmRepository", "name": "charts"}}},
		"values": map[string]any{"image": map[string]any{"digest": anyDigest}},
	})
	pruned := oci("pruned")
	config := gitRepo("payments-config")
	for _, o := range []*unstructured.Unstructured{repo, ks, hr, config} {
		g.Expect(stagecoach.Create(t.Context(), o.DeepCopy())).To(Succeed())
	}
	// Flux's kustomize-controller creates (from Git) and prunes labelled objects.
	g.Expect(kustomizeController.Create(t.Context(), pruned.DeepCopy())).To(Succeed())

	otherDigest := "sha256:" + fmt.Sprintf("%064d", 9)
	runGuardCases(t, []guardCase{
		{name: "a user moves an OCIRepository to a tag", who: alice, obj: repo, mutate: set(map[string]any{"tag": "latest"}, "spec", "ref"),
			wantErr: "spec.ref of Stagecoach-managed OCIRepository payments-oci decide what runs and may only be changed by Stagecoach (user alice)"},
		{name: "a user points an OCIRepository elsewhere", who: alice, obj: repo, mutate: set("oci://evil.example/x", "spec", "url"),
			wantErr: "spec.url of Stagecoach-managed OCIRepository payments-oci"},
		{name: "a user moves a GitRepository to another commit", who: alice, obj: config, mutate: set(strings.Repeat("b", 40), "spec", "ref", "commit"),
			wantErr: "spec.ref of Stagecoach-managed GitRepository payments-config decide what runs and may only be changed by Stagecoach (user alice)"},
		{name: "a user narrows what a GitRepository packages", who: alice, obj: config, mutate: set("/*\n!/overlays/prod", "spec", "ignore"),
			wantErr: "spec.ignore of Stagecoach-managed GitRepository payments-config"},
		{name: "Stagecoach promotes a commit", who: stagecoach, obj: config, mutate: set(strings.Repeat("c", 40), "spec", "ref", "commit")},
		{name: "a user changes a Kustomization's substitution", who: alice, obj: ks,
			mutate:  set(map[string]any{"STAGECOACH_DIGEST": otherDigest}, "spec", "postBuild", "substitute"),
			wantErr: "spec.postBuild of Stagecoach-managed Kustomization payments-ks"},
		{name: "a user changes a Kustomization's images", who: alice, obj: ks,
			mutate:  set([]any{map[string]any{"name": "app", "newTag": "v9"}}, "spec", "images"),
			wantErr: "spec.images of Stagecoach-managed Kustomization payments-ks"},
		{name: "a user changes a HelmRelease's chart version", who: alice, obj: hr, mutate: set("2.0.0", "spec", "chart", "spec", "version"),
			wantErr: "spec.chart of Stagecoach-managed HelmRelease payments-hr"},
		{name: "a user changes a HelmRelease's values key", who: alice, obj: hr, mutate: set(otherDigest, "spec", "values", "image", "digest"),
			wantErr: "spec.values of Stagecoach-managed HelmRelease payments-hr"},
		{name: "a user removes the label", who: alice, obj: hr, mutate: func(u *unstructured.Unstructured) { u.SetLabels(nil) },
			wantErr: "the stagecoach.dev/stage label of HelmRelease payments-hr may only be removed or changed by Stagecoach (user alice)"},
		{name: "a user deletes a Kustomization", who: alice, obj: ks, delete: true,
			wantErr: "Stagecoach-managed Kustomization payments-ks may only be deleted by Stagecoach or a break-glass member (user alice)"},
		{name: "a user changes the interval", who: alice, obj: repo, mutate: set("10m", "spec", "interval")},
		{name: "the kustomize-controller changes a guarded field", who: kustomizeController, obj: repo, mutate: set("oci://other.example/x", "spec", "url"),
			wantErr: "spec.url of Stagecoach-managed OCIRepository payments-oci"},
		{name: "Flux writes status", who: sourceController, obj: repo, status: true,
			mutate: set(map[string]any{"revision": anyDigest, "digest": anyDigest, "url": "http://x", "path": "x", "lastUpdateTime": "2026-01-01T00:00:00Z"},
				"status", "artifact")},
		{name: "Stagecoach promotes", who: stagecoach, obj: repo, mutate: set(otherDigest, "spec", "ref", "digest")},
		{name: "break-glass changes the values", who: breakGlass, obj: hr, mutate: set("x", "spec", "values", "extra")},
		{name: "the kustomize-controller prunes", who: kustomizeController, obj: pruned, delete: true},
	})
}

// A labelled ApplicationSet's spec decides what every generated Application runs: only Stagecoach
// (or break-glass) changes or deletes it.
func TestApplicationSetGuard(t *testing.T) {
	g := NewWithT(t)
	grantEveryone(t, "applicationset-writer", rbacv1.PolicyRule{APIGroups: []string{"argoproj.io"}, Resources: []string{"applicationsets"},
		Verbs: []string{"get", "list", "create", "update", "patch", "delete"}})
	applyManifests(t, filepath.Join(testenv.RepoRoot(), "manifests", "policies", "application-guard.yaml"))

	alice := as(t, "alice", "developers")
	breakGlass := as(t, "bob", "stagecoach:break-glass")
	appSet := func(name string) *unstructured.Unstructured {
		return guarded("argoproj.io/v1alpha1", "ApplicationSet", name, map[string]any{
			"generators": []any{map[string]any{"clusters": map[string]any{}}},
			"template": map[string]any{
				"metadata": map[string]any{"name": "{{name}}-" + name, "labels": map[string]any{"stagecoach.dev/stage": name}},
				"spec": map[string]any{"project": "default",
					"source":      map[string]any{"repoURL": "oci://registry.example/deploy/payments", "targetRevision": "1.4.2", "path": "."},
					"destination": map[string]any{"server": "{{server}}", "namespace": "payments"}}},
		})
	}
	// Setting up waves is anyone's: the creator picks the template.
	fleet := appSet("fleet")
	g.Expect(alice.Create(t.Context(), fleet.DeepCopy())).To(Succeed())
	g.Eventually(func() error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(fleet.GroupVersionKind())
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(fleet), u); err != nil {
			return err
		}
		u.SetAnnotations(map[string]string{"probe": time.Now().String()})
		_ = unstructured.SetNestedField(u.Object, "probe", "spec", "template", "spec", "source", "path")
		return alice.Update(t.Context(), u)
	}, 10*time.Second, 100*time.Millisecond).Should(MatchError(ContainSubstring("the spec of Stagecoach-managed ApplicationSet fleet")))

	runGuardCases(t, []guardCase{
		{name: "a user changes the template's repository", who: alice, obj: fleet,
			mutate:  set("oci://evil.example/payments", "spec", "template", "spec", "source", "repoURL"),
			wantErr: "the spec of Stagecoach-managed ApplicationSet fleet decides what its Applications run and may only be changed by Stagecoach or a break-glass member (user alice)"},
		{name: "a user removes the label", who: alice, obj: fleet, mutate: func(u *unstructured.Unstructured) { u.SetLabels(nil) },
			wantErr: "the stagecoach.dev/stage label of ApplicationSet fleet may only be removed or changed by Stagecoach"},
		{name: "a user deletes it", who: alice, obj: fleet, delete: true,
			wantErr: "Stagecoach-managed ApplicationSet fleet may only be deleted by Stagecoach or a break-glass member (user alice): it would delete every Application it generated"},
		{name: "a user annotates it", who: alice, obj: fleet, mutate: func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{"team": "payments"}) }},
		{name: "break-glass changes the template", who: breakGlass, obj: fleet, mutate: set("deploy", "spec", "template", "spec", "source", "path")},
		{name: "break-glass deletes it", who: breakGlass, obj: fleet, delete: true},
	})
}
