// Package validation sends valid and invalid Stagecoach objects to a real API server and checks
// that the CRD schema (CEL rules included) refuses each bad one with a message a person understands.
package validation

import (
	"fmt"
	"os"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	var err error
	env, err = testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "failed to stop the test API server:", err)
	}
	os.Exit(code)
}

const ns = "default"

// object builds an object of a Stagecoach kind from the YAML of its spec.
func object(kind, name, specYAML string) *unstructured.Unstructured {
	spec := map[string]any{}
	if err := yaml.Unmarshal([]byte(specYAML), &spec); err != nil {
		panic(fmt.Sprintf("bad test YAML for %s %s: %v", kind, name, err))
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion("stagecoach.dev/v1alpha1")
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestInvalidObjectsAreRefused(t *testing.T) {
	cases := []struct {
		name    string
		kind    string
		spec    string
		wantMsg string
	}{
		{name: "applyRef.source on a Kustomization", kind: "Stage", wantMsg: "applyRef.source is only for an Argo CD Application", spec: `
service: payments
environment: prod
applyRef: {kind: Kustomization, name: payments, source: chart}
source: {upstream: {stage: payments}}`},
		// Issue 40: promotion.git.
		{name: "promotion by commit on a Kustomization", kind: "Stage", wantMsg: "promotion.git needs an applyRef that syncs the environment's branch", spec: `
service: payments
environment: prod
applyRef: {kind: Kustomization, name: payments}
source: {upstream: {stage: payments}}
promotion: {git: {url: "https://git.example/org/config.git", branch: env/prod, set: [{path: prod/values.yaml, key: image.digest}]}}`},
		{name: "promotion by commit that sets and merges", kind: "Stage", wantMsg: "promotion.git must set exactly one of set (write the version into files) or merge: true", spec: `
service: payments
environment: prod
applyRef: {kind: Application, name: payments}
source: {git: {url: "https://git.example/org/config.git", branch: main}}
promotion: {git: {url: "https://git.example/org/config.git", branch: env/prod, merge: true, set: [{path: prod/values.yaml, key: image.digest}]}}`},
		{name: "a merge of digests", kind: "Stage", wantMsg: "promotion.git.merge merges a promoted commit: the Stage needs source.git", spec: `
service: payments
environment: prod
applyRef: {kind: Application, name: payments}
source: {upstream: {stage: payments}}
promotion: {git: {url: "https://git.example/org/config.git", branch: env/prod, merge: true}}`},
		{name: "an edit with both image and key", kind: "Stage", wantMsg: "exactly one of image (a kustomization's images entry) or key (a YAML path)", spec: `
service: payments
environment: prod
applyRef: {kind: Application, name: payments}
source: {upstream: {stage: payments}}
promotion: {git: {url: "https://git.example/org/config.git", branch: env/prod, set: [{path: prod/kustomization.yaml, image: web, key: images}]}}`},
		{name: "an edit outside the repository", kind: "Stage", wantMsg: "promotion.git.set path is relative to the repository's root and stays inside it", spec: `
service: payments
environment: prod
applyRef: {kind: Application, name: payments}
source: {upstream: {stage: payments}}
promotion: {git: {url: "https://git.example/org/config.git", branch: env/prod, set: [{path: ../../etc/passwd, key: a}]}}`},
		{name: "a ref for a branch", kind: "Stage", wantMsg: "promotion.git.branch is a branch name such as env/staging, not a ref", spec: `
service: payments
environment: prod
applyRef: {kind: Application, name: payments}
source: {upstream: {stage: payments}}
promotion: {git: {url: "https://git.example/org/config.git", branch: refs/heads/env/prod, set: [{path: prod/values.yaml, key: a}]}}`},
		{name: "a branch name Git refuses", kind: "Stage", wantMsg: "promotion.git.branch must be a valid Git branch name", spec: `
service: payments
environment: prod
applyRef: {kind: Application, name: payments}
source: {upstream: {stage: payments}}
promotion: {git: {url: "https://git.example/org/config.git", branch: "env:prod*", set: [{path: prod/values.yaml, key: a}]}}`},
		{name: "promotion by commit over plain http", kind: "Stage", wantMsg: "promotion.git.url uses plain http", spec: `
service: payments
environment: prod
applyRef: {kind: Application, name: payments}
source: {upstream: {stage: payments}}
promotion: {git: {url: "http://git.example/org/config.git", branch: env/prod, set: [{path: prod/values.yaml, key: a}]}}`},
		{name: "a forge token over plain http", kind: "Stage", wantMsg: "would send the forge token in the clear", spec: `
service: payments
environment: prod
applyRef: {kind: Application, name: payments}
source: {upstream: {stage: payments}}
promotion: {git: {url: "https://git.example/org/config.git", branch: env/prod, set: [{path: prod/values.yaml, key: a}],
  pullRequest: {provider: GitHub, apiURL: "http://api.git.example", tokenSecretRef: {name: token}}}}`},
		{name: "another forge", kind: "Stage", wantMsg: "Unsupported value: \"Bitbucket\"", spec: `
service: payments
environment: prod
applyRef: {kind: Application, name: payments}
source: {upstream: {stage: payments}}
promotion: {git: {url: "https://git.example/org/config.git", branch: env/prod, set: [{path: prod/values.yaml, key: a}],
  pullRequest: {provider: Bitbucket, tokenSecretRef: {name: token}}}}`},
		{name: "stage without source", kind: "Stage", wantMsg: "source must set exactly one of registry, git, upstream or upstreamRecords", spec: `
service: payments
environment: prod
applyRef: {kind: Application, name: payments}
source: {}`},
		{name: "stage with two sources", kind: "Stage", wantMsg: "source must set exactly one of registry, git, upstream or upstreamRecords", spec: `
service: payments
environment: prod
applyRef: {kind: Application, name: payments}
source: {upstream: {stage: payments, namespace: staging}, registry: {repository: r.example/payments}}`},
		{name: "git with branch and semver", kind: "Stage", wantMsg: "git must set exactly one of branch (each new commit) or semver (tags that meet a constraint)", spec: `
service: payments
environment: prod
applyRef: {apiVersion: source.toolkit.fluxcd.io/v1, kind: GitRepository, name: config, set: [{path: /spec/ref/commit, value: "{{ .Revision }}"}]}
completion: {observedCompletion: {succeeded: {key: 'status.conditions.#(type=="Ready").status', value: "True"}}}
source: {git: {url: "https://git.example/org/config.git", branch: main, semver: ">=1.0.0"}}`},
		{name: "git with url and sourceRef", kind: "Stage", wantMsg: "git must set exactly one of url (a repository) or sourceRef (a Flux GitRepository whose artifact it follows)", spec: `
service: payments
environment: prod
applyRef: {kind: GitRepository, name: config}
source: {git: {url: "https://git.example/org/config.git", sourceRef: {name: config}}}`},
		{name: "git sourceRef with a branch", kind: "Stage", wantMsg: "with sourceRef, the GitRepository's ref and secretRef are used, so set neither", spec: `
service: payments
environment: prod
applyRef: {kind: GitRepository, name: config}
source: {git: {sourceRef: {name: config}, branch: main}}`},
		{name: "git paths on tags", kind: "Stage", wantMsg: "git.paths selects the commits of a branch: set branch", spec: `
service: payments
environment: prod
applyRef: {apiVersion: source.toolkit.fluxcd.io/v1, kind: GitRepository, name: config, set: [{path: /spec/ref/commit, value: "{{ .Revision }}"}]}
completion: {observedCompletion: {succeeded: {key: 'status.conditions.#(type=="Ready").status', value: "True"}}}
source: {git: {url: "https://git.example/org/config.git", semver: ">=1.0.0", paths: [overlays/prod]}}`},
		{name: "records of commits and of digests at once", kind: "Stage", wantMsg: "upstreamRecords sets applyRepository (the upstream's versions are OCI digests) or gitRepository (they are Git commits), not both", spec: `
service: payments
environment: prod
applyRef: {apiVersion: source.toolkit.fluxcd.io/v1, kind: GitRepository, name: config}
source: {upstreamRecords: {repository: registry.example/streams, stream: a/b/c, applyRepository: registry.example/app, gitRepository: {url: "https://git.example/org/config.git"}}}`},
		{name: "records of commits over plain http", kind: "Stage", wantMsg: "gitRepository.url uses plain http: use https, or set insecure: true", spec: `
service: payments
environment: prod
applyRef: {apiVersion: source.toolkit.fluxcd.io/v1, kind: GitRepository, name: config}
source: {upstreamRecords: {repository: registry.example/streams, stream: a/b/c, gitRepository: {url: "http://git.example/org/config.git"}}}`},
		{name: "records of commits from something that is no URL", kind: "Stage", wantMsg: "gitRepository.url must be an https://, ssh:// or http:// URL", spec: `
service: payments
environment: prod
applyRef: {apiVersion: source.toolkit.fluxcd.io/v1, kind: GitRepository, name: config}
source: {upstreamRecords: {repository: registry.example/streams, stream: a/b/c, gitRepository: {url: "git.example:org/config.git"}}}`},
		{name: "git over plain http", kind: "Stage", wantMsg: "git.url uses plain http: use https, or set insecure: true", spec: `
service: payments
environment: prod
applyRef: {apiVersion: source.toolkit.fluxcd.io/v1, kind: GitRepository, name: config, set: [{path: /spec/ref/commit, value: "{{ .Revision }}"}]}
completion: {observedCompletion: {succeeded: {key: 'status.conditions.#(type=="Ready").status', value: "True"}}}
source: {git: {url: "http://git.example/org/config.git", branch: main}}`},
		{name: "git url that names no repository", kind: "Stage", wantMsg: "git.url must be an https://, ssh:// or http:// URL of a repository", spec: `
service: payments
environment: prod
applyRef: {apiVersion: source.toolkit.fluxcd.io/v1, kind: GitRepository, name: config, set: [{path: /spec/ref/commit, value: "{{ .Revision }}"}]}
completion: {observedCompletion: {succeeded: {key: 'status.conditions.#(type=="Ready").status', value: "True"}}}
source: {git: {url: "git.example:org/config.git", branch: main}}`},
		{name: "git verify mode unknown", kind: "Stage", wantMsg: "supported values: \"HEAD\", \"Tag\", \"TagAndHEAD\"", spec: `
service: payments
environment: prod
applyRef: {apiVersion: source.toolkit.fluxcd.io/v1, kind: GitRepository, name: config, set: [{path: /spec/ref/commit, value: "{{ .Revision }}"}]}
completion: {observedCompletion: {succeeded: {key: 'status.conditions.#(type=="Ready").status', value: "True"}}}
source: {git: {url: "https://git.example/org/config.git", branch: main, verify: {mode: Commit, secretRef: {name: keys}}}}`},
		{name: "completion with both rules", kind: "Stage", wantMsg: "completion must set exactly one of observedCompletion or observedMatches", spec: `
service: payments
environment: prod
applyRef: {apiVersion: kappctrl.k14s.io/v1alpha1, kind: App, name: payments}
completion:
  observedCompletion: {succeeded: {key: 'status.conditions.#(type=="ReconcileSucceeded").status', value: "True"}}
  observedMatches: [{input: spec.image, output: status.image}]
source: {upstream: {stage: payments}}`},
		{name: "completion with no rule", kind: "Stage", wantMsg: "completion must set exactly one of observedCompletion or observedMatches", spec: `
service: payments
environment: prod
applyRef: {apiVersion: kappctrl.k14s.io/v1alpha1, kind: App, name: payments}
completion: {}
source: {upstream: {stage: payments}}`},
		{name: "observedCompletion with failed alone", kind: "Stage", wantMsg: "observedCompletion needs succeeded: failed alone cannot tell when the object finished", spec: `
service: payments
environment: prod
applyRef: {apiVersion: kappctrl.k14s.io/v1alpha1, kind: App, name: payments}
completion:
  observedCompletion: {failed: {key: 'status.conditions.#(type=="ReconcileSucceeded").status', value: "False"}}
source: {upstream: {stage: payments}}`},
		{name: "kind without observer and without completion", kind: "Stage", wantMsg: "spec.completion is required for an applyRef kind without a built-in observer", spec: `
service: payments
environment: prod
applyRef: {apiVersion: kappctrl.k14s.io/v1alpha1, kind: App, name: payments}
source: {upstream: {stage: payments}}`},
		{name: "kind without applier and without set", kind: "Stage", wantMsg: "spec.applyRef.set is required for an applyRef kind without a built-in applier", spec: `
service: payments
environment: prod
applyRef: {apiVersion: kappctrl.k14s.io/v1alpha1, kind: App, name: payments}
completion:
  observedMatches: [{input: spec.image, output: status.image}]
source: {upstream: {stage: payments}}`},
		{name: "set on a built-in kind", kind: "Stage", wantMsg: "spec.applyRef.set is only for kinds without a built-in applier", spec: `
service: payments
environment: prod
applyRef: {kind: Kustomization, name: payments, set: [{path: /spec/path, value: "{{ .Digest }}"}]}
source: {upstream: {stage: payments}}`},
		{name: "set into status", kind: "Stage", wantMsg: "path must point into /spec/, /metadata/labels/ or /metadata/annotations/", spec: `
service: payments
environment: prod
applyRef: {apiVersion: kappctrl.k14s.io/v1alpha1, kind: App, name: payments, set: [{path: /status/image, value: "{{ .Digest }}"}]}
completion:
  observedMatches: [{input: spec.image, output: status.image}]
source: {upstream: {stage: payments}}`},
		{name: "unknown kind without apiVersion", kind: "Stage", wantMsg: "applyRef.apiVersion is required for kind App: only Application, ApplicationSet, OCIRepository, GitRepository, Kustomization and HelmRelease are known without it", spec: `
service: payments
environment: prod
applyRef: {kind: App, name: payments}
completion:
  observedMatches: [{input: spec.image, output: status.image}]
source: {upstream: {stage: payments}}`},
		{name: "waves on an Application", kind: "Stage", wantMsg: "waves are only allowed when applyRef.kind is ApplicationSet", spec: `
service: payments
environment: prod
applyRef: {kind: Application, name: payments}
source: {upstream: {stage: payments}}
waves: [{name: canary, maxTargets: 1, maxParallel: 1}]`},
		{name: "maxParallel 0 with maxTargets 3", kind: "Stage", wantMsg: "maxParallel may not be 0 when maxTargets is greater than 0", spec: `
service: payments
environment: prod
applyRef: {kind: ApplicationSet, name: payments}
source: {upstream: {stage: payments}}
waves: [{name: canary, maxTargets: 3, maxParallel: 0}]`},
		{name: "maxParallel 0% with maxTargets 50%", kind: "Stage", wantMsg: "maxParallel may not be 0 when maxTargets is greater than 0", spec: `
service: payments
environment: prod
applyRef: {kind: ApplicationSet, name: payments}
source: {upstream: {stage: payments}}
waves: [{name: rest, maxTargets: 50%, maxParallel: 0%}]`},
		{name: "maxParallel 0 with maxTargets defaulting to all", kind: "Stage", wantMsg: "maxParallel may not be 0 when maxTargets is greater than 0", spec: `
service: payments
environment: prod
applyRef: {kind: ApplicationSet, name: payments}
source: {upstream: {stage: payments}}
waves: [{name: rest, maxParallel: 0}]`},
		{name: "negative maxTargets", kind: "Stage", wantMsg: "maxTargets must be a non-negative integer or a percentage from 0% to 100%", spec: `
service: payments
environment: prod
applyRef: {kind: ApplicationSet, name: payments}
source: {upstream: {stage: payments}}
waves: [{name: canary, maxTargets: -1, maxParallel: 1}]`},
		{name: "maxTargets over 100%", kind: "Stage", wantMsg: "maxTargets must be a non-negative integer or a percentage from 0% to 100%", spec: `
service: payments
environment: prod
applyRef: {kind: ApplicationSet, name: payments}
source: {upstream: {stage: payments}}
waves: [{name: canary, maxTargets: 150%, maxParallel: 1}]`},
		{name: "maxParallel neither number nor percentage", kind: "Stage", wantMsg: "maxParallel must be a non-negative integer or a percentage from 0% to 100%", spec: `
service: payments
environment: prod
applyRef: {kind: ApplicationSet, name: payments}
source: {upstream: {stage: payments}}
waves: [{name: canary, maxTargets: 1, maxParallel: half}]`},
		{name: "maxFailures over 100%", kind: "Stage", wantMsg: "maxFailures must be a non-negative integer or a percentage from 0% to 100%", spec: `
service: payments
environment: prod
applyRef: {kind: ApplicationSet, name: payments}
source: {upstream: {stage: payments}}
waves: [{name: canary, maxFailures: 101%}]`},
		{name: "negative maxFailures", kind: "Stage", wantMsg: "maxFailures must be a non-negative integer or a percentage from 0% to 100%", spec: `
service: payments
environment: prod
applyRef: {kind: ApplicationSet, name: payments}
source: {upstream: {stage: payments}}
waves: [{name: canary, maxFailures: -1}]`},
		{name: "soak that does not parse", kind: "Stage", wantMsg: "soak must be a duration such as 30m or 1h30m", spec: `
service: payments
environment: prod
applyRef: {kind: Application, name: payments}
source: {upstream: {stage: payments}}
promotion: {soak: 30 minutes}`},
		{name: "progressDeadline without unit", kind: "Stage", wantMsg: "progressDeadline must be a duration such as 10m", spec: `
service: payments
environment: prod
applyRef: {kind: Application, name: payments}
source: {upstream: {stage: payments}}
verification: {progressDeadline: "10"}`},
		{name: "grace that does not parse", kind: "Stage", wantMsg: "grace must be a duration such as 30s", spec: `
service: payments
environment: prod
applyRef: {kind: Application, name: payments}
source: {upstream: {stage: payments}}
verification: {grace: soon}`},
		{name: "registry interval that does not parse", kind: "Stage", wantMsg: "interval must be a duration such as 1m or 1h30m", spec: `
service: payments
environment: prod
applyRef: {kind: OCIRepository, name: payments}
source: {registry: {repository: r.example/payments, interval: 1d}}`},
		{name: "window duration that does not parse", kind: "Stage", wantMsg: "duration must be a duration such as 8h or 30m", spec: `
service: payments
environment: prod
applyRef: {kind: Application, name: payments}
source: {upstream: {stage: payments}}
promotion: {windows: [{schedule: "0 9 * * 1-5", duration: 8 hours}]}`},
		{name: "window schedule with four fields", kind: "Stage", wantMsg: "schedule must be a cron expression with five fields", spec: `
service: payments
environment: prod
applyRef: {kind: Application, name: payments}
source: {upstream: {stage: payments}}
promotion: {windows: [{schedule: "0 9 * *", duration: 8h}]}`},
		{name: "registry with semver and pattern", kind: "Stage", wantMsg: "registry may set semver or pattern, not both", spec: `
service: payments
environment: prod
applyRef: {kind: OCIRepository, name: payments}
source: {registry: {repository: r.example/payments, semver: ">=1.0.0", pattern: "^v"}}`},
		{name: "verify without keys or identities", kind: "Stage", wantMsg: "verify needs secretRef (public keys) or matchOIDCIdentity (keyless identities)", spec: `
service: payments
environment: prod
applyRef: {kind: OCIRepository, name: payments}
source: {registry: {repository: r.example/payments, verify: {provider: cosign}}}`},
		{name: "check with http and plugin", kind: "Stage", wantMsg: "a check must set exactly one of http, plugin or run", spec: `
service: payments
environment: prod
applyRef: {kind: Application, name: payments}
source: {upstream: {stage: payments}}
verification:
  checks:
  - name: smoke
    http: {url: "http://payments.prod/healthz"}
    plugin: {name: smoke, sha256: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}`},
		{name: "http check URL without scheme", kind: "Stage", wantMsg: "url must start with http:// or https://", spec: `
service: payments
environment: prod
applyRef: {kind: Application, name: payments}
source: {upstream: {stage: payments}}
promotion: {checks: [{name: smoke, http: {url: "payments.prod/healthz"}}]}`},
		{name: "promote without digest", kind: "Promotion", wantMsg: "a Promote needs version.digest: the digest is what gets applied", spec: `
stage: payments
action: Promote
version: {tag: v1.2.3}`},
		{name: "promote without version, action defaulted", kind: "Promotion", wantMsg: "a Promote needs version.digest", spec: `
stage: payments`},
		{name: "promotion with a malformed digest", kind: "Promotion", wantMsg: "digest must look like sha256: followed by 64 lowercase hex characters (an OCI digest) or sha1: followed by 40 (a Git commit)", spec: `
stage: payments
version: {digest: "sha256:ABC"}`},
		{name: "approval with a malformed digest", kind: "Approval", wantMsg: "digest must look like sha256: followed by 64 lowercase hex characters (an OCI digest) or sha1: followed by 40 (a Git commit)", spec: `
stage: payments
digest: v1.2.3
approver: alice`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := object(tc.kind, "invalid-"+strings.ToLower(tc.kind), tc.spec)
			err := env.Client.Create(t.Context(), obj)
			g.Expect(err).To(HaveOccurred(), "the API server accepted an invalid %s", tc.kind)
			g.Expect(err.Error()).To(ContainSubstring(tc.wantMsg))
		})
	}
}

func TestValidObjectsAreAccepted(t *testing.T) {
	cases := []struct {
		name string
		kind string
		spec string
	}{
		{name: "stage through an Argo CD Application from upstream", kind: "Stage", spec: `
service: payments
environment: prod
applyRef: {kind: Application, name: payments}
source: {upstream: {stage: payments, namespace: staging}}
promotion:
  auto: true
  soak: 30m
  approvals: {required: 2, groups: [release-managers]}
  windows: [{schedule: "0 9 * * 1-5", duration: 8h, timeZone: Europe/Berlin}, {kind: Deny, schedule: "0 0 24 12 *", duration: 48h}]
  checks: [{name: smoke, http: {url: "https://payments.prod/healthz", expectedStatus: 200, body: {key: status, value: ok}}, retries: 2, timeout: 5s}]
verification: {progressDeadline: 10m, grace: 30s, checks: [{name: slo, plugin: {name: slo-check, sha256: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}}]}
rollback: {automatic: true, limit: 1}
dependsOn: [{stage: base, namespace: platform, version: ">=2.0.0"}]`},
		{name: "stage following another cluster's Stage of commits", kind: "Stage", spec: `
service: config
environment: prod
applyRef: {apiVersion: source.toolkit.fluxcd.io/v1, kind: GitRepository, name: config}
author: {user: alice}
source: {upstreamRecords: {repository: registry.example/streams, stream: cluster-a/config/staging, gitRepository: {url: "https://git.example/org/config.git", secretRef: {name: git-credentials}}}}`},
		{name: "stage promoting by pull request", kind: "Stage", spec: `
service: payments
environment: prod
applyRef: {kind: Application, name: payments}
source: {upstream: {stage: payments, namespace: staging}}
author: {user: alice}
promotion:
  git:
    url: https://git.example/org/config.git
    secretRef: {name: push}
    branch: env/prod
    set: [{path: prod/kustomization.yaml, image: registry.example/payments}, {path: prod/values.yaml, key: image.tag, value: "{{ .Version }}"}]
    author: {name: Release Bot, email: release@example.dev}
    signingKeyRef: {name: signing}
    pullRequest: {provider: GitLab, apiURL: "https://gitlab.example/api/v4", tokenSecretRef: {name: token}, merge: Manual, mergeStyle: squash}`},
		{name: "stage of commits merging into a branch Flux follows", kind: "Stage", spec: `
service: settings
environment: prod
applyRef: {kind: GitRepository, name: settings-prod}
source: {git: {url: "http://127.0.0.1:3000/org/config.git", branch: main, insecure: true}}
promotion: {git: {url: "http://127.0.0.1:3000/org/config.git", insecure: true, branch: env/prod, merge: true}}`},
		{name: "stage through a Flux OCIRepository from a signed registry", kind: "Stage", spec: `
service: payments
environment: dev
applyRef: {kind: OCIRepository, name: payments}
source: {registry: {repository: registry.example/deploy/payments, semver: ">=1.0.0", interval: 1m30s, verify: {secretRef: {name: cosign-keys}}}}`},
		{name: "stage taking the signed commits of a branch's path", kind: "Stage", spec: `
service: payments
environment: dev
applyRef: {kind: GitRepository, name: config, kustomization: dev}
source: {git: {url: "ssh://git@git.example/org/config.git", branch: main, paths: [overlays/dev], secretRef: {name: deploy-key}, verify: {mode: HEAD, secretRef: {name: signers}}}}`},
		{name: "stage following a Flux GitRepository's artifact", kind: "Stage", spec: `
service: payments
environment: dev
applyRef: {kind: GitRepository, name: dev-config, kustomization: dev}
source: {git: {sourceRef: {name: platform-config}, paths: [overlays/dev]}}`},
		{name: "promotion of a commit", kind: "Promotion", spec: `
stage: payments
version: {digest: "sha1:0123456789abcdef0123456789abcdef01234567", tag: "0123456"}`},
		{name: "stage promoting one source of a multi-source Application", kind: "Stage", spec: `
service: payments
environment: prod
applyRef: {kind: Application, name: payments, source: chart}
source: {upstream: {stage: payments}}`},
		{name: "stage following records", kind: "Stage", spec: `
service: payments
environment: prod
applyRef: {apiVersion: helm.toolkit.fluxcd.io/v2, kind: HelmRelease, name: payments}
source: {upstreamRecords: {repository: registry.example/delivery/streams, stream: 8d1e/staging/payments}}`},
		{name: "stage with waves over an ApplicationSet", kind: "Stage", spec: `
service: payments
environment: prod
applyRef: {kind: ApplicationSet, name: payments}
source: {upstream: {stage: payments}}
waves:
- {name: canary, selector: {matchLabels: {region: eu-west-1}}, maxTargets: 1, maxParallel: 1}
- {name: regions, maxTargets: 3, maxParallel: 3, shuffleKey: region}
- {name: rest, maxTargets: 100%, maxParallel: 25%}
- {name: empty, maxTargets: 0, maxParallel: 0}
- {name: soaked, soak: 30m, maxFailures: 10%, progressDeadline: 1h}
- {name: tolerant, maxFailures: 2}`},
		{name: "completion on a built-in kind", kind: "Stage", spec: `
service: payments
environment: prod
applyRef: {kind: Kustomization, name: payments}
completion:
  observedMatches: [{input: spec.images.0.digest, output: status.lastAppliedRevision}]
source: {upstream: {stage: payments}}`},
		{name: "stage with completion rules for another kind", kind: "Stage", spec: `
service: payments
environment: prod
applyRef: {apiVersion: kappctrl.k14s.io/v1alpha1, kind: App, name: payments, set: [{path: /spec/fetch/0/image/url, value: "{{ .Image }}"}]}
prerequisites: {kubernetesVersion: ">=1.30.0"}
completion:
  observedCompletion:
    succeeded: {key: 'status.conditions.#(type=="ReconcileSucceeded").status', value: "True"}
    failed: {key: 'status.conditions.#(type=="ReconcileFailed").status', value: "True"}
source: {upstream: {stage: payments}}`},
		{name: "promotion", kind: "Promotion", spec: `
stage: payments
version: {digest: "` + digest + `", tag: v1.2.3}
reason: release`},
		{name: "rollback to the last verified version", kind: "Promotion", spec: `
stage: payments
action: Rollback`},
		{name: "approval", kind: "Approval", spec: `
stage: payments
digest: "` + digest + `"
approver: alice
groups: [release-managers]`},
		{name: "freeze", kind: "Freeze", spec: `
selector: {matchLabels: {tier: payments}}
reason: end of quarter
until: "2026-12-31T00:00:00Z"`},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := object(tc.kind, fmt.Sprintf("valid-%d", i), tc.spec)
			g.Expect(env.Client.Create(t.Context(), obj)).To(Succeed())
		})
	}
}

func TestSpecsThatMayNotChange(t *testing.T) {
	cases := []struct {
		name    string
		kind    string
		spec    string
		change  func(u *unstructured.Unstructured)
		wantMsg string
	}{
		{name: "promotion version", kind: "Promotion", spec: "stage: payments\nversion: {digest: \"" + digest + "\"}",
			change: func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "v9", "spec", "version", "tag")
			},
			wantMsg: "the spec of a Promotion is immutable: create a new Promotion instead"},
		{name: "promotion break-glass", kind: "Promotion", spec: "stage: payments\nversion: {digest: \"" + digest + "\"}",
			change: func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, true, "spec", "breakGlass")
			},
			wantMsg: "the spec of a Promotion is immutable"},
		{name: "approval approver", kind: "Approval", spec: "stage: payments\ndigest: \"" + digest + "\"\napprover: alice",
			change: func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "mallory", "spec", "approver")
			},
			wantMsg: "the spec of an Approval is immutable: delete it and create a new one"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := t.Context()
			obj := object(tc.kind, fmt.Sprintf("immutable-%d", i), tc.spec)
			g.Expect(env.Client.Create(ctx, obj)).To(Succeed())

			// Labels may change: only the spec is frozen.
			obj.SetLabels(map[string]string{"team": "payments"})
			g.Expect(env.Client.Update(ctx, obj)).To(Succeed())

			tc.change(obj)
			err := env.Client.Update(ctx, obj)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.wantMsg))

			fresh := obj.DeepCopy()
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), fresh)).To(Succeed())
			g.Expect(fresh.Object["spec"]).NotTo(Equal(obj.Object["spec"]))
		})
	}
}
