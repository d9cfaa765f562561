package v1alpha1

// Where a Stage's next versions come from (spec.source): a registry, a Git repository or an
// upstream Stage, and how they are verified.

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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
