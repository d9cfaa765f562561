package e2e

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/source/git/gittest"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
	"github.com/stagecoach-dev/stagecoach/test/e2e/pipeline"
)

// A config repository's whole delivery on the real engines (issue 39): "fetch configuration from
// a git repository, deploy it to staging, run the integration tests, promote to production if
// they pass". dev (a Flux GitRepository and the Kustomization applying it) takes each signed commit
// of main; staging (an Argo CD Application on the plain Git source) takes what dev verified, and
// a Job run there after landing gates it; prod (Flux again) takes what staging verified. A commit
// whose tests fail is rolled back in staging and never reaches prod; an unsigned commit is skipped
// with its reason.
func TestConfigRepositoryDelivery(t *testing.T) {
	sc := env.Scenario(t)
	sc.RunPods()
	srv := gittest.NewServer(t, gittest.Options{})
	release := gittest.NewPGPSigner(t, "release")
	configMap := func(version string) map[string]string {
		return map[string]string{"app/configmap.yaml": fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {version: %q}\n", version)}
	}
	c1 := srv.Commit("release one", configMap("one"), &release)
	committed := time.Now()
	targets := map[string]string{"dev": sc.TargetNamespace("dev"), "staging": sc.TargetNamespace("staging"), "prod": sc.TargetNamespace("prod")}

	sc.G.Expect(sc.Client.Create(sc.Ctx(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sc.NS, Name: "config-signers"},
		Data: map[string][]byte{"release.asc": release.Public}})).To(Succeed())
	sc.Apply(localstack.JobGrantYAML(sc.NS))
	flux := func(env string) string {
		return fmt.Sprintf(`
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: config-%[1]s, labels: {stagecoach.dev/stage: %[1]s}}
spec:
  interval: 10m
  url: %[2]s
  ref: {branch: main}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: %[1]s, labels: {stagecoach.dev/stage: %[1]s}}
spec:
  interval: 10m
  prune: true
  path: ./app
  targetNamespace: %[3]s
  sourceRef: {kind: GitRepository, name: config-%[1]s}
`, env, srv.URL, targets[env])
	}
	sc.Apply(flux("dev"))
	sc.Apply(flux("prod"))
	sc.Apply(fmt.Sprintf(`
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: staging, labels: {stagecoach.dev/stage: staging}}
spec:
  project: default
  source: {repoURL: %s, path: app, targetRevision: main}
  destination: {server: https://kubernetes.default.svc, namespace: %s}
  syncPolicy:
    automated: {prune: true, selfHeal: true}
`, srv.URL, targets["staging"]))

	auto := func(s *stagecoachv1.Stage) { s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true} }
	sc.Stage("dev", "web", "dev", stagecoachv1.ApplierReference{Kind: "GitRepository", Name: "config-dev", Kustomization: "dev"},
		stagecoachv1.StageSource{Git: &stagecoachv1.GitSource{URL: srv.URL, Branch: "main", Paths: []string{"app"}, Insecure: true,
			Interval: &metav1.Duration{Duration: time.Hour},
			Verify:   &stagecoachv1.GitVerification{SecretRef: stagecoachv1.LocalObjectReference{Name: "config-signers"}}}}, auto)
	// The integration tests of a commit: a Job whose pod exits with the code the template renders
	// for the commit (the stand-in kubelet reads it); failing is the Stage's spec, set below.
	tests := func(failing string) runtime.RawExtension {
		return runtime.RawExtension{Raw: fmt.Appendf(nil, `{"apiVersion":"batch/v1","kind":"Job",
			"spec":{"backoffLimit":0,"template":{
				"metadata":{"annotations":{%q:"{{if eq .Revision \"%s\"}}1{{else}}0{{end}}"}},
				"spec":{"restartPolicy":"Never","containers":[{"name":"tests","image":"registry.example/config-tests:1","args":["--commit={{.Revision}}","--stage={{.Stage}}"]}]}}}}`,
			localstack.ExitCodeAnnotation, failing)}
	}
	sc.Stage("staging", "web", "staging", stagecoachv1.ApplierReference{Kind: "Application", Name: "staging"},
		stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "dev"}}, func(s *stagecoachv1.Stage) {
			auto(s)
			s.Spec.Author = localstack.AdminAuthor()
			s.Spec.Verification.Checks = []stagecoachv1.Check{{Name: "integration", Run: &stagecoachv1.RunCheck{Template: tests("none")}}}
		})
	sc.Stage("prod", "web", "prod", stagecoachv1.ApplierReference{Kind: "GitRepository", Name: "config-prod", Kustomization: "prod"},
		stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "staging"}}, auto)

	// c1 goes all the way.
	tl := map[string]localstack.Timeline{}
	for _, env := range []string{"dev", "staging", "prod"} {
		tl[env] = sc.WaitVerified(env, "sha1:"+c1, committed)
		sc.G.Eventually(func(g Gomega) {
			g.Expect(sc.ConfigMapData(g, targets[env], "web")).To(HaveKeyWithValue("version", "one"))
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
	}
	for _, env := range []string{"dev", "staging", "prod"} {
		report("%-8s delivery c1 %s", "git", tl[env])
	}
	report("%-8s commit on main → prod Verified: %s", "git", tl["prod"].Verified.Sub(committed).Round(10*time.Millisecond))

	// c2's tests fail in staging: staging goes back to c1, prod never sees c2.
	c2 := srv.Commit("release two", configMap("two"), &release)
	sc.G.Eventually(func(g Gomega) {
		s := sc.GetStage(g, "staging")
		s.Spec.Verification.Checks[0].Run.Template = tests(c2)
		g.Expect(sc.Client.Update(sc.Ctx(), s)).To(Succeed())
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
	ask := func(stage string) {
		sc.MergePatch(stagecoachv1.GroupVersion.String(), "Stage", stage,
			fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, stagecoachv1.ReconcileRequestAnnotation, time.Now().Format(time.RFC3339Nano)))
	}
	ask("dev")
	sc.WaitVerified("dev", "sha1:"+c2, time.Time{})
	var failed stagecoachv1.Promotion
	sc.G.Eventually(func(g Gomega) {
		var list stagecoachv1.PromotionList
		g.Expect(sc.Client.List(sc.Ctx(), &list, client.InNamespace(sc.NS), client.MatchingLabels{stagecoachv1.PromotionStageLabel: "staging"})).To(Succeed())
		found := false
		for _, p := range list.Items {
			if p.Spec.Version != nil && p.Spec.Version.Digest == "sha1:"+c2 {
				failed, found = p, true
			}
		}
		g.Expect(found).To(BeTrue(), "staging has no Promotion of c2")
		g.Expect(failed.Status.Phase).To(Equal(stagecoachv1.PhaseRolledBack), "Promotion %s: %s", failed.Name, failed.Status.Message)
		s := sc.GetStage(g, "staging")
		g.Expect(s.Status.Current).NotTo(BeNil())
		g.Expect(s.Status.Current.Digest).To(Equal("sha1:" + c1))
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
	sc.G.Expect(failed.Status.Message).To(ContainSubstring(`check "integration" failed`))
	sc.G.Eventually(func(g Gomega) {
		g.Expect(sc.ConfigMapData(g, targets["staging"], "web")).To(HaveKeyWithValue("version", "one"))
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
	ask("prod")
	sc.G.Consistently(func(g Gomega) {
		g.Expect(sc.GetStage(g, "prod").Status.Current.Digest).To(Equal("sha1:" + c1))
		g.Expect(sc.ConfigMapData(g, targets["prod"], "web")).To(HaveKeyWithValue("version", "one"))
	}, 3*time.Second, time.Second/5).Should(Succeed())

	// An unsigned commit is skipped by dev with its reason.
	c3 := srv.Commit("release three, unsigned", configMap("three"), nil)
	ask("dev")
	sc.G.Eventually(func(g Gomega) {
		s := sc.GetStage(g, "dev")
		g.Expect(s.Status.Candidate).NotTo(BeNil())
		g.Expect(s.Status.Candidate.Skipped).To(ContainElement(And(HaveField("Digest", "sha1:"+c3),
			HaveField("Reason", stagecoachv1.ReasonSignatureMissing), HaveField("Message", ContainSubstring("is not signed")))))
		g.Expect(s.Status.Current.Digest).To(Equal("sha1:" + c2))
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
}

// The demo's config delivery (pipeline.SetupConfig, make demo): a commit to main that changes app/
// reaches dev (Flux) and staging (Argo CD, verified by its integration Job) at that commit.
func TestDemoConfigDelivery(t *testing.T) {
	sc := env.Scenario(t)
	d, err := pipeline.SetupConfig(sc.Ctx(), env, sc.NS, "settings")
	sc.G.Expect(err).NotTo(HaveOccurred())
	sc.RunPods()
	commit, err := d.Commit(sc.Ctx(), "settings: release one", "one")
	sc.G.Expect(err).NotTo(HaveOccurred())
	for _, e := range []string{pipeline.Dev, pipeline.Staging} {
		sc.G.Eventually(func(g Gomega) {
			s, err := d.Stage(sc.Ctx(), e)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.Status.Current).NotTo(BeNil())
			g.Expect(s.Status.Current.Digest).To(Equal(commit))
			g.Expect(meta.IsStatusConditionTrue(s.Status.Conditions, stagecoachv1.ConditionVerified)).To(BeTrue())
			v, err := d.Version(sc.Ctx(), e)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(v).To(Equal("one"))
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
	}
	var jobs batchv1.JobList
	sc.G.Expect(sc.Client.List(sc.Ctx(), &jobs, client.InNamespace(sc.NS), client.MatchingLabels{stagecoachv1.RunCheckLabel: "integration"})).To(Succeed())
	sc.G.Expect(jobs.Items).To(HaveLen(1))
	sc.G.Expect(jobs.Items[0].Spec.Template.Spec.Containers[0].Args).To(ContainElement("--commit=" + commit[len("sha1:"):]))
}
