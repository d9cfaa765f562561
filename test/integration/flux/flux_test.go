package flux

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/source/git/gittest"
)

func kustomizationSpec() map[string]any {
	return map[string]any{"interval": "10m", "prune": true, "path": "./app",
		"sourceRef": map[string]any{"kind": "OCIRepository", "name": "app"}}
}

func substituted(n int) func(u *unstructured.Unstructured) bool {
	return func(u *unstructured.Unstructured) bool {
		d, _, _ := unstructured.NestedString(u.Object, "spec", "postBuild", "substitute", "STAGECOACH_DIGEST")
		return d == digest(n)
	}
}

func appliedRevision(u *unstructured.Unstructured) {
	_ = unstructured.SetNestedField(u.Object, "latest@"+digest(100), "status", "lastAppliedRevision")
}

// Ready=True left over from the previous generation is not landed: only Ready for the generation
// that carries the digest is.
func TestKustomizationStaleReadyIsNotLanded(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	k := createFlux(t, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", ns, "dev", kustomizationSpec())
	k.succeeded("ReconciliationSucceeded", appliedRevision) // Ready at generation 1
	newStage(t, ns, "dev", "Kustomization", nil)

	promote(t, ns, "v1", "dev", 1)
	k.waitFor(substituted(1))
	g.Expect(k.get().GetGeneration()).To(Equal(int64(2)))
	notLanded := func(g Gomega) {
		p := promotion(g, t, ns, "v1")
		g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhaseRunning))
		g.Expect(p.Status.LandedAt).To(BeNil())
		g.Expect(p.Status.Message).To(ContainSubstring(fmt.Sprintf("waiting for Kustomization '%s/dev' to be reconciled at generation 2", ns)))
	}
	g.Eventually(notLanded, timeout, interval).Should(Succeed())
	g.Consistently(notLanded, time.Second, interval).Should(Succeed())

	k.progressing()
	g.Eventually(func(g Gomega) {
		g.Expect(promotion(g, t, ns, "v1").Status.Message).To(ContainSubstring("is not Ready (Progressing)"))
	}, timeout, interval).Should(Succeed())
	k.succeeded("ReconciliationSucceeded", appliedRevision)
	p := eventuallyPhase(t, ns, "v1", stagecoachv1.PhaseSucceeded)
	g.Expect(p.Status.Message).To(ContainSubstring("is Ready at generation 2"))
	u := k.get()
	version, _, _ := unstructured.NestedString(u.Object, "spec", "postBuild", "substitute", "STAGECOACH_VERSION")
	g.Expect(version).To(Equal("v1.0.0"))
}

// A Kustomization whose health checks fail fails the promote, and the Stage rolls back.
func TestKustomizationHealthCheckFailedRollsBack(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	k := createFlux(t, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", ns, "staging", kustomizationSpec())
	newStage(t, ns, "staging", "Kustomization", nil)

	promote(t, ns, "v1", "staging", 1)
	k.waitFor(substituted(1))
	k.succeeded("ReconciliationSucceeded", appliedRevision)
	eventuallyPhase(t, ns, "v1", stagecoachv1.PhaseSucceeded)

	promote(t, ns, "v3", "staging", 3)
	k.waitFor(substituted(3))
	k.progressing()
	k.failed("HealthCheckFailed", "timeout waiting for: [Deployment/staging/payments status: 'InProgress']")
	p := eventuallyPhase(t, ns, "v3", stagecoachv1.PhaseFailed)
	g.Expect(p.Status.Message).To(ContainSubstring("failed with HealthCheckFailed applying " + digest(3)))

	// The rollback writes v1 back.
	eventuallyPhase(t, ns, "v3-rollback", stagecoachv1.PhaseRunning)
	k.waitFor(substituted(1))
	k.succeeded("ReconciliationSucceeded", appliedRevision)
	eventuallyPhase(t, ns, "v3-rollback", stagecoachv1.PhaseSucceeded)
	eventuallyPhase(t, ns, "v3", stagecoachv1.PhaseRolledBack)

	// notification-controller heard each step, about the Kustomization, so Alerts on it route them.
	g.Eventually(func(g Gomega) {
		var reasons []string
		for _, e := range notificationController.about("Kustomization", ns, "staging") {
			reasons = append(reasons, e.Severity+"/"+e.Reason)
		}
		g.Expect(reasons).To(ContainElements("info/Promoted", "info/Landed", "info/Verified", "error/PromotionFailed", "info/RolledBack"))
	}, timeout, interval).Should(Succeed())
	for _, e := range notificationController.about("Kustomization", ns, "staging") {
		if e.Reason != "PromotionFailed" {
			continue
		}
		g.Expect(e.InvolvedObject.APIVersion).To(Equal("kustomize.toolkit.fluxcd.io/v1"))
		g.Expect(e.ReportingController).To(Equal("stagecoach-controller"))
		g.Expect(e.Message).To(ContainSubstring("failed in staging"))
		g.Expect(e.Metadata).To(Equal(map[string]string{
			"kustomize.toolkit.fluxcd.io/revision":    "v3.0.0@" + digest(3),
			"kustomize.toolkit.fluxcd.io/stage":       ns + "/staging",
			"kustomize.toolkit.fluxcd.io/environment": "staging",
			"kustomize.toolkit.fluxcd.io/promotion":   "v3",
		}))
	}
}

// An OCIRepository pinned by digest lands when its stored artifact is that digest.
func TestOCIRepositoryPromotes(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	o := createFlux(t, "source.toolkit.fluxcd.io/v1", "OCIRepository", ns, "dev",
		map[string]any{"interval": "1m", "url": "oci://registry.example/deploy/payments", "ref": map[string]any{"tag": "latest"}})
	newStage(t, ns, "dev", "OCIRepository", nil)

	promote(t, ns, "v2", "dev", 2)
	o.waitFor(func(u *unstructured.Unstructured) bool {
		d, _, _ := unstructured.NestedString(u.Object, "spec", "ref", "digest")
		return d == digest(2)
	})
	// Ready at the new generation, but the artifact is still the old one: not landed.
	o.succeeded("Succeeded", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedMap(u.Object, map[string]any{"revision": "latest@" + digest(1), "digest": digest(1),
			"path": "x", "url": "http://x", "lastUpdateTime": time.Now().UTC().Format(time.RFC3339)}, "status", "artifact")
	})
	g.Eventually(func(g Gomega) {
		g.Expect(promotion(g, t, ns, "v2").Status.Message).To(ContainSubstring("stores artifact \"latest@" + digest(1) + "\""))
	}, timeout, interval).Should(Succeed())
	o.succeeded("Succeeded", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedMap(u.Object, map[string]any{"revision": "latest@" + digest(2), "digest": digest(2),
			"path": "x", "url": "http://x", "lastUpdateTime": time.Now().UTC().Format(time.RFC3339)}, "status", "artifact")
	})
	eventuallyPhase(t, ns, "v2", stagecoachv1.PhaseSucceeded)
}

// A HelmRelease carries the digest in a values key; landed when the newest release is deployed
// for the generation.
func TestHelmReleaseValuesKey(t *testing.T) {
	ns := newNamespace(t)
	h := createFlux(t, "helm.toolkit.fluxcd.io/v2", "HelmRelease", ns, "prod", map[string]any{"interval": "5m",
		"chart": map[string]any{"spec": map[string]any{"chart": "payments", "version": "1.0.0",
			"sourceRef": map[string]any{"kind": "HelmRepository", "name": "charts"}}}})
	newStage(t, ns, "prod", "HelmRelease", func(s *stagecoachv1.Stage) { s.Spec.ApplyRef.ValuesKey = "image.digest" })

	promote(t, ns, "v4", "prod", 4)
	h.waitFor(func(u *unstructured.Unstructured) bool {
		d, _, _ := unstructured.NestedString(u.Object, "spec", "values", "image", "digest")
		return d == digest(4)
	})
	h.progressing()
	h.succeeded("UpgradeSucceeded", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "prod", "namespace": ns, "version": int64(2),
			"status": "deployed", "chartName": "payments", "chartVersion": "1.0.0", "appVersion": "1.0.0",
			"configDigest": "sha256:abc", "digest": "sha256:def",
			"firstDeployed": time.Now().UTC().Format(time.RFC3339), "lastDeployed": time.Now().UTC().Format(time.RFC3339)}}, "status", "history")
	})
	eventuallyPhase(t, ns, "v4", stagecoachv1.PhaseSucceeded)
}

// A suspended Flux object applies nothing: the Stage is not Ready until it is resumed.
func TestSuspendedApplierIsNotReady(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	spec := kustomizationSpec()
	spec["suspend"] = true
	createFlux(t, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", ns, "dev", spec)
	newStage(t, ns, "dev", "Kustomization", nil)
	eventuallyReady(t, ns, "dev", metav1.ConditionFalse, stagecoachv1.ReasonApplierSuspended,
		fmt.Sprintf("Kustomization '%s/dev' is suspended, so it applies nothing: set spec.suspend to false", ns))

	k := &unstructured.Unstructured{}
	k.SetAPIVersion("kustomize.toolkit.fluxcd.io/v1")
	k.SetKind("Kustomization")
	g.Expect(env.Client.Get(t.Context(), clientKey(ns, "dev"), k)).To(Succeed())
	g.Expect(unstructured.SetNestedField(k.Object, false, "spec", "suspend")).To(Succeed())
	g.Expect(env.Client.Update(t.Context(), k)).To(Succeed())
	eventuallyReady(t, ns, "dev", metav1.ConditionTrue, stagecoachv1.ReasonApplierReady, "")
}

// dev is applied by an OCIRepository (pinned to the digest) and the Kustomization that applies its
// artifact: landed needs both, the artifact stored and the Kustomization Ready with it applied.
func TestOCIRepositoryThroughKustomization(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	o := createFlux(t, "source.toolkit.fluxcd.io/v1", "OCIRepository", ns, "dev",
		map[string]any{"interval": "1m", "url": "oci://registry.example/deploy/payments", "ref": map[string]any{"tag": "latest"}})
	newStage(t, ns, "dev", "OCIRepository", func(s *stagecoachv1.Stage) { s.Spec.ApplyRef.Kustomization = "dev-apply" })
	eventuallyReady(t, ns, "dev", metav1.ConditionFalse, stagecoachv1.ReasonApplierUnreadable,
		fmt.Sprintf("Kustomization '%s/dev-apply' (spec.applyRef.kustomization) is missing", ns))

	spec := kustomizationSpec()
	spec["sourceRef"] = map[string]any{"kind": "OCIRepository", "name": "dev"}
	k := createFlux(t, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", ns, "dev-apply", spec)
	// createFlux labels it for a Stage named like the object; relabel it for the Stage "dev".
	eventuallyReady(t, ns, "dev", metav1.ConditionFalse, stagecoachv1.ReasonApplierUnlabelled, "stagecoach.dev/stage=dev-apply, not dev")
	u := k.get()
	u.SetLabels(map[string]string{stagecoachv1.StageLabel: "dev"})
	g.Expect(env.Client.Update(t.Context(), u)).To(Succeed())
	eventuallyReady(t, ns, "dev", metav1.ConditionTrue, stagecoachv1.ReasonApplierReady, "")
	k.succeeded("ReconciliationSucceeded", func(u *unstructured.Unstructured) { // running v4
		_ = unstructured.SetNestedField(u.Object, "latest@"+digest(4), "status", "lastAppliedRevision")
	})

	promote(t, ns, "v5", "dev", 5)
	o.waitFor(func(u *unstructured.Unstructured) bool {
		d, _, _ := unstructured.NestedString(u.Object, "spec", "ref", "digest")
		return d == digest(5)
	})
	artifact := func(n int) func(u *unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedMap(u.Object, map[string]any{"revision": "latest@" + digest(n), "digest": digest(n),
				"path": "x", "url": "http://x", "lastUpdateTime": time.Now().UTC().Format(time.RFC3339)}, "status", "artifact")
		}
	}
	o.succeeded("Succeeded", artifact(5))
	// The artifact is stored, but the Kustomization has not applied it yet.
	g.Eventually(func(g Gomega) {
		g.Expect(promotion(g, t, ns, "v5").Status.Message).To(ContainSubstring("not " + digest(5) + " yet"))
	}, timeout, interval).Should(Succeed())
	g.Expect(promotion(g, t, ns, "v5").Status.LandedAt).To(BeNil())
	k.succeeded("ReconciliationSucceeded", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "latest@"+digest(5), "status", "lastAppliedRevision")
	})
	p := eventuallyPhase(t, ns, "v5", stagecoachv1.PhaseSucceeded)
	g.Expect(p.Status.Message).To(ContainSubstring("applied latest@" + digest(5)))

	// v6's artifact fails the Kustomization's health checks, and the Stage rolls back to v5. The
	// Kustomization's generation does not change with the artifact, so its Ready=False about v6
	// is still there when the rollback starts: it must not fail the rollback.
	promote(t, ns, "v6", "dev", 6)
	o.waitFor(func(u *unstructured.Unstructured) bool {
		d, _, _ := unstructured.NestedString(u.Object, "spec", "ref", "digest")
		return d == digest(6)
	})
	o.succeeded("Succeeded", artifact(6))
	k.failedAttempt("HealthCheckFailed", "timeout waiting for: [Deployment/dev/payments status: 'InProgress']", "latest@"+digest(6))
	p = eventuallyPhase(t, ns, "v6", stagecoachv1.PhaseFailed)
	g.Expect(p.Status.Message).To(ContainSubstring("failed with HealthCheckFailed applying " + digest(6)))
	eventuallyPhase(t, ns, "v6-rollback", stagecoachv1.PhaseRunning)
	o.waitFor(func(u *unstructured.Unstructured) bool {
		d, _, _ := unstructured.NestedString(u.Object, "spec", "ref", "digest")
		return d == digest(5)
	})
	o.succeeded("Succeeded", artifact(5))
	stillTrying := func(g Gomega) {
		r := promotion(g, t, ns, "v6-rollback")
		g.Expect(r.Status.Phase).To(Equal(stagecoachv1.PhaseRunning), r.Status.Message)
		g.Expect(r.Status.Message).To(ContainSubstring("has not tried " + digest(5) + " yet"))
	}
	g.Eventually(stillTrying, timeout, interval).Should(Succeed())
	g.Consistently(stillTrying, time.Second, interval).Should(Succeed())
	k.succeeded("ReconciliationSucceeded", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "latest@"+digest(5), "status", "lastAppliedRevision")
		_ = unstructured.SetNestedField(u.Object, "latest@"+digest(5), "status", "lastAttemptedRevision")
	})
	eventuallyPhase(t, ns, "v6-rollback", stagecoachv1.PhaseSucceeded)
	eventuallyPhase(t, ns, "v6", stagecoachv1.PhaseRolledBack)
}

// commit is the SHA of test commit n.
func commit(n int) string { return fmt.Sprintf("%040x", n) }

// A GitRepository is promoted to a Git commit (spec.ref.commit, its branch kept); landed needs the
// artifact at that commit (as source-controller writes it, <branch>@sha1:<SHA>) and, through
// applyRef.kustomization, the Kustomization Ready with that revision applied.
func TestGitRepositoryPromotesACommit(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	// A real Git server on 127.0.0.1: the source is read (an unreachable one turns the Stage not Ready).
	srv := gittest.NewServer(t, gittest.Options{})
	srv.Commit("one", map[string]string{"app/a.yaml": "a: 1\n"}, nil)
	o := createFlux(t, "source.toolkit.fluxcd.io/v1", "GitRepository", ns, "dev",
		map[string]any{"interval": "1m", "url": srv.URL, "ref": map[string]any{"branch": "main"}})
	spec := kustomizationSpec()
	spec["sourceRef"] = map[string]any{"kind": "GitRepository", "name": "dev"}
	k := createFlux(t, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", ns, "dev-apply", spec)
	u := k.get()
	u.SetLabels(map[string]string{stagecoachv1.StageLabel: "dev"})
	g.Expect(env.Client.Update(t.Context(), u)).To(Succeed())
	newStage(t, ns, "dev", "GitRepository", func(s *stagecoachv1.Stage) {
		s.Spec.ApplyRef.Kustomization = "dev-apply"
		s.Spec.Source = stagecoachv1.StageSource{Git: &stagecoachv1.GitSource{URL: srv.URL, Insecure: true, Branch: "main",
			Interval: &metav1.Duration{Duration: time.Hour}}}
	})
	eventuallyReady(t, ns, "dev", metav1.ConditionTrue, stagecoachv1.ReasonApplierReady, "")

	g.Expect(env.Client.Create(t.Context(), &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c2"},
		Spec: stagecoachv1.PromotionSpec{Stage: "dev", Version: &stagecoachv1.VersionReference{Digest: "sha1:" + commit(2), Tag: commit(2)[:7]}}})).To(Succeed())
	o.waitFor(func(u *unstructured.Unstructured) bool {
		c, _, _ := unstructured.NestedString(u.Object, "spec", "ref", "commit")
		b, _, _ := unstructured.NestedString(u.Object, "spec", "ref", "branch")
		return c == commit(2) && b == "main"
	})
	artifact := func(n int) func(u *unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedMap(u.Object, map[string]any{"revision": "main@sha1:" + commit(n), "digest": digest(n),
				"path": "x", "url": "http://x", "lastUpdateTime": time.Now().UTC().Format(time.RFC3339)}, "status", "artifact")
		}
	}
	// The Kustomization applied the branch's commit 1, as kustomize-controller had before.
	k.succeeded("ReconciliationSucceeded", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "main@sha1:"+commit(1), "status", "lastAppliedRevision")
	})
	o.succeeded("Succeeded", artifact(1))
	g.Eventually(func(g Gomega) {
		g.Expect(promotion(g, t, ns, "c2").Status.Message).To(ContainSubstring(`stores artifact "main@sha1:` + commit(1) + `", not sha1:` + commit(2) + " yet"))
	}, timeout, interval).Should(Succeed())
	// The artifact is at commit 2; the Kustomization has not applied it yet.
	o.succeeded("Succeeded", artifact(2))
	g.Eventually(func(g Gomega) {
		g.Expect(promotion(g, t, ns, "c2").Status.Message).To(ContainSubstring(`applied "main@sha1:` + commit(1) + `", not sha1:` + commit(2) + " yet"))
	}, timeout, interval).Should(Succeed())
	g.Expect(promotion(g, t, ns, "c2").Status.LandedAt).To(BeNil())
	k.succeeded("ReconciliationSucceeded", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "main@sha1:"+commit(2), "status", "lastAppliedRevision")
	})
	p := eventuallyPhase(t, ns, "c2", stagecoachv1.PhaseSucceeded)
	g.Expect(p.Status.Message).To(ContainSubstring("applied main@sha1:" + commit(2)))

	// An OCI digest is no version of a GitRepository: the write is refused, nothing changes.
	promote(t, ns, "oci", "dev", 3)
	g.Eventually(func(g Gomega) {
		p := promotion(g, t, ns, "oci")
		g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhaseFailed), p.Status.Message)
		g.Expect(p.Status.Message).To(ContainSubstring("not applied: GitRepository 'dev' takes Git commits, and " + digest(3) + " is not one"))
	}, timeout, interval).Should(Succeed())
	c, _, _ := unstructured.NestedString(o.get().Object, "spec", "ref", "commit")
	g.Expect(c).To(Equal(commit(2)))
}

// A Stage whose source offers another kind of version than its applier takes is never Ready:
// a GitRepository for a registry's digests, an OCIRepository for a Git source's commits.
func TestVersionKindMismatchIsNotReady(t *testing.T) {
	for _, tc := range []struct {
		name, kind string
		source     stagecoachv1.StageSource
		wantMsg    string
	}{
		{name: "a GitRepository for OCI digests", kind: "GitRepository",
			source:  stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: "registry.example/deploy/payments"}},
			wantMsg: "takes OCI digests from its source, and GitRepository"},
		{name: "an OCIRepository for Git commits", kind: "OCIRepository",
			source:  stagecoachv1.StageSource{Git: &stagecoachv1.GitSource{URL: "https://git.example/org/config.git", Branch: "main"}},
			wantMsg: "takes Git commits from its source, and OCIRepository"},
		{name: "an OCIRepository for another cluster's Stage of commits", kind: "OCIRepository",
			source: stagecoachv1.StageSource{UpstreamRecords: &stagecoachv1.UpstreamRecordsSource{Repository: "registry.example/streams",
				Stream: "cluster-a/config/staging", GitRepository: &stagecoachv1.GitRepositoryReference{URL: "https://git.example/org/config.git"}}},
			wantMsg: "takes Git commits from its source, and OCIRepository"},
		{name: "a GitRepository for another cluster's Stage of digests", kind: "GitRepository",
			source: stagecoachv1.StageSource{UpstreamRecords: &stagecoachv1.UpstreamRecordsSource{Repository: "registry.example/streams",
				Stream: "cluster-a/payments/staging", ApplyRepository: "registry.example/deploy/payments"}},
			wantMsg: "takes OCI digests from its source, and GitRepository"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			spec := map[string]any{"interval": "1m", "url": "oci://registry.example/deploy/payments", "ref": map[string]any{"tag": "latest"}}
			if tc.kind == "GitRepository" {
				spec = map[string]any{"interval": "1m", "url": "https://git.example/org/config.git", "ref": map[string]any{"branch": "main"}}
			}
			createFlux(t, "source.toolkit.fluxcd.io/v1", tc.kind, ns, "dev", spec)
			newStage(t, ns, "dev", tc.kind, func(s *stagecoachv1.Stage) { s.Spec.Source = tc.source })
			eventuallyReady(t, ns, "dev", metav1.ConditionFalse, stagecoachv1.ReasonVersionKindMismatch, tc.wantMsg)
		})
	}
}

// A Stage following a Flux GitRepository (source.git.sourceRef) takes its url, credentials and
// branch, and offers commits only up to the one source-controller fetched into the artifact: a
// newer commit on the branch waits until the artifact has it.
func TestGitSourceFollowsAGitRepositoryArtifact(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	srv := gittest.NewServer(t, gittest.Options{Username: "flux", Password: "s3cret"})
	c1 := srv.Commit("one", map[string]string{"app/a.yaml": "v: 1"}, nil)
	c2 := srv.Commit("two", map[string]string{"app/a.yaml": "v: 2"}, nil)
	g.Expect(env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "config-auth"},
		Data: map[string][]byte{"username": []byte("flux"), "password": []byte("s3cret")}})).To(Succeed())
	// The repository the platform team set up for Flux; its artifact is at c1.
	config := createFlux(t, "source.toolkit.fluxcd.io/v1", "GitRepository", ns, "config",
		map[string]any{"interval": "1m", "url": srv.URL, "ref": map[string]any{"branch": "main"}, "secretRef": map[string]any{"name": "config-auth"}})
	artifact := func(commit string) func(u *unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedMap(u.Object, map[string]any{"revision": "main@sha1:" + commit, "digest": digest(1),
				"path": "x", "url": "http://x", "lastUpdateTime": time.Now().UTC().Format(time.RFC3339)}, "status", "artifact")
		}
	}
	config.succeeded("Succeeded", artifact(c1))
	// dev applies through its own GitRepository, and follows the platform's.
	createFlux(t, "source.toolkit.fluxcd.io/v1", "GitRepository", ns, "dev",
		map[string]any{"interval": "1m", "url": srv.URL, "ref": map[string]any{"branch": "main"}, "secretRef": map[string]any{"name": "config-auth"}})
	newStage(t, ns, "dev", "GitRepository", func(s *stagecoachv1.Stage) {
		s.Spec.Source = stagecoachv1.StageSource{Git: &stagecoachv1.GitSource{SourceRef: &stagecoachv1.LocalObjectReference{Name: "config"},
			Interval: &metav1.Duration{Duration: time.Hour}}}
	})
	g.Eventually(func(g Gomega) {
		s := &stagecoachv1.Stage{}
		g.Expect(env.Client.Get(t.Context(), clientKey(ns, "dev"), s)).To(Succeed())
		g.Expect(s.Status.Candidate).NotTo(BeNil())
		g.Expect(s.Status.Candidate.Digest).To(Equal("sha1:"+c1), "the candidate is the artifact's commit, not the branch's head")
	}, timeout, interval).Should(Succeed())

	// source-controller fetches c2: after a look, it is the candidate.
	config.succeeded("Succeeded", artifact(c2))
	s := &stagecoachv1.Stage{}
	g.Expect(env.Client.Get(t.Context(), clientKey(ns, "dev"), s)).To(Succeed())
	s.Annotations = map[string]string{stagecoachv1.ReconcileRequestAnnotation: time.Now().Format(time.RFC3339Nano)}
	g.Expect(env.Client.Update(t.Context(), s)).To(Succeed())
	g.Eventually(func(g Gomega) {
		s := &stagecoachv1.Stage{}
		g.Expect(env.Client.Get(t.Context(), clientKey(ns, "dev"), s)).To(Succeed())
		g.Expect(s.Status.Candidate).NotTo(BeNil())
		g.Expect(s.Status.Candidate.Digest).To(Equal("sha1:" + c2))
	}, timeout, interval).Should(Succeed())

	// A GitRepository that is not there blocks the source, naming it.
	g.Expect(env.Client.Get(t.Context(), clientKey(ns, "dev"), s)).To(Succeed())
	s.Spec.Source.Git.SourceRef.Name = "missing"
	g.Expect(env.Client.Update(t.Context(), s)).To(Succeed())
	g.Eventually(func(g Gomega) {
		s := &stagecoachv1.Stage{}
		g.Expect(env.Client.Get(t.Context(), clientKey(ns, "dev"), s)).To(Succeed())
		g.Expect(s.Status.Candidate).NotTo(BeNil())
		g.Expect(s.Status.Candidate.BlockedBy).To(ContainElement(And(HaveField("Reason", stagecoachv1.ReasonSourceInvalid),
			HaveField("Message", ContainSubstring("GitRepository '"+ns+"/missing' (spec.source.git.sourceRef) cannot be read")))))
	}, timeout, interval).Should(Succeed())
}

// Without applyRef.kustomization, a commit has landed on a GitRepository once every Kustomization
// labelled for the Stage that applies its artifact has applied it; one labelled for no Stage is
// no proof either way.
func TestGitRepositoryLandsThroughEveryKustomization(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	// A real Git server on 127.0.0.1: the source is read (an unreachable one turns the Stage not Ready).
	srv := gittest.NewServer(t, gittest.Options{})
	srv.Commit("one", map[string]string{"app/a.yaml": "a: 1\n"}, nil)
	o := createFlux(t, "source.toolkit.fluxcd.io/v1", "GitRepository", ns, "dev",
		map[string]any{"interval": "1m", "url": srv.URL, "ref": map[string]any{"branch": "main"}})
	applying := func(name, stage string) *fluxObject {
		spec := kustomizationSpec()
		spec["sourceRef"] = map[string]any{"kind": "GitRepository", "name": "dev"}
		k := createFlux(t, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", ns, name, spec)
		u := k.get()
		u.SetLabels(map[string]string{stagecoachv1.StageLabel: stage})
		if stage == "" {
			u.SetLabels(nil)
		}
		g.Expect(env.Client.Update(t.Context(), u)).To(Succeed())
		return k
	}
	apps, infra := applying("dev-apps", "dev"), applying("dev-infra", "dev")
	applying("someone-elses", "")
	newStage(t, ns, "dev", "GitRepository", func(s *stagecoachv1.Stage) {
		s.Spec.Source = stagecoachv1.StageSource{Git: &stagecoachv1.GitSource{URL: srv.URL, Insecure: true, Branch: "main",
			Interval: &metav1.Duration{Duration: time.Hour}}}
	})
	eventuallyReady(t, ns, "dev", metav1.ConditionTrue, stagecoachv1.ReasonApplierReady, "")
	g.Expect(env.Client.Create(t.Context(), &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c2"},
		Spec: stagecoachv1.PromotionSpec{Stage: "dev", Version: &stagecoachv1.VersionReference{Digest: "sha1:" + commit(2), Tag: commit(2)[:7]}}})).To(Succeed())
	o.waitFor(func(u *unstructured.Unstructured) bool {
		c, _, _ := unstructured.NestedString(u.Object, "spec", "ref", "commit")
		return c == commit(2)
	})
	o.succeeded("Succeeded", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedMap(u.Object, map[string]any{"revision": "main@sha1:" + commit(2), "digest": digest(2),
			"path": "x", "url": "http://x", "lastUpdateTime": time.Now().UTC().Format(time.RFC3339)}, "status", "artifact")
	})
	applied := func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "main@sha1:"+commit(2), "status", "lastAppliedRevision")
	}
	apps.succeeded("ReconciliationSucceeded", applied)
	g.Eventually(func(g Gomega) {
		g.Expect(promotion(g, t, ns, "c2").Status.Message).To(ContainSubstring("waiting for Kustomization '" + ns + "/dev-infra' to be reconciled"))
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(promotion(g, t, ns, "c2").Status.LandedAt).To(BeNil())
	}, time.Second, interval).Should(Succeed())
	infra.succeeded("ReconciliationSucceeded", applied)
	p := eventuallyPhase(t, ns, "c2", stagecoachv1.PhaseSucceeded)
	g.Expect(p.Status.Message).To(And(ContainSubstring("dev-apps"), ContainSubstring("dev-infra")))
}
