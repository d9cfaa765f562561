package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"code.gitea.io/sdk/gitea"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
	"github.com/stagecoach-dev/stagecoach/test/e2e/pipeline"
)

// Promotion by pull request on a real Gitea, synced by the real Argo CD: each promotion's commit
// goes to a branch of its own and a pull request into env/staging, whose body shows the version,
// the gates and the diff. Stagecoach merges it (merge: Auto), or a person reviews and merges it
// (merge: Manual) while the Promotion waits; the Application, following env/staging, syncs the
// merge commit, at which landing is proven. A request closed without merging, or one someone else
// pushed to, is not taken as the promotion.
func TestPromotionByPullRequest(t *testing.T) {
	sc := env.Scenario(t)
	forge, err := env.StartGitea(sc.Ctx())
	sc.G.Expect(err).NotTo(HaveOccurred())
	target := sc.TargetNamespace("staging")
	images := sc.NS + "/web"
	versions := map[string]string{}
	for _, v := range []string{"v1.0.0", "v2.0.0", "v3.0.0", "v4.0.0"} {
		versions[v] = sc.Push(images, v, map[string]string{"configmap.yaml": localstack.ConfigMap("web", v)})
	}

	const overlay = "staging/configmap.yaml"
	repo, err := forge.CreateRepo(sc.Ctx(), "config-"+sc.NS)
	sc.G.Expect(err).NotTo(HaveOccurred())
	_, err = repo.Commit("env/staging", "staging overlay", overlay,
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  digest: none # Stagecoach writes it\n")
	sc.G.Expect(err).NotTo(HaveOccurred())
	for name, data := range map[string]map[string][]byte{
		"gitea-push":  {"username": []byte(forge.Admin), "password": []byte(forge.AdminPassword)},
		"gitea-token": {"token": []byte(forge.AdminToken)},
	} {
		sc.G.Expect(sc.Client.Create(sc.Ctx(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sc.NS, Name: name}, Data: data})).To(Succeed())
	}
	sc.Apply(fmt.Sprintf(`
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: staging, labels: {stagecoach.dev/stage: staging}}
spec:
  project: default
  source: {repoURL: %s, path: staging, targetRevision: env/staging}
  destination: {server: https://kubernetes.default.svc, namespace: %s}
  syncPolicy:
    automated: {prune: true, selfHeal: true}
`, repo.URL, target))
	sc.Stage("staging", "web", "staging", stagecoachv1.ApplierReference{Kind: "Application", Name: "staging"},
		stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: sc.Registry.Repository(images), Semver: ">=1.0.0"}},
		func(s *stagecoachv1.Stage) {
			s.Spec.Author = localstack.AdminAuthor()
			s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Git: &stagecoachv1.GitPromotion{URL: repo.URL, Insecure: true, Branch: "env/staging",
				SecretRef: &stagecoachv1.LocalObjectReference{Name: "gitea-push"},
				Set:       []stagecoachv1.GitFileEdit{{Path: overlay, Key: "data.digest"}},
				PullRequest: &stagecoachv1.GitPullRequest{Provider: "Gitea", TokenSecretRef: stagecoachv1.LocalObjectReference{Name: "gitea-token"},
					Merge: stagecoachv1.PullRequestMergeAuto}}}
		})
	sc.G.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(sc.GetStage(g, "staging").Status.Conditions, stagecoachv1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "Stage staging Ready: %s: %s", c.Reason, c.Message)
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())

	admin, err := forge.Client(sc.Ctx(), forge.AdminToken)
	sc.G.Expect(err).NotTo(HaveOccurred())
	reviewer, err := forge.Client(sc.Ctx(), forge.ReviewerToken)
	sc.G.Expect(err).NotTo(HaveOccurred())
	promotion := func(g Gomega, p *stagecoachv1.Promotion) *stagecoachv1.Promotion {
		got := &stagecoachv1.Promotion{}
		g.Expect(sc.Client.Get(sc.Ctx(), client.ObjectKeyFromObject(p), got)).To(Succeed())
		return got
	}
	// opened waits for p's pull request and reads it on the forge.
	opened := func(p *stagecoachv1.Promotion) (*stagecoachv1.Promotion, *gitea.PullRequest) {
		var got *stagecoachv1.Promotion
		sc.G.Eventually(func(g Gomega) {
			got = promotion(g, p)
			g.Expect(got.Status.PullRequest).NotTo(BeNil(), "Promotion %s: %s", got.Name, got.Status.Message)
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
		pr, _, err := admin.GetPullRequest(repo.Owner, repo.Name, got.Status.PullRequest.Number)
		sc.G.Expect(err).NotTo(HaveOccurred())
		return got, pr
	}
	// running says env/staging's head holds digest, Argo CD synced that very commit and the
	// cluster runs it.
	running := func(g Gomega, digest string) string {
		head, err := repo.Head("env/staging")
		g.Expect(err).NotTo(HaveOccurred())
		file, err := repo.File(head, overlay)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(file).To(ContainSubstring("digest: " + digest + " # Stagecoach writes it"))
		g.Expect(sc.ConfigMapData(g, target, "web")).To(HaveKeyWithValue("digest", digest))
		app := sc.Get(g, "argoproj.io/v1alpha1", "Application", "staging")
		g.Expect(localstack.Field(app, "status", "operationState", "syncResult", "revision")).To(Equal(head))
		return head
	}
	setMerge := func(merge string) {
		sc.MergePatch(stagecoachv1.GroupVersion.String(), "Stage", "staging",
			fmt.Sprintf(`{"spec":{"promotion":{"git":{"pullRequest":{"merge":%q}}}}}`, merge))
	}

	t.Run("merged by Stagecoach once the gates pass", func(t *testing.T) {
		sc := sc.For(t)
		requested := time.Now()
		p := sc.Promote("staging", "v1.0.0", versions["v1.0.0"])
		got, pr := opened(p)
		sc.G.Expect(pr.Title).To(Equal("Promote web to v1.0.0 in staging"))
		sc.G.Expect(pr.Body).To(ContainSubstring("Stagecoach promotes **web** to **v1.0.0** in **staging**"))
		sc.G.Expect(pr.Body).To(ContainSubstring("```diff\n"))
		sc.G.Expect(pr.Body).To(ContainSubstring("-  digest: none # Stagecoach writes it\n+  digest: " + versions["v1.0.0"] + " # Stagecoach writes it\n"))
		sc.G.Expect(pr.Head.Ref).To(Equal("stagecoach/" + sc.NS + "/staging/" + p.Name))
		sc.G.Expect(pr.Head.Sha).To(Equal(got.Status.PullRequest.HeadSHA))
		tl := sc.WaitVerified("staging", versions["v1.0.0"], requested)
		head := running(sc.G, versions["v1.0.0"])
		got = promotion(sc.G, p)
		sc.G.Expect(got.Status.Commit).To(Equal(&stagecoachv1.PushedCommit{SHA: head, Branch: "env/staging", Written: true}))
		merged, _, err := admin.GetPullRequest(repo.Owner, repo.Name, got.Status.PullRequest.Number)
		sc.G.Expect(err).NotTo(HaveOccurred())
		sc.G.Expect(merged.HasMerged).To(BeTrue())
		sc.G.Expect(*merged.MergedCommitID).To(Equal(head))
		sc.G.Expect(merged.MergedBy.UserName).To(Equal(forge.Admin))
		report("%-8s promotion by pull request on Gitea, merged by Stagecoach → Argo CD synced the merge %s", "gitea-pr", tl)
	})

	t.Run("merged by a person after review", func(t *testing.T) {
		sc := sc.For(t)
		setMerge(stagecoachv1.PullRequestMergeManual)
		p := sc.Promote("staging", "v2.0.0", versions["v2.0.0"])
		got, pr := opened(p)
		sc.G.Expect(pr.Body).To(ContainSubstring("A person merges this pull request"))
		// It waits for the person: nothing is merged, the Promotion says what it waits for.
		sc.G.Eventually(func(g Gomega) {
			g.Expect(promotion(g, p).Status.Message).To(ContainSubstring(fmt.Sprintf("waiting for a person to merge pull request #%d", pr.Index)))
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
		sc.G.Consistently(func(g Gomega) {
			got := promotion(g, p)
			g.Expect(got.Status.AppliedAt).To(BeNil())
			g.Expect(got.Status.Commit).To(BeNil())
		}, 3*time.Second, time.Second/5).Should(Succeed())
		_, _, err := reviewer.CreatePullReview(repo.Owner, repo.Name, pr.Index, gitea.CreatePullReviewOptions{State: gitea.ReviewStateApproved, Body: "looks right"})
		sc.G.Expect(err).NotTo(HaveOccurred())
		mergedAt := time.Now()
		ok, _, err := reviewer.MergePullRequest(repo.Owner, repo.Name, pr.Index, gitea.MergePullRequestOption{Style: gitea.MergeStyleMerge})
		sc.G.Expect(err).NotTo(HaveOccurred())
		sc.G.Expect(ok).To(BeTrue())
		tl := sc.WaitVerified("staging", versions["v2.0.0"], mergedAt)
		head := running(sc.G, versions["v2.0.0"])
		got = promotion(sc.G, p)
		sc.G.Expect(got.Status.Commit.SHA).To(Equal(head))
		report("%-8s pull request merged by a person on Gitea → Verified %s", "gitea-pr", tl)
	})

	t.Run("closed without merging", func(t *testing.T) {
		sc := sc.For(t)
		p := sc.Promote("staging", "v3.0.0", versions["v3.0.0"])
		_, pr := opened(p)
		closed := gitea.StateClosed
		_, _, err := reviewer.EditPullRequest(repo.Owner, repo.Name, pr.Index, gitea.EditPullRequestOption{State: &closed})
		sc.G.Expect(err).NotTo(HaveOccurred())
		sc.G.Eventually(func(g Gomega) {
			got := promotion(g, p)
			// Failed, then rolled back: the branch still holds v2, so the rollback writes nothing.
			g.Expect(got.Status.Phase).To(BeElementOf(stagecoachv1.PhaseFailed, stagecoachv1.PhaseRolledBack), "Promotion %s: %s", got.Name, got.Status.Message)
			g.Expect(got.Status.Message).To(ContainSubstring(fmt.Sprintf("pull request #%d (%s) was closed without merging", pr.Index, pr.HTMLURL)))
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
		running(sc.G, versions["v2.0.0"])
	})

	t.Run("someone else pushes to it", func(t *testing.T) {
		sc := sc.For(t)
		p := sc.Promote("staging", "v4.0.0", versions["v4.0.0"])
		got, pr := opened(p)
		theirs, err := repo.Commit(got.Status.PullRequest.Branch, "sneak a change in", "staging/extra.yaml",
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\n")
		sc.G.Expect(err).NotTo(HaveOccurred())
		sc.G.Eventually(func(g Gomega) {
			got := promotion(g, p)
			// Failed, then rolled back: the branch still holds v2, so the rollback writes nothing.
			g.Expect(got.Status.Phase).To(BeElementOf(stagecoachv1.PhaseFailed, stagecoachv1.PhaseRolledBack), "Promotion %s: %s", got.Name, got.Status.Message)
			g.Expect(got.Status.Message).To(ContainSubstring(fmt.Sprintf("someone else pushed to pull request #%d", pr.Index)))
			g.Expect(got.Status.Message).To(ContainSubstring(theirs[:7]))
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
		after, _, err := admin.GetPullRequest(repo.Owner, repo.Name, pr.Index)
		sc.G.Expect(err).NotTo(HaveOccurred())
		sc.G.Expect(after.HasMerged).To(BeFalse(), "it is never merged")
		running(sc.G, versions["v2.0.0"])
		sc.G.Expect(strings.Contains(after.Body, "```diff")).To(BeTrue())
	})
}

// The demo's delivery by pull request (pipeline.SetupPullRequest, make demo): what dev verified
// reaches the gitops Stage through a pull request on Gitea that Stagecoach merges, and the
// Application following env/prod syncs the merge commit.
func TestDemoPullRequestDelivery(t *testing.T) {
	sc := env.Scenario(t)
	repo, target := sc.NS+"/payments", sc.TargetNamespace("dev")
	v1 := sc.Push(repo, "v1.0.0", map[string]string{"configmap.yaml": localstack.ConfigMap("payments", "v1.0.0")})
	sc.FluxOCISource("payments-dev", repo, "v1.0.0", "dev", target)
	sc.Stage("dev", "payments", "dev",
		stagecoachv1.ApplierReference{Kind: "OCIRepository", Name: "payments-dev", Kustomization: "payments-dev-apply"},
		stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "none"}}, nil)
	d, err := pipeline.SetupPullRequest(sc.Ctx(), env, sc.NS, "payments", "dev")
	sc.G.Expect(err).NotTo(HaveOccurred())
	sc.Promote("dev", "v1.0.0", v1)
	sc.WaitVerified("dev", v1, time.Time{})
	sc.G.Eventually(func(g Gomega) {
		s, err := d.Stage(sc.Ctx(), pipeline.GitOpsLane)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.Status.Current).NotTo(BeNil())
		g.Expect(s.Status.Current.Digest).To(Equal(v1))
		g.Expect(meta.IsStatusConditionTrue(s.Status.Conditions, stagecoachv1.ConditionVerified)).To(BeTrue())
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
	pr, merged, err := d.PullRequestOf(sc.Ctx(), v1)
	sc.G.Expect(err).NotTo(HaveOccurred())
	sc.G.Expect(pr).NotTo(BeNil())
	sc.G.Expect(pr.URL).To(HavePrefix(d.Repo.URL[:strings.Index(d.Repo.URL, "/stagecoach/")]))
	head, err := d.Repo.Head("env/prod")
	sc.G.Expect(err).NotTo(HaveOccurred())
	sc.G.Expect(merged.SHA).To(Equal(head))
	sc.G.Eventually(func(g Gomega) {
		g.Expect(sc.ConfigMapData(g, d.Target, "payments")).To(HaveKeyWithValue("digest", v1))
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
}
