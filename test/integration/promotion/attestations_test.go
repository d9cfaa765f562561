package promotion

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller"
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
// with the reason naming the predicate, the signer and the condition, and never promoted. dev
// attests each version it verifies (spec.attest), signed by the controller's key; prod requires
// dev's attestation: a digest that did not pass dev (promoted by hand to prod) is held, naming the
// missing attestation, and what dev verified goes on. cosign's own verify-attestation (the library
// code of the CLI) accepts the attestation with the controller's public key.
func TestAttestationsGateVersions(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := newTestRegistry(t)
	sigstore := verifytest.NewSigstore(t)
	attestor, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return []byte("attest"), nil })
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "attestation-key"},
		Data: map[string][]byte{"cosign.key": attestor.PrivateBytes, "cosign.password": []byte("attest")}})).To(Succeed())
	g.Expect(env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sigstore"},
		Data: map[string][]byte{"trusted_root.json": sigstore.TrustedRoot()}})).To(Succeed())
	g.Expect(env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "staging-key"},
		Data: map[string][]byte{"cosign.pub": attestor.PublicBytes}})).To(Succeed())
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
		s.Spec.Attest = &stagecoachv1.AttestPolicy{}
	})
	prodApp := newApplication(t, ns, "prod", ociSpec(ns))
	newStage(t, ns, "prod", func(s *stagecoachv1.Stage) {
		s.Spec.Source = stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "dev",
			Verify: &stagecoachv1.UpstreamVerification{Attestations: []stagecoachv1.AttestationRequirement{{
				PredicateType: "https://stagecoach.dev/attestation/promotion/v1",
				Condition:     fmt.Sprintf(`predicate.namespace == %q && predicate.stage == "dev" && predicate.gates.exists(g, g.gate == "attestations" && g.passed)`, ns),
				SecretRef:     &stagecoachv1.LocalObjectReference{Name: "staging-key"}}}}}}
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true}
	})
	startControllerWith(t, nil, func(o *controller.Options) { o.AttestationKeySecret = ns + "/attestation-key" })

	// A version pushed straight to prod by hand, never verified in dev: held for the missing attestation.
	v0 := build("v0.9.0", "https://github.com/org/payments")
	g.Expect(env.Client.Create(t.Context(), &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod-by-hand"},
		Spec: stagecoachv1.PromotionSpec{Stage: "prod", Action: stagecoachv1.ActionPromote, RequestedBy: "alice",
			Version: &stagecoachv1.VersionReference{Digest: digestOf(v0), Tag: "v0.9.0"}}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		p := &stagecoachv1.Promotion{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "prod-by-hand"}, p)).To(Succeed())
		g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhasePending))
		g.Expect(p.Status.Message).To(And(ContainSubstring("has no attestation of predicate type https://stagecoach.dev/attestation/promotion/v1"),
			ContainSubstring(digestOf(v0))))
	}, timeout, interval).Should(Succeed())
	g.Expect(env.Client.Delete(t.Context(), &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod-by-hand"}})).To(Succeed())

	first := onlyPromotion(t, ns, "dev")
	g.Expect(first.Spec.Version.Digest).To(Equal(digestOf(v1)))
	devApp.deploy(digestOf(v1), false, "Succeeded", "Healthy")
	done := eventuallyPhase(t, ns, first.Name, stagecoachv1.PhaseSucceeded)
	g.Expect(done.Status.Gates).To(ContainElement(And(HaveField("Gate", stagecoachv1.GateAttestations), HaveField("Passed", true),
		HaveField("Message", And(ContainSubstring("attestation "+slsaProvenanceV1+" signed keyless by"), ContainSubstring("release.yml@refs/tags/v1.0.0"),
			ContainSubstring("meets predicate.buildDefinition"))))))

	// dev attests what it verified; prod, which requires that, takes it.
	var attested *stagecoachv1.AttestationReference
	g.Eventually(func(g Gomega) {
		p := &stagecoachv1.Promotion{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(done), p)).To(Succeed())
		g.Expect(p.Status.Attestation).NotTo(BeNil())
		attested = p.Status.Attestation
	}, timeout, interval).Should(Succeed())
	g.Expect(attested.Repository).To(Equal(reg.repo))
	g.Expect(attested.PredicateType).To(Equal("https://stagecoach.dev/attestation/promotion/v1"))
	toProd := onlyPromotion(t, ns, "prod")
	g.Expect(toProd.Spec.Version.Digest).To(Equal(digestOf(v1)))
	prodApp.deploy(digestOf(v1), false, "Succeeded", "Healthy")
	inProd := eventuallyPhase(t, ns, toProd.Name, stagecoachv1.PhaseSucceeded)
	g.Expect(inProd.Status.Gates).To(ContainElement(And(HaveField("Gate", stagecoachv1.GateAttestations), HaveField("Passed", true),
		HaveField("Message", ContainSubstring("signed by trusted key")))))

	// cosign's verify-attestation accepts it with the controller's public key, and it says what dev did.
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(attestor.PublicBytes)
	g.Expect(err).NotTo(HaveOccurred())
	sv, err := signature.LoadDefaultVerifier(pub)
	g.Expect(err).NotTo(HaveOccurred())
	ref, err := name.ParseReference(v1)
	g.Expect(err).NotTo(HaveOccurred())
	atts, _, err := cosign.VerifyImageAttestations(t.Context(), ref, &cosign.CheckOpts{SigVerifier: sv, IgnoreTlog: true, Offline: true,
		NewBundleFormat: true, ClaimVerifier: cosign.IntotoSubjectClaimVerifier})
	g.Expect(err).NotTo(HaveOccurred())
	var statements []string
	for _, a := range atts {
		env, err := a.Payload()
		g.Expect(err).NotTo(HaveOccurred())
		var envelope struct {
			Payload []byte `json:"payload"`
		}
		g.Expect(json.Unmarshal(env, &envelope)).To(Succeed())
		statements = append(statements, string(envelope.Payload))
	}
	g.Expect(statements).To(ContainElement(And(ContainSubstring(`"predicateType":"https://stagecoach.dev/attestation/promotion/v1"`),
		ContainSubstring(`"stage":"dev"`), ContainSubstring(`"namespace":"`+ns+`"`), ContainSubstring(`"digest":"`+digestOf(v1)+`"`),
		ContainSubstring(`"gate":"attestations"`), ContainSubstring(`"verifiedAt":"`))))

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

// A Stage attests through the controller's key only what its author may push with: tried as
// someone who may not (issue 41). A Secret named without spec.author, or one the author may not
// read, pushes nothing and says so in a Warning event on the Promotion; an author who may read it
// gets the attestation attached.
func TestPromotionAttestationPushesOnlyAsItsAuthorMay(t *testing.T) {
	g := NewWithT(t)
	keys := newNamespace(t)
	attestor, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return []byte("attest"), nil })
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: keys, Name: "attestation-key"},
		Data: map[string][]byte{"cosign.key": attestor.PrivateBytes, "cosign.password": []byte("attest")}})).To(Succeed())
	startControllerWith(t, nil, func(o *controller.Options) { o.AttestationKeySecret = keys + "/attestation-key" })

	for _, tc := range []struct {
		name        string
		author      *stagecoachv1.StageAuthor
		grant       bool
		upstream    bool   // the attesting Stage takes a registry Stage's versions
		wantWarning string // empty: attested
	}{
		{name: "no author", wantWarning: "names no spec.author, and the controller uses Secret 'push' (spec.attest.secretRef) only as whoever set the Stage"},
		{name: "an author who may not read the push Secret", author: &stagecoachv1.StageAuthor{User: "tina"},
			wantWarning: "the Stage's author tina may not get Secret '%s/push' (spec.attest.secretRef)"},
		{name: "an author who may read it", author: &stagecoachv1.StageAuthor{User: "tina"}, grant: true},
		{name: "credentials for the upstream chain's repository, which this Stage does not name", author: &stagecoachv1.StageAuthor{User: "tina"},
			grant: true, upstream: true,
			wantWarning: "takes an upstream's versions, and spec.attest.secretRef goes only to a repository this Stage names: set spec.attest.repository"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			reg := newTestRegistry(t)
			g.Expect(env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "push"},
				Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}})).To(Succeed())
			if tc.grant {
				grantSecret(t, ns, "push", "tina")
			}
			v1 := verifytest.PushRandomImage(t, reg.repo, "v1.0.0")
			digest := v1[strings.Index(v1, "@")+1:]
			stage := "dev"
			if tc.upstream {
				head := newApplication(t, ns, "dev", ociSpec(ns))
				newStage(t, ns, "dev", func(s *stagecoachv1.Stage) {
					s.Spec.Source = stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: reg.repo, Interval: &metav1.Duration{Duration: time.Hour}}}
					s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true}
				})
				first := onlyPromotion(t, ns, "dev")
				head.deploy(digest, false, "Succeeded", "Healthy")
				eventuallyPhase(t, ns, first.Name, stagecoachv1.PhaseSucceeded)
				stage = "staging"
			}
			app := newApplication(t, ns, stage, ociSpec(ns))
			newStage(t, ns, stage, func(s *stagecoachv1.Stage) {
				s.Spec.Author = tc.author
				s.Spec.Source = stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: reg.repo, Interval: &metav1.Duration{Duration: time.Hour}}}
				if tc.upstream {
					s.Spec.Source = stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "dev"}}
				}
				s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true}
				s.Spec.Attest = &stagecoachv1.AttestPolicy{SecretRef: &stagecoachv1.LocalObjectReference{Name: "push"}}
			})
			p := onlyPromotion(t, ns, stage)
			app.deploy(digest, false, "Succeeded", "Healthy")
			eventuallyPhase(t, ns, p.Name, stagecoachv1.PhaseSucceeded)
			if tc.wantWarning == "" {
				g.Eventually(func(g Gomega) {
					got := &stagecoachv1.Promotion{}
					g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(&p), got)).To(Succeed())
					g.Expect(got.Status.Attestation).NotTo(BeNil())
					g.Expect(eventNotes(g, t.Context(), ns, stagecoachv1.EventAttested, p.Name)).To(ContainElement(ContainSubstring("attached the promotion attestation")))
				}, timeout, interval).Should(Succeed())
				return
			}
			want := tc.wantWarning
			if strings.Contains(want, "%s") {
				want = fmt.Sprintf(want, ns)
			}
			g.Eventually(func(g Gomega) {
				g.Expect(eventNotes(g, t.Context(), ns, stagecoachv1.EventAttestationFailed, p.Name)).To(ContainElement(ContainSubstring(want)))
			}, timeout, interval).Should(Succeed())
			got := &stagecoachv1.Promotion{}
			g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(&p), got)).To(Succeed())
			g.Expect(got.Status.Attestation).To(BeNil())
			g.Expect(referrersOf(t, v1)).To(BeEmpty(), "nothing was pushed")
		})
	}
}

// A Stage that asks for attestations of a controller without an attestation key is told so.
func TestPromotionAttestationWithoutAKey(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := newTestRegistry(t)
	v1 := verifytest.PushRandomImage(t, reg.repo, "v1.0.0")
	app := newApplication(t, ns, "dev", ociSpec(ns))
	newStage(t, ns, "dev", func(s *stagecoachv1.Stage) {
		s.Spec.Source = stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: reg.repo, Interval: &metav1.Duration{Duration: time.Hour}}}
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true}
		s.Spec.Attest = &stagecoachv1.AttestPolicy{}
	})
	startController(t, nil)
	p := onlyPromotion(t, ns, "dev")
	app.deploy(v1[strings.Index(v1, "@")+1:], false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, p.Name, stagecoachv1.PhaseSucceeded)
	g.Eventually(func(g Gomega) {
		g.Expect(eventNotes(g, t.Context(), ns, stagecoachv1.EventAttestationFailed, p.Name)).To(ContainElement(
			ContainSubstring("Stage dev asks for promotion attestations (spec.attest), but this controller runs without --attestation-key-secret")))
	}, timeout, interval).Should(Succeed())
	g.Expect(referrersOf(t, v1)).To(BeEmpty())
}

// referrersOf lists the referrers of a digest reference.
func referrersOf(t *testing.T, ref string) []string {
	t.Helper()
	d, err := name.NewDigest(ref)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Referrers(d, remote.WithContext(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range im.Manifests {
		out = append(out, m.Digest.String())
	}
	return out
}

// A condition that does not compile holds every version (no version could pass it): the Stage is
// not Ready, naming the field and the expression's error, and nothing is promoted.
func TestAttestationConditionThatDoesNotCompile(t *testing.T) {
	ns := newNamespace(t)
	reg := newTestRegistry(t)
	signer := verifytest.NewKeyPair(t)
	verifytest.SignBundle(t, t.Context(), verifytest.PushRandomImage(t, reg.repo, "v1.0.0"), signer)
	g := NewWithT(t)
	g.Expect(env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keys"},
		Data: map[string][]byte{"cosign.pub": signer.PublicPEM}})).To(Succeed())
	newApplication(t, ns, "dev", ociSpec(ns))
	newStage(t, ns, "dev", func(s *stagecoachv1.Stage) {
		s.Spec.Source = stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: reg.repo,
			Interval: &metav1.Duration{Duration: time.Hour},
			Verify: &stagecoachv1.VerifySpec{SecretRef: &stagecoachv1.LocalObjectReference{Name: "keys"},
				Attestations: []stagecoachv1.AttestationRequirement{{PredicateType: "spdxjson", SecretRef: &stagecoachv1.LocalObjectReference{Name: "keys"},
					Condition: `predicate.packages.all(p, p.name ==`}}}}}
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true}
	})
	startController(t, nil)
	eventuallyCondition(t, ns, "dev", stagecoachv1.ConditionReady, metav1.ConditionFalse, stagecoachv1.ReasonConditionInvalid,
		"Stage dev cannot verify attestations: Stage dev: verify.attestations[0].condition: condition \"predicate.packages.all(p, p.name ==\" does not compile")
	g.Consistently(func(g Gomega) {
		g.Expect(promotionsOf(g, t, ns, "dev")).To(BeEmpty())
	}, time.Second, interval).Should(Succeed())
}

// Each way an attestation falls short, through a Stage (issue 41): the version is skipped with
// the reason and a message naming what failed, and the newest good version is taken.
func TestAttestationRefusalsSkipVersions(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := newTestRegistry(t)
	release, builder, stranger := verifytest.NewKeyPair(t), verifytest.NewKeyPair(t), verifytest.NewKeyPair(t)
	g.Expect(env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "release"},
		Data: map[string][]byte{"cosign.pub": release.PublicPEM}})).To(Succeed())
	g.Expect(env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "builder"},
		Data: map[string][]byte{"cosign.pub": builder.PublicPEM}})).To(Succeed())
	digestOf := func(ref string) string { return ref[strings.Index(ref, "@")+1:] }
	const ours = "https://github.com/org/payments"
	provenance := func(repository, builderID string) map[string]any {
		p := slsaProvenance(repository)
		p["runDetails"] = map[string]any{"builder": map[string]any{"id": builderID}}
		return p
	}
	push := func(tag string, attach func(ref string)) string {
		ref := verifytest.PushRandomImage(t, reg.repo, tag)
		verifytest.SignBundle(t, t.Context(), ref, release)
		attach(ref)
		return digestOf(ref)
	}
	good := push("v1.0.0", func(ref string) {
		verifytest.AttestBundle(t, t.Context(), ref, builder, verifytest.Statement(t, digestOf(ref), slsaProvenanceV1, provenance(ours, "https://github.com/actions/runner")))
	})
	wrongBuilder := push("v2.0.0", func(ref string) {
		verifytest.AttestBundle(t, t.Context(), ref, builder, verifytest.Statement(t, digestOf(ref), slsaProvenanceV1, provenance(ours, "https://ci.example/laptop")))
	})
	otherDigest := push("v3.0.0", func(ref string) {
		other := verifytest.PushRandomImage(t, reg.repo, "other")
		verifytest.AttestBundle(t, t.Context(), ref, builder, verifytest.Statement(t, digestOf(other), slsaProvenanceV1, provenance(ours, "https://github.com/actions/runner")))
	})
	untrusted := push("v4.0.0", func(ref string) {
		verifytest.AttestLegacy(t, t.Context(), ref, stranger, verifytest.Statement(t, digestOf(ref), slsaProvenanceV1, provenance(ours, "https://github.com/actions/runner")))
	})
	malformed := push("v5.0.0", func(ref string) {
		verifytest.AttestBundle(t, t.Context(), ref, builder, []byte(`{"_type":"https://in-toto.io/Statement/v1","predicateType":"`+slsaProvenanceV1+`","predicate":{}}`))
	})
	conditionErrors := push("v6.0.0", func(ref string) {
		verifytest.AttestBundle(t, t.Context(), ref, builder, verifytest.Statement(t, digestOf(ref), slsaProvenanceV1, map[string]any{"buildDefinition": map[string]any{}}))
	})
	newApplication(t, ns, "dev", ociSpec(ns))
	newStage(t, ns, "dev", func(s *stagecoachv1.Stage) {
		s.Spec.Source = stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: reg.repo, Interval: &metav1.Duration{Duration: time.Hour},
			Verify: &stagecoachv1.VerifySpec{SecretRef: &stagecoachv1.LocalObjectReference{Name: "release"},
				Attestations: []stagecoachv1.AttestationRequirement{{PredicateType: "slsaprovenance1", SecretRef: &stagecoachv1.LocalObjectReference{Name: "builder"},
					Condition: `predicate.buildDefinition.externalParameters.workflow.repository == "` + ours + `" && ` +
						`predicate.runDetails.builder.id.startsWith("https://github.com/actions/")`}}}}}
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true}
	})
	startController(t, nil)
	eventuallySkipped(t, ns, "dev", good,
		[2]string{conditionErrors, stagecoachv1.ReasonAttestationRefused}, [2]string{malformed, stagecoachv1.ReasonAttestationRefused},
		[2]string{untrusted, stagecoachv1.ReasonAttestationRefused}, [2]string{otherDigest, stagecoachv1.ReasonAttestationRefused},
		[2]string{wrongBuilder, stagecoachv1.ReasonAttestationRefused})
	skipped := map[string]string{}
	for _, s := range getStage(g, t.Context(), ns, "dev").Status.Candidate.Skipped {
		g.Expect(s.Gate).To(Equal(stagecoachv1.GateAttestations))
		skipped[s.Digest] = s.Message
	}
	g.Expect(skipped[conditionErrors]).To(And(ContainSubstring("failed to evaluate"), ContainSubstring("no such key")))
	g.Expect(skipped[malformed]).To(ContainSubstring("malformed in-toto statement"))
	g.Expect(skipped[untrusted]).To(And(ContainSubstring("attestation 1 in sha256-"), ContainSubstring("no trusted key verifies it")))
	g.Expect(skipped[otherDigest]).To(ContainSubstring("the statement is about sha256:"))
	g.Expect(skipped[wrongBuilder]).To(And(ContainSubstring("does not meet the condition"), ContainSubstring("signed by trusted key sha256:")))
	g.Expect(onlyPromotion(t, ns, "dev").Spec.Version.Digest).To(Equal(good))
}
