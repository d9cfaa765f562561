package promotion

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/source/git/gittest"
)

// Who may push through a Stage that promotes by commit (spec.promotion.git): the controller
// pushes with the credentials of a Secret in the Stage's namespace, and signs with its key, only
// as the Stage's author, when they may read that Secret themselves (a SubjectAccessReview of the
// real API server); and only to the branch the applier syncs. Each who may not is refused with a
// reason, and a person's Promotion does not get a commit through either.
func TestPromotionByCommitPushesOnlyAsItsAuthorMay(t *testing.T) {
	startController(t, nil)
	const overlay = "staging/configmap.yaml"
	srv := gittest.NewServer(t, gittest.Options{Username: "bot", Password: "s3cret"})
	srv.Commit("base", map[string]string{"README.md": "config\n"}, nil)
	srv.Branch("env/staging")
	srv.Commit("overlay", map[string]string{overlay: "data:\n  digest: none # Stagecoach writes it\n"}, nil)
	srv.Checkout("main")
	gitApp := func(url, branch string) map[string]any {
		spec := ociSpec("target")
		spec["source"] = map[string]any{"repoURL": url, "path": "staging", "targetRevision": branch}
		return spec
	}
	for _, tc := range []struct {
		name        string
		author      *stagecoachv1.StageAuthor
		grant       bool // RBAC lets the author get the credentials Secret
		app         map[string]any
		pullRequest bool // the Stage opens pull requests with the token of Secret token
		wantReason  string
		wantMessage string
	}{
		{name: "no author", app: gitApp(srv.URL, "env/staging"), wantReason: stagecoachv1.ReasonAuthorMissing,
			wantMessage: "Stage 'staging' names no spec.author, and the controller uses Secret 'push' (spec.promotion.git) only as whoever set the Stage"},
		{name: "an author who may not read the credentials", author: &stagecoachv1.StageAuthor{User: "tina"}, app: gitApp(srv.URL, "env/staging"),
			wantReason:  stagecoachv1.ReasonAuthorForbidden,
			wantMessage: "the Stage's author tina may not get Secret '%s/push' (spec.promotion.git), so the controller does not use it"},
		{name: "an author who may read the credentials but not the forge token", author: &stagecoachv1.StageAuthor{User: "tina"}, grant: true,
			app: gitApp(srv.URL, "env/staging"), pullRequest: true, wantReason: stagecoachv1.ReasonAuthorForbidden,
			wantMessage: "the Stage's author tina may not get Secret '%s/token' (spec.promotion.git)"},
		{name: "an applier on another branch", author: &stagecoachv1.StageAuthor{User: "tina"}, grant: true, app: gitApp(srv.URL, "main"),
			wantReason:  stagecoachv1.ReasonApplierNotOnBranch,
			wantMessage: `Stagecoach pushes to branch env/staging of ` + srv.URL + ` (spec.promotion.git), so what it pushes would never run; point the applier at that branch, or fix spec.promotion.git (it follows "main")`},
		{name: "an applier on another repository", author: &stagecoachv1.StageAuthor{User: "tina"}, grant: true, app: gitApp("https://git.example/fork.git", "env/staging"),
			wantReason: stagecoachv1.ReasonApplierNotOnBranch, wantMessage: "(it fetches https://git.example/fork.git)"},
		{name: "an applier rendering the branch with a plugin", author: &stagecoachv1.StageAuthor{User: "tina"}, grant: true, app: func() map[string]any {
			spec := gitApp(srv.URL, "env/staging")
			spec["source"].(map[string]any)["plugin"] = map[string]any{"name": "stagecoach"}
			return spec
		}(), wantReason: stagecoachv1.ReasonApplierNotOnBranch, wantMessage: "its source is rendered by a plugin or is a chart"},
		{name: "an applier on the repository written otherwise", author: &stagecoachv1.StageAuthor{User: "tina"}, grant: true, app: gitApp(srv.URL+"/", "env/staging"),
			wantReason: stagecoachv1.ReasonApplierNotOnBranch, wantMessage: "(it fetches " + srv.URL + "/)"},
		{name: "an author who may read them", author: &stagecoachv1.StageAuthor{User: "tina"}, grant: true, app: gitApp(srv.URL, "refs/heads/env/staging"),
			wantReason: stagecoachv1.ReasonApplierReady},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			g.Expect(env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "push"},
				Data: map[string][]byte{"username": []byte("bot"), "password": []byte("s3cret")}})).To(Succeed())
			g.Expect(env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "token"},
				Data: map[string][]byte{"token": []byte("forge-token")}})).To(Succeed())
			if tc.grant {
				grantSecret(t, ns, "push", "tina")
			}
			app := newApplication(t, ns, "staging", tc.app)
			newStage(t, ns, "staging", func(s *stagecoachv1.Stage) {
				s.Spec.Author = tc.author
				s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Git: &stagecoachv1.GitPromotion{URL: srv.URL, Insecure: true, Branch: "env/staging",
					SecretRef: &stagecoachv1.LocalObjectReference{Name: "push"}, Set: []stagecoachv1.GitFileEdit{{Path: overlay, Key: "data.digest"}}}}
				if tc.pullRequest {
					s.Spec.Promotion.Git.PullRequest = &stagecoachv1.GitPullRequest{Provider: "Gitea",
						TokenSecretRef: stagecoachv1.LocalObjectReference{Name: "token"}}
				}
			})
			before := srv.Head("env/staging")
			if tc.wantReason == stagecoachv1.ReasonApplierReady {
				eventuallyCondition(t, ns, "staging", stagecoachv1.ConditionReady, metav1.ConditionTrue, tc.wantReason, "syncs branch env/staging of "+srv.URL)
				eventuallyCondition(t, ns, "staging", stagecoachv1.ConditionMediated, metav1.ConditionTrue, stagecoachv1.ReasonMediated,
					"runs what branch env/staging of "+srv.URL+" holds")
				p := newPromotion(t, ns, "staging-1", "staging", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
				g.Eventually(func(g Gomega) {
					got := getPromotion(g, t.Context(), ns, p.Name)
					g.Expect(got.Status.Commit).NotTo(BeNil(), "Promotion %s: %s", got.Name, got.Status.Message)
					g.Expect(got.Status.Commit.SHA).To(Equal(srv.Head("env/staging")))
					g.Expect(getStage(g, t.Context(), ns, "staging").Status.LastCommit).To(Equal(&stagecoachv1.BranchCommit{
						SHA: got.Status.Commit.SHA, URL: srv.URL, Branch: "env/staging"}))
				}, timeout, interval).Should(Succeed())
				head := srv.Head("env/staging")
				g.Expect(head).NotTo(Equal(before))
				g.Expect(srv.File(head, overlay)).To(Equal("data:\n  digest: " + digest(1) + " # Stagecoach writes it\n"))
				g.Expect(srv.CommitObject(head).Message).To(ContainSubstring(fmt.Sprintf("Stagecoach-Stage: %s/staging\nStagecoach-Promotion: staging-1\n", ns)))
				// The Application is asked to fetch the branch now; its spec is never written. The
				// controller asks right after it records the commit, so the ask is waited for (read
				// live from the API server).
				g.Eventually(func(g Gomega) {
					written, err := app.app.Get(t.Context())
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(written.GetAnnotations()).To(HaveKeyWithValue("argocd.argoproj.io/refresh", "normal"))
				}, timeout, interval).Should(Succeed())
				g.Expect(app.get().Object["spec"].(map[string]any)["source"]).To(Equal(tc.app["source"]))
				return
			}
			if tc.wantReason == stagecoachv1.ReasonAuthorForbidden {
				tc.wantMessage = fmt.Sprintf(tc.wantMessage, ns)
			}
			eventuallyCondition(t, ns, "staging", stagecoachv1.ConditionReady, metav1.ConditionFalse, tc.wantReason, tc.wantMessage)
			newPromotion(t, ns, "staging-1", "staging", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
			g.Consistently(func(g Gomega) {
				g.Expect(srv.Head("env/staging")).To(Equal(before))
				g.Expect(getPromotion(g, t.Context(), ns, "staging-1").Status.Commit).To(BeNil())
			}, 3*time.Second, 100*time.Millisecond).Should(Succeed())
		})
	}
}

// grantSecret lets user get one Secret in ns, for the test's lifetime (the namespace goes with it).
func grantSecret(t *testing.T, ns, name, user string) {
	t.Helper()
	g := NewWithT(t)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secret-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{name}, Verbs: []string{"get"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secret-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	g.Expect(env.Client.Create(t.Context(), role)).To(Succeed())
	g.Expect(env.Client.Create(t.Context(), binding)).To(Succeed())
}
