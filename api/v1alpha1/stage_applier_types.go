package v1alpha1

// The object that applies a Stage's version (spec.applier), the fields it sets and the rules
// that say when it has finished.

// ApplierReference names the object that applies a Stage's version.
//
// +kubebuilder:validation:XValidation:rule="!has(self.image) || self.kind == 'Kustomization'",message="applyRef.image is only for a Flux Kustomization: it names the spec.images entry to pin"
// +kubebuilder:validation:XValidation:rule="!has(self.kustomization) || self.kind == 'OCIRepository' || self.kind == 'GitRepository'",message="applyRef.kustomization is only for a Flux OCIRepository or GitRepository: it names the Kustomization that applies the repository's artifact"
// +kubebuilder:validation:XValidation:rule="!has(self.valuesKey) || self.kind == 'HelmRelease'",message="applyRef.valuesKey is only for a Flux HelmRelease: it names the values key that carries the digest"
// +kubebuilder:validation:XValidation:rule="!has(self.source) || self.kind == 'Application'",message="applyRef.source is only for an Argo CD Application: it names the source (sources[].name or repoURL) of a multi-source Application that Stagecoach promotes"
// +kubebuilder:validation:XValidation:rule="has(self.apiVersion) || self.kind in ['Application', 'ApplicationSet', 'OCIRepository', 'GitRepository', 'Kustomization', 'HelmRelease']",messageExpression="'applyRef.apiVersion is required for kind ' + self.kind + ': only Application, ApplicationSet, OCIRepository, GitRepository, Kustomization and HelmRelease are known without it'"
type ApplierReference struct {
	// APIVersion of the applier, for example argoproj.io/v1alpha1. Optional for the built-in kinds.
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?v[0-9]+((alpha|beta)[0-9]+)?$`
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`

	// Kind of the applier.
	// +kubebuilder:validation:MinLength=1
	// +required
	Kind string `json:"kind"`

	// Name of the applier, in the Stage's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// Image, for a Flux Kustomization, names the spec.images entry whose digest Stagecoach sets.
	// Without it the version goes to spec.postBuild.substitute (STAGECOACH_DIGEST, STAGECOACH_VERSION).
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Image string `json:"image,omitempty"`

	// Kustomization, for a Flux OCIRepository or GitRepository, names the Kustomization (same
	// namespace, same stagecoach.dev/stage label) that applies the repository's artifact: the
	// version has landed only when that Kustomization is Ready with the digest (or commit) as its
	// lastAppliedRevision.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Kustomization string `json:"kustomization,omitempty"`

	// Source, for a multi-source Argo CD Application, names the source Stagecoach promotes: its
	// sources[].name, or its repoURL. Every other source must be pinned to a commit SHA or a
	// digest for the Stage to be Mediated.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Source string `json:"source,omitempty"`

	// ValuesKey, for a Flux HelmRelease, is the dotted path in spec.values that carries the
	// digest (for example image.digest). Without it the version's tag is the chart version.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	ValuesKey string `json:"valuesKey,omitempty"`

	// Set, for a kind without a built-in applier, lists the fields that carry the version.
	// Promoting server-side applies exactly these fields, with Stagecoach's field manager.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Set []FieldSetting `json:"set,omitempty"`
}

// FieldSetting is one field of the applier that carries the version.
type FieldSetting struct {
	// Path is a JSON pointer (RFC 6901) into the object's spec, or into metadata.labels or
	// metadata.annotations; never status. A list index crosses a list whose items have a name
	// (for example /spec/template/spec/containers/0/image).
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/spec/') || self.startsWith('/metadata/labels/') || self.startsWith('/metadata/annotations/')",message="path must point into /spec/, /metadata/labels/ or /metadata/annotations/: Stagecoach never writes status or other metadata"
	// +required
	Path string `json:"path"`

	// Value is a Go template over the version: {{ .Digest }}, {{ .Version }} (the tag),
	// {{ .Revision }} (a commit's SHA for a Git source, the digest otherwise), {{ .Repository }}
	// and {{ .Image }} (repository@digest): the repository of spec.source.registry, or
	// spec.source.upstream.repository for a Stage taking an upstream's versions.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +required
	Value string `json:"value"`
}

// CompletionRules read an applier's completion from its status, through gjson paths.
//
// +kubebuilder:validation:XValidation:rule="has(self.observedCompletion) != has(self.observedMatches)",message="completion must set exactly one of observedCompletion or observedMatches"
type CompletionRules struct {
	// ObservedCompletion compares fields of the status, once status.observedGeneration equals
	// metadata.generation.
	// +optional
	ObservedCompletion *ObservedCompletion `json:"observedCompletion,omitempty"`

	// ObservedMatches lists spec/status field pairs that must all be equal, for kinds that report
	// no observedGeneration.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +optional
	ObservedMatches []ObservedMatch `json:"observedMatches,omitempty"`
}

// ObservedCompletion says which status value means succeeded and which means failed.
//
// +kubebuilder:validation:XValidation:rule="has(self.succeeded)",message="observedCompletion needs succeeded: failed alone cannot tell when the object finished"
type ObservedCompletion struct {
	// Succeeded holds when the object finished well.
	// +optional
	Succeeded *FieldMatch `json:"succeeded,omitempty"`

	// Failed holds when the object failed; failure overrides success.
	// +optional
	Failed *FieldMatch `json:"failed,omitempty"`
}

// FieldMatch holds when the gjson path Key of an object reads Value.
type FieldMatch struct {
	// Key is a gjson path, for example status.conditions.#(type=="Ready").status.
	// +kubebuilder:validation:MinLength=1
	// +required
	Key string `json:"key"`

	// Value is the string the path must read.
	// +required
	Value string `json:"value"`
}

// ObservedMatch holds when the gjson path Input (in the spec) reads the same as Output (in the status).
type ObservedMatch struct {
	// +kubebuilder:validation:MinLength=1
	// +required
	Input string `json:"input"`
	// +kubebuilder:validation:MinLength=1
	// +required
	Output string `json:"output"`
}
