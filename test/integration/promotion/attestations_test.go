package promotion

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/verify/verifytest"
)

const slsaProvenanceV1 = "https://slsa.dev/provenance/v1"

// slsaProvenance is an SLSA v1 provenance naming the source repository the workflow built from.
func slsaProvenance(repository string) map[string]any {
	return map[string]any{
		"buildDefinition": map[string]any{"buildType": "https://actions.github.io/buildtypes/workflow/v1",
			"externalParameters": map[string]any{"workflow": map[string]any{"repository": repository, "ref": "refs/tags/v1.0.0"}}},
		"runDetails": map[string]any{"builder": map[string]any{"id": "https://github.com/actions/runner/github-hosted"}},
	}
}

// A Stage that requires an SLSA provenance (issue 41) promotes only the versions whose
// provenance the release workflow signed keyless and that says it was built from the
// organisation's repository: a version built from a fork, or without provenance, is skipped
// with the reason naming the predicate, the signer and the condition, and never promoted. A
// Stage taking that Stage's versions requires an attestation its own key signed: without it the
// candidate is held, naming the missing attestation; once attached, it is promoted.
func TestAttestationsGateVersions(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := newTestRegistry(t)
	sigstore := verifytest.NewSigstore(t)
	staging := verifytest.NewKeyPair(t)
	g.Expect(env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sigstore"},
		Data: map[string][]byte{"trusted_root.json": sigstore.TrustedRoot()}})).To(Succeed())
	g.Expect(env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "staging-key"},
		Data: map[string][]byte{"cosign.pub": staging.PublicPEM}})).To(Succeed())
	release := verifytest.GitHubActions("org/payments", "release.yml", "refs/tags/v1.0.0")
	digestOf := func(ref string) string { return ref[strings.Index(ref, "@")+1:] }
	releaseIdentity := []stagecoachv1.OIDCIdentityMatch{{Issuer: "^https://token.actions.githubusercontent.com$",
		Subject: "^https://github.com/org/payments/.github/workflows/release.yml@refs/tags/v.*$"}}
	root := &stagecoachv1.TrustedRootSource{SecretRef: stagecoachv1.LocalObjectReference{Name: "sigstore"}}
	build := func(tag, fromRepository string) string {
		ref := verifytest.PushRandomImage(t, reg.repo, tag)
		sigstore.SignBundle(t, t.Context(), ref, release, verifytest.Keyless{})
		if fromRepository != "" {
			sigstore.AttestBundle(t, t.Context(), ref, verifytest.Statement(t, digestOf(ref), slsaProvenanceV1, slsaProvenance(fromRepository)), release, verifytest.Keyless{})
		}
		return ref
	}

	v1 := build("v1.0.0", "https://github.com/org/payments")
	devApp := newApplication(t, ns, "dev", ociSpec(ns))
	newStage(t, ns, "dev", func(s *stagecoachv1.Stage) {
		s.Spec.Source = stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: reg.repo,
			Interval: &metav1.Duration{Duration: time.Hour},
			Verify: &stagecoachv1.VerifySpec{MatchOIDCIdentity: releaseIdentity, TrustedRoot: root,
				Attestations: []stagecoachv1.AttestationRequirement{{PredicateType: "slsaprovenance1",
					Condition:         `predicate.buildDefinition.externalParameters.workflow.repository == "https://github.com/org/payments"`,
					MatchOIDCIdentity: releaseIdentity, TrustedRoot: root}}}}}
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true}
	})
	prodApp := newApplication(t, ns, "prod", ociSpec(ns))
	newStage(t, ns, "prod", func(s *stagecoachv1.Stage) {
		s.Spec.Source = stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "dev",
			Verify: &stagecoachv1.UpstreamVerification{Attestations: []stagecoachv1.AttestationRequirement{{
				PredicateType: "https://stagecoach.dev/attestation/promotion/v1",
				Condition:     `predicate.stage == "dev"`,
				SecretRef:     &stagecoachv1.LocalObjectReference{Name: "staging-key"}}}}}}
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true}
	})
	startController(t, nil)

	first := onlyPromotion(t, ns, "dev")
	g.Expect(first.Spec.Version.Digest).To(Equal(digestOf(v1)))
	devApp.deploy(digestOf(v1), false, "Succeeded", "Healthy")
	done := eventuallyPhase(t, ns, first.Name, stagecoachv1.PhaseSucceeded)
	g.Expect(done.Status.Gates).To(ContainElement(And(HaveField("Gate", stagecoachv1.GateAttestations), HaveField("Passed", true),
		HaveField("Message", And(ContainSubstring("attestation "+slsaProvenanceV1+" signed keyless by"), ContainSubstring("release.yml@refs/tags/v1.0.0"),
			ContainSubstring("meets predicate.buildDefinition"))))))

	// prod takes what dev verified, but only with the attestation the staging key signed.
	eventuallyBlockedBy(t, ns, "prod", stagecoachv1.GateAttestations, "has no attestation of predicate type https://stagecoach.dev/attestation/promotion/v1",
		digestOf(v1))
	g.Expect(promotionsOf(g, t, ns, "prod")).To(BeEmpty())
	verifytest.AttestBundle(t, t.Context(), v1, staging, verifytest.Statement(t, digestOf(v1), "https://stagecoach.dev/attestation/promotion/v1",
		map[string]any{"stage": "dev", "namespace": ns}))
	askToLook(t, ns, "prod")
	toProd := onlyPromotion(t, ns, "prod")
	g.Expect(toProd.Spec.Version.Digest).To(Equal(digestOf(v1)))
	prodApp.deploy(digestOf(v1), false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, toProd.Name, stagecoachv1.PhaseSucceeded)

	// v2 was built from a fork, v3 has no provenance: both skipped, with their reasons.
	v2 := build("v2.0.0", "https://github.com/someone/payments-fork")
	v3 := build("v3.0.0", "")
	askToLook(t, ns, "dev")
	eventuallySkipped(t, ns, "dev", "", [2]string{digestOf(v3), stagecoachv1.ReasonAttestationMissing},
		[2]string{digestOf(v2), stagecoachv1.ReasonAttestationRefused})
	skipped := getStage(g, t.Context(), ns, "dev").Status.Candidate.Skipped
	g.Expect(skipped[0].Gate).To(Equal(stagecoachv1.GateAttestations))
	g.Expect(skipped[1].Message).To(And(ContainSubstring("does not meet the condition predicate.buildDefinition.externalParameters.workflow.repository"),
		ContainSubstring("signed keyless by subject \"https://github.com/org/payments/.github/workflows/release.yml@refs/tags/v1.0.0\"")))
	g.Consistently(func(g Gomega) {
		g.Expect(promotionsOf(g, t, ns, "dev")).To(HaveLen(1))
	}, time.Second, interval).Should(Succeed())
}
