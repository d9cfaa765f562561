package e2e

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/verify/verifytest"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
	"github.com/stagecoach-dev/stagecoach/test/e2e/pipeline"
)

// One service, two environments on the real engines: dev is applied by a Flux OCIRepository and
// the Kustomization through it, prod by an Argo CD Application with an OCI source. A person
// promotes to dev; prod follows dev automatically. The first release (v0) puts both environments
// in place; the second (v1) is the measured upgrade. Both must reach Verified at v1's digest, and
// the engines themselves must show v1 applied.
func TestOCIPipelineFluxDevArgoCDProd(t *testing.T) {
	sc := env.Scenario(t)
	repo := sc.NS + "/payments"
	manifests := func(version string) map[string]string {
		return map[string]string{"configmap.yaml": localstack.ConfigMap("payments", version)}
	}
	v0 := sc.Push(repo, "v0.0.0", manifests("v0.0.0"))
	v1 := sc.Push(repo, "v1.0.0", manifests("v1.0.0"))

	// Before their first promotion the appliers name no digest: Stagecoach writes every digest
	// they ever run (a digest it did not write freezes the Stage).
	devNS, prodNS := sc.TargetNamespace("dev"), sc.TargetNamespace("prod")
	sc.FluxOCISource("payments-dev", repo, "v0.0.0", "dev", devNS)
	sc.ArgoCDOCIApplication("payments-prod", repo, "", "prod", prodNS)
	sc.Stage("dev", "payments", "dev",
		stagecoachv1.ApplierReference{Kind: "OCIRepository", Name: "payments-dev", Kustomization: "payments-dev-apply"},
		// Until the registry source lands, dev takes versions only from people's Promotions.
		stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "none"}}, nil)
	sc.Stage("prod", "payments", "prod",
		stagecoachv1.ApplierReference{Kind: "Application", Name: "payments-prod"},
		stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "dev"}},
		func(s *stagecoachv1.Stage) { s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true} })

	for _, release := range []struct {
		tag, digest string
		measured    bool
	}{{"v0.0.0", v0, false}, {"v1.0.0", v1, true}} {
		created := time.Now()
		sc.Promote("dev", release.tag, release.digest)
		dev := sc.WaitVerified("dev", release.digest, created)
		// prod's lead time starts when dev verified the version: from then on it was prod's to take.
		prod := sc.WaitVerified("prod", release.digest, dev.Verified)
		sc.G.Eventually(func(g Gomega) {
			g.Expect(sc.ConfigMapData(g, devNS, "payments")).To(HaveKeyWithValue("version", release.tag))
			g.Expect(sc.ConfigMapData(g, prodNS, "payments")).To(HaveKeyWithValue("version", release.tag))
		}, localstack.WaitTimeout, time.Second).Should(Succeed())
		if release.measured {
			report("%s", dev)
			report("%s", prod)
			report("%-8s lead time %7s  (Promotion created → prod Verified)", "pipeline", prod.Verified.Sub(dev.Requested).Round(10*time.Millisecond))
		}
	}

	// What the engines report, not only what Stagecoach concluded.
	g := sc.G
	oci := sc.Get(g, "source.toolkit.fluxcd.io/v1", "OCIRepository", "payments-dev")
	g.Expect(localstack.Field(oci, "spec", "ref", "digest")).To(Equal(v1))
	g.Expect(localstack.Field(oci, "status", "artifact", "revision")).To(HaveSuffix(v1))
	kus := sc.Get(g, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", "payments-dev-apply")
	g.Expect(localstack.Field(kus, "status", "lastAppliedRevision")).To(HaveSuffix(v1))
	app := sc.Get(g, "argoproj.io/v1alpha1", "Application", "payments-prod")
	g.Expect(localstack.Field(app, "spec", "source", "targetRevision")).To(Equal(v1))
	g.Expect(localstack.Field(app, "status", "sync", "status")).To(Equal("Synced"))
	g.Expect(localstack.Field(app, "status", "sync", "revision")).To(Equal(v1))
	g.Expect(localstack.Field(app, "status", "operationState", "syncResult", "revision")).To(Equal(v1))
	g.Expect(localstack.Field(app, "status", "health", "status")).To(Equal("Healthy"))
}

// The demo pipeline's Keyless lane (issue 31), on the real Flux: a service's dev Stage trusts a CI
// identity, not a key file — its release workflow at any tag, certified by a Sigstore in memory
// whose trusted root a Secret holds (verify.trustedRoot.secretRef). It takes the release that
// workflow signed keyless, saying who signed, and skips one another workflow of the same
// repository signed, naming that identity; no Promotion of it exists.
func TestKeylessStageTrustsACIIdentity(t *testing.T) {
	sc := env.Scenario(t)
	g := sc.G
	ctx := sc.Ctx()
	keyless, err := pipeline.SetupKeyless(ctx, sc.Stack, sc.NS, pipeline.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	stage := keyless.Stages[pipeline.Keyless]
	pushed := time.Now()
	trusted := keyless.KeylessIdentity("v1.0.0")
	kv1, err := keyless.PushKeyless(ctx, "v1.0.0", trusted)
	g.Expect(err).NotTo(HaveOccurred())

	tl := sc.WaitVerified(stage, kv1, pushed)
	promotions, err := keyless.Promotions(ctx, pipeline.Keyless)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(promotions).To(ContainElement(And(HaveField("Spec.Version.Digest", kv1),
		HaveField("Status.Gates", ContainElement(And(HaveField("Gate", "signature"), HaveField("Passed", true),
			HaveField("Message", And(ContainSubstring("signed keyless by subject %q", trusted.Subject), ContainSubstring("ref refs/tags/v1.0.0")))))),
		// and the SLSA provenance the release workflow attached (issue 41).
		HaveField("Status.Gates", ContainElement(And(HaveField("Gate", stagecoachv1.GateAttestations), HaveField("Passed", true),
			HaveField("Message", And(ContainSubstring("attestation https://slsa.dev/provenance/v1 signed keyless by subject %q", trusted.Subject),
				ContainSubstring("meets predicate.buildDefinition.externalParameters.workflow.repository")))))))))
	g.Eventually(func(g Gomega) {
		g.Expect(sc.ConfigMapData(g, keyless.Targets[pipeline.Keyless], keyless.KeylessService)).To(HaveKeyWithValue("version", "v1.0.0"))
	}, localstack.WaitTimeout, time.Second).Should(Succeed())
	report("%s (keyless: trusts %s's release workflow)", tl, pipeline.KeylessOrg+"/"+keyless.KeylessService)

	// The nightly workflow of the same repository is not the release workflow.
	nightly := verifytest.GitHubActions(pipeline.KeylessOrg+"/"+keyless.KeylessService, "nightly.yml", "refs/heads/main")
	pushed = time.Now()
	kv2, err := keyless.PushKeyless(ctx, "v2.0.0", nightly)
	g.Expect(err).NotTo(HaveOccurred())
	skipped := waitSkipped(sc, keyless, pipeline.Keyless, kv2)
	g.Expect(skipped.Reason).To(Equal(stagecoachv1.ReasonSignatureInvalid), skipped.Message)
	g.Expect(skipped.Message).To(And(ContainSubstring("identity mismatch"), ContainSubstring(nightly.Subject)))
	report("%-8s skipped v2.0.0 %s after its push: %s", stage, time.Since(pushed).Round(10*time.Millisecond), skipped.Reason)
	promotions, err = keyless.Promotions(ctx, pipeline.Keyless)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(digests(promotions)).To(Equal([]string{kv1}), "only the release workflow's v1 is promoted")
	g.Expect(sc.ConfigMapData(g, keyless.Targets[pipeline.Keyless], keyless.KeylessService)).To(HaveKeyWithValue("version", "v1.0.0"))
}
