package v1alpha1

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Defaults of optional Stage fields; the getters below apply them so that the reconciler never
// has to know them.
const (
	// Modes of a git source's verify: what must be signed.
	GitVerifyHEAD       = "HEAD"
	GitVerifyTag        = "Tag"
	GitVerifyTagAndHEAD = "TagAndHEAD"

	DefaultRegistryInterval = time.Minute
	DefaultProgressDeadline = 10 * time.Minute
	DefaultGrace            = 10 * time.Second
	DefaultRollbackLimit    = int32(1)
	// DefaultTrustedRootKey is the entry verify.trustedRoot is read from, the name Sigstore
	// publishes its trusted root under.
	DefaultTrustedRootKey = "trusted_root.json"
)

// The admission policies (manifests/policies) that keep anyone but Stagecoach from changing
// what a Stage's applier runs, and guard what its gates trust.
const (
	PolicyApplication = "application-guard.stagecoach.dev"
	// PolicyApplicationCreate judges what a labelled Application may run when it is created (or
	// labelled) against its Stage's judged digests (an app-of-apps re-create, an ApplicationSet's).
	PolicyApplicationCreate  = "application-create-guard.stagecoach.dev"
	PolicyApplicationSet     = "applicationset-guard.stagecoach.dev"
	PolicyFluxOCIRepository  = "flux-ocirepository-guard.stagecoach.dev"
	PolicyFluxGitRepository  = "flux-gitrepository-guard.stagecoach.dev"
	PolicyFluxKustomization  = "flux-kustomization-guard.stagecoach.dev"
	PolicyFluxHelmRelease    = "flux-helmrelease-guard.stagecoach.dev"
	PolicyPromotionRequester = "promotion-requester-guard.stagecoach.dev"
	PolicyApproval           = "approval-guard.stagecoach.dev"
	PolicyStageAuthor        = "stage-author-guard.stagecoach.dev"
	// PolicyStageStatus and PolicyPromotionStatus let only the controller write Stages' and
	// Promotions' status: every Stage relies on both (a verified version, a passed gate).
	PolicyStageStatus     = "stage-status-guard.stagecoach.dev"
	PolicyPromotionStatus = "promotion-status-guard.stagecoach.dev"
)

// BuiltinApplier is a kind Stagecoach applies and observes itself.
type BuiltinApplier struct {
	// GroupVersionKind's version is the one used when applyRef.apiVersion is empty.
	schema.GroupVersionKind
	// Guards are the policies that keep anyone but Stagecoach from changing what it runs.
	Guards []string
}

// builtinAppliers is the one list of the built-in kinds: the defaults below, the appliers
// (internal/applier.For), the guards (internal/plan.GuardPolicies) and, through a test, the
// kind lists of the CEL rules on StageSpec and ApplierReference read it.
var builtinAppliers = []BuiltinApplier{
	{GroupVersionKind: schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"},
		Guards: []string{PolicyApplication, PolicyApplicationCreate}},
	// A fleet: the Applications it owns are promoted wave by wave, each guarded as an Application.
	{GroupVersionKind: schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "ApplicationSet"},
		Guards: []string{PolicyApplicationSet, PolicyApplication, PolicyApplicationCreate}},
	{GroupVersionKind: schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "OCIRepository"},
		Guards: []string{PolicyFluxOCIRepository}},
	// Takes Git commits (spec.ref.commit): the applier of a Stage with a git source.
	{GroupVersionKind: schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "GitRepository"},
		Guards: []string{PolicyFluxGitRepository}},
	{GroupVersionKind: schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"},
		Guards: []string{PolicyFluxKustomization}},
	{GroupVersionKind: schema.GroupVersionKind{Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmRelease"},
		Guards: []string{PolicyFluxHelmRelease}},
}

// BuiltinAppliers lists the kinds Stagecoach applies and observes itself.
func BuiltinAppliers() []BuiltinApplier {
	return slices.Clone(builtinAppliers)
}

// LookupBuiltinApplier finds a built-in kind by its name.
func LookupBuiltinApplier(kind string) (BuiltinApplier, bool) {
	for _, b := range builtinAppliers {
		if b.Kind == kind {
			return b, true
		}
	}
	return BuiltinApplier{}, false
}

// GroupVersionKind resolves the reference, filling in the API version of a built-in kind.
// It returns an error for a kind that is neither built in nor given an apiVersion.
func (r ApplierReference) GroupVersionKind() (schema.GroupVersionKind, error) {
	if r.APIVersion == "" {
		b, ok := LookupBuiltinApplier(r.Kind)
		if !ok {
			return schema.GroupVersionKind{}, &UnknownApplierKindError{Kind: r.Kind}
		}
		return b.GroupVersionKind, nil
	}
	gv, err := schema.ParseGroupVersion(r.APIVersion)
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	return gv.WithKind(r.Kind), nil
}

// Builtin reports whether Stagecoach observes the referenced kind itself (no completion rules needed).
func (r ApplierReference) Builtin() bool {
	gvk, err := r.GroupVersionKind()
	if err != nil {
		return false
	}
	b, ok := LookupBuiltinApplier(gvk.Kind)
	return ok && b.Group == gvk.Group
}

// UnknownApplierKindError is returned for a kind without apiVersion that Stagecoach does not know.
type UnknownApplierKindError struct{ Kind string }

func (e *UnknownApplierKindError) Error() string {
	return "applyRef.apiVersion is required for kind " + e.Kind
}

// GetProgressDeadline returns verification.progressDeadline or its default.
func (s *Stage) GetProgressDeadline() time.Duration {
	if v := s.Spec.Verification; v != nil && v.ProgressDeadline != nil {
		return v.ProgressDeadline.Duration
	}
	return DefaultProgressDeadline
}

// GetGrace returns verification.grace or its default.
func (s *Stage) GetGrace() time.Duration {
	if v := s.Spec.Verification; v != nil && v.Grace != nil {
		return v.Grace.Duration
	}
	return DefaultGrace
}

// GetAutomaticRollback returns rollback.automatic or its default (true).
func (s *Stage) GetAutomaticRollback() bool {
	if r := s.Spec.Rollback; r != nil && r.Automatic != nil {
		return *r.Automatic
	}
	return true
}

// GetRollbackLimit returns rollback.limit or its default.
func (s *Stage) GetRollbackLimit() int32 {
	if r := s.Spec.Rollback; r != nil && r.Limit != nil {
		return *r.Limit
	}
	return DefaultRollbackLimit
}

// UpstreamKey is where the Stage's upstream Stage lives (its namespace defaults to this Stage's),
// and false when the source is not an upstream Stage.
func (s *Stage) UpstreamKey() (types.NamespacedName, bool) {
	up := s.Spec.Source.Upstream
	if up == nil {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: namespaceOr(up.Namespace, s.Namespace), Name: up.Stage}, true
}

// DependencyKey is where a dependency's Stage lives (its namespace defaults to this Stage's).
func (s *Stage) DependencyKey(d StageDependency) types.NamespacedName {
	return types.NamespacedName{Namespace: namespaceOr(d.Namespace, s.Namespace), Name: d.Stage}
}

func namespaceOr(ns, fallback string) string {
	if ns == "" {
		return fallback
	}
	return ns
}

// GetRegistryInterval returns source.registry.interval or its default.
func (s *Stage) GetRegistryInterval() time.Duration {
	if r := s.Spec.Source.Registry; r != nil && r.Interval != nil && r.Interval.Duration > 0 {
		return r.Interval.Duration
	}
	return DefaultRegistryInterval
}

// GetGitInterval is how often a git source is fetched.
func (s *Stage) GetGitInterval() time.Duration {
	if g := s.Spec.Source.Git; g != nil && g.Interval != nil && g.Interval.Duration > 0 {
		return g.Interval.Duration
	}
	return DefaultRegistryInterval
}

// GetMode is what a git source's verification requires to be signed (default HEAD).
func (v *GitVerification) GetMode() string {
	if v.Mode == "" {
		return GitVerifyHEAD
	}
	return v.Mode
}

// GetKey is the entry of the Secret the trusted root is read from.
func (t *TrustedRootSource) GetKey() string {
	if t.Key == "" {
		return DefaultTrustedRootKey
	}
	return t.Key
}

// GetPreApplyChecks returns promotion.checks: they run before a version is applied.
func (s *Stage) GetPreApplyChecks() []Check {
	if s.Spec.Promotion == nil {
		return nil
	}
	return s.Spec.Promotion.Checks
}

// GetVerificationChecks returns verification.checks: they run once a version landed.
func (s *Stage) GetVerificationChecks() []Check {
	if s.Spec.Verification == nil {
		return nil
	}
	return s.Spec.Verification.Checks
}

// GetConditions returns the Stage's conditions.
func (s *Stage) GetConditions() []metav1.Condition { return s.Status.Conditions }

// SetConditions replaces the Stage's conditions.
func (s *Stage) SetConditions(c []metav1.Condition) { s.Status.Conditions = c }
