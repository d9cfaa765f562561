// Package v1alpha1 holds the Stagecoach API: Stage, Promotion, Approval and Freeze in the
// stagecoach.dev group.
// +kubebuilder:object:generate=true
// +groupName=stagecoach.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every Stagecoach kind.
	GroupVersion = schema.GroupVersion{Group: "stagecoach.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the Stagecoach kinds with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the Stagecoach kinds to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
