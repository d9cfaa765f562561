package e2e

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
	"github.com/stagecoach-dev/stagecoach/test/e2e/pipeline"
)

// One service through three environments on the real engines (see package pipeline): dev on
// Flux OCIRepository + Kustomization from the registry (signed releases only), staging on a Flux
// Kustomization following dev, prod on an Argo CD Application following staging after one
// approval; and a second service in prod, whose Argo CD Application renders a Git source through
// the Stagecoach config management plugin (in Argo CD's real cmp-server). The releases, in order,
// each a subtest that needs the previous ones:
//
//   - v1, signed: reaches dev, staging and, after one Approval, prod; all Verified;
//   - the second service's signed v1 image: after one Approval the plugin, having checked the
//     signature itself, pins the PodTemplate's image to the digest; Argo CD syncs it; Verified;
//   - v2, unsigned (of both services): skipped for its signature (status.candidate.skipped); no
//     Promotion of it, anywhere;
//   - v3, signed but refused by staging's API server: Verified in dev, fails in staging, rolls
//     back to v1, automation holds; v3 never reaches prod;
//   - v4, signed and good: Verified in dev, but staging holds until a person promotes it; that
//     person's Approval does not count in prod, another person's does;
//   - v5, signed, then v6, unsigned, both in the registry before dev looks: dev takes v5 (the
//     newest eligible) and lists v6 as skipped; v5 reaches prod after one approval.
func TestThreeStagePipeline(t *testing.T) {
	sc := env.Scenario(t)
	ctx := sc.Ctx()
	p, err := pipeline.Setup(ctx, sc.Stack, sc.NS, pipeline.Options{})
	sc.G.Expect(err).NotTo(HaveOccurred())
	watchPipeline(t, p)

	admin := sc.Client
	var v1, v2, v3, v6, pluginV2 string

	if !t.Run("signed v1 reaches prod after one approval", func(t *testing.T) {
		sc := sc.For(t)
		g := sc.G
		pushed := time.Now()
		var err error
		v1, err = p.PushSigned(ctx, "v1.0.0", p.Manifests("v1.0.0"))
		g.Expect(err).NotTo(HaveOccurred())

		dev := sc.WaitVerified(p.Stages[pipeline.Dev], v1, pushed)
		staging := sc.WaitVerified(p.Stages[pipeline.Staging], v1, dev.Verified)

		// prod waits for a person: the candidate is v1, held by the approvals gate, and
		// automation has created no Promotion for it.
		waitBlocked(sc, p, pipeline.Prod, v1, "approvals")
		promotions, err := p.Promotions(ctx, pipeline.Prod)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(promotions).To(BeEmpty(), "prod promoted before anyone approved")

		// Every Promotion so far was automatic, so the admin (who promoted nothing) may approve.
		approved := time.Now()
		_, err = p.Approve(ctx, admin, localstack.AdminUser, pipeline.Prod, v1, "e2e: release v1")
		g.Expect(err).NotTo(HaveOccurred())
		prod := sc.WaitVerified(p.Stages[pipeline.Prod], v1, approved)

		expectRunning(sc, p, map[string]string{pipeline.Dev: "v1.0.0", pipeline.Staging: "v1.0.0", pipeline.Prod: "v1.0.0"})
		// What the engines report, not only what Stagecoach concluded.
		oci := sc.Get(g, "source.toolkit.fluxcd.io/v1", "OCIRepository", p.Stages[pipeline.Dev])
		g.Expect(localstack.Field(oci, "spec", "ref", "digest")).To(Equal(v1))
		kus := sc.Get(g, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", p.Stages[pipeline.Staging])
		g.Expect(localstack.Field(kus, "spec", "postBuild", "substitute", "STAGECOACH_DIGEST")).To(Equal(v1))
		g.Expect(sc.ConfigMapData(g, p.Targets[pipeline.Staging], p.Service)).To(HaveKeyWithValue("digest", v1))
		app := sc.Get(g, "argoproj.io/v1alpha1", "Application", p.Stages[pipeline.Prod])
		g.Expect(localstack.Field(app, "status", "sync", "revision")).To(Equal(v1))
		g.Expect(localstack.Field(app, "status", "health", "status")).To(Equal("Healthy"))

		report("%s", dev)
		report("%s", staging)
		report("%s", prod)
		humanWait := approved.Sub(staging.Verified)
		total := prod.Verified.Sub(pushed) - humanWait
		var stagecoach, engines, grace time.Duration
		for _, tl := range []localstack.Timeline{dev, staging, prod} {
			stagecoach += tl.Applied.Sub(tl.Requested)
			engines += tl.Landed.Sub(tl.Applied)
			grace += tl.Verified.Sub(tl.Landed)
		}
		pct := func(d time.Duration) float64 { return 100 * d.Seconds() / total.Seconds() }
		r := func(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }
		report("%-8s lead time %7s  (push → prod Verified, less %s waiting for the approval): Stagecoach %s (%.0f%%), engines %s (%.0f%%), grace %s (%.0f%%)",
			"3-stage", r(total), r(humanWait), r(stagecoach), pct(stagecoach), r(engines), pct(engines), r(grace), pct(grace))
	}) {
		return
	}

	if !t.Run("the second service, rendered by the plugin from Git, reaches prod after one approval", func(t *testing.T) {
		sc := sc.For(t)
		g := sc.G
		pushed := time.Now()
		image, err := p.PushPluginImage(ctx, "v1.0.0", pipeline.SignedBundle)
		g.Expect(err).NotTo(HaveOccurred())
		waitBlocked(sc, p, pipeline.PluginProd, image, "approvals")
		approved := time.Now()
		_, err = p.Approve(ctx, admin, localstack.AdminUser, pipeline.PluginProd, image, "e2e: release checkout v1")
		g.Expect(err).NotTo(HaveOccurred())
		prod := sc.WaitVerified(p.Stages[pipeline.PluginProd], image, approved)

		// Argo CD compared the live state with what the plugin rendered at the digest Stagecoach wrote.
		app := sc.Get(g, "argoproj.io/v1alpha1", "Application", p.Stages[pipeline.PluginProd])
		g.Expect(localstack.Field(app, "status", "health", "status")).To(Equal("Healthy"))
		g.Expect(localstack.Field(app, "status", "sync", "status")).To(Equal("Synced"))
		env, _, _ := unstructured.NestedSlice(app.Object, "status", "sync", "comparedTo", "source", "plugin", "env")
		g.Expect(env).To(ContainElement(map[string]any{"name": "STAGECOACH_DIGEST", "value": image}))
		// What runs: the plugin pinned the declared image and stamped the Stage and version.
		tmpl := &corev1.PodTemplate{}
		g.Expect(sc.Client.Get(ctx, client.ObjectKey{Namespace: p.Targets[pipeline.PluginProd], Name: p.PluginService}, tmpl)).To(Succeed())
		g.Expect(tmpl.Template.Spec.Containers).To(HaveLen(1))
		g.Expect(tmpl.Template.Spec.Containers[0].Image).To(Equal(p.PluginImage() + "@" + image))
		g.Expect(tmpl.Annotations).To(HaveKeyWithValue("stagecoach.dev/stage", p.Stages[pipeline.PluginProd]))
		g.Expect(tmpl.Annotations).To(HaveKeyWithValue("stagecoach.dev/version", "v1.0.0"))
		report("%s (Argo CD on Git through the Stagecoach plugin; pushed → approved %s)", prod, approved.Sub(pushed).Round(10*time.Millisecond))
	}) {
		return
	}

	if !t.Run("unsigned v2 is never offered", func(t *testing.T) {
		sc := sc.For(t)
		var err error
		v2, err = p.Push(ctx, "v2.0.0", p.Manifests("v2.0.0"), pipeline.Unsigned)
		sc.G.Expect(err).NotTo(HaveOccurred())
		skipped := waitSkipped(sc, p, pipeline.Dev, v2)
		sc.G.Expect(skipped.Reason).To(Equal("SignatureMissing"), skipped.Message)
		pluginV2, err = p.PushPluginImage(ctx, "v2.0.0", pipeline.Unsigned)
		sc.G.Expect(err).NotTo(HaveOccurred())
		skipped = waitSkipped(sc, p, pipeline.PluginProd, pluginV2)
		sc.G.Expect(skipped.Reason).To(Equal("SignatureMissing"), skipped.Message)
		// That no Promotion of v2 ever exists is checked at the end, once later releases passed it by.
	}) {
		return
	}

	if !t.Run("v3 fails in staging, rolls back and holds automation", func(t *testing.T) {
		sc := sc.For(t)
		g := sc.G
		denyInStaging(sc, p, "v3.0.0")
		pushed := time.Now()
		var err error
		// Signed the cosign v2 way this time: both signature formats are trusted.
		v3, err = p.Push(ctx, "v3.0.0", p.Manifests("v3.0.0"), pipeline.SignedLegacy)
		g.Expect(err).NotTo(HaveOccurred())
		dev := sc.WaitVerified(p.Stages[pipeline.Dev], v3, pushed)
		report("%s (v3)", dev)

		failed, rollback, failedSeen, rolledBackSeen := waitRolledBack(sc, p, pipeline.Staging, v3)
		g.Expect(rollback.Status.Version.Digest).To(Equal(v1))
		staging, err := p.Stage(ctx, pipeline.Staging)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(staging.Status.Current.Digest).To(Equal(v1))
		g.Expect(staging.Status.FailedDigests).To(ContainElement(v3))
		g.Expect(staging.Status.Hold).NotTo(BeNil())
		g.Expect(staging.Status.Hold.Promotion).To(Equal(failed.Name))
		g.Expect(meta.IsStatusConditionTrue(staging.Status.Conditions, stagecoachv1.ConditionVerified)).To(BeTrue())
		g.Expect(sc.ConfigMapData(g, p.Targets[pipeline.Staging], p.Service)).To(HaveKeyWithValue("version", "v1.0.0"))
		// v3 stays the candidate, held back by its failure and by the hold.
		waitBlocked(sc, p, pipeline.Staging, v3, "hold")
		waitBlocked(sc, p, pipeline.Staging, v3, "history")
		report("%-8s v3 failed %s after dev verified it (%s); rolled back to v1 and Verified %s later",
			"staging", failedSeen.Sub(dev.Verified).Round(10*time.Millisecond), staging.Status.Hold.Message,
			rolledBackSeen.Sub(failedSeen).Round(10*time.Millisecond))
	}) {
		return
	}

	if !t.Run("v4 waits for a person in staging; the promoter cannot approve it for prod", func(t *testing.T) {
		sc := sc.For(t)
		g := sc.G
		pushed := time.Now()
		v4, err := p.PushSigned(ctx, "v4.0.0", p.Manifests("v4.0.0"))
		g.Expect(err).NotTo(HaveOccurred())
		sc.WaitVerified(p.Stages[pipeline.Dev], v4, pushed)
		waitBlocked(sc, p, pipeline.Staging, v4, "hold")
		promotions, err := p.Promotions(ctx, pipeline.Staging)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(digests(promotions)).NotTo(ContainElement(v4), "staging took v4 automatically while held")

		// The admin promotes v4 by hand: that lifts the hold, and makes the admin's approval not count.
		promoted := time.Now()
		_, err = p.Promote(ctx, admin, localstack.AdminUser, pipeline.Staging, "v4.0.0", v4, "e2e: v4 fixes v3")
		g.Expect(err).NotTo(HaveOccurred())
		sc.WaitVerified(p.Stages[pipeline.Staging], v4, promoted)
		_, err = p.Approve(ctx, admin, localstack.AdminUser, pipeline.Prod, v4, "e2e: my own fix")
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func(g Gomega) {
			st, err := p.Stage(ctx, pipeline.Prod)
			g.Expect(err).NotTo(HaveOccurred())
			b, ok := pipeline.Blocked(st, v4, "approvals")
			g.Expect(ok).To(BeTrue(), "prod's candidate is not v4 held by approvals: %+v", st.Status.Candidate)
			g.Expect(b.Message).To(ContainSubstring(localstack.AdminUser + " promoted this version by hand in " + p.Namespace + "/" +
				p.Stages[pipeline.Staging] + " and cannot approve it"))
		}, localstack.WaitTimeout, 100*time.Millisecond).Should(Succeed())

		alice, err := sc.ClientAs("alice", "system:masters", "system:authenticated")
		g.Expect(err).NotTo(HaveOccurred())
		approved := time.Now()
		_, err = p.Approve(ctx, alice, "alice", pipeline.Prod, v4, "e2e: reviewed the fix")
		g.Expect(err).NotTo(HaveOccurred())
		prod := sc.WaitVerified(p.Stages[pipeline.Prod], v4, approved)
		report("%s (v4, approved by a second person)", prod)
		expectRunning(sc, p, map[string]string{pipeline.Dev: "v4.0.0", pipeline.Staging: "v4.0.0", pipeline.Prod: "v4.0.0"})
	}) {
		return
	}

	t.Run("signed v5 pushed before an unsigned v6 reaches prod", func(t *testing.T) {
		sc := sc.For(t)
		g := sc.G
		pushed := time.Now()
		v5, err := p.Publish(ctx, "v5.0.0", p.Manifests("v5.0.0"), pipeline.SignedBundle)
		g.Expect(err).NotTo(HaveOccurred())
		v6, err = p.Publish(ctx, "v6.0.0", p.Manifests("v6.0.0"), pipeline.Unsigned)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.RequestReconcile(ctx, pipeline.Dev)).To(Succeed())

		dev := sc.WaitVerified(p.Stages[pipeline.Dev], v5, pushed)
		skipped := waitSkipped(sc, p, pipeline.Dev, v6)
		g.Expect(skipped.Reason).To(Equal("SignatureMissing"), skipped.Message)
		g.Expect(skipped.Version).To(Equal("v6.0.0"))
		sc.WaitVerified(p.Stages[pipeline.Staging], v5, dev.Verified)
		waitBlocked(sc, p, pipeline.Prod, v5, "approvals")
		approved := time.Now()
		_, err = p.Approve(ctx, admin, localstack.AdminUser, pipeline.Prod, v5, "e2e: release v5")
		g.Expect(err).NotTo(HaveOccurred())
		prod := sc.WaitVerified(p.Stages[pipeline.Prod], v5, approved)
		report("%s (v5, pushed before the unsigned v6)", prod)
		expectRunning(sc, p, map[string]string{pipeline.Dev: "v5.0.0", pipeline.Staging: "v5.0.0", pipeline.Prod: "v5.0.0"})
	})

	// Across every environment: the unsigned v2 and v6 were never promoted, v3 never reached prod.
	all, err := p.Promotions(ctx, "")
	sc.G.Expect(err).NotTo(HaveOccurred())
	sc.G.Expect(digests(all)).NotTo(ContainElement(v2), "a Promotion of the unsigned v2 exists")
	if v6 != "" {
		sc.G.Expect(digests(all)).NotTo(ContainElement(v6), "a Promotion of the unsigned v6 exists")
	}
	sc.G.Expect(digests(all)).NotTo(ContainElement(pluginV2), "a Promotion of the second service's unsigned v2 exists")
	prodPromotions, err := p.Promotions(ctx, pipeline.Prod)
	sc.G.Expect(err).NotTo(HaveOccurred())
	sc.G.Expect(digests(prodPromotions)).NotTo(ContainElement(v3), "v3 reached prod")
}

// watchPipeline logs the pipeline's events (what a demo prints) while the test runs.
func watchPipeline(t *testing.T, p *pipeline.Pipeline) {
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { p.Watch(ctx, 200*time.Millisecond, func(e pipeline.Event) { t.Log(e) }) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// waitBlocked waits until env's candidate is digest, held back by gate, and returns that block.
func waitBlocked(sc *localstack.Scenario, p *pipeline.Pipeline, env, digest, gate string) stagecoachv1.GateBlock {
	sc.T.Helper()
	var block stagecoachv1.GateBlock
	sc.G.Eventually(func(g Gomega) {
		st, err := p.Stage(sc.Ctx(), env)
		g.Expect(err).NotTo(HaveOccurred())
		b, ok := pipeline.Blocked(st, digest, gate)
		g.Expect(ok).To(BeTrue(), "Stage %s: candidate %+v is not %s held by %s", st.Name, st.Status.Candidate, digest, gate)
		block = b
	}, localstack.WaitTimeout, 100*time.Millisecond).Should(Succeed())
	return block
}

// waitSkipped waits until env's Stage lists digest as a newer version it passes over, and
// returns why.
func waitSkipped(sc *localstack.Scenario, p *pipeline.Pipeline, env, digest string) stagecoachv1.SkippedVersion {
	sc.T.Helper()
	var skipped stagecoachv1.SkippedVersion
	sc.G.Eventually(func(g Gomega) {
		st, err := p.Stage(sc.Ctx(), env)
		g.Expect(err).NotTo(HaveOccurred())
		s, ok := pipeline.Skipped(st, digest)
		g.Expect(ok).To(BeTrue(), "Stage %s: candidate %+v does not skip %s", st.Name, st.Status.Candidate, digest)
		skipped = s
	}, localstack.WaitTimeout, 100*time.Millisecond).Should(Succeed())
	return skipped
}

// waitRolledBack waits until env's promote of digest has failed and its automatic rollback has
// been Verified; it returns both Promotions and when each end was first seen (polling every 100 ms).
func waitRolledBack(sc *localstack.Scenario, p *pipeline.Pipeline, env, digest string) (failed, rollback *stagecoachv1.Promotion, failedSeen, rolledBackSeen time.Time) {
	sc.T.Helper()
	sc.G.Eventually(func(g Gomega) {
		failed, rollback = nil, nil
		list, err := p.Promotions(sc.Ctx(), env)
		g.Expect(err).NotTo(HaveOccurred())
		for i := range list {
			pr := &list[i]
			if pr.Spec.Action == stagecoachv1.ActionPromote && pr.Spec.Version != nil && pr.Spec.Version.Digest == digest {
				failed = pr
			}
		}
		g.Expect(failed).NotTo(BeNil(), "no Promotion of %s in %s yet", digest, env)
		g.Expect(failed.Status.Phase).NotTo(Equal(stagecoachv1.PhaseSucceeded), "%s succeeded in %s", digest, env)
		if failedSeen.IsZero() && (failed.Status.Phase == stagecoachv1.PhaseFailed || failed.Status.Phase == stagecoachv1.PhaseRolledBack) {
			failedSeen = time.Now()
		}
		for i := range list {
			if list[i].Annotations[stagecoachv1.RollbackOfAnnotation] == failed.Name {
				rollback = &list[i]
			}
		}
		g.Expect(rollback).NotTo(BeNil(), "no rollback of %s yet (%s: %s)", failed.Name, failed.Status.Phase, failed.Status.Message)
		g.Expect(rollback.Status.Phase).To(Equal(stagecoachv1.PhaseSucceeded), "rollback %s: %s", rollback.Name, rollback.Status.Message)
		g.Expect(failed.Status.Phase).To(Equal(stagecoachv1.PhaseRolledBack), "%s: %s", failed.Name, failed.Status.Message)
		rolledBackSeen = time.Now()
	}, localstack.WaitTimeout, 100*time.Millisecond).Should(Succeed())
	return failed, rollback, failedSeen, rolledBackSeen
}

// expectRunning checks that each environment's Stage is Verified at the version and that the
// engine applied it (the ConfigMap in the target namespace names it).
func expectRunning(sc *localstack.Scenario, p *pipeline.Pipeline, versions map[string]string) {
	sc.T.Helper()
	sc.G.Eventually(func(g Gomega) {
		for env, version := range versions {
			st, err := p.Stage(sc.Ctx(), env)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Status.Current).NotTo(BeNil())
			g.Expect(st.Status.Current.Version).To(Equal(version), "Stage %s", st.Name)
			g.Expect(meta.IsStatusConditionTrue(st.Status.Conditions, stagecoachv1.ConditionVerified)).To(BeTrue(), "Stage %s not Verified", st.Name)
			g.Expect(sc.ConfigMapData(g, p.Targets[env], p.Service)).To(HaveKeyWithValue("version", version), "ConfigMap in %s", p.Targets[env])
		}
	}, localstack.WaitTimeout, 100*time.Millisecond).Should(Succeed())
}

// denyInStaging makes staging's API server refuse the service's ConfigMap at version (a
// ValidatingAdmissionPolicy bound to staging's target namespace only), and waits until it does.
func denyInStaging(sc *localstack.Scenario, p *pipeline.Pipeline, version string) {
	sc.T.Helper()
	name := sc.NS + "-deny-" + version
	sc.G.Expect(localstack.ApplyYAML(sc.Ctx(), sc.Client, []byte(`
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: `+name+`}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps]}]
  validations:
  - expression: "!has(object.data) || !('version' in object.data) || object.data.version != '`+version+`'"
    message: "staging does not take `+version+` (the e2e scenario's broken release)"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: `+name+`}
spec:
  policyName: `+name+`
  validationActions: [Deny]
  matchResources:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: `+p.Targets[pipeline.Staging]+`}}
`))).To(Succeed())
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: p.Targets[pipeline.Staging], Name: "deny-probe"},
		Data: map[string]string{"version": version}}
	sc.G.Eventually(func() error {
		return sc.Client.Create(sc.Ctx(), probe.DeepCopy(), client.DryRunAll)
	}, 30*time.Second, 100*time.Millisecond).Should(MatchError(ContainSubstring("staging does not take")))
}

func digests(promotions []stagecoachv1.Promotion) []string {
	var out []string
	for _, p := range promotions {
		if p.Spec.Version != nil && !slices.Contains(out, p.Spec.Version.Digest) {
			out = append(out, p.Spec.Version.Digest)
		}
	}
	return out
}
