package e2e

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
)

// A config repository's commits are the releases (source.git): each new commit of main that
// changes the dev overlay is promoted by writing its SHA into a Flux GitRepository's
// spec.ref.commit (the built-in applier of commits); the real source-controller fetches that
// commit, the real kustomize-controller applies it, and the version lands only once the
// Kustomization reports it applied. A commit to another overlay is no release of dev.
func TestGitCommitsPromotedToAFluxGitRepository(t *testing.T) {
	sc := env.Scenario(t)
	const repo = "config"
	configMap := func(version string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {version: %q}\n", version)
	}
	c1, err := sc.Git.Commit(sc.Ctx(), repo+"-"+sc.NS, "dev: first release", map[string]string{"dev/configmap.yaml": configMap("one")})
	sc.G.Expect(err).NotTo(HaveOccurred())
	url := sc.Git.URL(repo + "-" + sc.NS)
	target := sc.TargetNamespace("dev")

	sc.Apply(fmt.Sprintf(`
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: config, labels: {stagecoach.dev/stage: dev}}
spec:
  interval: 10m
  url: %[1]s
  ref: {branch: main}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: dev, labels: {stagecoach.dev/stage: dev}}
spec:
  interval: 10m
  prune: true
  path: ./dev
  targetNamespace: %[2]s
  sourceRef: {kind: GitRepository, name: config}
`, url, target))

	sc.Stage("dev", "web", "dev",
		stagecoachv1.ApplierReference{Kind: "GitRepository", Name: "config", Kustomization: "dev"},
		stagecoachv1.StageSource{Git: &stagecoachv1.GitSource{URL: url, Branch: "main", Paths: []string{"dev"}, Insecure: true,
			Interval: &metav1.Duration{Duration: time.Hour}}},
		func(s *stagecoachv1.Stage) {
			s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true}
		})

	verified := func(commit, version string) localstack.Timeline {
		tl := sc.WaitVerified("dev", "sha1:"+commit, time.Time{})
		sc.G.Eventually(func(g Gomega) {
			repo := sc.Get(g, "source.toolkit.fluxcd.io/v1", "GitRepository", "config")
			g.Expect(localstack.Field(repo, "spec", "ref", "commit")).To(Equal(commit))
			g.Expect(localstack.Field(repo, "status", "artifact", "revision")).To(Equal("main@sha1:" + commit))
			g.Expect(sc.ConfigMapData(g, target, "web")).To(HaveKeyWithValue("version", version))
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
		return tl
	}
	tl := verified(c1, "one")
	s := sc.GetStage(sc.G, "dev")
	sc.G.Expect(s.Status.Current.Version).To(Equal(c1[:7]))
	sc.G.Expect(meta.IsStatusConditionTrue(s.Status.Conditions, stagecoachv1.ConditionReady)).To(BeTrue())

	// A commit to prod's overlay is no release of dev; the next dev commit is.
	_, err = sc.Git.Commit(sc.Ctx(), repo+"-"+sc.NS, "prod: tune", map[string]string{"prod/configmap.yaml": configMap("prod")})
	sc.G.Expect(err).NotTo(HaveOccurred())
	c3, err := sc.Git.Commit(sc.Ctx(), repo+"-"+sc.NS, "dev: second release", map[string]string{"dev/configmap.yaml": configMap("two")})
	sc.G.Expect(err).NotTo(HaveOccurred())
	committed := time.Now()
	sc.MergePatch(stagecoachv1.GroupVersion.String(), "Stage", "dev",
		fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, stagecoachv1.ReconcileRequestAnnotation, committed.Format(time.RFC3339Nano)))
	tl2 := verified(c3, "two")
	var list stagecoachv1.PromotionList
	sc.G.Expect(sc.Client.List(sc.Ctx(), &list, client.InNamespace(sc.NS))).To(Succeed())
	sc.G.Expect(list.Items).To(HaveLen(2), "only dev's two commits are promoted")
	sc.G.Expect(sc.GetStage(sc.G, "dev").Status.History).NotTo(BeEmpty())
	report("%-8s git commit → Flux GitRepository + Kustomization at the commit %s", "git", tl)
	report("%-8s git commit pushed, fetched on request → Verified in %s", "git", tl2.Verified.Sub(committed).Round(10*time.Millisecond))
}
