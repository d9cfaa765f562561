package v1alpha1

// Checks before and after a promotion is applied (spec.verification.checks and the gates' checks).

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

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
