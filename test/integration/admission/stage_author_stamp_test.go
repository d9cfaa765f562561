package admission

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

// applyStampPolicy creates manifests/policies/optional/stage-author-stamp.yaml with its binding
// limited to namespace (the suite's other tests run in default and write authors by hand).
func applyStampPolicy(t *testing.T, namespace string) {
	t.Helper()
	kinds := 0
	applyManifests(t, filepath.Join(testenv.RepoRoot(), "manifests", "policies", "optional", "stage-author-stamp.yaml"), func(obj *unstructured.Unstructured) {
		kinds++
		if obj.GetKind() == "MutatingAdmissionPolicyBinding" {
			NewWithT(t).Expect(unstructured.SetNestedField(obj.Object, map[string]any{
				"matchLabels": map[string]any{"kubernetes.io/metadata.name": namespace}}, "spec", "matchResources", "namespaceSelector")).To(Succeed())
		}
	})
	NewWithT(t).Expect(kinds).To(Equal(2), "the file holds the policy and its binding")
}

// Where the API server serves MutatingAdmissionPolicy, a Stage's author is stamped from the
// request: nobody writes spec.author by hand, the same YAML serves a person and a GitOps engine,
// and a new writer of where or what is written becomes the author (issue 37).
func TestStageAuthorStamp(t *testing.T) {
	g := NewWithT(t)
	grantEveryone(t, "stage-author-stamp-writer", rbacv1.PolicyRule{APIGroups: []string{"stagecoach.dev"}, Resources: []string{"stages"},
		Verbs: []string{"get", "list", "create", "patch", "update"}})
	applyManifests(t, filepath.Join(testenv.RepoRoot(), "manifests", "policies", "stage-status-guard.yaml"))
	stamped := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "stamped-"}}
	g.Expect(env.Client.Create(t.Context(), stamped)).To(Succeed())
	applyStampPolicy(t, stamped.Name)

	tina := as(t, "tina", "team-a")
	bob := as(t, "bob", "team-a")
	argo := as(t, argoCDSA, "system:serviceaccounts", "system:serviceaccounts:argocd")
	stage := func(name string, author *stagecoachv1.StageAuthor) *stagecoachv1.Stage {
		s := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: stamped.Name, Name: name},
			Spec: stagecoachv1.StageSpec{Service: "web", Environment: "dev", Author: author,
				ApplyRef: stagecoachv1.ApplierReference{APIVersion: "example.dev/v1", Kind: "Widget", Name: name,
					Set: []stagecoachv1.FieldSetting{{Path: "/spec/image", Value: "{{ .Image }}"}}},
				Completion: &stagecoachv1.CompletionRules{ObservedMatches: []stagecoachv1.ObservedMatch{{Input: "spec.image", Output: "status.image"}}},
				Source:     stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: "registry.example/team-a/web"}}}}
		s.SetGroupVersionKind(stagecoachv1.GroupVersion.WithKind("Stage"))
		return s
	}
	authorOf := func(g Gomega, name string) *stagecoachv1.StageAuthor {
		s := &stagecoachv1.Stage{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: stamped.Name, Name: name}, s)).To(Succeed())
		return s.Spec.Author
	}
	// The policy takes a moment to be enforced after it is created.
	probes := 0
	g.Eventually(func(g Gomega) {
		probes++
		name := fmt.Sprintf("stamp-probe-%d", probes)
		g.Expect(tina.Create(t.Context(), stage(name, nil))).To(Succeed())
		g.Expect(authorOf(g, name)).NotTo(BeNil())
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())

	// And stage-author-guard, which this file's tests may be the first to install, refuses.
	g.Eventually(func() error {
		probes++
		return tina.Create(t.Context(), stage(fmt.Sprintf("stamp-probe-%d", probes), &stagecoachv1.StageAuthor{User: "alice"}))
	}, 10*time.Second, 100*time.Millisecond).Should(MatchError(ContainSubstring("names author alice but is written by tina")))

	tinaAuthor := &stagecoachv1.StageAuthor{User: "tina", Groups: []string{"team-a", "system:authenticated"}}
	argoAuthor := &stagecoachv1.StageAuthor{User: argoCDSA, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:argocd", "system:authenticated"}}
	// A Git copy as Argo CD applies it server-side: no author.
	gitApply := func(name string) error {
		s := stage(name, nil)
		return argo.Patch(t.Context(), s, client.Apply, client.FieldOwner("argocd-controller"), client.ForceOwnership)
	}
	for _, tc := range []struct {
		name string
		// create, when set, makes the Stage first (by tina unless it says otherwise).
		create func(name string) error
		// change, when set, is bob's update of the created Stage.
		change     func(*stagecoachv1.Stage)
		wantErr    string
		wantAuthor *stagecoachv1.StageAuthor
	}{
		{name: "tina creates a Stage naming nobody: she is its author, in her groups",
			create: func(name string) error { return tina.Create(t.Context(), stage(name, nil)) }, wantAuthor: tinaAuthor},
		{name: "tina names herself in one group: kept as written",
			create: func(name string) error {
				return tina.Create(t.Context(), stage(name, &stagecoachv1.StageAuthor{User: "tina", Groups: []string{"team-a"}}))
			},
			wantAuthor: &stagecoachv1.StageAuthor{User: "tina", Groups: []string{"team-a"}}},
		{name: "naming someone else is still refused",
			create: func(name string) error {
				return tina.Create(t.Context(), stage(name, &stagecoachv1.StageAuthor{User: "alice"}))
			},
			wantErr: "names author alice but is written by tina"},
		{name: "Argo CD applies the Git copy: its service account is the author, with its namespace's group",
			create: gitApply, wantAuthor: argoAuthor},
		{name: "Argo CD applies the same Git copy again: the author stays",
			create: func(name string) error {
				if err := gitApply(name); err != nil {
					return err
				}
				return gitApply(name)
			},
			wantAuthor: argoAuthor},
		{name: "bob points tina's Stage at his repository: he becomes its author",
			create: func(name string) error { return tina.Create(t.Context(), stage(name, nil)) },
			change: func(s *stagecoachv1.Stage) {
				s.Spec.Source.Registry.Repository = "registry.example/bob/web"
			},
			wantAuthor: &stagecoachv1.StageAuthor{User: "bob", Groups: []string{"team-a", "system:authenticated"}}},
		{name: "bob points tina's Stage at another object: he becomes its author",
			create:     func(name string) error { return tina.Create(t.Context(), stage(name, nil)) },
			change:     func(s *stagecoachv1.Stage) { s.Spec.ApplyRef.Name = "platform-widget" },
			wantAuthor: &stagecoachv1.StageAuthor{User: "bob", Groups: []string{"team-a", "system:authenticated"}}},
		{name: "bob changes the target and names tina: refused",
			create: func(name string) error {
				return tina.Create(t.Context(), stage(name, &stagecoachv1.StageAuthor{User: "tina"}))
			},
			change: func(s *stagecoachv1.Stage) {
				s.Spec.ApplyRef.Name = "platform-widget"
				s.Spec.Author = &stagecoachv1.StageAuthor{User: "tina", Groups: []string{"team-a"}}
			},
			wantErr: "names author tina but is written by bob"},
		{name: "bob adds a run to tina's Stage's checks: he becomes its author",
			create: func(name string) error { return tina.Create(t.Context(), stage(name, nil)) },
			change: func(s *stagecoachv1.Stage) {
				s.Spec.Verification = &stagecoachv1.VerificationPolicy{Checks: []stagecoachv1.Check{{Name: "tests",
					Run: &stagecoachv1.RunCheck{Template: runtime.RawExtension{Raw: []byte(`{"apiVersion":"batch/v1","kind":"Job","spec":{}}`)}}}}}
			},
			wantAuthor: &stagecoachv1.StageAuthor{User: "bob", Groups: []string{"team-a", "system:authenticated"}}},
		{name: "bob adds an HTTP check to tina's Stage: the author stays",
			create: func(name string) error { return tina.Create(t.Context(), stage(name, nil)) },
			change: func(s *stagecoachv1.Stage) {
				s.Spec.Verification = &stagecoachv1.VerificationPolicy{Checks: []stagecoachv1.Check{{Name: "smoke",
					HTTP: &stagecoachv1.HTTPCheck{URL: "https://web.example/healthz"}}}}
			},
			wantAuthor: tinaAuthor},
		{name: "bob suspends tina's Stage: the author stays",
			create: func(name string) error { return tina.Create(t.Context(), stage(name, nil)) },
			change: func(s *stagecoachv1.Stage) { s.Spec.Suspend = true }, wantAuthor: tinaAuthor},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			name := fmt.Sprintf("stamp-%d", time.Now().UnixNano())
			err := tc.create(name)
			if tc.change != nil {
				g.Expect(err).NotTo(HaveOccurred())
				s := &stagecoachv1.Stage{}
				g.Expect(bob.Get(t.Context(), client.ObjectKey{Namespace: stamped.Name, Name: name}, s)).To(Succeed())
				tc.change(s)
				err = bob.Update(t.Context(), s)
			}
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(authorOf(g, name)).To(Equal(tc.wantAuthor))
		})
	}

	t.Run("without the policy bound, a Stage naming nobody keeps no author", func(t *testing.T) {
		g := NewWithT(t)
		s := stage("unstamped", nil)
		s.Namespace = ns
		g.Expect(tina.Create(t.Context(), s)).To(Succeed())
		got := &stagecoachv1.Stage{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(s), got)).To(Succeed())
		g.Expect(got.Spec.Author).To(BeNil())
	})
}
