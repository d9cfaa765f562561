package records

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/source/git/gittest"
)

// A Stage of Git commits is followed across clusters as a Stage of digests is: staging in cluster
// A verifies a commit of the config repository and records it; prod in cluster B, naming the
// repository its applier fetches (spec.source.upstreamRecords.gitRepository), takes that commit
// once it finds it on a branch there (fetched with credentials its author may read), and cites
// the record.
func TestFollowAStageOfCommits(t *testing.T) {
	g := NewWithT(t)
	srv := gittest.NewServer(t, gittest.Options{Username: "ci", Password: "s3cret"})
	c1 := "sha1:" + srv.Commit("config: first", map[string]string{"overlays/prod/kustomization.yaml": "v: 1"}, nil)
	nsA, nsB, stream := pipelineWith(t, func(prod *stagecoachv1.Stage) {
		prod.Spec.Source.UpstreamRecords.ApplyRepository = ""
		prod.Spec.Source.UpstreamRecords.GitRepository = &stagecoachv1.GitRepositoryReference{URL: srv.URL, Insecure: true,
			SecretRef: &stagecoachv1.LocalObjectReference{Name: "git-credentials"}}
	})
	g.Expect(envB.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "git-credentials"},
		Data: map[string][]byte{"username": []byte("ci"), "password": []byte("s3cret")}})).To(Succeed())
	startA(t, nil)
	startB(t)
	verifyInStaging(t, nsA, "staging-c1", c1, c1[5:12])
	followed(t, nsB, c1, 2)
	var taken *stagecoachv1.Promotion
	for _, p := range promotionsOf(g, t, envB, nsB) {
		if p.Spec.Version != nil && p.Spec.Version.Digest == c1 {
			taken = &p
		}
	}
	g.Expect(taken).NotTo(BeNil())
	g.Expect(taken.Status.Gates).To(ContainElement(And(HaveField("Gate", stagecoachv1.GatePublished),
		HaveField("Message", ContainSubstring("verified upstream in record 2")))))
	g.Expect(stream).NotTo(BeEmpty())
	staging := getStage(g, t, envA, nsA, "staging")
	g.Expect(staging.Status.Stream).NotTo(BeNil())
	g.Expect(staging.Status.Stream.ID).To(Equal(stream), "prod followed the stream staging recorded the commit in")
}

// What prod refuses to take from a stream of commits, each with the reason naming the field and
// the fix, and nothing applied: a commit on no branch of the repository it names (a mirror that
// lacks it), credentials its author may not read, and a commit offered to a Stage of OCI digests.
func TestFollowingCommitsRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		prod func(prod *stagecoachv1.Stage, upstream, mirror *gittest.Server)
		// widgetWriter is granted writing Widgets in prod's namespace (what the applier needs).
		widgetWriter string
		wantMsg      []string
	}{
		{name: "a mirror without the commit",
			prod: func(prod *stagecoachv1.Stage, _, mirror *gittest.Server) {
				prod.Spec.Source.UpstreamRecords.ApplyRepository = ""
				prod.Spec.Source.UpstreamRecords.GitRepository = &stagecoachv1.GitRepositoryReference{URL: mirror.URL, Insecure: true}
			},
			wantMsg: []string{"is on no branch of", "spec.source.upstreamRecords.gitRepository", "push it there"}},
		{name: "credentials the author may not read", widgetWriter: "tina",
			prod: func(prod *stagecoachv1.Stage, upstream, _ *gittest.Server) {
				prod.Spec.Author = &stagecoachv1.StageAuthor{User: "tina"}
				prod.Spec.Source.UpstreamRecords.ApplyRepository = ""
				prod.Spec.Source.UpstreamRecords.GitRepository = &stagecoachv1.GitRepositoryReference{URL: upstream.URL, Insecure: true,
					SecretRef: &stagecoachv1.LocalObjectReference{Name: "git-credentials"}}
			},
			wantMsg: []string{"the Stage's author tina may not get Secret", "/git-credentials' (spec.source.upstreamRecords.gitRepository.secretRef)"}},
		{name: "a commit for a Stage of OCI digests",
			wantMsg: []string{"is a Git commit, and this Stage takes OCI digests", "spec.source.upstreamRecords.gitRepository"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			upstream, mirror := gittest.NewServer(t, gittest.Options{}), gittest.NewServer(t, gittest.Options{})
			c1 := "sha1:" + upstream.Commit("config: first", map[string]string{"a": "1"}, nil)
			mirror.Commit("something else", map[string]string{"b": "2"}, nil)
			nsA, nsB, _ := pipelineWith(t, func(prod *stagecoachv1.Stage) {
				if tc.prod != nil {
					tc.prod(prod, upstream, mirror)
				}
			})
			if tc.widgetWriter != "" {
				grantWidgets(t, nsB, tc.widgetWriter)
			}
			g.Expect(envB.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "git-credentials"},
				Data: map[string][]byte{"username": []byte("ci"), "password": []byte("s3cret")}})).To(Succeed())
			startA(t, nil)
			startB(t)
			verifyInStaging(t, nsA, "staging-c1", c1, c1[5:12])

			g.Eventually(func(g Gomega) {
				prod := getStage(g, t, envB, nsB, "prod")
				g.Expect(prod.Status.UpstreamSeen).NotTo(BeNil())
				g.Expect(prod.Status.Candidate).NotTo(BeNil())
				var msg string
				for _, b := range prod.Status.Candidate.BlockedBy {
					if b.Gate == stagecoachv1.GateSource && b.Reason == stagecoachv1.ReasonNotPublished {
						msg = b.Message
					}
				}
				for _, part := range tc.wantMsg {
					g.Expect(msg).To(ContainSubstring(part))
				}
			}, timeout, interval).Should(Succeed())
			g.Consistently(func(g Gomega) {
				g.Expect(promotionsOf(g, t, envB, nsB)).To(BeEmpty(), "prod took a commit it should refuse")
			}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
		})
	}
}

// grantWidgets lets user do everything to Widgets in ns of cluster B, and nothing else.
func grantWidgets(t *testing.T, ns, user string) {
	t.Helper()
	g := NewWithT(t)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "widget-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"example.dev"}, Resources: []string{"widgets"}, Verbs: []string{"*"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "widget-writer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	g.Expect(envB.Client.Create(t.Context(), role)).To(Succeed())
	g.Expect(envB.Client.Create(t.Context(), binding)).To(Succeed())
}
