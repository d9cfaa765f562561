// Package pipeline sets up one service's three-stage delivery pipeline on a running local stack
// (test/e2e/localstack), for the end-to-end scenarios and the demo alike:
//
//   - dev is applied by a Flux OCIRepository and the Kustomization that applies its artifact; its
//     Stage takes the newest signed release (semver ">=1.0.0") from the registry, automatically;
//   - staging is applied by a Flux Kustomization from a Git environment repository, the version
//     substituted into its manifests; its Stage follows dev, automatically, soak 0;
//   - prod is applied by an Argo CD Application with an OCI source; its Stage follows staging,
//     automatically once one person has approved the version;
//   - a second service (default checkout) runs in prod too: an Argo CD Application renders its
//     Git environment repository through the Stagecoach config management plugin, which pins the
//     service's image to the promoted digest after checking its signature. Its Stage takes the
//     newest signed image (semver ">=1.0.0") from the registry once one person has approved it;
//   - with Options.KeylessService, a third service's dev (the Keyless lane) trusts a CI identity,
//     not a key file: releases its release workflow signed keyless (see keyless.go).
//
// Nothing here needs a testing.T: every function takes a context and returns an error, and
// Watch reports what happens as Events for a demo to print.
package pipeline

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/verify/verifytest"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
)

// Environments of the pipeline, in order.
const (
	Dev     = "dev"
	Staging = "staging"
	Prod    = "prod"
)

// PluginProd is the key (in Pipeline.Stages, Targets, Appliers, and Event.Environment) of the
// second service's prod Stage, rendered by the Stagecoach plugin from Git.
const PluginProd = "prod/plugin"

// Environments lists the first service's environments in the order a version travels.
var Environments = []string{Dev, Staging, Prod}

// Lanes lists every Stage key of the pipeline: the environments, then the plugin-rendered service
// (and Keyless when the pipeline has it; see Pipeline.Lanes).
var Lanes = []string{Dev, Staging, Prod, PluginProd}

// defaultRegistryInterval is how often registry sources list the registry by default.
const defaultRegistryInterval = 10 * time.Second

// BaselineTag is the release the environments ran before Stagecoach took over: dev's
// OCIRepository starts at it, so that Flux reports a healthy artifact from the start. It is
// below the registry source's ">=1.0.0" and never offered.
const BaselineTag = "v0.0.0"

// Options shape a pipeline; zero values take the defaults.
type Options struct {
	// Service is the service's name (default payments): the ConfigMap the manifests create, the
	// registry repository's last element and the prefix of the Stages' names.
	Service string
	// Key signs releases; dev trusts its public key. A new key pair when zero.
	Key *verifytest.KeyPair
	// RegistryInterval is how often dev lists the registry (default 10s); Push also asks dev to
	// list at once, as a registry webhook would.
	RegistryInterval time.Duration
	// Grace is how long landed must hold before a version is Verified (default 1s).
	Grace time.Duration
	// ProgressDeadline is how long a version may take to land (default 2m).
	ProgressDeadline time.Duration
	// Approvals prod requires (default 1), for both services.
	Approvals int32
	// PluginService names the second service, rendered by the Stagecoach plugin (default checkout).
	PluginService string
	// KeylessService, when set, adds the Keyless lane: that service's dev Stage trusts keyless
	// signatures of its release workflow (KeylessIdentity) instead of a key.
	KeylessService string
	// AttestationKey, with KeylessService, is the public key of the controller's
	// --attestation-key-secret (see EnableAttestations): the Keyless lane then goes on to
	// KeylessStaging, which attests what it verifies, and KeylessProd, which requires that.
	AttestationKey []byte
}

func (o *Options) defaults() error {
	if o.Service == "" {
		o.Service = "payments"
	}
	if o.Key == nil {
		var kp verifytest.KeyPair
		if err := asTest(func(tb testing.TB) { kp = verifytest.NewKeyPair(tb) }); err != nil {
			return err
		}
		o.Key = &kp
	}
	if o.RegistryInterval == 0 {
		o.RegistryInterval = defaultRegistryInterval
	}
	if o.Grace == 0 {
		o.Grace = time.Second
	}
	if o.ProgressDeadline == 0 {
		o.ProgressDeadline = 2 * time.Minute
	}
	if o.Approvals == 0 {
		o.Approvals = 1
	}
	if o.PluginService == "" {
		o.PluginService = "checkout"
	}
	if o.PluginService == o.Service {
		return fmt.Errorf("the plugin-rendered service must differ from the service (both are %q)", o.Service)
	}
	if o.KeylessService != "" && (o.KeylessService == o.Service || o.KeylessService == o.PluginService) {
		return fmt.Errorf("the keyless service must differ from the other two (%q)", o.KeylessService)
	}
	return nil
}

// Pipeline is a service's three Stages and the engines' objects under them.
type Pipeline struct {
	Stack     *localstack.Stack
	Namespace string
	Service   string
	// Repo is the registry repository (path on Stack.Registry) releases are pushed to.
	Repo string
	// GitRepo is the Git environment repository staging's Kustomization applies.
	GitRepo string
	// PluginService is the second service; PluginRepo the registry repository of its image, and
	// PluginGitRepo its Git environment repository, which the plugin renders.
	PluginService, PluginRepo, PluginGitRepo string
	// Stages maps a lane (an environment, or PluginProd) to its Stage's name; Targets to the
	// namespace it deploys into.
	Stages, Targets map[string]string
	// Appliers maps a lane to the engine object that applies it, as "Kind/name".
	Appliers map[string]string
	// KeylessService and KeylessRepo are the Keyless lane's service and registry repository
	// (empty without that lane).
	KeylessService, KeylessRepo string

	key  verifytest.KeyPair
	opts Options
	// sigstore certifies the keyless service's CI (nil without the Keyless lane).
	sigstore *verifytest.Sigstore
}

// Lanes lists the pipeline's Stage keys in order: Lanes, then Keyless when it has that lane.
func (p *Pipeline) Lanes() []string {
	var out []string
	for _, lane := range append(slices.Clone(Lanes), Keyless, KeylessStaging, KeylessProd) {
		if _, ok := p.Stages[lane]; ok {
			out = append(out, lane)
		}
	}
	return out
}

// Setup creates, in namespace (created when missing), the pipeline of one service: target
// namespaces, the cosign key Secret (and the plugin's trust in the key), the engines' objects (at
// the baseline release) and the four Stages (five with Options.KeylessService). It returns when everything is created; the Stages
// then become Ready on their own.
func Setup(ctx context.Context, s *localstack.Stack, namespace string, opts Options) (*Pipeline, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	svc := opts.Service
	p := &Pipeline{Stack: s, Namespace: namespace, Service: svc, Repo: namespace + "/" + svc, GitRepo: namespace + "/" + svc + "-environments",
		PluginService: opts.PluginService, PluginRepo: namespace + "/" + opts.PluginService, PluginGitRepo: namespace + "/" + opts.PluginService + "-environments",
		Stages: map[string]string{}, Targets: map[string]string{}, Appliers: map[string]string{}, key: *opts.Key, opts: opts}
	for _, ns := range append([]string{namespace}, namespace+"-"+Dev, namespace+"-"+Staging, namespace+"-"+Prod) {
		if err := s.Namespace(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("failed to create namespace %s for the %s pipeline: %w", ns, svc, err)
		}
	}
	for _, env := range Environments {
		p.Stages[env] = svc + "-" + env
		p.Targets[env] = namespace + "-" + env
	}
	p.Stages[PluginProd] = p.PluginService + "-" + Prod
	p.Targets[PluginProd] = p.Targets[Prod]

	keys := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: p.KeySecret()},
		Data: map[string][]byte{"cosign.pub": p.key.PublicPEM}}
	if err := s.Client.Create(ctx, keys); err != nil {
		return nil, fmt.Errorf("failed to create Secret %s/%s with the cosign public key: %w", namespace, keys.Name, err)
	}
	if _, err := s.Registry.PushManifests(ctx, p.Repo, BaselineTag, p.Manifests(BaselineTag)); err != nil {
		return nil, fmt.Errorf("failed to push the baseline release %s: %w", BaselineTag, err)
	}
	if _, err := s.Git.Commit(ctx, p.GitRepo, "staging environment of "+svc, map[string]string{
		"staging/configmap.yaml": localstack.SubstitutedConfigMap(svc),
	}); err != nil {
		return nil, fmt.Errorf("failed to commit the environment repository %s: %w", p.GitRepo, err)
	}
	// The second service's image existed before Stagecoach, at a tag below the semver constraint.
	if _, err := s.Registry.PushManifests(ctx, p.PluginRepo, BaselineTag, p.pluginImageFiles(BaselineTag)); err != nil {
		return nil, fmt.Errorf("failed to push the baseline image %s of %s: %w", BaselineTag, p.PluginService, err)
	}
	// The plugin's keys directory is the sidecar's mounted Secret of trusted keys: one file per key.
	if err := s.TrustPluginKey(namespace+"-"+p.PluginService, p.key.PublicPEM); err != nil {
		return nil, fmt.Errorf("failed to give the Stagecoach plugin the public key of %s: %w", p.PluginService, err)
	}
	if _, err := s.Git.Commit(ctx, p.PluginGitRepo, "prod environment of "+p.PluginService, p.pluginEnvironment()); err != nil {
		return nil, fmt.Errorf("failed to commit the environment repository %s: %w", p.PluginGitRepo, err)
	}
	if err := s.ArgoCDOCIRepository(ctx, p.Repo); err != nil {
		return nil, err
	}
	if err := localstack.ApplyYAML(ctx, s.Client, []byte(p.enginesYAML())); err != nil {
		return nil, fmt.Errorf("failed to apply the Flux and Argo CD objects of the %s pipeline: %w", svc, err)
	}
	p.Appliers[Dev] = "OCIRepository/" + p.Stages[Dev]
	p.Appliers[Staging] = "Kustomization/" + p.Stages[Staging]
	p.Appliers[Prod] = "Application/" + p.Stages[Prod]
	p.Appliers[PluginProd] = "Application/" + p.Stages[PluginProd]

	verification := verificationPolicy(opts)
	registry := func(repo string) stagecoachv1.StageSource {
		return stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: s.Registry.Repository(repo), Semver: ">=1.0.0",
			Interval: &metav1.Duration{Duration: opts.RegistryInterval},
			Verify:   &stagecoachv1.VerifySpec{SecretRef: &stagecoachv1.LocalObjectReference{Name: p.KeySecret()}}}}
	}
	stages := []stagecoachv1.StageSpec{
		{Service: svc, Environment: Dev,
			ApplyRef:  stagecoachv1.ApplierReference{Kind: "OCIRepository", Name: p.Stages[Dev], Kustomization: p.Stages[Dev] + "-apply"},
			Source:    registry(p.Repo),
			Promotion: &stagecoachv1.PromotionPolicy{Auto: true}},
		{Service: svc, Environment: Staging,
			ApplyRef:  stagecoachv1.ApplierReference{Kind: "Kustomization", Name: p.Stages[Staging]},
			Source:    stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: p.Stages[Dev]}},
			Promotion: &stagecoachv1.PromotionPolicy{Auto: true, Soak: &metav1.Duration{}}},
		{Service: svc, Environment: Prod,
			ApplyRef: stagecoachv1.ApplierReference{Kind: "Application", Name: p.Stages[Prod]},
			Source:   stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: p.Stages[Staging]}},
			Promotion: &stagecoachv1.PromotionPolicy{Auto: true,
				Approvals: &stagecoachv1.ApprovalPolicy{Required: opts.Approvals}}},
		{Service: p.PluginService, Environment: Prod,
			ApplyRef: stagecoachv1.ApplierReference{Kind: "Application", Name: p.Stages[PluginProd]},
			Source:   registry(p.PluginRepo),
			Promotion: &stagecoachv1.PromotionPolicy{Auto: true,
				Approvals: &stagecoachv1.ApprovalPolicy{Required: opts.Approvals}}},
	}
	for _, spec := range stages {
		spec.Verification = verification.DeepCopy()
		st := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: spec.Service + "-" + spec.Environment}, Spec: spec}
		if err := s.Client.Create(ctx, st); err != nil {
			return nil, fmt.Errorf("failed to create Stage %s/%s: %w", namespace, st.Name, err)
		}
	}
	if opts.KeylessService != "" {
		if err := p.setupKeyless(ctx, verification.DeepCopy()); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// verificationPolicy is every Stage's spec.verification.
func verificationPolicy(opts Options) *stagecoachv1.VerificationPolicy {
	grace, deadline := opts.Grace, opts.ProgressDeadline
	if grace == 0 {
		grace = time.Second
	}
	if deadline == 0 {
		deadline = 2 * time.Minute
	}
	return &stagecoachv1.VerificationPolicy{Grace: &metav1.Duration{Duration: grace}, ProgressDeadline: &metav1.Duration{Duration: deadline}}
}

// KeySecret names the Secret holding the cosign public key dev trusts.
func (p *Pipeline) KeySecret() string { return p.Service + "-cosign-keys" }

// Manifests are a release's files: one ConfigMap named after the service whose data names the
// version (the simplest object both engines count as healthy without workload controllers).
func (p *Pipeline) Manifests(version string) map[string]string {
	return map[string]string{"configmap.yaml": localstack.ConfigMap(p.Service, version)}
}

// PluginImage is the second service's image repository, registry-qualified: what its
// .stagecoach.yaml declares and the plugin pins.
func (p *Pipeline) PluginImage() string { return p.Stack.Registry.Repository(p.PluginRepo) }

// pluginEnvironment is the second service's Git environment repository: prod/ holds a PodTemplate
// (a workload object that is healthy without kube-controller-manager) whose container runs the
// service's image, and the .stagecoach.yaml that opts the directory into the plugin.
func (p *Pipeline) pluginEnvironment() map[string]string {
	return map[string]string{
		"prod/.stagecoach.yaml": fmt.Sprintf("stage: %s\nimages:\n  - %s\n", p.Stages[PluginProd], p.PluginImage()),
		"prod/podtemplate.yaml": fmt.Sprintf(`apiVersion: v1
kind: PodTemplate
metadata:
  name: %[1]s
template:
  metadata:
    labels: {app: %[1]s}
  spec:
    containers:
      - name: %[1]s
        image: %[2]s:latest
`, p.PluginService, p.PluginImage()),
	}
}

// enginesYAML: dev's OCIRepository and Kustomization (at the baseline tag: Stagecoach pins
// digests from the first promotion on), staging's GitRepository and Kustomization, prod's
// Application (no revision until Stagecoach writes one), and the plugin service's Application on
// Git (no STAGECOACH_DIGEST until Stagecoach writes one). Each applier carries its Stage's label.
func (p *Pipeline) enginesYAML() string {
	s := p.Stack
	return localstack.FluxOCISourceYAML(p.Namespace, p.Stages[Dev], s.Registry.OCIURL(p.Repo), BaselineTag, p.Stages[Dev], p.Namespace+"-dev") +
		"---\n" + localstack.FluxGitKustomizationYAML(p.Namespace, p.Stages[Staging], s.Git.URL(p.GitRepo), Staging, p.Stages[Staging], p.Targets[Staging], time.Minute) +
		"---\n" + localstack.ArgoCDOCIApplicationYAML(p.Namespace, p.Stages[Prod], s.Registry.OCIURL(p.Repo), "", p.Stages[Prod], p.Namespace+"-prod") +
		"---\n" + localstack.ArgoCDPluginApplicationYAML(p.Namespace, p.Stages[PluginProd], s.Git.URL(p.PluginGitRepo), "prod", p.Stages[PluginProd], p.Targets[PluginProd])
}

// Signing is how a release is signed.
type Signing int

const (
	// Unsigned pushes the release without a signature.
	Unsigned Signing = iota
	// SignedBundle signs like cosign v3: a Sigstore bundle as an OCI referrer.
	SignedBundle
	// SignedLegacy signs like cosign v2: a simple-signing payload under the .sig tag.
	SignedLegacy
)

func (s Signing) String() string {
	switch s {
	case SignedBundle:
		return "signed (Sigstore bundle)"
	case SignedLegacy:
		return "signed (legacy .sig)"
	}
	return "unsigned"
}

// Push pushes a release (files as a plain-manifests artifact tagged tag), signs it as asked with
// the pipeline's key, and asks dev to list the registry at once. It returns the digest.
func (p *Pipeline) Push(ctx context.Context, tag string, files map[string]string, signing Signing) (string, error) {
	return p.push(ctx, p.Repo, Dev, tag, files, signing)
}

// PushPluginImage pushes the second service's image tagged tag (one layer naming the version),
// signs it as asked, and asks its Stage to list the registry at once. It returns the digest.
func (p *Pipeline) PushPluginImage(ctx context.Context, tag string, signing Signing) (string, error) {
	return p.push(ctx, p.PluginRepo, PluginProd, tag, p.pluginImageFiles(tag), signing)
}

// pluginImageFiles is the second service's image content at tag: one layer naming the version.
func (p *Pipeline) pluginImageFiles(tag string) map[string]string {
	return map[string]string{p.PluginService + "/VERSION": tag + "\n"}
}

func (p *Pipeline) push(ctx context.Context, repo, lane, tag string, files map[string]string, signing Signing) (string, error) {
	digest, err := p.publish(ctx, repo, tag, files, signing)
	if err != nil {
		return "", err
	}
	return digest, p.RequestReconcile(ctx, lane)
}

// Publish pushes a release like Push but does not ask dev to look: several releases can then
// be in the registry before dev lists it (RequestReconcile).
func (p *Pipeline) Publish(ctx context.Context, tag string, files map[string]string, signing Signing) (string, error) {
	return p.publish(ctx, p.Repo, tag, files, signing)
}

func (p *Pipeline) publish(ctx context.Context, repo, tag string, files map[string]string, signing Signing) (string, error) {
	digest, err := p.Stack.Registry.PushManifests(ctx, repo, tag, files)
	if err != nil {
		return "", err
	}
	ref := p.Stack.Registry.Repository(repo) + "@" + digest
	switch signing {
	case SignedBundle:
		err = asTest(func(tb testing.TB) { verifytest.SignBundle(tb, ctx, ref, p.key) })
	case SignedLegacy:
		err = asTest(func(tb testing.TB) { verifytest.SignLegacy(tb, ctx, ref, p.key) })
	}
	if err != nil {
		return "", fmt.Errorf("failed to sign %s: %w", ref, err)
	}
	return digest, nil
}

// PushSigned pushes the release files for tag, signed with a Sigstore bundle.
func (p *Pipeline) PushSigned(ctx context.Context, tag string, files map[string]string) (string, error) {
	return p.Push(ctx, tag, files, SignedBundle)
}

// RequestReconcile asks the controller to look at env's Stage now (stagecoach.dev/requested-at):
// for a registry source, to list the registry.
func (p *Pipeline) RequestReconcile(ctx context.Context, env string) error {
	st := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Stages[env]}}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, stagecoachv1.ReconcileRequestAnnotation, time.Now().UTC().Format(time.RFC3339Nano))
	if err := p.Stack.Client.Patch(ctx, st, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		return fmt.Errorf("failed to annotate Stage %s/%s with %s: %w", p.Namespace, st.Name, stagecoachv1.ReconcileRequestAnnotation, err)
	}
	return nil
}

// Approve approves digest for env's Stage as user, through c, which must authenticate as user
// (the approval-guard admission policy makes the approver the creating user).
func (p *Pipeline) Approve(ctx context.Context, c client.Client, user, env, digest, comment string) (*stagecoachv1.Approval, error) {
	a := &stagecoachv1.Approval{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, GenerateName: p.Stages[env] + "-"},
		Spec: stagecoachv1.ApprovalSpec{Stage: p.Stages[env], Digest: digest, Approver: user, Comment: comment}}
	if err := c.Create(ctx, a); err != nil {
		return nil, fmt.Errorf("failed to create the Approval of %s for Stage %s/%s as %s: %w", digest, p.Namespace, p.Stages[env], user, err)
	}
	return a, nil
}

// Promote asks, as user through c, for digest (tag) on env's Stage.
func (p *Pipeline) Promote(ctx context.Context, c client.Client, user, env, tag, digest, reason string) (*stagecoachv1.Promotion, error) {
	pr := &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, GenerateName: p.Stages[env] + "-"},
		Spec: stagecoachv1.PromotionSpec{Stage: p.Stages[env], RequestedBy: user, Reason: reason,
			Version: &stagecoachv1.VersionReference{Digest: digest, Tag: tag}}}
	if err := c.Create(ctx, pr); err != nil {
		return nil, fmt.Errorf("failed to create a Promotion of %s for Stage %s/%s as %s: %w", tag, p.Namespace, p.Stages[env], user, err)
	}
	return pr, nil
}

// Stage reads env's Stage.
func (p *Pipeline) Stage(ctx context.Context, env string) (*stagecoachv1.Stage, error) {
	st := &stagecoachv1.Stage{}
	if err := p.Stack.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.Stages[env]}, st); err != nil {
		return nil, err
	}
	return st, nil
}

// Promotions lists the Promotions of a lane's Stage (every lane's when env is empty).
func (p *Pipeline) Promotions(ctx context.Context, env string) ([]stagecoachv1.Promotion, error) {
	var list stagecoachv1.PromotionList
	if err := p.Stack.Client.List(ctx, &list, client.InNamespace(p.Namespace)); err != nil {
		return nil, err
	}
	var out []stagecoachv1.Promotion
	for _, pr := range list.Items {
		for _, e := range p.Lanes() {
			if (env == "" || env == e) && pr.Spec.Stage == p.Stages[e] {
				out = append(out, pr)
			}
		}
	}
	return out, nil
}

// Blocked reports the gate of env's Stage candidate digest named gate, if the candidate is held
// back by it.
func Blocked(st *stagecoachv1.Stage, digest, gate string) (stagecoachv1.GateBlock, bool) {
	c := st.Status.Candidate
	if c == nil || c.Digest != digest {
		return stagecoachv1.GateBlock{}, false
	}
	for _, b := range c.BlockedBy {
		if b.Gate == gate {
			return b, true
		}
	}
	return stagecoachv1.GateBlock{}, false
}

// Skipped reports how env's Stage passes over digest, a version newer than its candidate that
// automation never offers (unsigned, or failed there before), if it does.
func Skipped(st *stagecoachv1.Stage, digest string) (stagecoachv1.SkippedVersion, bool) {
	if c := st.Status.Candidate; c != nil {
		for _, s := range c.Skipped {
			if s.Digest == digest {
				return s, true
			}
		}
	}
	return stagecoachv1.SkippedVersion{}, false
}
