package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
	"github.com/stagecoach-dev/stagecoach/test/e2e/pipeline"
)

// The demo's supply chain, on the real Flux (issue 41; the Keyless lane with
// Options.AttestationKey, as make demo runs it): the release workflow signs each release keyless
// and attaches an SLSA provenance (a virtual Sigstore); dev requires that provenance, built from
// the service's repository; staging, taking what dev verified, attaches the signed promotion
// attestation; prod requires staging's attestation. A release built from a fork is skipped in
// dev, naming the condition; a build a person sends to prod directly, skipping staging, is held
// in prod, naming the missing attestation.
func TestSupplyChainOnRealFlux(t *testing.T) {
	sc := env.Scenario(t)
	ctx := sc.Ctx()
	publicKey, restore, err := pipeline.EnableAttestations(ctx, env)
	t.Cleanup(func() {
		if restore == nil {
			return
		}
		if err := restore(context.WithoutCancel(ctx)); err != nil {
			t.Errorf("cannot restart the stack's controller without its attestation key: %v", err)
		}
	})
	sc.G.Expect(err).NotTo(HaveOccurred())
	p, err := pipeline.SetupKeyless(ctx, sc.Stack, sc.NS, pipeline.Options{AttestationKey: publicKey})
	sc.G.Expect(err).NotTo(HaveOccurred())
	watchPipeline(t, p)
	devStage, stagingStage, prodStage := p.Stages[pipeline.Keyless], p.Stages[pipeline.KeylessStaging], p.Stages[pipeline.KeylessProd]

	pushed := time.Now()
	v1, err := p.PushKeyless(ctx, "v1.0.0", p.KeylessIdentity("v1.0.0"))
	sc.G.Expect(err).NotTo(HaveOccurred())
	dev := sc.WaitVerified(devStage, v1, pushed)
	staging := sc.WaitVerified(stagingStage, v1, dev.Verified)
	sc.G.Eventually(func(g Gomega) {
		pr := &stagecoachv1.Promotion{}
		g.Expect(sc.Client.Get(ctx, client.ObjectKey{Namespace: sc.NS, Name: staging.Promotion}, pr)).To(Succeed())
		g.Expect(pr.Status.Attestation).NotTo(BeNil(), "staging has not attested %s yet", v1)
		g.Expect(pr.Status.Attestation.PredicateType).To(Equal(pipeline.PromotionPredicateType))
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
	prod := sc.WaitVerified(prodStage, v1, staging.Verified)
	for _, tl := range []localstack.Timeline{dev, prod} {
		sc.G.Eventually(func(g Gomega) {
			pr := &stagecoachv1.Promotion{}
			g.Expect(sc.Client.Get(ctx, client.ObjectKey{Namespace: sc.NS, Name: tl.Promotion}, pr)).To(Succeed())
			g.Expect(pr.Status.Gates).To(ContainElement(And(HaveField("Gate", stagecoachv1.GateAttestations), HaveField("Passed", true))))
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
	}
	sc.G.Eventually(func(g Gomega) {
		g.Expect(sc.ConfigMapData(g, p.Targets[pipeline.KeylessProd], p.KeylessService)).To(HaveKeyWithValue("version", "v1.0.0"))
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
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
	report("supply chain: staging Verified → attestation attached %s → prod promoted (its attestations gate passed) %s; staging Verified → prod Verified %s",
		attached.Sub(verifiedAt).Round(time.Millisecond), promoted.Sub(attached).Round(time.Millisecond),
		prod.Verified.Sub(staging.Verified).Round(10*time.Millisecond))

	// A release built from a fork: dev skips it, naming the condition.
	fork, err := p.PushKeylessFrom(ctx, "v2.0.0", p.KeylessIdentity("v2.0.0"), "https://github.com/someone/"+p.KeylessService)
	sc.G.Expect(err).NotTo(HaveOccurred())
	sc.G.Eventually(func(g Gomega) {
		c := sc.GetStage(g, devStage).Status.Candidate
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Skipped).To(ContainElement(And(HaveField("Digest", fork), HaveField("Gate", stagecoachv1.GateAttestations),
			HaveField("Reason", stagecoachv1.ReasonAttestationRefused), HaveField("Message", ContainSubstring("does not meet the condition")))))
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())

	// A good build a person sends to prod directly (a hotfix tag, which dev's semver does not
	// offer), skipping staging: held, naming the missing attestation.
	hotfix, err := p.PushKeyless(ctx, "hotfix-3", p.KeylessIdentity("hotfix-3"))
	sc.G.Expect(err).NotTo(HaveOccurred())
	direct := sc.Promote(prodStage, "hotfix-3", hotfix)
	sc.G.Eventually(func(g Gomega) {
		pr := &stagecoachv1.Promotion{}
		g.Expect(sc.Client.Get(ctx, client.ObjectKeyFromObject(direct), pr)).To(Succeed())
		g.Expect(pr.Status.Phase).To(Equal(stagecoachv1.PhasePending))
		g.Expect(pr.Status.Message).To(And(ContainSubstring("has no attestation of predicate type "+pipeline.PromotionPredicateType), ContainSubstring(hotfix)))
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
	sc.G.Expect(sc.ConfigMapData(sc.G, p.Targets[pipeline.KeylessProd], p.KeylessService)).To(HaveKeyWithValue("version", "v1.0.0"))
}
