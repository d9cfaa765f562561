package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Defaults of optional Stage fields; the getters below apply them so that the reconciler never
// has to know them.
const (
	DefaultRegistryInterval = time.Minute
	DefaultProgressDeadline = 10 * time.Minute
	DefaultGrace            = 10 * time.Second
	DefaultRollbackLimit    = int32(1)
)

// builtinAppliers maps the kinds Stagecoach observes itself to the API version used when
// applyRef.apiVersion is empty.
var builtinAppliers = map[string]schema.GroupVersion{
	"Application":    {Group: "argoproj.io", Version: "v1alpha1"},
	"ApplicationSet": {Group: "argoproj.io", Version: "v1alpha1"},
	"OCIRepository":  {Group: "source.toolkit.fluxcd.io", Version: "v1"},
	"Kustomization":  {Group: "kustomize.toolkit.fluxcd.io", Version: "v1"},
	"HelmRelease":    {Group: "helm.toolkit.fluxcd.io", Version: "v2"},
}

// BuiltinApplierGroupKinds lists the kinds with a built-in observer, with their default versions.
func BuiltinApplierGroupKinds() []schema.GroupVersionKind {
	gvks := make([]schema.GroupVersionKind, 0, len(builtinAppliers))
	for kind, gv := range builtinAppliers {
		gvks = append(gvks, gv.WithKind(kind))
	}
	return gvks
}

// GroupVersionKind resolves the reference, filling in the API version of a built-in kind.
// It returns an error for a kind that is neither built in nor given an apiVersion.
func (r ApplierReference) GroupVersionKind() (schema.GroupVersionKind, error) {
	if r.APIVersion == "" {
		gv, ok := builtinAppliers[r.Kind]
		if !ok {
			return schema.GroupVersionKind{}, &UnknownApplierKindError{Kind: r.Kind}
		}
		return gv.WithKind(r.Kind), nil
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
	gv, ok := builtinAppliers[gvk.Kind]
	return ok && gv.Group == gvk.Group
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
