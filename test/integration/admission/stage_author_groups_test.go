package admission

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

// A Stage's author groups are rights the controller acts with, so whoever names several must be
// in every one of them (stage-author-guard): a member of one of two named groups is refused, in
// either order, on create and on update; a member of both is allowed.
func TestStageAuthorGroupsAll(t *testing.T) {
	g := NewWithT(t)
	grantEveryone(t, "stage-author-groups-writer", rbacv1.PolicyRule{APIGroups: []string{"stagecoach.dev"}, Resources: []string{"stages"},
		Verbs: []string{"get", "list", "create", "patch", "update"}})
	applyManifests(t, filepath.Join(testenv.RepoRoot(), "manifests", "policies", "stage-status-guard.yaml"))
	const teamA, admins = "team-a", "platform-admins"
	tina := as(t, "tina", teamA)
	pat := as(t, "pat", teamA, admins)
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
		return tina.Create(t.Context(), stage(fmt.Sprintf("groups-probe-%d", probes), &stagecoachv1.StageAuthor{User: "alice"}))
	}, 10*time.Second, 100*time.Millisecond).Should(MatchError(ContainSubstring("names author alice but is written by tina")))

	for i, tc := range []struct {
		name    string
		creator client.Client
		author  *stagecoachv1.StageAuthor
		// writer, when set, changes the created Stage's author to changeTo.
		writer   client.Client
		changeTo *stagecoachv1.StageAuthor
		wantErr  string
	}{
		{name: "tina names her group and one she is not in", creator: tina,
			author:  &stagecoachv1.StageAuthor{User: "tina", Groups: []string{teamA, admins}},
			wantErr: fmt.Sprintf("Stage groups-0 names author groups %s,%s, but tina is not a member of all of them", teamA, admins)},
		{name: "tina names a group she is not in, then hers", creator: tina,
			author:  &stagecoachv1.StageAuthor{User: "tina", Groups: []string{admins, teamA}},
			wantErr: "but tina is not a member of all of them"},
		{name: "pat names both of his groups", creator: pat,
			author: &stagecoachv1.StageAuthor{User: "pat", Groups: []string{teamA, admins}}},
		{name: "pat names both of his groups the other way round", creator: pat,
			author: &stagecoachv1.StageAuthor{User: "pat", Groups: []string{admins, teamA}}},
		{name: "tina takes over pat's Stage naming both of his groups", creator: pat,
			author:   &stagecoachv1.StageAuthor{User: "pat", Groups: []string{teamA}},
			writer:   tina,
			changeTo: &stagecoachv1.StageAuthor{User: "tina", Groups: []string{teamA, admins}},
			wantErr:  "but tina is not a member of all of them"},
		{name: "pat adds his second group to his Stage", creator: pat,
			author:   &stagecoachv1.StageAuthor{User: "pat", Groups: []string{teamA}},
			writer:   pat,
			changeTo: &stagecoachv1.StageAuthor{User: "pat", Groups: []string{teamA, admins}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := stage(fmt.Sprintf("groups-%d", i), tc.author)
			err := tc.creator.Create(t.Context(), s)
			if tc.writer != nil {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(tc.writer.Get(t.Context(), client.ObjectKeyFromObject(s), s)).To(Succeed())
				s.Spec.Author = tc.changeTo
				err = tc.writer.Update(t.Context(), s)
			}
			// What the API server holds afterwards, read live.
			got := &stagecoachv1.Stage{}
			getErr := env.Client.Get(t.Context(), client.ObjectKeyFromObject(s), got)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(getErr).NotTo(HaveOccurred())
				want := tc.author
				if tc.changeTo != nil {
					want = tc.changeTo
				}
				g.Expect(got.Spec.Author).To(Equal(want))
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			if tc.writer == nil {
				g.Expect(getErr).To(MatchError(ContainSubstring("not found")), "the refused Stage was not created")
				return
			}
			g.Expect(getErr).NotTo(HaveOccurred())
			g.Expect(got.Spec.Author).To(Equal(tc.author), "the refused update changed nothing")
		})
	}
}
