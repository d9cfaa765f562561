package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/verify/verifytest"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
)

// Provenance at the gate and a promotion attestation, on the real Flux (issue 41): the release
// workflow signs each release keyless and attaches an SLSA provenance (a virtual Sigstore); dev
// requires that provenance, built from the organisation's repository; staging, taking what dev
// verified, attaches the signed promotion attestation; prod requires staging's attestation. A
// release built from a fork is skipped in dev, naming the condition; a digest a person sends to
// prod directly, skipping staging, is held in prod, naming the missing attestation.
func TestSupplyChainOnRealFlux(t *testing.T) {
	sc := env.Scenario(t)
	ctx := sc.Ctx()
	repo := sc.NS + "/payments"
	sigstore := verifytest.NewSigstore(t)
	release := verifytest.GitHubActions("org/payments", "release.yml", "refs/tags/v1.0.0")
	identity := []stagecoachv1.OIDCIdentityMatch{{Issuer: "^https://token.actions.githubusercontent.com$",
		Subject: "^https://github.com/org/payments/.github/workflows/release.yml@refs/tags/v.*$"}}
	root := &stagecoachv1.TrustedRootSource{SecretRef: stagecoachv1.LocalObjectReference{Name: "sigstore"}}
	const promotionType = "https://stagecoach.dev/attestation/promotion/v1"

	// The controller signs promotion attestations with a key of its own (restarted with it, and
	// back without it when the test ends: the other scenarios share it).
	const password = "e2e-attest"
	key, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return []byte(password), nil })
	sc.G.Expect(err).NotTo(HaveOccurred())
	secret := "attestation-key-" + sc.NS
	sc.G.Expect(sc.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "stagecoach-system", Name: secret},
		Data: map[string][]byte{"cosign.key": key.PrivateBytes, "cosign.password": []byte(password)}})).To(Succeed())
	restore, err := env.RestartControllerWith(ctx, "--attestation-key-secret=stagecoach-system/"+secret)
	t.Cleanup(func() {
		if err := restore(context.WithoutCancel(ctx)); err != nil {
			t.Errorf("cannot restart the stack's controller without its attestation key: %v", err)
		}
	})
	sc.G.Expect(err).NotTo(HaveOccurred())
	for name, data := range map[string]map[string][]byte{
		"sigstore":       {"trusted_root.json": sigstore.TrustedRoot()},
		"stagecoach-key": {"cosign.pub": key.PublicBytes},
	} {
		sc.G.Expect(sc.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sc.NS, Name: name}, Data: data})).To(Succeed())
	}

	// build pushes a release, signs it keyless as the release workflow and attaches its SLSA
	// provenance naming the repository it was built from.
	build := func(tag, from string) string {
		digest := sc.Push(repo, tag, map[string]string{"configmap.yaml": localstack.ConfigMap("payments", tag)})
		ref := sc.Registry.Repository(repo) + "@" + digest
		sigstore.SignBundle(t, ctx, ref, release, verifytest.Keyless{})
		sigstore.AttestBundle(t, ctx, ref, verifytest.Statement(t, digest, "https://slsa.dev/provenance/v1", map[string]any{
			"buildDefinition": map[string]any{"buildType": "https://actions.github.io/buildtypes/workflow/v1",
				"externalParameters": map[string]any{"workflow": map[string]any{"repository": from, "ref": "refs/tags/" + tag}}},
			"runDetails": map[string]any{"builder": map[string]any{"id": "https://github.com/actions/runner/github-hosted"}},
		}), release, verifytest.Keyless{})
		return digest
	}
	pushed := time.Now()
	v1 := build("v1.0.0", "https://github.com/org/payments")

	targets := map[string]string{}
	for _, env := range []string{"dev", "staging", "prod"} {
		targets[env] = sc.TargetNamespace(env)
		sc.FluxOCISource("payments-"+env, repo, "v1.0.0", env, targets[env])
	}
	applier := func(env string) stagecoachv1.ApplierReference {
		return stagecoachv1.ApplierReference{Kind: "OCIRepository", Name: "payments-" + env, Kustomization: "payments-" + env + "-apply"}
	}
	auto := func(s *stagecoachv1.Stage) { s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true} }
	sc.Stage("dev", "payments", "dev", applier("dev"), stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{
		Repository: sc.Registry.Repository(repo), Semver: ">=1.0.0", Interval: &metav1.Duration{Duration: 2 * time.Second},
		Verify: &stagecoachv1.VerifySpec{MatchOIDCIdentity: identity, TrustedRoot: root,
			Attestations: []stagecoachv1.AttestationRequirement{{PredicateType: "slsaprovenance1", MatchOIDCIdentity: identity, TrustedRoot: root,
				Condition: `predicate.buildDefinition.externalParameters.workflow.repository == "https://github.com/org/payments"`}}}}}, auto)
	sc.Stage("staging", "payments", "staging", applier("staging"), stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "dev"}},
		func(s *stagecoachv1.Stage) { auto(s); s.Spec.Attest = &stagecoachv1.AttestPolicy{} })
	sc.Stage("prod", "payments", "prod", applier("prod"), stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "staging",
		Verify: &stagecoachv1.UpstreamVerification{Attestations: []stagecoachv1.AttestationRequirement{{PredicateType: promotionType,
			SecretRef: &stagecoachv1.LocalObjectReference{Name: "stagecoach-key"},
			Condition: `predicate.namespace == "` + sc.NS + `" && predicate.stage == "staging"`}}}}}, auto)

	dev := sc.WaitVerified("dev", v1, pushed)
	staging := sc.WaitVerified("staging", v1, dev.Verified)
	var attestedAt time.Time
	sc.G.Eventually(func(g Gomega) {
		p := &stagecoachv1.Promotion{}
		g.Expect(sc.Client.Get(ctx, client.ObjectKey{Namespace: sc.NS, Name: staging.Promotion}, p)).To(Succeed())
		g.Expect(p.Status.Attestation).NotTo(BeNil(), "staging has not attested %s yet", v1)
		g.Expect(p.Status.Attestation.PredicateType).To(Equal(promotionType))
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
	attestedAt = time.Now()
	prod := sc.WaitVerified("prod", v1, staging.Verified)
	for _, tl := range []localstack.Timeline{dev, prod} {
		sc.G.Eventually(func(g Gomega) {
			p := &stagecoachv1.Promotion{}
			g.Expect(sc.Client.Get(ctx, client.ObjectKey{Namespace: sc.NS, Name: tl.Promotion}, p)).To(Succeed())
			g.Expect(p.Status.Gates).To(ContainElement(And(HaveField("Gate", stagecoachv1.GateAttestations), HaveField("Passed", true))))
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
	}
	report("%s", dev)
	report("%s", staging)
	report("%s", prod)
	// What the attestations add, from the controller's own events (microseconds): staging's
	// Verified → its attestation attached → prod's promote, which checked it at its gate.
	at := func(reason, promotion string) time.Time {
		var events eventsv1.EventList
		sc.G.Expect(sc.Client.List(ctx, &events, client.InNamespace(sc.NS))).To(Succeed())
		for _, e := range events.Items {
			if e.Reason == reason && e.Regarding.Kind == "Promotion" && e.Regarding.Name == promotion {
				return e.EventTime.Time
			}
		}
		sc.T.Fatalf("no %s event about Promotion %s", reason, promotion)
		return time.Time{}
	}
	verifiedAt, attached, promoted := at(stagecoachv1.EventVerified, staging.Promotion), at(stagecoachv1.EventAttested, staging.Promotion),
		at(stagecoachv1.EventPromoted, prod.Promotion)
	report("supply chain: staging Verified → attestation attached %s → prod promoted (its attestations gate passed) %s; staging Verified → prod Verified %s (seen %s after attached)",
		attached.Sub(verifiedAt).Round(time.Millisecond), promoted.Sub(attached).Round(time.Millisecond),
		prod.Verified.Sub(staging.Verified).Round(10*time.Millisecond), time.Since(attestedAt).Round(time.Second))

	// A release built from a fork: dev skips it, naming the condition.
	fork := build("v2.0.0", "https://github.com/someone/payments")
	sc.G.Eventually(func(g Gomega) {
		c := sc.GetStage(g, "dev").Status.Candidate
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Skipped).To(ContainElement(And(HaveField("Digest", fork), HaveField("Gate", stagecoachv1.GateAttestations),
			HaveField("Reason", stagecoachv1.ReasonAttestationRefused), HaveField("Message", ContainSubstring("does not meet the condition")))))
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())

	// A good build a person sends to prod directly (a hotfix tag, which dev's semver does not
	// offer), skipping staging: held, naming the missing attestation.
	v3 := build("hotfix-3", "https://github.com/org/payments")
	direct := sc.Promote("prod", "hotfix-3", v3)
	sc.G.Eventually(func(g Gomega) {
		p := &stagecoachv1.Promotion{}
		g.Expect(sc.Client.Get(ctx, client.ObjectKeyFromObject(direct), p)).To(Succeed())
		g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhasePending))
		g.Expect(p.Status.Message).To(And(ContainSubstring("has no attestation of predicate type "+promotionType), ContainSubstring(v3)))
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
	sc.G.Expect(sc.ConfigMapData(sc.G, targets["prod"], "payments")).To(HaveKeyWithValue("version", "v1.0.0"))
}
