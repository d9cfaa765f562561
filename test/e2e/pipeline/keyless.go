package pipeline

import (
	"context"
	"fmt"
	"testing"

	"github.com/sigstore/cosign/v3/pkg/cosign"
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

// KeylessStaging and KeylessProd are the keyless service's staging, which takes what Keyless
// verified and attaches a signed promotion attestation to it (spec.attest), and prod, which takes
// what staging verified only with that attestation (source.upstream.verify.attestations): with
// Options.AttestationKey. Both are Flux OCIRepositories, like Keyless.
const (
	KeylessStaging = "staging/keyless"
	KeylessProd    = "prod/keyless"
)

// PromotionPredicateType is the predicate type of Stagecoach's promotion attestations.
const PromotionPredicateType = "https://stagecoach.dev/attestation/promotion/v1"

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
	if p.opts.AttestationKey == nil {
		return nil
	}
	return p.setupAttestingLanes(ctx, verification)
}

// setupAttestingLanes adds KeylessStaging (attests) and KeylessProd (requires staging's
// attestation, trusting the controller's key from a Secret), each on its own OCIRepository.
func (p *Pipeline) setupAttestingLanes(ctx context.Context, verification *stagecoachv1.VerificationPolicy) error {
	s, svc := p.Stack, p.KeylessService
	key := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: svc + "-attestation-key"},
		Data: map[string][]byte{"cosign.pub": p.opts.AttestationKey}}
	if err := s.Client.Create(ctx, key); err != nil {
		return fmt.Errorf("failed to create Secret %s/%s with the controller's attestation key: %w", p.Namespace, key.Name, err)
	}
	for _, lane := range []struct{ key, env, upstream string }{{KeylessStaging, Staging, Keyless}, {KeylessProd, Prod, KeylessStaging}} {
		p.Stages[lane.key] = svc + "-" + lane.env
		p.Targets[lane.key] = p.Namespace + "-" + lane.env
		p.Appliers[lane.key] = "OCIRepository/" + p.Stages[lane.key]
		if err := s.Namespace(ctx, p.Targets[lane.key]); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("failed to create namespace %s: %w", p.Targets[lane.key], err)
		}
		yaml := localstack.FluxOCISourceYAML(p.Namespace, p.Stages[lane.key], s.Registry.OCIURL(p.KeylessRepo), BaselineTag, p.Stages[lane.key], p.Targets[lane.key])
		if err := localstack.ApplyYAML(ctx, s.Client, []byte(yaml)); err != nil {
			return fmt.Errorf("failed to apply the Flux objects of %s: %w", p.Stages[lane.key], err)
		}
		st := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Stages[lane.key]}, Spec: stagecoachv1.StageSpec{
			Service: svc, Environment: lane.env,
			ApplyRef:     stagecoachv1.ApplierReference{Kind: "OCIRepository", Name: p.Stages[lane.key], Kustomization: p.Stages[lane.key] + "-apply"},
			Source:       stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: p.Stages[lane.upstream]}},
			Promotion:    &stagecoachv1.PromotionPolicy{Auto: true},
			Verification: verification.DeepCopy(),
		}}
		if lane.key == KeylessStaging {
			st.Spec.Attest = &stagecoachv1.AttestPolicy{}
		} else {
			st.Spec.Source.Upstream.Verify = &stagecoachv1.UpstreamVerification{Attestations: []stagecoachv1.AttestationRequirement{{
				PredicateType: PromotionPredicateType, SecretRef: &stagecoachv1.LocalObjectReference{Name: key.Name},
				Condition: fmt.Sprintf(`predicate.namespace == %q && predicate.stage == %q`, p.Namespace, p.Stages[KeylessStaging])}}}
		}
		if err := s.Client.Create(ctx, st); err != nil {
			return fmt.Errorf("failed to create Stage %s/%s: %w", p.Namespace, st.Name, err)
		}
	}
	return nil
}

// EnableAttestations gives the stack's controller a key to sign promotion attestations with: a
// new cosign key pair in Secret stagecoach-system/stagecoach-attestation-key, and the controller
// restarted with --attestation-key-secret naming it. It returns the public key (for
// Options.AttestationKey) and what restarts the controller as it was.
func EnableAttestations(ctx context.Context, s *localstack.Stack) (publicKey []byte, restore func(context.Context) error, err error) {
	const password = "stagecoach-attestations"
	keys, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return []byte(password), nil })
	if err != nil {
		return nil, nil, err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "stagecoach-system", Name: "stagecoach-attestation-key"},
		Data: map[string][]byte{"cosign.key": keys.PrivateBytes, "cosign.password": []byte(password)}}
	if err := s.Client.Create(ctx, secret); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return nil, nil, fmt.Errorf("failed to create the attestation key Secret: %w", err)
		}
		if err := s.Client.Update(ctx, secret); err != nil {
			return nil, nil, fmt.Errorf("failed to replace the attestation key Secret: %w", err)
		}
	}
	restore, err = s.RestartControllerWith(ctx, "--attestation-key-secret=stagecoach-system/"+secret.Name)
	return keys.PublicBytes, restore, err
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
	return p.PushKeylessFrom(ctx, tag, signer, p.KeylessSourceRepository())
}

// PushKeylessFrom is PushKeyless with a provenance naming another source repository (a fork's build).
func (p *Pipeline) PushKeylessFrom(ctx context.Context, tag string, signer verifytest.CI, source string) (string, error) {
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
				"externalParameters": map[string]any{"workflow": map[string]any{"repository": source, "ref": "refs/tags/" + tag,
					"path": ".github/workflows/release.yml"}}},
			"runDetails": map[string]any{"builder": map[string]any{"id": "https://github.com/actions/runner/github-hosted"}},
		}), signer, verifytest.Keyless{})
	}); err != nil {
		return "", fmt.Errorf("failed to sign and attest %s keyless: %w", ref, err)
	}
	return digest, p.RequestReconcile(ctx, Keyless)
}
