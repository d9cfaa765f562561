package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`
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
