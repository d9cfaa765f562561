package e2e

import (
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
)

// Applications whose release is one of several sources (issue 30), on the real engines.

// TestMultiSourceArgoCD: an Argo CD Application renders two sources together, the release (an OCI
// artifact, the source applyRef.source names) and its values (a ConfigMap from the stack's git
// server, pinned to a commit). Stagecoach moves only the release: v1 is Verified; v2, which the
// target's admission refuses, fails its sync and rolls back to v1; v3 is Verified. The values
// source's revision never changes, Argo CD keeps rendering it, and once it follows a branch the
// Stage is no longer Mediated.
func TestMultiSourceArgoCD(t *testing.T) {
	sc := env.Scenario(t)
	ctx := sc.Ctx()
	name := "payments-prod"
	repo := sc.NS + "/payments"
	digests := map[string]string{}
	for _, tag := range []string{"v1.0.0", "v2.0.0", "v3.0.0"} {
		digests[tag] = sc.Push(repo, tag, map[string]string{"configmap.yaml": localstack.ConfigMap("payments", tag)})
	}
	sc.G.Expect(sc.ArgoCDOCIRepository(ctx, repo)).To(Succeed())
	target := sc.TargetNamespace("prod")

	gitRepo := sc.NS + "-values"
	valuesCM := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: payments-values\ndata:\n  replicas: \"3\"\n"
	valuesSHA, err := sc.Git.Commit(ctx, gitRepo, "prod values", map[string]string{"prod/values.yaml": valuesCM})
	sc.G.Expect(err).NotTo(HaveOccurred())

	// Every revision list Argo CD reports for the Application, in order.
	syncs := watchSourceSyncs(sc, name)
	sc.Apply(localstack.MultiSourceApplicationYAML(sc.NS, name, sc.Registry.OCIURL(repo), sc.Git.URL(gitRepo), "prod", valuesSHA, name, target))
	sc.Stage(name, "payments", "prod", stagecoachv1.ApplierReference{Kind: "Application", Name: name, Source: "app"},
		stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: sc.Registry.Repository(repo), Semver: ">=1.0.0"}},
		func(s *stagecoachv1.Stage) {
			s.Spec.Verification.ProgressDeadline = &metav1.Duration{Duration: 2 * time.Minute}
			s.Spec.Rollback = &stagecoachv1.RollbackPolicy{Automatic: ptrTo(true)}
		})
	sc.G.Eventually(func(g Gomega) {
		s := sc.GetStage(g, name)
		m := meta.FindStatusCondition(s.Status.Conditions, stagecoachv1.ConditionMediated)
		g.Expect(m).NotTo(BeNil())
		g.Expect(m.Status).To(Equal(metav1.ConditionTrue), m.Message)
		g.Expect(m.Reason).To(Equal(stagecoachv1.ReasonMediated), m.Message)
	}, localstack.WaitTimeout, time.Second/5).Should(Succeed())

	// expectValuesPinned: the values source is where the Application declared it, Argo CD
	// rendered it at that commit, and its ConfigMap runs.
	expectValuesPinned := func(g Gomega) {
		app := sc.Get(g, argoAPI, "Application", name)
		sources, _, _ := unstructured.NestedSlice(app.Object, "spec", "sources")
		g.Expect(sources).To(HaveLen(2))
		g.Expect(sources[1]).To(HaveKeyWithValue("targetRevision", valuesSHA), "the values source is not Stagecoach's to move")
		revisions, _, _ := unstructured.NestedStringSlice(app.Object, "status", "sync", "revisions")
		g.Expect(revisions).To(HaveLen(2))
		g.Expect(revisions[1]).To(Equal(valuesSHA))
		g.Expect(sc.ConfigMapData(g, target, "payments-values")).To(HaveKeyWithValue("replicas", "3"))
	}
	// expectRunning: the release source and what runs are at tag, and Argo CD is Synced and Healthy.
	expectRunning := func(g Gomega, tag string) {
		app := sc.Get(g, argoAPI, "Application", name)
		sources, _, _ := unstructured.NestedSlice(app.Object, "spec", "sources")
		g.Expect(sources[0]).To(HaveKeyWithValue("targetRevision", digests[tag]))
		revisions, _, _ := unstructured.NestedStringSlice(app.Object, "status", "sync", "revisions")
		g.Expect(revisions).To(Equal([]string{digests[tag], valuesSHA}))
		g.Expect(localstack.Field(app, "status", "sync", "status")).To(Equal("Synced"))
		g.Expect(localstack.Field(app, "status", "health", "status")).To(Equal("Healthy"))
		g.Expect(sc.ConfigMapData(g, target, "payments")).To(HaveKeyWithValue("version", tag))
		expectValuesPinned(g)
	}

	promote := func(t *testing.T, tag string) {
		sc := sc.For(t)
		promoted := time.Now()
		sc.Promote(name, tag, digests[tag])
		tl := sc.WaitVerified(name, digests[tag], promoted)
		report("%-8s promote %s → Verified %s: %s", "multi-src", tag, tl.Verified.Sub(promoted).Round(10*time.Millisecond), tl)
		sc.G.Eventually(func(g Gomega) { expectRunning(g, tag) }, 30*time.Second, time.Second/5).Should(Succeed())
	}

	if !t.Run("v1 is Verified; the values stay at their commit", func(t *testing.T) { promote(t, "v1.0.0") }) {
		return
	}

	if !t.Run("v2 fails its sync and rolls back to v1", func(t *testing.T) {
		sc := sc.For(t)
		g := sc.G
		// The target's admission refuses v2's ConfigMap, as a cluster's policy would.
		for _, o := range refuseVersionPolicy(sc.NS, target, "v2.0.0") {
			g.Expect(localstack.Apply(ctx, sc.Client, o)).To(Succeed())
			sc.DeleteOnCleanup(o)
		}
		g.Eventually(func() error {
			cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "probe", "namespace": target}, "data": map[string]any{"version": "v2.0.0"}}}
			return sc.Client.Create(ctx, cm, client.DryRunAll)
		}, time.Minute, time.Second/5).Should(MatchError(ContainSubstring("refused")))

		promoted := time.Now()
		sc.Promote(name, "v2.0.0", digests["v2.0.0"])
		failed, rollback, failedSeen, verifiedSeen := waitPromotionRolledBack(sc, name, digests["v2.0.0"])
		g.Expect(rollback.Spec.Version.Digest).To(Equal(digests["v1.0.0"]))
		s := sc.GetStage(g, name)
		g.Expect(s.Status.Current.Digest).To(Equal(digests["v1.0.0"]))
		v := meta.FindStatusCondition(s.Status.Conditions, stagecoachv1.ConditionVerified)
		g.Expect(v).NotTo(BeNil())
		g.Expect(v.Status).To(Equal(metav1.ConditionTrue), v.Message)
		g.Expect(sc.ConfigMapData(g, target, "payments")).To(HaveKeyWithValue("version", "v1.0.0"))
		g.Eventually(func(g Gomega) { expectRunning(g, "v1.0.0") }, 30*time.Second, time.Second/5).Should(Succeed())
		// Argo CD tried v2 (its sync at the release's index), and never another values revision.
		g.Expect(syncs.release()).To(ContainElement(digests["v2.0.0"]), "Argo CD never synced v2")
		g.Expect(syncs.values()).To(HaveEach(valuesSHA), "the values source moved")
		report("%-8s v2 failed %s after it was promoted (%s); rolled back to v1 and Verified %s later",
			"multi-src", failedSeen.Sub(promoted).Round(10*time.Millisecond), failed.Status.Message, verifiedSeen.Sub(failedSeen).Round(10*time.Millisecond))
	}) {
		return
	}

	if !t.Run("v3 is Verified after the rollback", func(t *testing.T) { promote(t, "v3.0.0") }) {
		return
	}

	t.Run("values that follow a branch are SourceUnpinned", func(t *testing.T) {
		sc := sc.For(t)
		sc.MergePatch(argoAPI, "Application", name,
			`{"spec":{"sources":[{"name":"app","repoURL":"`+sc.Registry.OCIURL(repo)+`","path":".","targetRevision":"`+digests["v3.0.0"]+`"},`+
				`{"name":"values","repoURL":"`+sc.Git.URL(gitRepo)+`","path":"prod","targetRevision":"main"}]}}`)
		sc.G.Eventually(func(g Gomega) {
			s := sc.GetStage(g, name)
			m := meta.FindStatusCondition(s.Status.Conditions, stagecoachv1.ConditionMediated)
			g.Expect(m).NotTo(BeNil())
			g.Expect(m.Status).To(Equal(metav1.ConditionFalse), m.Message)
			g.Expect(m.Reason).To(Equal(stagecoachv1.ReasonSourceUnpinned), m.Message)
			g.Expect(m.Message).To(ContainSubstring(`spec.sources[1] "values"`))
		}, localstack.WaitTimeout, time.Second/5).Should(Succeed())
		g := sc.G
		g.Expect(syncs.values()).To(HaveEach(valuesSHA), "the values source moved before the branch")
	})
}

// sourceSyncs records the revision lists that a multi-source Application's sync operations asked
// for and synced, one entry per source.
type sourceSyncs struct {
	mu   sync.Mutex
	seen [][]string
}

// watchSourceSyncs records status.operationState.operation.sync.revisions and
// status.operationState.syncResult.revisions of the Application name whenever they change.
func watchSourceSyncs(sc *localstack.Scenario, name string) *sourceSyncs {
	s := &sourceSyncs{}
	sc.Watch(argoAPI, "Application", func(_ time.Time, u *unstructured.Unstructured) {
		if u.GetName() != name {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, path := range [][]string{{"status", "operationState", "operation", "sync", "revisions"},
			{"status", "operationState", "syncResult", "revisions"}} {
			revs, _, _ := unstructured.NestedStringSlice(u.Object, path...)
			if n := len(s.seen); len(revs) > 0 && (n == 0 || !slices.Equal(s.seen[n-1], revs)) {
				s.seen = append(s.seen, revs)
			}
		}
	})
	return s
}

// at lists the revisions of source i that syncs asked for or synced.
func (s *sourceSyncs) at(i int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, revs := range s.seen {
		if i < len(revs) {
			out = append(out, revs[i])
		}
	}
	return out
}

func (s *sourceSyncs) release() []string { return s.at(0) }
func (s *sourceSyncs) values() []string  { return s.at(1) }

// waitPromotionRolledBack waits until the Promotion of digest on stage has failed and its
// automatic rollback succeeded, and the Stage is Verified again; it returns both Promotions, when
// the failure was first seen and when the Stage was Verified again (polling every 100 ms).
func waitPromotionRolledBack(sc *localstack.Scenario, stage, digest string) (failed, rollback *stagecoachv1.Promotion, failedSeen, verifiedSeen time.Time) {
	sc.T.Helper()
	sc.G.Eventually(func(g Gomega) {
		failed, rollback = nil, nil
		var list stagecoachv1.PromotionList
		g.Expect(sc.Client.List(sc.Ctx(), &list, client.InNamespace(sc.NS))).To(Succeed())
		for i := range list.Items {
			p := &list.Items[i]
			if p.Spec.Stage == stage && p.Spec.Action == stagecoachv1.ActionPromote && p.Spec.Version != nil && p.Spec.Version.Digest == digest {
				failed = p
			}
		}
		g.Expect(failed).NotTo(BeNil(), "no Promotion of %s on %s yet", digest, stage)
		g.Expect(failed.Status.Phase).NotTo(Equal(stagecoachv1.PhaseSucceeded), "%s succeeded on %s", digest, stage)
		if failedSeen.IsZero() && (failed.Status.Phase == stagecoachv1.PhaseFailed || failed.Status.Phase == stagecoachv1.PhaseRolledBack) {
			failedSeen = time.Now()
		}
		for i := range list.Items {
			if list.Items[i].Annotations[stagecoachv1.RollbackOfAnnotation] == failed.Name {
				rollback = &list.Items[i]
			}
		}
		g.Expect(rollback).NotTo(BeNil(), "no rollback of %s yet (%s: %s)", failed.Name, failed.Status.Phase, failed.Status.Message)
		g.Expect(rollback.Status.Phase).To(Equal(stagecoachv1.PhaseSucceeded), "rollback %s: %s", rollback.Name, rollback.Status.Message)
		g.Expect(failed.Status.Phase).To(Equal(stagecoachv1.PhaseRolledBack), "%s: %s", failed.Name, failed.Status.Message)
		s := sc.GetStage(g, stage)
		g.Expect(meta.IsStatusConditionTrue(s.Status.Conditions, stagecoachv1.ConditionVerified)).To(BeTrue(), "Stage %s not Verified again", stage)
		verifiedSeen = time.Now()
	}, localstack.WaitTimeout, 100*time.Millisecond).Should(Succeed())
	return failed, rollback, failedSeen, verifiedSeen
}

// TestHelmChartArgoCD: an Argo CD Application installs a Helm chart from the stack's registry,
// which the repo-server pulls and renders with the helm command. Stagecoach promotes it by chart
// version (Mediated by version), the digest beside it: 1.0.0 is Verified; 2.0.0, pushed again
// with other contents after its first digest was judged, is refused before anything is written
// (TagMismatch): the tag no longer names the digest the Promotion is for. (A push between the
// write and the pull fails the Promotion at landing, TagMoved: test/integration/promotion.)
func TestHelmChartArgoCD(t *testing.T) {
	sc := env.Scenario(t)
	ctx := sc.Ctx()
	name, chart := "checkout-prod", "checkout"
	charts := sc.NS + "/charts"
	push := func(version, build string) string {
		d, err := sc.Registry.PushChart(ctx, charts, chart, version, map[string]string{"configmap.yaml": "apiVersion: v1\nkind: ConfigMap\n" +
			"metadata:\n  name: checkout\ndata:\n  version: {{ .Chart.Version | quote }}\n  build: " + build + "\n"})
		sc.G.Expect(err).NotTo(HaveOccurred())
		return d
	}
	v1 := push("1.0.0", "first")
	sc.G.Expect(sc.ArgoCDHelmOCIRepository(ctx, charts)).To(Succeed())
	target := sc.TargetNamespace("prod")
	// At a version that does not exist: the Application runs nothing until Stagecoach gives it one.
	sc.Apply(localstack.HelmChartApplicationYAML(sc.NS, name, sc.Registry.HelmChartRepoURL(charts), chart, "0.1.0", name, target))
	sc.Stage(name, "checkout", "prod", stagecoachv1.ApplierReference{Kind: "Application", Name: name},
		stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: sc.Registry.Repository(charts + "/" + chart), Semver: ">=1.0.0"}},
		func(s *stagecoachv1.Stage) {
			s.Spec.Verification.ProgressDeadline = &metav1.Duration{Duration: 2 * time.Minute}
			s.Spec.Rollback = &stagecoachv1.RollbackPolicy{Automatic: ptrTo(true)}
		})
	sc.G.Eventually(func(g Gomega) {
		s := sc.GetStage(g, name)
		m := meta.FindStatusCondition(s.Status.Conditions, stagecoachv1.ConditionMediated)
		g.Expect(m).NotTo(BeNil())
		g.Expect(m.Status).To(Equal(metav1.ConditionTrue), m.Message)
		g.Expect(m.Reason).To(Equal(stagecoachv1.ReasonMediatedByVersion), m.Message)
	}, localstack.WaitTimeout, time.Second/5).Should(Succeed())

	// expectRunning: Argo CD runs chart version at digest (Stagecoach's annotation), Synced and Healthy.
	expectRunning := func(g Gomega, version, digest, build string) {
		app := sc.Get(g, argoAPI, "Application", name)
		g.Expect(localstack.Field(app, "spec", "source", "targetRevision")).To(Equal(version))
		g.Expect(app.GetAnnotations()).To(HaveKeyWithValue("stagecoach.dev/digest", digest))
		g.Expect(localstack.Field(app, "status", "sync", "revision")).To(Equal(version))
		g.Expect(localstack.Field(app, "status", "sync", "status")).To(Equal("Synced"))
		g.Expect(localstack.Field(app, "status", "health", "status")).To(Equal("Healthy"))
		data := sc.ConfigMapData(g, target, "checkout")
		g.Expect(data).To(HaveKeyWithValue("version", version))
		g.Expect(data).To(HaveKeyWithValue("build", build))
	}

	if !t.Run("1.0.0 is Verified by chart version", func(t *testing.T) {
		sc := sc.For(t)
		promoted := time.Now()
		sc.Promote(name, "1.0.0", v1)
		tl := sc.WaitVerified(name, v1, promoted)
		report("%-8s promote 1.0.0 → Verified %s: %s", "chart", tl.Verified.Sub(promoted).Round(10*time.Millisecond), tl)
		sc.G.Eventually(func(g Gomega) { expectRunning(g, "1.0.0", v1, "first") }, 30*time.Second, time.Second/5).Should(Succeed())
	}) {
		return
	}

	t.Run("2.0.0 pushed again before the write is refused (TagMismatch)", func(t *testing.T) {
		sc := sc.For(t)
		g := sc.G
		v2 := push("2.0.0", "first")
		repushed := push("2.0.0", "second")
		g.Expect(repushed).NotTo(Equal(v2))
		promoted := time.Now()
		p := sc.Promote(name, "2.0.0", v2)
		var refused time.Time
		g.Eventually(func(g Gomega) {
			got := &stagecoachv1.Promotion{}
			g.Expect(sc.Client.Get(sc.Ctx(), client.ObjectKeyFromObject(p), got)).To(Succeed())
			g.Expect(got.Status.Phase).To(Equal(stagecoachv1.PhaseFailed), got.Status.Message)
			g.Expect(got.Status.Message).To(ContainSubstring(`not applied (TagMismatch): tag "2.0.0" of ` + sc.Registry.Repository(charts+"/"+chart) +
				" names " + repushed + ", not " + v2))
			g.Expect(got.Status.AppliedAt).To(BeNil())
			refused = time.Now()
		}, localstack.WaitTimeout, 100*time.Millisecond).Should(Succeed())
		s := sc.GetStage(g, name)
		g.Expect(s.Status.Current.Digest).To(Equal(v1))
		g.Expect(s.Status.Hold).NotTo(BeNil())
		g.Expect(s.Status.Hold.Reason).To(Equal(stagecoachv1.ReasonTagMismatch))
		g.Consistently(func(g Gomega) { expectRunning(g, "1.0.0", v1, "first") }, 3*time.Second, time.Second/5).Should(Succeed())
		report("%-8s 2.0.0 pushed again before the write: refused %s after it was promoted (%s), nothing written, 1.0.0 still runs",
			"chart", refused.Sub(promoted).Round(10*time.Millisecond), stagecoachv1.ReasonTagMismatch)
	})
}
