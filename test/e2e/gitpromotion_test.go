package e2e

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	fluxsig "github.com/fluxcd/pkg/git/signature"
	"github.com/go-git/go-git/v5/plumbing"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
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
		encoded := &plumbing.MemoryObject{}
		sc.G.Expect(c.EncodeWithoutSignature(encoded)).To(Succeed())
		r, err := encoded.Reader()
		sc.G.Expect(err).NotTo(HaveOccurred())
		payload, err := io.ReadAll(r)
		sc.G.Expect(err).NotTo(HaveOccurred())
		_, err = fluxsig.VerifyPGPSignature(c.PGPSignature, payload, string(signing.Public))
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
