package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// StageKind is the kind name of a Stage.
const StageKind = "Stage"

// Stage is one service in one environment: which object applies its version, where its next
// versions come from, and the gates a version must pass to get there.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=stg
// +kubebuilder:printcolumn:name="Environment",type=string,JSONPath=`.spec.environment`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.current.version`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Stage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec StageSpec `json:"spec"`
	// +kubebuilder:default={"observedGeneration":-1}
	Status StageStatus `json:"status,omitempty"`
}

// StageSpec is the desired behaviour of a Stage.
//
// +kubebuilder:validation:XValidation:rule="!has(self.promotion) || !has(self.promotion.git) || self.applyRef.kind == 'Application' || self.applyRef.kind == 'GitRepository'",message="promotion.git needs an applyRef that syncs the environment's branch: an Argo CD Application or a Flux GitRepository"
// +kubebuilder:validation:XValidation:rule="!has(self.promotion) || !has(self.promotion.git) || !has(self.promotion.git.merge) || !self.promotion.git.merge || has(self.source.git)",message="promotion.git.merge merges a promoted commit: the Stage needs source.git (a Stage of Git commits); to promote an image digest, use promotion.git.set"
// +kubebuilder:validation:XValidation:rule="!has(self.waves) || size(self.waves) == 0 || self.applyRef.kind == 'ApplicationSet'",message="waves are only allowed when applyRef.kind is ApplicationSet: waves roll a version out over the clusters of an ApplicationSet"
// +kubebuilder:validation:XValidation:rule="has(self.completion) || self.applyRef.kind in ['Application', 'ApplicationSet', 'OCIRepository', 'GitRepository', 'Kustomization', 'HelmRelease']",message="spec.completion is required for an applyRef kind without a built-in observer: say how to read completion from its status (observedCompletion or observedMatches)"
// +kubebuilder:validation:XValidation:rule="has(self.applyRef.set) || self.applyRef.kind in ['Application', 'ApplicationSet', 'OCIRepository', 'GitRepository', 'Kustomization', 'HelmRelease']",message="spec.applyRef.set is required for an applyRef kind without a built-in applier: say which fields carry the version, for example {path: /spec/template/spec/containers/0/image, value: '{{ .Image }}'}"
// +kubebuilder:validation:XValidation:rule="!has(self.applyRef.set) || !(self.applyRef.kind in ['Application', 'ApplicationSet', 'OCIRepository', 'GitRepository', 'Kustomization', 'HelmRelease'])",message="spec.applyRef.set is only for kinds without a built-in applier: Stagecoach already knows where this applyRef.kind carries the version"
type StageSpec struct {
	// Service names the service this Stage carries (for example payments).
	// +kubebuilder:validation:MinLength=1
	// +required
	Service string `json:"service"`

	// Environment names the environment this Stage is (for example prod).
	// +kubebuilder:validation:MinLength=1
	// +required
	Environment string `json:"environment"`

	// ApplyRef is the object, in the Stage's namespace, that applies the version: an Argo CD
	// Application or ApplicationSet, a Flux OCIRepository, Kustomization or HelmRelease, or any
	// kind whose completion can be read from its status (see completion).
	// +required
	ApplyRef ApplierReference `json:"applyRef"`

	// Author is who wrote this Stage's applyRef: the controller writes to an applier of a kind
	// without a built-in observer only what the author may write (asked of the API server as a
	// SubjectAccessReview before each write), and such a Stage is not Ready without one. The
	// stage-author-guard admission policy requires it to name the user who creates the Stage or
	// changes its applyRef or author, in groups that user is in.
	// +optional
	Author *StageAuthor `json:"author,omitempty"`

	// Completion says how to read from the applier's status that it has finished: required for
	// kinds Stagecoach has no built-in observer for; on a built-in kind both the built-in proof and
	// these rules must hold.
	// +optional
	Completion *CompletionRules `json:"completion,omitempty"`

	// Source is where the Stage's next versions come from.
	// +required
	Source StageSource `json:"source"`

	// Promotion holds the gates a version must pass before it is applied.
	// +optional
	Promotion *PromotionPolicy `json:"promotion,omitempty"`

	// Verification says when an applied version counts as landed and verified.
	// +optional
	Verification *VerificationPolicy `json:"verification,omitempty"`

	// Rollback says what happens when a promote fails.
	// +optional
	Rollback *RollbackPolicy `json:"rollback,omitempty"`

	// Waves roll a version out over the clusters of an ApplicationSet, wave by wave.
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	// +optional
	Waves []Wave `json:"waves,omitempty"`

	// AllowPartial accepts a wave plan that leaves some clusters of the ApplicationSet out.
	// By default such a plan is refused, since it is usually a mistake in the selectors.
	// +optional
	AllowPartial bool `json:"allowPartial,omitempty"`

	// DependsOn lists Stages that must be Verified (at a version meeting a constraint) before
	// this Stage promotes.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	DependsOn []StageDependency `json:"dependsOn,omitempty"`

	// Prerequisites must hold in this cluster before a version is promoted here.
	// +optional
	Prerequisites *Prerequisites `json:"prerequisites,omitempty"`

	// Attest, when set, attaches a signed in-toto attestation to each OCI digest this Stage
	// verifies (predicate type https://stagecoach.dev/attestation/promotion/v1), signed by the
	// controller's --attestation-key-secret, as a Sigstore bundle referrer in the repository the
	// versions live in: a Stage downstream, or an admission policy, can then require that a digest
	// passed this one.
	// +optional
	Attest *AttestPolicy `json:"attest,omitempty"`

	// Suspend stops all promotion of this Stage: nothing starts and automation stops; a
	// Promotion already running finishes. Its status is still kept.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// Prerequisites are conditions on the cluster a Stage promotes into.
type Prerequisites struct {
	// KubernetesVersion is a semver constraint on the API server's version (for example
	// ">=1.30.0"): while the cluster does not meet it, candidates wait (gate prerequisites,
	// reason KubernetesVersion).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +optional
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
}

// AdoptedRevision is what an applier held when a Stage took it over.
type AdoptedRevision struct {
	// Revision is the applier's value then: a digest, or for an Argo CD Application a tag.
	// +optional
	Revision string `json:"revision,omitempty"`

	// At is when the Stage took the applier over.
	// +required
	At metav1.Time `json:"at"`
}

// StageAuthor is the identity a Stage writes to its applier with.
type StageAuthor struct {
	// User is the author's Kubernetes user name (kubectl auth whoami).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +required
	User string `json:"user"`

	// Groups of the author whose rights count too.
	// +kubebuilder:validation:MaxItems=32
	// +listType=set
	// +optional
	Groups []string `json:"groups,omitempty"`
}

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

// StageSource is where a Stage's next versions come from: exactly one of its fields.
//
// +kubebuilder:validation:XValidation:rule="[has(self.registry), has(self.git), has(self.upstream), has(self.upstreamRecords)].filter(x, x).size() == 1",message="source must set exactly one of registry, git, upstream or upstreamRecords"
type StageSource struct {
	// Registry offers the tags of an OCI repository.
	// +optional
	Registry *RegistrySource `json:"registry,omitempty"`

	// Git offers the commits of a Git repository: each new commit of a branch, or each tag that
	// meets a semver constraint. Its versions are commits (digest sha1:<40 hex>), not OCI digests.
	// +optional
	Git *GitSource `json:"git,omitempty"`

	// Upstream offers the versions another Stage in this cluster has Verified.
	// +optional
	Upstream *UpstreamSource `json:"upstream,omitempty"`

	// UpstreamRecords offers the versions another Stage's signed records show as verified,
	// read from an OCI registry (the upstream may be in another cluster).
	// +optional
	UpstreamRecords *UpstreamRecordsSource `json:"upstreamRecords,omitempty"`
}

// RegistrySource lists the tags of an OCI repository.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.semver) && has(self.pattern))",message="registry may set semver or pattern, not both"
type RegistrySource struct {
	// Repository is the OCI repository, for example registry.example/deploy/payments.
	// +kubebuilder:validation:MinLength=1
	// +required
	Repository string `json:"repository"`

	// Semver is a constraint tags must meet, for example ">=1.0.0" or "^1.2 || ~2.0.3", in the
	// syntax of Flux's ImagePolicy semver range (github.com/Masterminds/semver/v3). Tags are versions
	// only with all three numbers (an optional "v" first); prereleases only meet a constraint that
	// names one (">=1.0.0-0").
	// +optional
	Semver string `json:"semver,omitempty"`

	// Pattern is a regular expression tags must match.
	// +optional
	Pattern string `json:"pattern,omitempty"`

	// Interval between two listings of the repository (default 1m).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$')",message="interval must be a duration such as 1m or 1h30m"
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`

	// SecretRef names a docker-config Secret with the credentials for the registry.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`

	// Insecure allows plain HTTP to a registry that is not on loopback.
	// +optional
	Insecure bool `json:"insecure,omitempty"`

	// Verify checks every candidate's signature before it is offered.
	// +optional
	Verify *VerifySpec `json:"verify,omitempty"`
}

// GitSource offers the commits of a Git repository as versions. A version is a commit: its digest
// is sha1:<40 hex> (Flux's revision form), its tag the Git tag or the commit's short SHA. The
// repository is fetched when the interval has passed; one clone per repository and credentials is
// kept and fetched incrementally.
//
// +kubebuilder:validation:XValidation:rule="has(self.url) != has(self.sourceRef)",message="git must set exactly one of url (a repository) or sourceRef (a Flux GitRepository whose artifact it follows)"
// +kubebuilder:validation:XValidation:rule="has(self.sourceRef) ? !has(self.branch) && !has(self.semver) && !has(self.secretRef) : has(self.branch) != has(self.semver)",message="git must set exactly one of branch (each new commit) or semver (tags that meet a constraint); with sourceRef, the GitRepository's ref and secretRef are used, so set neither"
// +kubebuilder:validation:XValidation:rule="!has(self.paths) || has(self.branch) || has(self.sourceRef)",message="git.paths selects the commits of a branch: set branch"
// +kubebuilder:validation:XValidation:rule="!has(self.url) || !self.url.startsWith('http://') || self.insecure",message="git.url uses plain http: use https, or set insecure: true for a server you trust on your network"
type GitSource struct {
	// URL of the repository: https://, ssh:// or (with insecure) http://. Exactly one of url
	// or sourceRef.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^(https?|ssh)://[^/]+/.+')",message="git.url must be an https://, ssh:// or http:// URL of a repository, for example https://git.example/org/config.git"
	// +optional
	URL string `json:"url,omitempty"`

	// SourceRef names a Flux GitRepository in the Stage's namespace whose artifact the Stage
	// follows: the repository is fetched from its url with its secretRef, at its ref (a branch, or
	// a semver range), and a commit is offered once source-controller has fetched it into the
	// artifact (and verified it, when the GitRepository sets spec.verify), never beyond it.
	// +optional
	SourceRef *LocalObjectReference `json:"sourceRef,omitempty"`

	// SecretRef names a Secret in the Stage's namespace with the credentials, in the format of
	// Flux's GitRepository: username and password (HTTPS basic authentication), bearerToken
	// (HTTPS), or identity and known_hosts (SSH); ca.crt adds a certificate authority for HTTPS.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`

	// Branch whose commits are versions, newest first; automation never goes back to a commit
	// that is not a descendant of the one running.
	// +kubebuilder:validation:MaxLength=255
	// +optional
	Branch string `json:"branch,omitempty"`

	// Paths keep only the commits of the branch that change a file under one of them (a
	// directory, or a file), for example the overlay of this environment.
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=1024
	// +optional
	Paths []string `json:"paths,omitempty"`

	// Semver is a constraint the repository's tags must meet, for example ">=1.0.0", in the syntax
	// of registry.semver; each tag that meets it is a version of the commit it points to.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Semver string `json:"semver,omitempty"`

	// Interval between two fetches of the repository (default 1m).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$')",message="interval must be a duration such as 1m or 1h30m"
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`

	// Insecure allows plain HTTP.
	// +optional
	Insecure bool `json:"insecure,omitempty"`

	// Verify checks each commit's (or tag's) signature before it is offered; a version whose
	// signature is missing or from no trusted key is skipped with its reason.
	// +optional
	Verify *GitVerification `json:"verify,omitempty"`
}

// GitVerification says how a commit's signature is verified, as Flux's GitRepository verify: with
// OpenPGP public keys and SSH public keys from a Secret.
type GitVerification struct {
	// Mode is what must be signed: HEAD (the commit), Tag (the annotated tag, semver only) or
	// TagAndHEAD (both).
	// +kubebuilder:validation:Enum=HEAD;Tag;TagAndHEAD
	// +kubebuilder:default=HEAD
	// +optional
	Mode string `json:"mode,omitempty"`

	// SecretRef names a Secret in the Stage's namespace whose entries are the trusted keys: an
	// entry ending .sshpub holds SSH public keys (authorized_keys format), any other entry (.asc)
	// an armored OpenPGP key ring.
	// +required
	SecretRef LocalObjectReference `json:"secretRef"`
}

// VerifySpec says how a version's cosign signature is verified: with public keys (secretRef),
// keyless (matchOIDCIdentity: the CI identity a short-lived Fulcio certificate names, checked
// against a Sigstore trusted root, offline), or both (a signature either trusts counts). Legacy
// .sig signatures and Sigstore bundles attached as OCI referrers count alike; a signature counts
// only for the digest it names.
//
// +kubebuilder:validation:XValidation:rule="has(self.secretRef) || (has(self.matchOIDCIdentity) && size(self.matchOIDCIdentity) > 0)",message="verify needs secretRef (public keys) or matchOIDCIdentity (keyless identities)"
// +kubebuilder:validation:XValidation:rule="!has(self.trustedRoot) || has(self.matchOIDCIdentity)",message="trustedRoot is for keyless signatures: set matchOIDCIdentity to the identities that sign"
type VerifySpec struct {
	// Attestations are in-toto attestations each version must carry, signed by whom each entry
	// trusts and meeting its condition; a version without them is skipped with the reason.
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Attestations []AttestationRequirement `json:"attestations,omitempty"`

	// Provider of the signatures; only cosign.
	// +kubebuilder:validation:Enum=cosign
	// +kubebuilder:default=cosign
	// +optional
	Provider string `json:"provider,omitempty"`

	// SecretRef names a Secret whose every *.pub key is a trusted cosign public key.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`

	// MatchOIDCIdentity lists the keyless identities a signature may carry, as Flux's
	// OCIRepository spells them: a keyless signature counts when its certificate's OIDC issuer
	// and subject (for GitHub Actions, the workflow's URL at its ref) match one entry.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="matchOIDCIdentity must list at least one {issuer, subject}: an empty list trusts no keyless signer (leave the field out to trust only the keys of secretRef)"
	// +optional
	MatchOIDCIdentity []OIDCIdentityMatch `json:"matchOIDCIdentity,omitempty"`

	// TrustedRoot is where the Sigstore trust roots of keyless signatures come from: a Secret
	// entry holding a trusted_root.json (as Sigstore publishes it) of a private Fulcio and Rekor,
	// or a newer copy of the public instance's. Unset: the public Sigstore instance's trusted
	// root, shipped with Stagecoach.
	// +optional
	TrustedRoot *TrustedRootSource `json:"trustedRoot,omitempty"`
}

// OIDCIdentityMatch is a keyless signing identity, as regular expressions that must match the
// whole value (as if between ^ and $), for example issuer
// "^https://token.actions.githubusercontent.com$" and subject
// "^https://github.com/org/app/.github/workflows/release.yml@refs/tags/v.*$".
type OIDCIdentityMatch struct {
	// Issuer is a regular expression the OIDC issuer must match.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +required
	Issuer string `json:"issuer"`
	// Subject is a regular expression the certificate subject must match.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +required
	Subject string `json:"subject"`
}

// TrustedRootSource names a trusted_root.json in a Secret of the Stage's namespace (a Secret, as
// Flux's trustedRootSecretRef: the controller reads Secrets the Stage names, and no ConfigMap
// cluster-wide).
type TrustedRootSource struct {
	// SecretRef names the Secret holding the trusted root.
	// +required
	SecretRef LocalObjectReference `json:"secretRef"`

	// Key is the entry holding the JSON (default trusted_root.json).
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +optional
	Key string `json:"key,omitempty"`
}

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`
}

// UpstreamSource names a Stage in this cluster whose Verified versions this Stage takes.
type UpstreamSource struct {
	// Stage is the upstream Stage's name.
	// +kubebuilder:validation:MinLength=1
	// +required
	Stage string `json:"stage"`

	// Namespace of the upstream Stage; this Stage's namespace when empty.
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// Repository is the OCI repository this Stage takes its upstream's versions from: the one
	// {{ .Repository }} and {{ .Image }} render in spec.applyRef.set. A Stage renders only a
	// repository its own spec names, never one an upstream Stage's editor chose; when the head of
	// the upstream chain offers versions of another repository, the Stage is not Ready
	// (UpstreamRepositoryMismatch) and nothing is written.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Repository string `json:"repository,omitempty"`

	// Verify checks what the version carries before this Stage takes it, in the repository at the
	// head of the upstream chain (with its registry credentials when that Stage is in this
	// namespace): for example the promotion attestation the upstream Stage attached.
	// +optional
	Verify *UpstreamVerification `json:"verify,omitempty"`
}

// AttestPolicy says how a Stage attaches its promotion attestations.
//
// +kubebuilder:validation:XValidation:rule="!has(self.insecure) || !self.insecure || has(self.repository)",message="attest.insecure is for attest.repository: set the repository the attestations go to"
type AttestPolicy struct {
	// Repository the attestations are pushed to, where the digests exist (the repository the
	// versions live in, or a mirror that keeps digests). Unset: the repository of the Stage's
	// registry source or, for a Stage taking an upstream's versions, that of the Stage at the head
	// of the upstream chain, pushed to anonymously only: credentials go only to a repository this
	// Stage names itself.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Repository string `json:"repository,omitempty"`

	// Insecure allows plain HTTP to attest.repository when it is not on loopback.
	// +optional
	Insecure bool `json:"insecure,omitempty"`

	// SecretRef names a docker-config Secret in the Stage's namespace with the right to push to
	// the repository. The Stage's author must be allowed to get it (as for promotion.git). Used
	// only for the Stage's own registry source's repository or attest.repository. Unset: the push
	// is anonymous (a registry on the controller's network that takes anonymous pushes).
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
}

// UpstreamVerification is what a Stage that takes an upstream's versions checks on each of them.
type UpstreamVerification struct {
	// Attestations each version must carry (see VerifySpec.attestations).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +required
	Attestations []AttestationRequirement `json:"attestations"`
}

// AttestationRequirement is an in-toto attestation a version must carry: a statement of the
// predicate type about this very digest, attached the way cosign attaches it (a Sigstore bundle
// as an OCI referrer, or a DSSE envelope under the legacy <repo>:sha256-<hex>.att tag), signed by
// a trusted key or keyless identity, whose condition holds. Checked offline, like signatures.
//
// +kubebuilder:validation:XValidation:rule="has(self.secretRef) || (has(self.matchOIDCIdentity) && size(self.matchOIDCIdentity) > 0)",message="an attestation needs who must have signed it: secretRef (public keys) or matchOIDCIdentity (keyless identities)"
// +kubebuilder:validation:XValidation:rule="!has(self.trustedRoot) || has(self.matchOIDCIdentity)",message="trustedRoot is for keyless signatures: set matchOIDCIdentity to the identities that sign"
type AttestationRequirement struct {
	// PredicateType is the statement's predicateType: a URI such as
	// https://slsa.dev/provenance/v1, or one of cosign's short names: slsaprovenance1,
	// slsaprovenance (v0.2), spdxjson, cyclonedx, vuln, openvex, custom.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +required
	PredicateType string `json:"predicateType"`

	// Condition is a CEL expression over the statement that must be true, with the variables
	// predicate (the predicate, as JSON), predicateType and subject, for example
	// predicate.buildDefinition.externalParameters.workflow.repository == "https://github.com/org/app".
	// Unset: any verified statement of the type counts. An expression that errors (a missing
	// field) does not pass.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Condition string `json:"condition,omitempty"`

	// SecretRef names a Secret whose every *.pub entry is a trusted cosign public key.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`

	// MatchOIDCIdentity lists the keyless identities that may sign the attestation (as
	// verify.matchOIDCIdentity).
	// +kubebuilder:validation:MaxItems=16
	// +optional
	MatchOIDCIdentity []OIDCIdentityMatch `json:"matchOIDCIdentity,omitempty"`

	// TrustedRoot of keyless signatures (as verify.trustedRoot).
	// +optional
	TrustedRoot *TrustedRootSource `json:"trustedRoot,omitempty"`
}

// UpstreamRecordsSource follows another Stage through its signed records. The upstream's versions
// are OCI digests (checked in applyRepository) or, with gitRepository, Git commits of a config
// repository (checked there): a Stage says which it takes.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.applyRepository) && has(self.gitRepository))",message="upstreamRecords sets applyRepository (the upstream's versions are OCI digests) or gitRepository (they are Git commits), not both"
type UpstreamRecordsSource struct {
	// Repository holds the records, for example registry.example/delivery/streams.
	// +kubebuilder:validation:MinLength=1
	// +required
	Repository string `json:"repository"`

	// Stream is the upstream Stage's status.stream.id.
	// +kubebuilder:validation:MinLength=1
	// +required
	Stream string `json:"stream"`

	// SecretRef names a docker-config Secret with the credentials for the registry.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`

	// ApplyRepository is the OCI repository this Stage applies from (the upstream's repository
	// or a mirror that keeps digests); a version offered by the records must exist there.
	// When empty it is read from the applier (an Argo CD OCI source's repoURL, a Flux
	// OCIRepository's url).
	// +optional
	ApplyRepository string `json:"applyRepository,omitempty"`

	// GitRepository makes this Stage take Git commits: the upstream's versions are commits
	// (sha1:<SHA>) of a config repository, and each one the records offer must be on a branch of
	// this repository, the one this Stage's applier fetches (the upstream's, or a mirror).
	// Fetched with secretRef's credentials only when the Stage's author may read that Secret.
	// +optional
	GitRepository *GitRepositoryReference `json:"gitRepository,omitempty"`

	// MaxAge bounds how old the newest trusted record of the stream may be. A repository (or a
	// mirror) that stops showing the upstream's newest records would hide a failure recorded
	// there; with maxAge set, a stream whose newest trusted record is older is refused (the
	// Stage is not Ready, UpstreamStale, and nothing is promoted from it) until a newer one
	// arrives. The upstream writes a record only when it takes a step, so set it above the
	// longest time the upstream goes without one. Unset: no bound.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$')",message="maxAge must be a duration such as 24h or 168h"
	// +optional
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
}

// GitRepositoryReference is a Git repository a Stage reads, and how.
//
// +kubebuilder:validation:XValidation:rule="!self.url.startsWith('http://') || self.insecure",message="gitRepository.url uses plain http: use https, or set insecure: true for a server you trust on your network"
type GitRepositoryReference struct {
	// URL of the repository: https://, ssh:// or (with insecure) http://.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^(https?|ssh)://[^/]+/.+')",message="gitRepository.url must be an https://, ssh:// or http:// URL of a repository, for example https://git.example/org/config.git"
	// +required
	URL string `json:"url"`

	// SecretRef names a Secret in the Stage's namespace with the credentials, in the format of
	// source.git.secretRef.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`

	// Insecure allows plain HTTP.
	// +optional
	Insecure bool `json:"insecure,omitempty"`
}

// PromotionPolicy holds the gates before apply.
type PromotionPolicy struct {
	// Auto promotes the newest eligible version without a person asking.
	// +optional
	Auto bool `json:"auto,omitempty"`

	// Supersede says which running promotes a newer Promotion replaces while they have not
	// landed: Automatic (the default) the ones automation created, All a person's too, Never
	// none. The one replaced ends Aborted, superseded, never verified; the newer one starts at
	// once, through its own gates. A promote that has landed (in its soak or checks) is never
	// superseded: only a Rollback stops it.
	// +kubebuilder:validation:Enum=Automatic;All;Never
	// +optional
	Supersede SupersedePolicy `json:"supersede,omitempty"`

	// Soak is how long a version must have been Verified upstream (upstream sources) or offered
	// by the registry (registry sources: since Stagecoach first saw the tag at that digest).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$')",message="soak must be a duration such as 30m or 1h30m"
	// +optional
	Soak *metav1.Duration `json:"soak,omitempty"`

	// Approvals required before a version is applied.
	// +optional
	Approvals *ApprovalPolicy `json:"approvals,omitempty"`

	// Windows allow (or deny) promotion at certain times; deny wins.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Windows []TimeWindow `json:"windows,omitempty"`

	// Checks run before apply.
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=name
	// +optional
	Checks []Check `json:"checks,omitempty"`

	// Git makes each promotion a commit to the environment's branch of a Git repository instead
	// of a write to the applier: Git keeps saying what runs. applyRef is then the engine object
	// that syncs that branch (an Argo CD Application whose Git source follows it, or a Flux
	// GitRepository on it), and a version has landed when that object runs the commit Stagecoach
	// pushed.
	// +optional
	Git *GitPromotion `json:"git,omitempty"`
}

// SupersedePolicy says which running promotes a newer Promotion replaces before they land.
type SupersedePolicy string

const (
	SupersedeAutomatic SupersedePolicy = "Automatic"
	SupersedeAll       SupersedePolicy = "All"
	SupersedeNever     SupersedePolicy = "Never"
)

// GitPromotion is how a promotion is written to Git: the environment's repository and branch,
// what the commit changes (set a version into files, or merge the promoted commit), and who signs.
// +kubebuilder:validation:XValidation:rule="(has(self.set) && size(self.set) > 0) != (has(self.merge) && self.merge)",message="promotion.git must set exactly one of set (write the version into files) or merge: true (merge the promoted commit of a Stage of Git commits)"
// +kubebuilder:validation:XValidation:rule="!self.url.startsWith('http://') || self.insecure",message="promotion.git.url uses plain http: use https, or set insecure: true for a server you trust on your network"
// +kubebuilder:validation:XValidation:rule="!has(self.pullRequest) || !has(self.pullRequest.apiURL) || !self.pullRequest.apiURL.startsWith('http://') || self.insecure",message="promotion.git.pullRequest.apiURL uses plain http, which would send the forge token in the clear: use https, or set insecure: true for a server you trust on your network"
type GitPromotion struct {
	// URL of the environment's repository: https://, ssh:// or (with insecure) http://.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^(https?|ssh)://[^/]+/.+')",message="promotion.git.url must be an https://, ssh:// or http:// URL of a repository, for example https://git.example/org/config.git"
	// +required
	URL string `json:"url"`

	// SecretRef names a Secret in the Stage's namespace with credentials that may push, in the
	// format of Flux's GitRepository: username and password, bearerToken, or identity and
	// known_hosts (SSH). The Stage's author must be allowed to read it.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`

	// Insecure allows plain HTTP.
	// +optional
	Insecure bool `json:"insecure,omitempty"`

	// Branch of the environment, which the applier syncs; it must exist.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('refs/') && !self.contains('..') && !self.endsWith('/')",message="promotion.git.branch is a branch name such as env/staging, not a ref"
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9._/+-]+$') && !self.startsWith('-') && !self.startsWith('/') && !self.contains('//') && !self.endsWith('.lock') && !self.endsWith('.')",message="promotion.git.branch must be a valid Git branch name: letters, digits and . _ / + -"
	// +required
	Branch string `json:"branch"`

	// Set writes the version into files of the branch, keeping their comments and order.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Set []GitFileEdit `json:"set,omitempty"`

	// Merge fast-forwards the branch to the promoted commit (a Stage of Git commits of this
	// repository), or, when the branch has commits of its own, commits the promoted commit's
	// tree on top of it with both as parents: the branch then holds exactly what was promoted.
	// +optional
	Merge bool `json:"merge,omitempty"`

	// Author of the commits (default Stagecoach <stagecoach@stagecoach.dev>).
	// +optional
	Author *GitAuthor `json:"author,omitempty"`

	// SigningKeyRef names a Secret in the Stage's namespace whose key signs each commit, in the
	// format of Flux's ImageUpdateAutomation: git.asc (an armored OpenPGP private key) with an
	// optional passphrase, or identity (an SSH private key) with an optional password. Branch
	// protection can then require signed commits; Argo CD verifies OpenPGP signatures only.
	// +optional
	SigningKeyRef *LocalObjectReference `json:"signingKeyRef,omitempty"`

	// PullRequest opens a pull request with each promotion's commit, from a branch of its own
	// (stagecoach/<namespace>/<Stage>/<Promotion>) into branch, instead of pushing to branch: its body lists
	// the version, each gate's verdict and the diff. Stagecoach merges it (merge: Auto), or a
	// person does (merge: Manual) and the Promotion waits; a request closed without merging, in
	// conflict, or whose branch someone else pushed to fails the Promotion.
	// +optional
	PullRequest *GitPullRequest `json:"pullRequest,omitempty"`
}

// GitPullRequest is how promotions are proposed on the forge.
type GitPullRequest struct {
	// Provider is the forge: Gitea, GitHub or GitLab (merge requests).
	// +kubebuilder:validation:Enum=Gitea;GitHub;GitLab
	// +required
	Provider string `json:"provider"`

	// APIURL of the forge; by default found from url: https://api.github.com for github.com,
	// https://<host>/api/v3 for GitHub Enterprise, https://<host>/api/v4 for GitLab, and the
	// host itself for Gitea.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^https?://[^/]+')",message="pullRequest.apiURL must be an https:// or http:// URL"
	// +optional
	APIURL string `json:"apiURL,omitempty"`

	// TokenSecretRef names a Secret in the Stage's namespace whose key token is an API token that
	// may open and merge pull requests. The Stage's author must be allowed to read it.
	// +required
	TokenSecretRef LocalObjectReference `json:"tokenSecretRef"`

	// Merge says who merges: Auto, Stagecoach as soon as it is open (the gates have passed), or
	// Manual, a person, and the Promotion waits (without a progress deadline) until they do.
	// +kubebuilder:validation:Enum=Auto;Manual
	// +kubebuilder:default=Auto
	// +optional
	Merge string `json:"merge,omitempty"`

	// MergeStyle of Stagecoach's merges: merge (default), squash or rebase.
	// +kubebuilder:validation:Enum=merge;squash;rebase
	// +optional
	MergeStyle string `json:"mergeStyle,omitempty"`
}

// Who merges a promotion's pull request.
const (
	PullRequestMergeAuto   = "Auto"
	PullRequestMergeManual = "Manual"
)

// GitFileEdit writes the version into one file.
// +kubebuilder:validation:XValidation:rule="has(self.image) != has(self.key)",message="a promotion.git.set entry must set exactly one of image (a kustomization's images entry) or key (a YAML path)"
// +kubebuilder:validation:XValidation:rule="!has(self.value) || has(self.key)",message="promotion.git.set value goes with key: an image entry is given the digest"
type GitFileEdit struct {
	// Path of the file in the repository, for example overlays/staging/kustomization.yaml.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.contains('..')",message="promotion.git.set path is relative to the repository's root and stays inside it"
	// +required
	Path string `json:"path"`

	// Image names the entry of the kustomization's images list whose digest is set (newTag is
	// removed: the digest decides).
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Image string `json:"image,omitempty"`

	// Key is a dotted YAML path, for example image.digest, set to value in every document of the
	// file that has it (created where missing).
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Key string `json:"key,omitempty"`

	// Value written at key: a template of {{ .Digest }}, {{ .Version }}, {{ .Revision }} (a
	// commit's SHA) and {{ .Stage }}; default {{ .Digest }}.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Value string `json:"value,omitempty"`
}

// BranchCommit is a commit of a repository's branch.
type BranchCommit struct {
	SHA    string `json:"sha"`
	URL    string `json:"url"`
	Branch string `json:"branch"`
}

// GitAuthor is who a commit says wrote it.
type GitAuthor struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +required
	Name string `json:"name"`
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=256
	// +required
	Email string `json:"email"`
}

// ApprovalPolicy requires Approvals from members of groups.
type ApprovalPolicy struct {
	// Required is how many distinct approvers must approve.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=16
	// +required
	Required int32 `json:"required"`

	// Groups whose members may approve; any authenticated user when empty.
	// +optional
	Groups []string `json:"groups,omitempty"`
}

// TimeWindow is a time range that opens at each tick of a cron schedule and lasts duration.
type TimeWindow struct {
	// Kind is Allow (promotion only inside) or Deny (never inside).
	// +kubebuilder:validation:Enum=Allow;Deny
	// +kubebuilder:default=Allow
	// +optional
	Kind string `json:"kind,omitempty"`

	// Schedule in cron syntax (minute hour day-of-month month day-of-week).
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^ *[^ ]+( +[^ ]+){4} *$')",message="schedule must be a cron expression with five fields, such as '0 9 * * 1-5'"
	// +required
	Schedule string `json:"schedule"`

	// Duration of the window.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$')",message="duration must be a duration such as 8h or 30m"
	// +required
	Duration metav1.Duration `json:"duration"`

	// TimeZone is an IANA time zone name such as Europe/Berlin; UTC when empty.
	// +optional
	TimeZone string `json:"timeZone,omitempty"`
}

// Check is a built-in HTTP check, a check plugin or a run: exactly one of them.
//
// +kubebuilder:validation:XValidation:rule="(has(self.http) ? 1 : 0) + (has(self.plugin) ? 1 : 0) + (has(self.run) ? 1 : 0) == 1",message="a check must set exactly one of http, plugin or run"
type Check struct {
	// Name of the check, unique in its list.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Name string `json:"name"`

	// HTTP calls a URL and checks the answer.
	// +optional
	HTTP *HTTPCheck `json:"http,omitempty"`

	// Plugin runs a check plugin (hashicorp/go-plugin).
	// +optional
	Plugin *PluginCheck `json:"plugin,omitempty"`

	// Run creates an object in the Stage's namespace (a Job, a Tekton PipelineRun, any kind) for
	// the version and judges it by completion rules; the Stage's spec.author must be allowed to
	// create it.
	// +optional
	Run *RunCheck `json:"run,omitempty"`

	// Timeout of one attempt (default 30s; for a run, 10m: how long it may take to complete).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$')",message="timeout must be a duration such as 30s"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// Retries after a failed attempt.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	// +optional
	Retries int32 `json:"retries,omitempty"`
}

// RunCheck creates an object for the version, owned by the Promotion, and passes when its
// completion rules say it succeeded (a failed rule wins over a succeeded one). The object is
// created with a generated name in the Stage's namespace, only when the Stage's spec.author may
// create that kind there (a SubjectAccessReview), and labelled stagecoach.dev/stage,
// stagecoach.dev/promotion-uid, stagecoach.dev/check and stagecoach.dev/check-phase; the newest
// runs of each check are kept, older ones deleted.
type RunCheck struct {
	// Template is the object to create: apiVersion, kind, metadata (labels and annotations; no
	// name, no other namespace) and the rest. Its string values may use {{.Version}}, {{.Digest}},
	// {{.Revision}}, {{.Stage}}, {{.Namespace}}, {{.Environment}} and {{.Service}}.
	// +kubebuilder:validation:EmbeddedResource
	// +kubebuilder:pruning:PreserveUnknownFields
	// +required
	Template runtime.RawExtension `json:"template"`

	// Completion says when the run succeeded or failed. Optional for a batch/v1 Job (its Complete
	// and Failed conditions) and a tekton.dev PipelineRun or TaskRun (its Succeeded condition).
	// +optional
	Completion *CompletionRules `json:"completion,omitempty"`

	// Keep is how many runs of this check are kept (default 3); older ones are deleted.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=20
	// +optional
	Keep int32 `json:"keep,omitempty"`
}

// HTTPCheck calls a URL.
type HTTPCheck struct {
	// URL to call.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('http://') || self.startsWith('https://')",message="url must start with http:// or https://"
	// +required
	URL string `json:"url"`

	// Method (default GET).
	// +kubebuilder:validation:Enum=GET;HEAD;POST
	// +optional
	Method string `json:"method,omitempty"`

	// ExpectedStatus is the status code that passes (default 200).
	// +kubebuilder:validation:Minimum=100
	// +kubebuilder:validation:Maximum=599
	// +optional
	ExpectedStatus int32 `json:"expectedStatus,omitempty"`

	// Body, when set, must hold on the JSON response body.
	// +optional
	Body *FieldMatch `json:"body,omitempty"`

	// FollowRedirects lets the check follow redirects (at most 10, each to a target the
	// controller may call). Off by default: a redirect answer is the answer, and its status
	// is compared with expectedStatus.
	// +optional
	FollowRedirects bool `json:"followRedirects,omitempty"`
}

// PluginCheck runs a check plugin binary, pinned by checksum.
type PluginCheck struct {
	// Name of the plugin binary in the controller's plugin directory.
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][a-zA-Z0-9._-]*$`
	// +required
	Name string `json:"name"`

	// SHA256 of the binary; it does not run when the checksum differs.
	// +kubebuilder:validation:Pattern=`^[a-f0-9]{64}$`
	// +required
	SHA256 string `json:"sha256"`

	// Config is handed to the plugin as is.
	// +optional
	Config map[string]string `json:"config,omitempty"`
}

// VerificationPolicy says when an applied version counts as landed and verified.
type VerificationPolicy struct {
	// ProgressDeadline: the version must land within it, else the promote fails (default 10m).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$')",message="progressDeadline must be a duration such as 10m"
	// +optional
	ProgressDeadline *metav1.Duration `json:"progressDeadline,omitempty"`

	// Grace: landed must hold this long before it counts, against flapping health (default 10s).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$')",message="grace must be a duration such as 30s"
	// +optional
	Grace *metav1.Duration `json:"grace,omitempty"`

	// Checks run after landing, before the version is Verified.
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=name
	// +optional
	Checks []Check `json:"checks,omitempty"`
}

// RollbackPolicy says what happens when a promote fails.
type RollbackPolicy struct {
	// Automatic rolls back to the last verified version (default true).
	// +optional
	Automatic *bool `json:"automatic,omitempty"`

	// Limit is how many automatic rollbacks may happen before a person acts (default 1).
	// +kubebuilder:validation:Minimum=0
	// +optional
	Limit *int32 `json:"limit,omitempty"`
}

// StageDependency requires another Stage to be Verified at a version meeting a constraint.
type StageDependency struct {
	// Stage is the other Stage's name.
	// +kubebuilder:validation:MinLength=1
	// +required
	Stage string `json:"stage"`

	// Namespace of the other Stage; this Stage's namespace when empty.
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// Version is a semver constraint its current version must meet, as in the registry source's
	// semver; any when empty.
	// +optional
	Version string `json:"version,omitempty"`
}

// StageStatus is the observed state of a Stage.
type StageStatus struct {
	// ObservedGeneration is the generation last reconciled; -1 before the first reconcile.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration"`

	// Conditions, at most one per type.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LastHandledReconcileAt is the last stagecoach.dev/requested-at value handled.
	// +optional
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`

	// Applier is the object the Stage resolved applyRef to.
	// +optional
	Applier *ObjectReference `json:"applier,omitempty"`

	// Current is the version running, and since when.
	// +optional
	Current *CurrentVersion `json:"current,omitempty"`

	// Candidate is the next version and what blocks it.
	// +optional
	Candidate *CandidateVersion `json:"candidate,omitempty"`

	// History of promotions, newest first, bounded.
	// +kubebuilder:validation:MaxItems=20
	// +optional
	History []HistoryEntry `json:"history,omitempty"`

	// Waves is the progress of a fleet rollout.
	// +optional
	Waves []WaveStatus `json:"waves,omitempty"`

	// Stream is this Stage's record stream.
	// +optional
	Stream *StreamStatus `json:"stream,omitempty"`

	// UpstreamSeen is the newest upstream record read.
	// +optional
	UpstreamSeen *UpstreamSeen `json:"upstreamSeen,omitempty"`

	// LastAppliedDigest is the digest Stagecoach last wrote to the applier or, before its first
	// write, the value the applier held when this Stage took it over (see adopted; for an Argo CD
	// Application that may be a tag). Any other value found there was written by someone else.
	// +optional
	LastAppliedDigest string `json:"lastAppliedDigest,omitempty"`

	// Adopted records when this Stage took its applier over and what the applier held then
	// (empty when it held no version). It is set once, on the first reconcile with a usable
	// applier before the Stage has applied anything; what someone else writes after that is a
	// foreign write.
	// +optional
	Adopted *AdoptedRevision `json:"adopted,omitempty"`

	// LastCommit is the commit Stagecoach last pushed to promotion.git's branch (or found there
	// holding the version), with the repository and branch: a later commit there on the files it
	// writes that it did not make is a foreign write. Another repository or branch in the spec
	// starts afresh.
	// +optional
	LastCommit *BranchCommit `json:"lastCommit,omitempty"`

	// Hold stops automatic promotion until a person promotes, after a failure.
	// +optional
	Hold *AutomationHold `json:"hold,omitempty"`

	// FailedDigests are versions that failed in this Stage; automation never offers them again.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	FailedDigests []string `json:"failedDigests,omitempty"`

	// AutomaticRollbacks counts rollbacks since a person last promoted.
	// +optional
	AutomaticRollbacks int32 `json:"automaticRollbacks,omitempty"`
}

// AutomationHold says why automatic promotion is held.
type AutomationHold struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Promotion is the failed Promotion that set the hold.
	// +optional
	Promotion string      `json:"promotion,omitempty"`
	Since     metav1.Time `json:"since"`
}

// ObjectReference names an object fully.
type ObjectReference struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace,omitempty"`
}

// CurrentVersion is the version a Stage runs.
type CurrentVersion struct {
	// +optional
	Version string `json:"version,omitempty"`
	// +optional
	Digest string `json:"digest,omitempty"`
	// +optional
	PromotedAt *metav1.Time `json:"promotedAt,omitempty"`
	// +optional
	VerifiedAt *metav1.Time `json:"verifiedAt,omitempty"`
	// Promotion is the name of the Promotion that brought it.
	// +optional
	Promotion string `json:"promotion,omitempty"`
}

// CandidateVersion is the next version and what blocks it.
type CandidateVersion struct {
	// +optional
	Version string `json:"version,omitempty"`
	// +optional
	Digest string `json:"digest,omitempty"`
	// BlockedBy lists every gate that holds the candidate back.
	// +optional
	BlockedBy []GateBlock `json:"blockedBy,omitempty"`
	// FirstSeen is when the source first offered this version at this digest (registry sources;
	// soak counts from it).
	// +optional
	FirstSeen *metav1.Time `json:"firstSeen,omitempty"`
	// Skipped lists the newer versions the source offers that automation passes over for this
	// one (not signed by a trusted key, or failed in this Stage before), newest first, at most 5.
	// +kubebuilder:validation:MaxItems=5
	// +optional
	Skipped []SkippedVersion `json:"skipped,omitempty"`
}

// SkippedVersion is a version newer than the candidate that automation never offers, and why.
type SkippedVersion struct {
	// +optional
	Version string `json:"version,omitempty"`
	Digest  string `json:"digest"`
	// Gate is signature, attestations or history.
	Gate string `json:"gate"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// GateBlock is one gate that holds a candidate back.
type GateBlock struct {
	// Gate is soak, approvals, window, freeze, dependsOn, check, signature or source.
	Gate string `json:"gate"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// Until is when the gate opens by itself, when known.
	// +optional
	Until *metav1.Time `json:"until,omitempty"`
}

// HistoryEntry is one finished promotion of a Stage.
type HistoryEntry struct {
	// +optional
	Version string `json:"version,omitempty"`
	// +optional
	Digest string `json:"digest,omitempty"`
	// +optional
	Action PromotionAction `json:"action,omitempty"`
	// Phase the promotion ended in, in the words of a Promotion's status.phase.
	// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed;RolledBack;Aborted
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// +optional
	Promotion string `json:"promotion,omitempty"`
	// +optional
	PromotedAt *metav1.Time `json:"promotedAt,omitempty"`
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
	// +optional
	Record *RecordReference `json:"record,omitempty"`
}

// StreamStatus is a Stage's own record stream.
type StreamStatus struct {
	// ID is the stream id, <cluster>/<namespace>/<name>: what a follower's
	// spec.source.upstreamRecords.stream names. Empty while records are off.
	// +optional
	ID string `json:"id"`
	// Seq is the newest record written (0 before the first).
	// +optional
	Seq int64 `json:"seq"`
	// Digest is the digest of record Seq: the next record's prev.
	// +optional
	Digest string `json:"digest,omitempty"`
	// Message says when records are off or delayed (the registry cannot be written).
	// +optional
	Message string `json:"message,omitempty"`
}

// UpstreamSeen is the newest upstream record a follower has read.
type UpstreamSeen struct {
	Seq    int64  `json:"seq"`
	Digest string `json:"digest"`
}

// RecordReference points at a signed record in an OCI registry.
type RecordReference struct {
	Ref string `json:"ref"`
	Seq int64  `json:"seq"`
	// Action is the record's action (Promote, Verify, Rollback, Freeze, Unfreeze).
	// +optional
	Action string `json:"action,omitempty"`
	// Digest is the record's digest.
	// +optional
	Digest string `json:"digest,omitempty"`
}

// PendingRecord is a record being written. Its seq is reserved, and its exact bytes kept, before
// the push: after a restart the same record is written again (and found already there), so a
// crash between the push and the status write neither duplicates nor skips a seq.
type PendingRecord struct {
	Seq    int64  `json:"seq"`
	Action string `json:"action"`
	// Record is the canonical JSON of the record.
	Record string `json:"record"`
	// Message says why it is not written yet (the registry cannot be reached).
	// +optional
	Message string `json:"message,omitempty"`
}

// +kubebuilder:object:root=true

// StageList is a list of Stages.
type StageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Stage `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Stage{}, &StageList{})
}

// Kinds of TimeWindow.
const (
	WindowAllow = "Allow"
	WindowDeny  = "Deny"
)
