package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Freeze stops promotion on the Stages it selects until it is deleted or its time runs out. Only a
// break-glass Promotion from a member of the break-glass group passes, and that is recorded.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.spec.reason`
// +kubebuilder:printcolumn:name="Until",type=string,JSONPath=`.spec.until`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Freeze struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec FreezeSpec `json:"spec"`
	// +optional
	Status FreezeStatus `json:"status,omitempty"`
}

// FreezeSpec selects the frozen Stages.
type FreezeSpec struct {
	// Selector picks Stages by label; every Stage when empty.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// NamespaceSelector extends the Freeze to Stages in the namespaces it selects (cluster-wide
	// when empty but set); without it the Freeze holds only in its own namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// Reason, for people and the record.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +required
	Reason string `json:"reason"`

	// Until is when the Freeze ends by itself; it holds until deleted when empty.
	// +optional
	Until *metav1.Time `json:"until,omitempty"`
}

// FreezeStatus is the observed state of a Freeze.
type FreezeStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Stages lists the Stages held, as namespace/name.
	// +optional
	Stages []string `json:"stages,omitempty"`
}

// +kubebuilder:object:root=true

// FreezeList is a list of Freezes.
type FreezeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Freeze `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Freeze{}, &FreezeList{})
}
