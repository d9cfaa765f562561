package pipeline

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/verify/verifytest"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
)

// Keyless is the key (in Pipeline.Stages, Targets, Appliers, and Event.Environment) of the Stage
// that trusts a CI identity, not a key file (issue 31): Options.KeylessService's dev, applied by a
// Flux OCIRepository and Kustomization like dev, taking the newest release >=1.0.0 that the
// service's release workflow signed keyless (KeylessIdentity), as certified by the pipeline's
// Sigstore, whose trusted_root.json a Secret holds (verify.trustedRoot.secretRef).
const Keyless = "dev/keyless"

// KeylessOrg is the GitHub organisation whose workflows sign the keyless service's releases.
const KeylessOrg = "stagecoach-demo"

// SetupKeyless creates, in namespace, only the Keyless lane of a pipeline (Options.KeylessService,
// default ledger): the Secret with the trusted root of a Sigstore in memory, the service's
// baseline release, its OCIRepository and Kustomization, and the Stage. Setup adds the same lane to
// the whole pipeline when Options.KeylessService is set.
func SetupKeyless(ctx context.Context, s *localstack.Stack, namespace string, opts Options) (*Pipeline, error) {
	if opts.KeylessService == "" {
		opts.KeylessService = "ledger"
	}
	if opts.RegistryInterval == 0 {
		opts.RegistryInterval = defaultRegistryInterval
	}
	p := &Pipeline{Stack: s, Namespace: namespace, Stages: map[string]string{}, Targets: map[string]string{}, Appliers: map[string]string{}, opts: opts}
	for _, ns := range []string{namespace, namespace + "-" + Dev} {
		if err := s.Namespace(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("failed to create namespace %s for the %s pipeline: %w", ns, opts.KeylessService, err)
		}
	}
	return p, p.setupKeyless(ctx, verificationPolicy(opts))
}

// setupKeyless adds the Keyless lane to p.
func (p *Pipeline) setupKeyless(ctx context.Context, verification *stagecoachv1.VerificationPolicy) error {
	s, svc := p.Stack, p.opts.KeylessService
	p.KeylessService, p.KeylessRepo = svc, p.Namespace+"/"+svc
	p.Stages[Keyless] = svc + "-" + Dev
	p.Targets[Keyless] = p.Namespace + "-" + Dev
	p.Appliers[Keyless] = "OCIRepository/" + p.Stages[Keyless]
	if err := asTest(func(tb testing.TB) { p.sigstore = verifytest.NewSigstore(tb) }); err != nil {
		return fmt.Errorf("failed to start the Sigstore that certifies %s's CI: %w", svc, err)
	}
	root := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.TrustedRootSecret()},
		Data: map[string][]byte{"trusted_root.json": p.sigstore.TrustedRoot()}}
	if err := s.Client.Create(ctx, root); err != nil {
		return fmt.Errorf("failed to create Secret %s/%s with the Sigstore trusted root: %w", p.Namespace, root.Name, err)
	}
	if _, err := s.Registry.PushManifests(ctx, p.KeylessRepo, BaselineTag, p.keylessManifests(BaselineTag)); err != nil {
		return fmt.Errorf("failed to push the baseline release %s of %s: %w", BaselineTag, svc, err)
	}
	yaml := localstack.FluxOCISourceYAML(p.Namespace, p.Stages[Keyless], s.Registry.OCIURL(p.KeylessRepo), BaselineTag, p.Stages[Keyless], p.Targets[Keyless])
	if err := localstack.ApplyYAML(ctx, s.Client, []byte(yaml)); err != nil {
		return fmt.Errorf("failed to apply the Flux objects of %s: %w", svc, err)
	}
	trusted := p.KeylessIdentity("")
	st := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Stages[Keyless]}, Spec: stagecoachv1.StageSpec{
		Service: svc, Environment: Dev,
		ApplyRef: stagecoachv1.ApplierReference{Kind: "OCIRepository", Name: p.Stages[Keyless], Kustomization: p.Stages[Keyless] + "-apply"},
		Source: stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: s.Registry.Repository(p.KeylessRepo), Semver: ">=1.0.0",
			Interval: &metav1.Duration{Duration: p.opts.RegistryInterval},
			Verify: &stagecoachv1.VerifySpec{
				// Any tag of the release workflow of this one repository, from GitHub Actions.
				MatchOIDCIdentity: []stagecoachv1.OIDCIdentityMatch{{Issuer: "^" + trusted.Issuer + "$",
					Subject: "^https://github.com/" + KeylessOrg + "/" + svc + "/.github/workflows/release.yml@refs/tags/v.*$"}},
				TrustedRoot: &stagecoachv1.TrustedRootSource{SecretRef: stagecoachv1.LocalObjectReference{Name: p.TrustedRootSecret()}},
				// And an SLSA provenance the same workflow attached, saying it built from this repository.
				Attestations: []stagecoachv1.AttestationRequirement{{PredicateType: "slsaprovenance1",
					MatchOIDCIdentity: []stagecoachv1.OIDCIdentityMatch{{Issuer: "^" + trusted.Issuer + "$",
						Subject: "^https://github.com/" + KeylessOrg + "/" + svc + "/.github/workflows/release.yml@refs/tags/v.*$"}},
					TrustedRoot: &stagecoachv1.TrustedRootSource{SecretRef: stagecoachv1.LocalObjectReference{Name: p.TrustedRootSecret()}},
					Condition:   `predicate.buildDefinition.externalParameters.workflow.repository == "` + p.KeylessSourceRepository() + `"`}},
			}}},
		Promotion:    &stagecoachv1.PromotionPolicy{Auto: true},
		Verification: verification,
	}}
	if err := s.Client.Create(ctx, st); err != nil {
		return fmt.Errorf("failed to create Stage %s/%s: %w", p.Namespace, st.Name, err)
	}
	return nil
}

// TrustedRootSecret names the Secret holding the trusted_root.json of the pipeline's Sigstore.
func (p *Pipeline) TrustedRootSecret() string { return p.KeylessService + "-sigstore-root" }

// KeylessIdentity is the identity the Keyless Stage trusts, as the release workflow of the
// service's repository running for tag signs (any tag matches the Stage's subject expression).
func (p *Pipeline) KeylessIdentity(tag string) verifytest.CI {
	return verifytest.GitHubActions(KeylessOrg+"/"+p.KeylessService, "release.yml", "refs/tags/"+tag)
}

// keylessManifests are the keyless service's release files: its ConfigMap naming the version.
func (p *Pipeline) keylessManifests(version string) map[string]string {
	return map[string]string{"configmap.yaml": localstack.ConfigMap(p.KeylessService, version)}
}

// KeylessSourceRepository is the repository the keyless service's releases are built from, as its
// SLSA provenance names it.
func (p *Pipeline) KeylessSourceRepository() string {
	return "https://github.com/" + KeylessOrg + "/" + p.KeylessService
}

// PushKeyless pushes the keyless service's release tagged tag, signs it keyless as signer (a
// Sigstore bundle certified by the pipeline's Sigstore, logged in its transparency log, as
// `cosign sign` from CI), attaches the SLSA provenance signer's build wrote (`cosign attest`,
// built from KeylessSourceRepository), and asks the Keyless Stage to list the registry at once.
// It returns the digest.
func (p *Pipeline) PushKeyless(ctx context.Context, tag string, signer verifytest.CI) (string, error) {
	if p.sigstore == nil {
		return "", fmt.Errorf("the pipeline has no keyless lane: set Options.KeylessService")
	}
	digest, err := p.Stack.Registry.PushManifests(ctx, p.KeylessRepo, tag, p.keylessManifests(tag))
	if err != nil {
		return "", err
	}
	ref := p.Stack.Registry.Repository(p.KeylessRepo) + "@" + digest
	if err := asTest(func(tb testing.TB) {
		p.sigstore.SignBundle(tb, ctx, ref, signer, verifytest.Keyless{})
		p.sigstore.AttestBundle(tb, ctx, ref, verifytest.Statement(tb, digest, "https://slsa.dev/provenance/v1", map[string]any{
			"buildDefinition": map[string]any{"buildType": "https://actions.github.io/buildtypes/workflow/v1",
				"externalParameters": map[string]any{"workflow": map[string]any{"repository": p.KeylessSourceRepository(), "ref": "refs/tags/" + tag,
					"path": ".github/workflows/release.yml"}}},
			"runDetails": map[string]any{"builder": map[string]any{"id": "https://github.com/actions/runner/github-hosted"}},
		}), signer, verifytest.Keyless{})
	}); err != nil {
		return "", fmt.Errorf("failed to sign and attest %s keyless: %w", ref, err)
	}
	return digest, p.RequestReconcile(ctx, Keyless)
}
