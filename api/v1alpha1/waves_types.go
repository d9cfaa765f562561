package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The wave types live in their own file so that fleet rollouts and the rest of the Stage API
// can change side by side.

// Wave is one step of a fleet rollout over an ApplicationSet's clusters.
//
// A target is one Application owned by the ApplicationSet (one per cluster with the usual
// cluster or list generator); it is selected by the labels of its destination cluster, that
// is, of the Argo CD cluster Secret its spec.destination names by server or by name. The
// in-cluster destination counts as a cluster even without a Secret (it then has no labels).
//
// Waves take targets in order: each wave takes, among the targets its selector matches that
// no earlier wave took, the first maxTargets in the Stage's order. That order is deterministic
// and seeded by the Stage's name, so different services get different canaries and the same
// service always starts on the same clusters; shuffleKey then alternates it across a label's
// values.
//
// Percentages are rounded up, so a percentage above 0% always means at least one target:
// maxTargets is a percentage of the targets that match the selector and are not taken by an
// earlier wave (4 clusters, a first wave that takes 1, then maxTargets: 100% takes 3);
// maxParallel is a percentage of the wave's own targets. maxFailures is rounded down, since it
// is a failure budget and must not grow beyond what was written (10% of 5 targets is 0).
//
// +kubebuilder:validation:XValidation:rule="!has(self.maxParallel) || !(type(self.maxParallel) == int ? self.maxParallel == 0 : self.maxParallel == '0%') || (has(self.maxTargets) && (type(self.maxTargets) == int ? self.maxTargets == 0 : self.maxTargets == '0%'))",message="maxParallel may not be 0 when maxTargets is greater than 0: the wave would never finish"
type Wave struct {
	// Name of the wave.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Name string `json:"name"`

	// Selector picks targets by their cluster's labels (matchLabels and matchExpressions);
	// all clusters when absent or empty.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// MaxTargets is how many targets this wave takes: a number, or a percentage (rounded up) of
	// the targets that match the selector and are not taken by an earlier wave (default 100%).
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=4
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="maxTargets must be a non-negative integer or a percentage from 0% to 100%"
	// +optional
	MaxTargets *intstr.IntOrString `json:"maxTargets,omitempty"`

	// MaxParallel is how many targets of the wave sync at once: a number, or a percentage
	// (rounded up) of the wave's targets (default 1).
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=4
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="maxParallel must be a non-negative integer or a percentage from 0% to 100%"
	// +optional
	MaxParallel *intstr.IntOrString `json:"maxParallel,omitempty"`

	// ShuffleKey is a cluster label whose values the wave alternates between (for example
	// region), so that a bad version reaches one cluster per value first. Clusters without the
	// label form a group of their own.
	// +kubebuilder:validation:MaxLength=317
	// +optional
	ShuffleKey string `json:"shuffleKey,omitempty"`

	// Soak is how long this wave must stay verified, once all its targets are done, before the
	// next wave starts (default 0). It does not delay the end of the last wave.
	// +optional
	Soak *metav1.Duration `json:"soak,omitempty"`

	// MaxFailures is how many targets of this wave may fail while the rollout goes on: a number,
	// or a percentage of the wave's targets rounded down (default 0). A failed target within the
	// budget is reported and left alone; one more halts the rollout (and rolls back every target
	// already moved when rollback is automatic).
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=4
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="maxFailures must be a non-negative integer or a percentage from 0% to 100%"
	// +optional
	MaxFailures *intstr.IntOrString `json:"maxFailures,omitempty"`

	// ProgressDeadline is how long the wave may take from its start until all its targets are
	// done; past it the rollout halts. Without it only each target's own deadline
	// (verification.progressDeadline) applies.
	// +optional
	ProgressDeadline *metav1.Duration `json:"progressDeadline,omitempty"`
}

// WaveStatus is the progress of one wave. Targets are Application names.
type WaveStatus struct {
	// Name of the wave.
	Name string `json:"name"`

	// Digest is the version this status belongs to; a status for another digest is stale and
	// is reset when a new rollout starts.
	// +optional
	Digest string `json:"digest,omitempty"`

	// Phase of the wave, in the words of a Promotion's status.phase: Pending (it waits for an
	// earlier wave or its soak, or for the plan to be accepted), Running (targets are being
	// promoted), Soaking (all its targets are done and it waits for its soak before the next wave
	// starts), Succeeded (all its targets are done, failures within maxFailures, and its soak is
	// over), Failed (more failed targets than maxFailures allows, or past its progressDeadline: the
	// rollout is halted) or Aborted (an Abort Promotion cancelled the rollout before the wave
	// ended). Earlier versions wrote Progressing for Running and Completed for Succeeded; clients
	// should read those as the new words.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// Message says what the wave does or waits for, with counts.
	// +optional
	Message string `json:"message,omitempty"`

	// Targets are the Applications this wave rolls out to, in the order they start.
	// +optional
	Targets []string `json:"targets,omitempty"`

	// Syncing are the targets promoted and not yet done.
	// +optional
	Syncing []string `json:"syncing,omitempty"`

	// Failed are the targets whose promote failed.
	// +optional
	Failed []string `json:"failed,omitempty"`

	// Completed are the targets where the version has landed.
	// +optional
	Completed []string `json:"completed,omitempty"`

	// StartedAt is when the wave's first target was promoted; written once.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`

	// FinishedAt is when the wave's last target was done, or when it failed; written once.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
}
