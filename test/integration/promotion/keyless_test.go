package promotion

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller"
	"github.com/stagecoach-dev/stagecoach/internal/verify"
	"github.com/stagecoach-dev/stagecoach/internal/verify/verifytest"
)

// A Stage that trusts a CI identity keyless (issue 31) promotes only the versions that identity
// signed — a Sigstore bundle or a legacy .sig, certified by the Sigstore whose trusted root a
// Secret holds — and says who signed; another workflow's signature is skipped, naming the
// identity it carries. Push, then sign: a version listed before its signature was pushed is
// promoted as soon as a person asks for a listing, not when the cached "not signed" expires.
func TestKeylessIdentityGatesRegistryVersions(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := newTestRegistry(t)
	sigstore := verifytest.NewSigstore(t)
	g.Expect(env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sigstore"},
		Data: map[string][]byte{"trusted_root.json": sigstore.TrustedRoot()}})).To(Succeed())
	release := func(tag string) verifytest.CI {
		return verifytest.GitHubActions("org/payments", "release.yml", "refs/tags/"+tag)
	}
	digestOf := func(ref string) string { return ref[strings.Index(ref, "@")+1:] }
	ask := func() { askToLook(t, ns, "dev") }

	v1 := verifytest.PushRandomImage(t, reg.repo, "v1.0.0")
	sigstore.SignBundle(t, t.Context(), v1, release("v1.0.0"), verifytest.Keyless{})
	app := newApplication(t, ns, "dev", ociSpec(ns))
	newStage(t, ns, "dev", func(s *stagecoachv1.Stage) {
		s.Spec.Source = stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: reg.repo,
			Interval: &metav1.Duration{Duration: time.Hour},
			Verify: &stagecoachv1.VerifySpec{
				MatchOIDCIdentity: []stagecoachv1.OIDCIdentityMatch{{Issuer: "^https://token.actions.githubusercontent.com$",
					Subject: "^https://github.com/org/payments/.github/workflows/release.yml@refs/tags/v.*$"}},
				TrustedRoot: &stagecoachv1.TrustedRootSource{SecretRef: stagecoachv1.LocalObjectReference{Name: "sigstore"}},
			}}}
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true}
	})
	startController(t, nil)
	first := onlyPromotion(t, ns, "dev")
	g.Expect(first.Spec.Version.Digest).To(Equal(digestOf(v1)))
	app.deploy(digestOf(v1), false, "Succeeded", "Healthy")
	done := eventuallyPhase(t, ns, first.Name, stagecoachv1.PhaseSucceeded)
	g.Expect(done.Status.Gates).To(ContainElement(And(HaveField("Gate", "signature"), HaveField("Passed", true),
		HaveField("Message", And(ContainSubstring("signed keyless by subject \"https://github.com/org/payments/.github/workflows/release.yml@refs/tags/v1.0.0\""),
			ContainSubstring("issuer https://token.actions.githubusercontent.com"), ContainSubstring("ref refs/tags/v1.0.0"))))))

	// Another workflow of the same repository signed v2: skipped, naming who signed.
	v2 := verifytest.PushRandomImage(t, reg.repo, "v2.0.0")
	sigstore.SignLegacy(t, t.Context(), v2, verifytest.GitHubActions("org/payments", "nightly.yml", "refs/heads/main"), verifytest.Keyless{})
	ask()
	eventuallySkipped(t, ns, "dev", "", [2]string{digestOf(v2), stagecoachv1.ReasonSignatureInvalid})
	skipped := getStage(g, t.Context(), ns, "dev").Status.Candidate.Skipped[0]
	g.Expect(skipped.Message).To(And(ContainSubstring("identity mismatch"), ContainSubstring("nightly.yml@refs/heads/main")))

	// Push, then sign: v3 is listed unsigned, then the release workflow signs it.
	v3 := verifytest.PushRandomImage(t, reg.repo, "v3.0.0")
	ask()
	eventuallySkipped(t, ns, "dev", "", [2]string{digestOf(v3), stagecoachv1.ReasonSignatureMissing},
		[2]string{digestOf(v2), stagecoachv1.ReasonSignatureInvalid})
	sigstore.SignLegacy(t, t.Context(), v3, release("v3.0.0"), verifytest.Keyless{})
	asked := time.Now()
	ask()
	g.Eventually(func(g Gomega) {
		g.Expect(promotionsOf(g, t, ns, "dev")).To(ContainElement(HaveField("Spec.Version.Digest", digestOf(v3))))
	}, timeout, interval).Should(Succeed())
	g.Expect(time.Since(asked)).To(BeNumerically("<", verify.DefaultNegativeTTL), "the re-list checked the signature again")
	for _, p := range promotionsOf(g, t, ns, "dev") {
		g.Expect(p.Spec.Version.Digest).NotTo(Equal(digestOf(v2)))
	}
}

// The controller may be given the public Sigstore instance's trusted root afresh
// (--sigstore-trusted-root): a Stage trusting an identity without verify.trustedRoot checks
// against that root instead of the one shipped with Stagecoach (which the virtual Sigstore's
// certificates do not chain to).
func TestKeylessDefaultRootFromTheController(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := newTestRegistry(t)
	sigstore := verifytest.NewSigstore(t)
	rootFile := filepath.Join(t.TempDir(), "trusted_root.json")
	g.Expect(os.WriteFile(rootFile, sigstore.TrustedRoot(), 0o600)).To(Succeed())

	v1 := verifytest.PushRandomImage(t, reg.repo, "v1.0.0")
	sigstore.SignBundle(t, t.Context(), v1, verifytest.GitHubActions("org/payments", "release.yml", "refs/tags/v1.0.0"), verifytest.Keyless{})
	app := newApplication(t, ns, "dev", ociSpec(ns))
	newStage(t, ns, "dev", func(s *stagecoachv1.Stage) {
		s.Spec.Source = stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: reg.repo,
			Verify: &stagecoachv1.VerifySpec{MatchOIDCIdentity: []stagecoachv1.OIDCIdentityMatch{{
				Issuer: "^https://token.actions.githubusercontent.com$", Subject: "^https://github.com/org/payments/.+$"}}}}}
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true}
	})
	startControllerWith(t, nil, func(o *controller.Options) { o.SigstoreTrustedRoot = rootFile })
	first := onlyPromotion(t, ns, "dev")
	g.Expect(first.Spec.Version.Digest).To(Equal(v1[strings.Index(v1, "@")+1:]))
	app.deploy(first.Spec.Version.Digest, false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, first.Name, stagecoachv1.PhaseSucceeded)
}
