package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Approval is one person's approval of one version for one Stage. It never changes once created;
// an admission policy makes spec.approver the user who creates it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Stage",type=string,JSONPath=`.spec.stage`
// +kubebuilder:printcolumn:name="Approver",type=string,JSONPath=`.spec.approver`
// +kubebuilder:printcolumn:name="Digest",type=string,JSONPath=`.spec.digest`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Approval struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="the spec of an Approval is immutable: delete it and create a new one"
	Spec ApprovalSpec `json:"spec"`
	// +optional
	Status ApprovalStatus `json:"status,omitempty"`
}

// ApprovalSpec says who approves which version for which Stage.
type ApprovalSpec struct {
	// Stage is the name of the Stage, in the Approval's namespace.
	// +kubebuilder:validation:MinLength=1
	// +required
	Stage string `json:"stage"`

	// Digest of the approved version.
	// +kubebuilder:validation:MaxLength=71
	// +kubebuilder:validation:XValidation:rule="self.matches('^(sha256:[a-f0-9]{64}|sha1:[a-f0-9]{40})$')",message="digest must look like sha256: followed by 64 lowercase hex characters (an OCI digest) or sha1: followed by 40 (a Git commit)"
	// +required
	Digest string `json:"digest"`

	// Approver is the user who approves; it must be the user who creates the Approval.
	// +kubebuilder:validation:MinLength=1
	// +required
	Approver string `json:"approver"`

	// Groups the approver approves as; each must be one of the user's groups.
	// +optional
	Groups []string `json:"groups,omitempty"`

	// Comment, for people and the record.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Comment string `json:"comment,omitempty"`
}

// ApprovalStatus is the observed state of an Approval.
type ApprovalStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true

// ApprovalList is a list of Approvals.
type ApprovalList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Approval `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Approval{}, &ApprovalList{})
}
