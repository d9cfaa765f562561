package v1alpha1

// Promotion through Git (spec.promotion.git): the commit or pull request that promotes.

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
