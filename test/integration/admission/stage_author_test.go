package admission

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

// spec.author is who the controller writes a generic applier as, so it must be whoever creates
// the Stage or changes its applyRef, source or author, in groups of theirs; other changes keep it.
func TestStageAuthorGuard(t *testing.T) {
	g := NewWithT(t)
	grantEveryone(t, "stage-author-writer", rbacv1.PolicyRule{APIGroups: []string{"stagecoach.dev"}, Resources: []string{"stages"},
		Verbs: []string{"get", "list", "create", "patch", "update"}})
	applyManifests(t, filepath.Join(testenv.RepoRoot(), "manifests", "policies", "stage-status-guard.yaml"))
	tina := as(t, "tina", "team-a")
	bob := as(t, "bob", "team-a")
	stage := func(name string, author *stagecoachv1.StageAuthor) *stagecoachv1.Stage {
		return &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: stagecoachv1.StageSpec{Service: "web", Environment: "dev", Author: author,
				ApplyRef: stagecoachv1.ApplierReference{APIVersion: "example.dev/v1", Kind: "Widget", Name: name,
					Set: []stagecoachv1.FieldSetting{{Path: "/spec/image", Value: "{{ .Image }}"}}},
				Completion: &stagecoachv1.CompletionRules{ObservedMatches: []stagecoachv1.ObservedMatch{{Input: "spec.image", Output: "status.image"}}},
				Source:     stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "none"}}}}
	}
	// The policy takes a moment to be enforced after it is created.
	probes := 0
	g.Eventually(func() error {
		probes++
		return tina.Create(t.Context(), stage(fmt.Sprintf("author-probe-%d", probes), &stagecoachv1.StageAuthor{User: "alice"}))
	}, 10*time.Second, 100*time.Millisecond).Should(MatchError(ContainSubstring("names author alice but is written by tina")))

	for i, tc := range []struct {
		name    string
		creator client.Client
		author  *stagecoachv1.StageAuthor
		// create, when set, changes the Stage before it is created.
		create func(*stagecoachv1.Stage)
		// change, when set, is done by bob on the created Stage.
		change  func(*stagecoachv1.Stage)
		wantErr string
	}{
		{name: "tina names herself", creator: tina, author: &stagecoachv1.StageAuthor{User: "tina"}},
		{name: "tina names herself in her group", creator: tina, author: &stagecoachv1.StageAuthor{User: "tina", Groups: []string{"team-a"}}},
		{name: "tina names another user", creator: tina, author: &stagecoachv1.StageAuthor{User: "alice"},
			wantErr: "Stage author-2 names author alice but is written by tina: set spec.author.user to your own user name"},
		{name: "tina names a group she is not in", creator: tina, author: &stagecoachv1.StageAuthor{User: "tina", Groups: []string{"platform-admins"}},
			wantErr: "names author groups platform-admins, but tina is not a member of all of them"},
		{name: "no author: nothing to check (the controller writes no generic applier for it)", creator: tina},
		{name: "bob points tina's Stage at another object", creator: tina, author: &stagecoachv1.StageAuthor{User: "tina"},
			change:  func(s *stagecoachv1.Stage) { s.Spec.ApplyRef.Name = "platform-widget" },
			wantErr: "names author tina but is written by bob"},
		{name: "bob changes the paths the Stage writes", creator: tina, author: &stagecoachv1.StageAuthor{User: "tina"},
			change: func(s *stagecoachv1.Stage) {
				s.Spec.ApplyRef.Set = []stagecoachv1.FieldSetting{{Path: "/spec/replicas", Value: "{{ .Digest }}"}}
			},
			wantErr: "names author tina but is written by bob"},
		// Issue 37 item 5: {{ .Image }} renders the repository from spec.source.
		{name: "bob points tina's Stage's source at his own repository", creator: tina, author: &stagecoachv1.StageAuthor{User: "tina"},
			change: func(s *stagecoachv1.Stage) {
				s.Spec.Source = stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: "registry.example/bob/web"}}
			},
			wantErr: "names author tina but is written by bob"},
		{name: "bob points tina's Stage at another upstream", creator: tina, author: &stagecoachv1.StageAuthor{User: "tina"},
			change:  func(s *stagecoachv1.Stage) { s.Spec.Source.Upstream.Stage = "bobs-stage" },
			wantErr: "whoever sets the applyRef, the source, promotion.git, attest or a check's run is who the controller writes the applier, pushes and creates runs as"},
		// Issue 39: a check's run is created as the author, so adding or changing one is theirs.
		{name: "bob adds a run to tina's Stage's checks", creator: tina, author: &stagecoachv1.StageAuthor{User: "tina"},
			change: func(s *stagecoachv1.Stage) {
				s.Spec.Verification = &stagecoachv1.VerificationPolicy{Checks: []stagecoachv1.Check{{Name: "tests",
					Run: &stagecoachv1.RunCheck{Template: runtime.RawExtension{Raw: []byte(`{"apiVersion":"batch/v1","kind":"Job","spec":{}}`)}}}}}
			},
			wantErr: "names author tina but is written by bob"},
		{name: "bob changes the run of tina's check before apply", creator: tina, author: &stagecoachv1.StageAuthor{User: "tina"},
			create: func(s *stagecoachv1.Stage) {
				s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Checks: []stagecoachv1.Check{{Name: "tests",
					Run: &stagecoachv1.RunCheck{Template: runtime.RawExtension{Raw: []byte(`{"apiVersion":"batch/v1","kind":"Job","spec":{}}`)}}}}}
			},
			change: func(s *stagecoachv1.Stage) {
				s.Spec.Promotion.Checks[0].Run.Template.Raw = []byte(`{"apiVersion":"v1","kind":"Pod","spec":{"hostNetwork":true}}`)
			},
			wantErr: "names author tina but is written by bob"},
		// Issue 40: the controller pushes with Secrets the author may read, to the repository
		// promotion.git names: changing it is the author's.
		{name: "bob points tina's promotion by commit at his own repository", creator: tina, author: &stagecoachv1.StageAuthor{User: "tina"},
			create: func(s *stagecoachv1.Stage) {
				s.Spec.ApplyRef = stagecoachv1.ApplierReference{Kind: "Application", Name: s.Name}
				s.Spec.Completion = nil
				s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Git: &stagecoachv1.GitPromotion{URL: "https://git.example/team-a/config.git",
					Branch: "env/dev", SecretRef: &stagecoachv1.LocalObjectReference{Name: "push"},
					Set: []stagecoachv1.GitFileEdit{{Path: "dev/values.yaml", Key: "image.digest"}}}}
			},
			change:  func(s *stagecoachv1.Stage) { s.Spec.Promotion.Git.URL = "https://bob.example/config.git" },
			wantErr: "whoever sets the applyRef, the source, promotion.git, attest or a check's run is who the controller writes the applier, pushes and creates runs as"},
		{name: "bob adds a promotion by commit to tina's Stage", creator: tina, author: &stagecoachv1.StageAuthor{User: "tina"},
			create: func(s *stagecoachv1.Stage) {
				s.Spec.ApplyRef = stagecoachv1.ApplierReference{Kind: "Application", Name: s.Name}
				s.Spec.Completion = nil
			},
			change: func(s *stagecoachv1.Stage) {
				s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Git: &stagecoachv1.GitPromotion{URL: "https://git.example/team-a/config.git",
					Branch: "env/dev", SigningKeyRef: &stagecoachv1.LocalObjectReference{Name: "signing"},
					Set: []stagecoachv1.GitFileEdit{{Path: "dev/values.yaml", Key: "image.digest"}}}}
			},
			wantErr: "names author tina but is written by bob"},
		// Issue 41: the controller pushes the promotion attestation with the Secret spec.attest
		// names, as the author: adding or changing it is the author's.
		{name: "bob makes tina's Stage attest with a push Secret", creator: tina, author: &stagecoachv1.StageAuthor{User: "tina"},
			change: func(s *stagecoachv1.Stage) {
				s.Spec.Attest = &stagecoachv1.AttestPolicy{SecretRef: &stagecoachv1.LocalObjectReference{Name: "push"}}
			},
			wantErr: "names author tina but is written by bob"},
		{name: "bob changes the push Secret of tina's attestations", creator: tina, author: &stagecoachv1.StageAuthor{User: "tina"},
			create: func(s *stagecoachv1.Stage) { s.Spec.Attest = &stagecoachv1.AttestPolicy{} },
			change: func(s *stagecoachv1.Stage) {
				s.Spec.Attest.SecretRef = &stagecoachv1.LocalObjectReference{Name: "bobs-push"}
			},
			wantErr: "whoever sets the applyRef, the source, promotion.git, attest or a check's run is who the controller writes the applier, pushes and creates runs as"},
		{name: "bob adds an HTTP check: the author stays", creator: tina, author: &stagecoachv1.StageAuthor{User: "tina"},
			change: func(s *stagecoachv1.Stage) {
				s.Spec.Verification = &stagecoachv1.VerificationPolicy{Checks: []stagecoachv1.Check{{Name: "smoke",
					HTTP: &stagecoachv1.HTTPCheck{URL: "https://web.example/healthz"}}}}
			}},
		{name: "bob names himself when he adds a run", creator: tina, author: &stagecoachv1.StageAuthor{User: "tina"},
			change: func(s *stagecoachv1.Stage) {
				s.Spec.Verification = &stagecoachv1.VerificationPolicy{Checks: []stagecoachv1.Check{{Name: "tests",
					Run: &stagecoachv1.RunCheck{Template: runtime.RawExtension{Raw: []byte(`{"apiVersion":"batch/v1","kind":"Job","spec":{}}`)}}}}}
				s.Spec.Author = &stagecoachv1.StageAuthor{User: "bob"}
			}},
		{name: "bob names himself when he changes the source", creator: tina, author: &stagecoachv1.StageAuthor{User: "tina"},
			change: func(s *stagecoachv1.Stage) {
				s.Spec.Source = stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: "registry.example/bob/web"}}
				s.Spec.Author = &stagecoachv1.StageAuthor{User: "bob"}
			}},
		{name: "bob names himself when he changes the applyRef", creator: tina, author: &stagecoachv1.StageAuthor{User: "tina"},
			change: func(s *stagecoachv1.Stage) {
				s.Spec.ApplyRef.Name = "platform-widget"
				s.Spec.Author = &stagecoachv1.StageAuthor{User: "bob"}
			}},
		{name: "bob suspends tina's Stage: the author stays", creator: tina, author: &stagecoachv1.StageAuthor{User: "tina"},
			change: func(s *stagecoachv1.Stage) { s.Spec.Suspend = true }},
		{name: "bob adds an author to a Stage without one", creator: tina,
			change:  func(s *stagecoachv1.Stage) { s.Spec.Author = &stagecoachv1.StageAuthor{User: "tina"} },
			wantErr: "names author tina but is written by bob"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := stage(fmt.Sprintf("author-%d", i), tc.author)
			if tc.create != nil {
				tc.create(s)
			}
			err := tc.creator.Create(t.Context(), s)
			if tc.change != nil {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(bob.Get(t.Context(), client.ObjectKeyFromObject(s), s)).To(Succeed())
				tc.change(s)
				err = bob.Update(t.Context(), s)
			}
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}
