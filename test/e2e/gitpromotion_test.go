package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	gitsource "github.com/stagecoach-dev/stagecoach/internal/source/git"
	"github.com/stagecoach-dev/stagecoach/internal/source/git/gittest"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
)

// Promotion by commit (spec.promotion.git) on the real Argo CD: the Stage writes each version's
// digest into the staging overlay of the config repository's env/staging branch as a signed
// commit, and the Application, which follows that branch with selfHeal, syncs it. Git keeps
// saying what runs: the promotion is the commit, landing is proven at that commit, a version whose
// tests fail is reverted by a commit, and a commit someone else makes to the overlay freezes the
// Stage instead of being written over.
func TestPromotionByCommitToAnEnvironmentBranch(t *testing.T) {
	sc := env.Scenario(t)
	sc.RunPods()
	sc.Apply(localstack.JobGrantYAML(sc.NS))
	target := sc.TargetNamespace("staging")
	repo := sc.NS + "/web"
	v1 := sc.Push(repo, "v1.0.0", map[string]string{"configmap.yaml": localstack.ConfigMap("web", "v1.0.0")})
	v2 := sc.Push(repo, "v2.0.0", map[string]string{"configmap.yaml": localstack.ConfigMap("web", "v2.0.0")})

	const overlay = "staging/configmap.yaml"
	srv := gittest.NewServer(t, gittest.Options{})
	srv.Commit("base", map[string]string{"README.md": "config\n"}, nil)
	srv.Branch("env/staging")
	srv.Commit("staging overlay", map[string]string{overlay: `# The web release running in staging: Stagecoach writes data.digest.
apiVersion: v1
kind: ConfigMap
metadata:
  name: web
data:
  digest: none # set by Stagecoach
  owner: team-web
`}, nil)
	srv.Checkout("main")
	signing := gittest.NewPGPSigner(t, "stagecoach")
	sc.G.Expect(sc.Client.Create(sc.Ctx(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sc.NS, Name: "staging-signing"},
		Data: map[string][]byte{"git.asc": signing.Private}})).To(Succeed())

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
`, srv.URL, target))
	// The tests of v2.0.0 fail.
	tests := runtime.RawExtension{Raw: fmt.Appendf(nil, `{"apiVersion":"batch/v1","kind":"Job",
		"spec":{"backoffLimit":0,"template":{
			"metadata":{"annotations":{%q:"{{if eq .Version \"v2.0.0\"}}1{{else}}0{{end}}"}},
			"spec":{"restartPolicy":"Never","containers":[{"name":"tests","image":"%s@{{.Digest}}","args":["--version={{.Version}}"]}]}}}}`,
		localstack.ExitCodeAnnotation, sc.Registry.Repository(repo))}
	sc.Stage("staging", "web", "staging", stagecoachv1.ApplierReference{Kind: "Application", Name: "staging"},
		stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: sc.Registry.Repository(repo), Semver: ">=1.0.0"}},
		func(s *stagecoachv1.Stage) {
			s.Spec.Author = localstack.AdminAuthor()
			s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Git: &stagecoachv1.GitPromotion{URL: srv.URL, Insecure: true, Branch: "env/staging",
				Set:           []stagecoachv1.GitFileEdit{{Path: overlay, Key: "data.digest"}},
				Author:        &stagecoachv1.GitAuthor{Name: "Stagecoach e2e", Email: "stagecoach@e2e.dev"},
				SigningKeyRef: &stagecoachv1.LocalObjectReference{Name: "staging-signing"}}}
			s.Spec.Verification.Checks = []stagecoachv1.Check{{Name: "integration", Run: &stagecoachv1.RunCheck{Template: tests}}}
		})
	sc.G.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(sc.GetStage(g, "staging").Status.Conditions, stagecoachv1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "Stage staging Ready: %s: %s", c.Reason, c.Message)
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())

	// running says the branch's head holds digest and the cluster runs it, synced by Argo CD at
	// that very commit.
	running := func(g Gomega, digest string) string {
		head := srv.Head("env/staging")
		g.Expect(srv.File(head, overlay)).To(ContainSubstring("digest: " + digest + " # set by Stagecoach"))
		g.Expect(sc.ConfigMapData(g, target, "web")).To(HaveKeyWithValue("digest", digest))
		app := sc.Get(g, "argoproj.io/v1alpha1", "Application", "staging")
		g.Expect(localstack.Field(app, "status", "operationState", "syncResult", "revision")).To(Equal(head))
		return head
	}
	promotion := func(g Gomega, p *stagecoachv1.Promotion) *stagecoachv1.Promotion {
		got := &stagecoachv1.Promotion{}
		g.Expect(sc.Client.Get(sc.Ctx(), client.ObjectKeyFromObject(p), got)).To(Succeed())
		return got
	}

	t.Run("a signed commit to the branch is the promotion", func(t *testing.T) {
		sc := sc.For(t)
		before := srv.Head("env/staging")
		requested := time.Now()
		p := sc.Promote("staging", "v1.0.0", v1)
		tl := sc.WaitVerified("staging", v1, requested)
		head := running(sc.G, v1)
		got := promotion(sc.G, p)
		sc.G.Expect(got.Status.Commit).To(Equal(&stagecoachv1.PushedCommit{SHA: head, Branch: "env/staging", Written: true}))

		c := srv.CommitObject(head)
		sc.G.Expect(c.ParentHashes).To(Equal([]plumbing.Hash{plumbing.NewHash(before)}))
		sc.G.Expect(c.Author.Name).To(Equal("Stagecoach e2e"))
		sc.G.Expect(c.Message).To(HavePrefix("Promote web to v1.0.0 in staging\n"))
		sc.G.Expect(c.Message).To(ContainSubstring("Stagecoach-Promotion: " + p.Name + "\n"))
		_, err := gitsource.SignedBy(c, gitsource.Keys{PGP: []string{string(signing.Public)}})
		sc.G.Expect(err).NotTo(HaveOccurred(), "the commit is signed with the Stage's key")
		// The rest of the file is as it was written.
		file := srv.File(head, overlay)
		sc.G.Expect(file).To(HavePrefix("# The web release running in staging: Stagecoach writes data.digest.\n"))
		sc.G.Expect(file).To(ContainSubstring("  owner: team-web\n"))
		// Stagecoach never wrote the Application's spec: it still follows the branch.
		app := sc.Get(sc.G, "argoproj.io/v1alpha1", "Application", "staging")
		sc.G.Expect(localstack.Field(app, "spec", "source", "targetRevision")).To(Equal("env/staging"))
		report("%-8s promotion by signed commit to env/staging → Argo CD synced it %s", "git-push", tl)
	})

	t.Run("a version whose tests fail is reverted by a commit", func(t *testing.T) {
		sc := sc.For(t)
		v1Commit := srv.Head("env/staging")
		p := sc.Promote("staging", "v2.0.0", v2)
		var got *stagecoachv1.Promotion
		sc.G.Eventually(func(g Gomega) {
			got = promotion(g, p)
			g.Expect(got.Status.Phase).To(Equal(stagecoachv1.PhaseRolledBack), "Promotion %s: %s", got.Name, got.Status.Message)
			s := sc.GetStage(g, "staging")
			g.Expect(s.Status.Current).NotTo(BeNil())
			g.Expect(s.Status.Current.Digest).To(Equal(v1))
			running(g, v1)
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
		sc.G.Expect(got.Status.Commit).NotTo(BeNil())
		v2Commit := got.Status.Commit.SHA
		sc.G.Expect(srv.File(v2Commit, overlay)).To(ContainSubstring("digest: " + v2))
		revert := srv.CommitObject(srv.Head("env/staging"))
		sc.G.Expect(revert.Message).To(HavePrefix("Revert web in staging to v1.0.0\n"))
		sc.G.Expect(revert.ParentHashes).To(Equal([]plumbing.Hash{plumbing.NewHash(v2Commit)}))
		sc.G.Expect(revert.TreeHash).To(Equal(srv.CommitObject(v1Commit).TreeHash), "the revert restores v1's files exactly")
	})

	// For comparison, in the same run: the engine alone, syncing a commit a person pushed to the
	// branch (another file of the overlay, so not Stagecoach's business) when asked to refresh,
	// as Stagecoach asks after its push.
	t.Run("the engine's own time to sync a pushed commit", func(t *testing.T) {
		sc := sc.For(t)
		srv.Checkout("env/staging")
		theirs := srv.Commit("notes", map[string]string{"staging/notes.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\n"}, nil)
		srv.Checkout("main")
		pushed := time.Now()
		sc.MergePatch("argoproj.io/v1alpha1", "Application", "staging", `{"metadata":{"annotations":{"argocd.argoproj.io/refresh":"normal"}}}`)
		sc.G.Eventually(func(g Gomega) {
			app := sc.Get(g, "argoproj.io/v1alpha1", "Application", "staging")
			g.Expect(localstack.Field(app, "status", "operationState", "syncResult", "revision")).To(Equal(theirs))
			g.Expect(localstack.Field(app, "status", "sync", "status")).To(Equal("Synced"))
			g.Expect(localstack.Field(app, "status", "health", "status")).To(Equal("Healthy"))
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
		report("%-8s the engine alone: a pushed commit → Argo CD synced and Healthy in %s", "git-push", time.Since(pushed).Round(10*time.Millisecond))
	})

	t.Run("a commit by someone else freezes the Stage", func(t *testing.T) {
		sc := sc.For(t)
		srv.Checkout("env/staging")
		theirs := srv.Commit("hotfix: pin the digest by hand", map[string]string{overlay: strings.Replace(
			srv.File(srv.Head("env/staging"), overlay), "owner: team-web", "owner: someone", 1)}, nil)
		srv.Checkout("main")
		p := sc.Promote("staging", "v2.0.0", v2)
		sc.G.Eventually(func(g Gomega) {
			got := promotion(g, p)
			g.Expect(got.Status.Phase).To(Equal(stagecoachv1.PhaseAborted), "Promotion %s: %s", got.Name, got.Status.Message)
			frozen := meta.FindStatusCondition(sc.GetStage(g, "staging").Status.Conditions, stagecoachv1.ConditionFrozen)
			g.Expect(frozen).NotTo(BeNil())
			g.Expect(frozen.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(frozen.Reason).To(Equal(stagecoachv1.ReasonForeignWrite))
			g.Expect(frozen.Message).To(And(ContainSubstring(theirs[:12]), ContainSubstring("Dev <dev@example.dev>"),
				ContainSubstring("hotfix: pin the digest by hand")))
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
		sc.G.Expect(srv.Head("env/staging")).To(Equal(theirs), "nothing is written over it")
	})
}

// Two Stages promote by commit to one branch at the same moment: each writes its own overlay, the
// second push is refused as not fast-forward or waits for the first, and is written again on top
// of it; both land, in order, neither over the other.
func TestTwoPromotionsToOneBranch(t *testing.T) {
	sc := env.Scenario(t)
	srv := gittest.NewServer(t, gittest.Options{})
	srv.Commit("base", map[string]string{"README.md": "config\n"}, nil)
	srv.Branch("env/staging")
	apps := []string{"web", "api"}
	digests, targets := map[string]string{}, map[string]string{}
	for _, app := range apps {
		targets[app] = sc.TargetNamespace(app)
		srv.Commit(app+" overlay", map[string]string{"staging/" + app + "/configmap.yaml": fmt.Sprintf(
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  digest: none\n", app)}, nil)
		repo := sc.NS + "/" + app
		digests[app] = sc.Push(repo, "v1.0.0", map[string]string{"configmap.yaml": localstack.ConfigMap(app, "v1.0.0")})
		sc.Apply(fmt.Sprintf(`
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: %[1]s, labels: {stagecoach.dev/stage: %[1]s}}
spec:
  project: default
  source: {repoURL: %[2]s, path: staging/%[1]s, targetRevision: env/staging}
  destination: {server: https://kubernetes.default.svc, namespace: %[3]s}
  syncPolicy:
    automated: {prune: true, selfHeal: true}
`, app, srv.URL, targets[app]))
		sc.Stage(app, app, "staging", stagecoachv1.ApplierReference{Kind: "Application", Name: app},
			stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: sc.Registry.Repository(repo), Semver: ">=1.0.0"}},
			func(s *stagecoachv1.Stage) {
				s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Git: &stagecoachv1.GitPromotion{URL: srv.URL, Insecure: true, Branch: "env/staging",
					Set: []stagecoachv1.GitFileEdit{{Path: "staging/" + app + "/configmap.yaml", Key: "data.digest"}}}}
			})
	}
	srv.Checkout("main")
	before := srv.Head("env/staging")
	for _, app := range apps {
		sc.G.Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(sc.GetStage(g, app).Status.Conditions, stagecoachv1.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "Stage %s Ready: %s: %s", app, c.Reason, c.Message)
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
	}
	requested := time.Now()
	for _, app := range apps {
		sc.Promote(app, "v1.0.0", digests[app])
	}
	for _, app := range apps {
		tl := sc.WaitVerified(app, digests[app], requested)
		sc.G.Eventually(func(g Gomega) {
			g.Expect(sc.ConfigMapData(g, targets[app], app)).To(HaveKeyWithValue("digest", digests[app]))
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
		report("%-8s two promotions to one branch at once: %s %s", "git-push", app, tl)
	}
	// Two commits on top of the branch as it was, one after the other, each with both changes so far.
	head := srv.CommitObject(srv.Head("env/staging"))
	sc.G.Expect(head.ParentHashes).To(HaveLen(1))
	first := srv.CommitObject(head.ParentHashes[0].String())
	sc.G.Expect(first.ParentHashes).To(Equal([]plumbing.Hash{plumbing.NewHash(before)}))
	sc.G.Expect([]string{first.Message, head.Message}).To(ConsistOf(ContainSubstring("Stagecoach-Stage: "+sc.NS+"/web\n"), ContainSubstring("Stagecoach-Stage: "+sc.NS+"/api\n")))
	for _, app := range apps {
		sc.G.Expect(srv.File(head.Hash.String(), "staging/"+app+"/configmap.yaml")).To(ContainSubstring("digest: " + digests[app]))
	}
}

// A Stage of Git commits promoted by merging into the environment's branch, which a Flux
// GitRepository follows: each promoted commit of main is fast-forwarded onto env/prod, the real
// source-controller fetches it and the real kustomize-controller applies it; landing is proven
// at the commit on the branch. Stagecoach never writes the GitRepository's spec.
func TestMergePromotionToABranchFluxFollows(t *testing.T) {
	sc := env.Scenario(t)
	srv := gittest.NewServer(t, gittest.Options{})
	configMap := func(version string) map[string]string {
		return map[string]string{"app/configmap.yaml": fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {version: %q}\n", version)}
	}
	c1 := srv.Commit("release one", configMap("one"), nil)
	srv.Branch("env/prod")
	srv.Checkout("main")
	c2 := srv.Commit("release two", configMap("two"), nil)
	target := sc.TargetNamespace("prod")
	sc.Apply(fmt.Sprintf(`
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: config-prod, labels: {stagecoach.dev/stage: prod}}
spec:
  interval: 10m
  url: %[1]s
  ref: {branch: env/prod}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: prod, labels: {stagecoach.dev/stage: prod}}
spec:
  interval: 10m
  prune: true
  path: ./app
  targetNamespace: %[2]s
  sourceRef: {kind: GitRepository, name: config-prod}
`, srv.URL, target))
	sc.Stage("prod", "web", "prod", stagecoachv1.ApplierReference{Kind: "GitRepository", Name: "config-prod", Kustomization: "prod"},
		stagecoachv1.StageSource{Git: &stagecoachv1.GitSource{URL: srv.URL, Branch: "main", Insecure: true, Interval: &metav1.Duration{Duration: time.Hour}}},
		func(s *stagecoachv1.Stage) {
			s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Git: &stagecoachv1.GitPromotion{URL: srv.URL, Insecure: true, Branch: "env/prod", Merge: true}}
		})
	sc.G.Eventually(func(g Gomega) {
		g.Expect(sc.ConfigMapData(g, target, "web")).To(HaveKeyWithValue("version", "one"))
		c := meta.FindStatusCondition(sc.GetStage(g, "prod").Status.Conditions, stagecoachv1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "Stage prod Ready: %s: %s", c.Reason, c.Message)
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
	sc.G.Expect(srv.Head("env/prod")).To(Equal(c1))

	requested := time.Now()
	sc.Promote("prod", c2[:7], "sha1:"+c2)
	tl := sc.WaitVerified("prod", "sha1:"+c2, requested)
	sc.G.Expect(srv.Head("env/prod")).To(Equal(c2), "fast-forwarded to the promoted commit")
	sc.G.Eventually(func(g Gomega) {
		g.Expect(sc.ConfigMapData(g, target, "web")).To(HaveKeyWithValue("version", "two"))
		repo := sc.Get(g, "source.toolkit.fluxcd.io/v1", "GitRepository", "config-prod")
		g.Expect(localstack.Field(repo, "status", "artifact", "revision")).To(Equal("env/prod@sha1:" + c2))
		g.Expect(localstack.Field(repo, "spec", "ref", "commit")).To(BeEmpty(), "Stagecoach does not pin the GitRepository")
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
	report("%-8s promotion by merge into env/prod → Flux fetched and applied it %s", "git-push", tl)

	// Issue 50 item 5: a commit someone else makes on the branch freezes the Stage and stops the
	// automatic merge of the next release; after a person's Unfreeze, automation offers that
	// release again (its next attempt) and merges it over the accepted branch.
	sc.MergePatch("stagecoach.dev/v1alpha1", "Stage", "prod", `{"spec":{"promotion":{"auto":true}}}`)
	srv.Checkout("env/prod")
	theirs := srv.Commit("hotfix by hand", map[string]string{"app/hotfix.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: hotfix}\ndata: {by: hand}\n"}, nil)
	srv.Checkout("main")
	c3 := srv.Commit("release three", configMap("three"), nil)
	sc.MergePatch("stagecoach.dev/v1alpha1", "Stage", "prod",
		fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, stagecoachv1.ReconcileRequestAnnotation, time.Now().Format(time.RFC3339Nano)))
	var stopped stagecoachv1.Promotion
	sc.G.Eventually(func(g Gomega) {
		var list stagecoachv1.PromotionList
		g.Expect(sc.Client.List(sc.Ctx(), &list, client.InNamespace(sc.NS))).To(Succeed())
		var ofC3 []stagecoachv1.Promotion
		for _, p := range list.Items {
			if p.Spec.Version != nil && p.Spec.Version.Digest == "sha1:"+c3 {
				ofC3 = append(ofC3, p)
			}
		}
		g.Expect(ofC3).To(HaveLen(1))
		stopped = ofC3[0]
		g.Expect(stopped.Status.Phase).To(Equal(stagecoachv1.PhaseAborted), "Promotion %s: %s", stopped.Name, stopped.Status.Message)
		frozen := meta.FindStatusCondition(sc.GetStage(g, "prod").Status.Conditions, stagecoachv1.ConditionFrozen)
		g.Expect(frozen).NotTo(BeNil())
		g.Expect(frozen.Reason).To(Equal(stagecoachv1.ReasonForeignWrite))
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
	sc.G.Expect(srv.Head("env/prod")).To(Equal(theirs), "nothing is merged over it while frozen")

	sc.G.Expect(sc.Client.Create(sc.Ctx(), &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: sc.NS, GenerateName: "prod-unfreeze-"},
		Spec: stagecoachv1.PromotionSpec{Stage: "prod", Action: stagecoachv1.ActionUnfreeze, RequestedBy: localstack.AdminUser,
			Reason: "the hotfix is accepted"}})).To(Succeed())
	sc.G.Eventually(func(g Gomega) {
		var list stagecoachv1.PromotionList
		g.Expect(sc.Client.List(sc.Ctx(), &list, client.InNamespace(sc.NS))).To(Succeed())
		var again *stagecoachv1.Promotion
		for i, p := range list.Items {
			if p.Spec.Version != nil && p.Spec.Version.Digest == "sha1:"+c3 && p.Name != stopped.Name {
				again = &list.Items[i]
			}
		}
		g.Expect(again).NotTo(BeNil(), "automation offers %s again after the Unfreeze", c3[:7])
		g.Expect(again.Name).To(Equal(stopped.Name+"-2"), "its next attempt")
		g.Expect(again.Status.Phase).To(Equal(stagecoachv1.PhaseSucceeded), "Promotion %s: %s", again.Name, again.Status.Message)
		s := sc.GetStage(g, "prod")
		g.Expect(s.Status.Current).NotTo(BeNil())
		g.Expect(s.Status.Current.Digest).To(Equal("sha1:" + c3))
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
	// A merge writes the promoted commit's tree on the branch: prod runs exactly release three,
	// the accepted hotfix stays in the branch's history (a parent of the merge), not in its files.
	sc.G.Eventually(func(g Gomega) {
		g.Expect(sc.ConfigMapData(g, target, "web")).To(HaveKeyWithValue("version", "three"))
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
	sc.G.Expect(srv.Head("env/prod")).NotTo(Equal(theirs), "merged over the accepted branch")
}
