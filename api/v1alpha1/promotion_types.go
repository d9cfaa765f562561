package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PromotionAction is what a Promotion does to its Stage.
// +kubebuilder:validation:Enum=Promote;Rollback;Freeze;Unfreeze;Abort
type PromotionAction string

const (
	ActionPromote  PromotionAction = "Promote"
	ActionRollback PromotionAction = "Rollback"
	ActionFreeze   PromotionAction = "Freeze"
	ActionUnfreeze PromotionAction = "Unfreeze"
	// ActionAbort cancels the Stage's running Promotion (phase Aborted, with this one's reason):
	// a fleet rollout stops where it is, nothing more is written.
	ActionAbort PromotionAction = "Abort"
)

// Promotion is one operation on one Stage. Its spec never changes once created.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=promo
// +kubebuilder:printcolumn:name="Stage",type=string,JSONPath=`.spec.stage`
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=`.spec.action`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version.tag`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Promotion struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="the spec of a Promotion is immutable: create a new Promotion instead"
	Spec PromotionSpec `json:"spec"`
	// +optional
	Status PromotionStatus `json:"status,omitempty"`
}

// PromotionSpec is the operation asked for.
//
// +kubebuilder:validation:XValidation:rule="self.action != 'Promote' || (has(self.version) && has(self.version.digest))",message="a Promote needs version.digest: the digest is what gets applied"
type PromotionSpec struct {
	// Stage is the name of the Stage, in the Promotion's namespace.
	// +kubebuilder:validation:MinLength=1
	// +required
	Stage string `json:"stage"`

	// Action is Promote (default), Rollback, Freeze, Unfreeze or Abort.
	// +kubebuilder:default=Promote
	// +optional
	Action PromotionAction `json:"action,omitempty"`

	// Version to promote; for a Rollback, the version to return to (the last verified when empty).
	// +optional
	Version *VersionReference `json:"version,omitempty"`

	// Reason, for people and the record.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Reason string `json:"reason,omitempty"`

	// RequestedBy is the user who created the Promotion; an admission policy makes it the
	// creating user. Approvals from this user do not count for this version, here or downstream.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	RequestedBy string `json:"requestedBy,omitempty"`

	// BreakGlass lets the Promotion start during a Freeze. Only members of the break-glass group
	// may create such a Promotion, and it is recorded.
	// +optional
	BreakGlass bool `json:"breakGlass,omitempty"`
}

// VersionReference names a version by digest (what is applied) and tag (what people read).
type VersionReference struct {
	// Digest of the version: its OCI artifact's (sha256:...), or its Git commit (sha1:<40 hex>)
	// for a Stage whose source is git.
	// +kubebuilder:validation:MaxLength=71
	// +kubebuilder:validation:XValidation:rule="self.matches('^(sha256:[a-f0-9]{64}|sha1:[a-f0-9]{40})$')",message="digest must look like sha256: followed by 64 lowercase hex characters (an OCI digest) or sha1: followed by 40 (a Git commit)"
	// +optional
	Digest string `json:"digest,omitempty"`

	// Tag of the version, for example v1.2.3.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Tag string `json:"tag,omitempty"`
}

// PromotionStatus is the progress of a Promotion.
type PromotionStatus struct {
	// ObservedGeneration is the generation last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions, at most one per type.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Phase is Pending, Running, Succeeded, Failed, RolledBack or Aborted.
	// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed;RolledBack;Aborted
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// Version is the version this Promotion applies, resolved when it starts (a Rollback without
	// spec.version returns to the Stage's last verified version).
	// +optional
	Version *VersionReference `json:"version,omitempty"`

	// Gates is the verdict of every gate when the Promotion was admitted.
	// +optional
	Gates []GateResult `json:"gates,omitempty"`

	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// +optional
	AppliedAt *metav1.Time `json:"appliedAt,omitempty"`
	// +optional
	LandedAt *metav1.Time `json:"landedAt,omitempty"`
	// +optional
	VerifiedAt *metav1.Time `json:"verifiedAt,omitempty"`
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`

	// Record is the signed record of this operation.
	// +optional
	Record *RecordReference `json:"record,omitempty"`

	// Recording is the record of this operation being written to the Stage's stream, until the
	// registry has it.
	// +optional
	Recording *PendingRecord `json:"recording,omitempty"`

	// Message says what happened last, for people.
	// +optional
	Message string `json:"message,omitempty"`

	// Commit is the commit this Promotion pushed (promotion.git), at which its landing is proven.
	// +optional
	Commit *PushedCommit `json:"commit,omitempty"`

	// PullRequest is the pull request this Promotion opened (promotion.git.pullRequest).
	// +optional
	PullRequest *PullRequestReference `json:"pullRequest,omitempty"`

	// Attestation is the promotion attestation attached once this Promotion was verified
	// (the Stage's spec.attest).
	// +optional
	Attestation *AttestationReference `json:"attestation,omitempty"`
}

// AttestationReference is the promotion attestation a verified Promotion attached (spec.attest).
type AttestationReference struct {
	// Repository the attestation was pushed to.
	Repository string `json:"repository"`
	// Digest of the referrer manifest that carries it.
	Digest string `json:"digest"`
	// PredicateType of its statement.
	PredicateType string `json:"predicateType"`
	// KeyID of the controller key that signed it.
	KeyID string `json:"keyID,omitempty"`
}

// PullRequestReference is a promotion's pull request on the forge.
type PullRequestReference struct {
	Number int64  `json:"number"`
	URL    string `json:"url,omitempty"`
	// Branch is the request's own branch, which holds the promotion's commit.
	Branch string `json:"branch"`
	// HeadSHA is the commit Stagecoach pushed to it: a request whose head is another commit was
	// changed by someone else and is not taken as the promotion.
	HeadSHA string `json:"headSHA"`
}

// PushedCommit is a commit Stagecoach pushed to an environment's branch.
type PushedCommit struct {
	// SHA of the commit.
	SHA string `json:"sha"`
	// Branch it was pushed to.
	Branch string `json:"branch"`
	// Written reports whether this Promotion made the commit; false when the branch already held
	// the version (nothing to commit).
	// +optional
	Written bool `json:"written,omitempty"`
}

// GateResult is one gate's verdict.
type GateResult struct {
	Gate   string `json:"gate"`
	Passed bool   `json:"passed"`
	// +optional
	Message string `json:"message,omitempty"`
}

// +kubebuilder:object:root=true

// PromotionList is a list of Promotions.
type PromotionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Promotion `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Promotion{}, &PromotionList{})
}
