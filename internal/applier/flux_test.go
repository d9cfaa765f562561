package applier

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func fluxObj(t *testing.T, kind string, generation int64, y string) *unstructured.Unstructured {
	t.Helper()
	// Decoded as the API client decodes (integers as int64), not as plain YAML (float64).
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatalf("bad fixture: %v", err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(`{"apiVersion":"x/v1","kind":"` + kind + `",` + string(j)[1:])); err != nil {
		t.Fatalf("bad fixture: %v", err)
	}
	u.SetKind(kind)
	u.SetNamespace("dev")
	u.SetName("payments")
	u.SetGeneration(generation)
	return u
}

func TestFluxValidate(t *testing.T) {
	cases := []struct {
		name       string
		applier    Applier
		kind, y    string
		wantReason string
		wantMsg    string
	}{
		{name: "OCIRepository", applier: FluxOCIRepository{}, kind: "OCIRepository", y: `{spec: {url: oci://r/p}}`},
		{name: "suspended Kustomization", applier: FluxKustomization{}, kind: "Kustomization", y: `{spec: {suspend: true}}`,
			wantReason: "ApplierSuspended", wantMsg: "Kustomization 'dev/payments' is suspended, so it applies nothing: set spec.suspend to false"},
		{name: "suspended HelmRelease", applier: FluxHelmRelease{}, kind: "HelmRelease", y: `{spec: {suspend: true}}`, wantReason: "ApplierSuspended"},
		{name: "suspended OCIRepository", applier: FluxOCIRepository{}, kind: "OCIRepository", y: `{spec: {suspend: true}}`, wantReason: "ApplierSuspended"},
		{name: "HelmRelease by values key", applier: FluxHelmRelease{ValuesKey: "image.digest"}, kind: "HelmRelease",
			y: `{spec: {chart: {spec: {chart: payments, version: 1.0.0}}}}`},
		{name: "HelmRelease by chart version (checked again at landing: TagPinned)", applier: FluxHelmRelease{}, kind: "HelmRelease",
			y: `{spec: {chart: {spec: {chart: payments, version: 1.0.0}}}}`},
		{name: "Kustomization image entry missing", applier: FluxKustomization{Image: "app"}, kind: "Kustomization", y: `{spec: {images: [{name: other}]}}`,
			wantReason: "ApplierUnreadable", wantMsg: `has no spec.images entry named "app"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := fluxObj(t, tc.kind, 1, tc.y)
			blocking, unmediated := tc.applier.Validate(obj)
			fromCache, unmediatedFromCache := tc.applier.Validate(cached(t, obj))
			g.Expect(fromCache).To(Equal(blocking), "read from the cache")
			g.Expect(unmediatedFromCache).To(Equal(unmediated), "read from the cache")
			if tc.wantReason == "" {
				g.Expect(blocking).To(BeNil())
				return
			}
			g.Expect(blocking).NotTo(BeNil())
			g.Expect(blocking.Reason).To(Equal(tc.wantReason))
			g.Expect(blocking.Message).To(ContainSubstring(tc.wantMsg))
		})
	}
}

func TestFluxSetRevision(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		applier Applier
		kind, y string
		path    []string
		want    any
	}{
		{name: "OCIRepository digest", applier: FluxOCIRepository{}, kind: "OCIRepository", y: `{spec: {ref: {tag: latest}}}`,
			path: []string{"spec", "ref", "digest"}, want: d2},
		{name: "Kustomization substitution", applier: FluxKustomization{}, kind: "Kustomization", y: `{spec: {postBuild: {substitute: {REGION: eu}}}}`,
			path: []string{"spec", "postBuild", "substitute"}, want: map[string]any{"REGION": "eu", "STAGECOACH_DIGEST": d2, "STAGECOACH_VERSION": "v2.0.0"}},
		{name: "Kustomization image", applier: FluxKustomization{Image: "app"}, kind: "Kustomization", y: `{spec: {images: [{name: db}, {name: app, newName: r/app}]}}`,
			path: []string{"spec", "images"}, want: []any{map[string]any{"name": "db"}, map[string]any{"name": "app", "newName": "r/app", "digest": d2}}},
		{name: "HelmRelease values key", applier: FluxHelmRelease{ValuesKey: "image.digest"}, kind: "HelmRelease", y: `{spec: {values: {replicas: 2}}}`,
			path: []string{"spec", "values"}, want: map[string]any{"replicas": int64(2), "image": map[string]any{"digest": d2}}},
		{name: "HelmRelease chart version", applier: FluxHelmRelease{}, kind: "HelmRelease", y: `{spec: {chart: {spec: {chart: app, version: 1.0.0}}}}`,
			path: []string{"spec", "chart", "spec", "version"}, want: "2.0.0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := fluxObj(t, tc.kind, 1, tc.y)
			g.Expect(tc.applier.Revision(cached(t, obj))).To(Equal(tc.applier.Revision(obj)))
			expectSameWrite(t, g, obj, func(u *unstructured.Unstructured) error {
				return tc.applier.SetRevision(u, Version{Digest: d2, Tag: "v2.0.0"}, now)
			})
			g.Expect(tc.applier.SetRevision(obj, Version{Digest: d2, Tag: "v2.0.0"}, now)).To(Succeed())
			got, _, _ := unstructured.NestedFieldCopy(obj.Object, tc.path...)
			g.Expect(got).To(Equal(tc.want))
			g.Expect(tc.applier.Revision(obj)).To(Equal(d2))
			g.Expect(obj.GetAnnotations()).To(HaveKeyWithValue(RequestedAtAnnotation, "2026-11-30T12:00:00Z"))
		})
	}
}

func TestFluxObserve(t *testing.T) {
	ready := func(status, reason string, gen int) string {
		return `{type: Ready, status: "` + status + `", reason: ` + reason + `, message: "m", observedGeneration: ` + string(rune('0'+gen)) + `}`
	}
	cases := []struct {
		name       string
		applier    Applier
		kind       string
		y          string
		wantPhase  Phase
		wantReason string
	}{
		{name: "OCIRepository landed (tag@digest)", applier: FluxOCIRepository{}, kind: "OCIRepository",
			y:         `{spec: {ref: {digest: "` + d2 + `"}}, status: {observedGeneration: 2, artifact: {revision: "v2@` + d2 + `"}, conditions: [` + ready("True", "Succeeded", 2) + `]}}`,
			wantPhase: Landed},
		{name: "OCIRepository Ready from the previous generation", applier: FluxOCIRepository{}, kind: "OCIRepository",
			y:         `{spec: {ref: {digest: "` + d2 + `"}}, status: {observedGeneration: 1, artifact: {revision: "` + d1 + `"}, conditions: [` + ready("True", "Succeeded", 1) + `]}}`,
			wantPhase: Progressing, wantReason: "WaitingForReconcile"},
		{name: "OCIRepository Ready but still the old artifact", applier: FluxOCIRepository{}, kind: "OCIRepository",
			y:         `{spec: {ref: {digest: "` + d2 + `"}}, status: {observedGeneration: 2, artifact: {revision: "` + d1 + `"}, conditions: [` + ready("True", "Succeeded", 2) + `]}}`,
			wantPhase: Progressing, wantReason: "WaitingForRevision"},
		{name: "OCIRepository fetch failed", applier: FluxOCIRepository{}, kind: "OCIRepository",
			y:         `{spec: {ref: {digest: "` + d2 + `"}}, status: {observedGeneration: 2, conditions: [` + ready("False", "FetchFailed", 2) + `]}}`,
			wantPhase: Failed, wantReason: "FetchFailed"},
		{name: "Kustomization reconciling", applier: FluxKustomization{}, kind: "Kustomization",
			y:         `{spec: {postBuild: {substitute: {STAGECOACH_DIGEST: "` + d2 + `"}}}, status: {observedGeneration: 1, conditions: [` + ready("Unknown", "Progressing", 2) + `, {type: Reconciling, status: "True", reason: Progressing, message: m}]}}`,
			wantPhase: Progressing, wantReason: "WaitingForReady"},
		// An interval run of the generation that already settled (status.observedGeneration is it):
		// what was applied stands while the engine checks it again.
		{name: "Kustomization reconciling again the generation it settled", applier: FluxKustomization{}, kind: "Kustomization",
			y:         `{spec: {postBuild: {substitute: {STAGECOACH_DIGEST: "` + d2 + `"}}}, status: {observedGeneration: 2, lastAppliedRevision: "main@sha1:abc", conditions: [` + ready("Unknown", "Progressing", 2) + `]}}`,
			wantPhase: Rechecking, wantReason: "Rechecking"},
		{name: "Kustomization reconciling again, but another digest in spec", applier: FluxKustomization{}, kind: "Kustomization",
			y:         `{spec: {postBuild: {substitute: {STAGECOACH_DIGEST: "` + d1 + `"}}}, status: {observedGeneration: 2, conditions: [` + ready("Unknown", "Progressing", 2) + `]}}`,
			wantPhase: Progressing, wantReason: "WaitingForReady"},
		{name: "OCIRepository reconciling again, artifact still the digest", applier: FluxOCIRepository{}, kind: "OCIRepository",
			y:         `{spec: {ref: {digest: "` + d2 + `"}}, status: {observedGeneration: 2, artifact: {revision: "v2@` + d2 + `"}, conditions: [` + ready("Unknown", "Progressing", 2) + `]}}`,
			wantPhase: Rechecking, wantReason: "Rechecking"},
		{name: "OCIRepository reconciling a new generation", applier: FluxOCIRepository{}, kind: "OCIRepository",
			y:         `{spec: {ref: {digest: "` + d2 + `"}}, status: {observedGeneration: 1, artifact: {revision: "v2@` + d2 + `"}, conditions: [` + ready("Unknown", "Progressing", 2) + `]}}`,
			wantPhase: Progressing, wantReason: "WaitingForReady"},
		{name: "Kustomization landed", applier: FluxKustomization{}, kind: "Kustomization",
			y:         `{spec: {postBuild: {substitute: {STAGECOACH_DIGEST: "` + d2 + `"}}}, status: {observedGeneration: 2, lastAppliedRevision: "main@sha1:abc", conditions: [` + ready("True", "ReconciliationSucceeded", 2) + `]}}`,
			wantPhase: Landed},
		{name: "Kustomization health check failed", applier: FluxKustomization{}, kind: "Kustomization",
			y:         `{spec: {postBuild: {substitute: {STAGECOACH_DIGEST: "` + d2 + `"}}}, status: {observedGeneration: 2, conditions: [` + ready("False", "HealthCheckFailed", 2) + `]}}`,
			wantPhase: Failed, wantReason: "HealthCheckFailed"},
		// The Kustomization's source (Git) is the same whatever the version: a missing artifact waits.
		{name: "Kustomization waiting for its source's artifact is not a failure", applier: FluxKustomization{}, kind: "Kustomization",
			y:         `{spec: {postBuild: {substitute: {STAGECOACH_DIGEST: "` + d2 + `"}}}, status: {observedGeneration: 1, conditions: [` + ready("False", "ArtifactFailed", 2) + `]}}`,
			wantPhase: Progressing, wantReason: "WaitingForReady"},
		{name: "Kustomization waiting on a dependency is not a failure", applier: FluxKustomization{}, kind: "Kustomization",
			y:         `{spec: {postBuild: {substitute: {STAGECOACH_DIGEST: "` + d2 + `"}}}, status: {observedGeneration: 2, conditions: [` + ready("False", "DependencyNotReady", 2) + `]}}`,
			wantPhase: Progressing},
		{name: "HelmRelease deployed at the values digest", applier: FluxHelmRelease{ValuesKey: "image.digest"}, kind: "HelmRelease",
			y:         `{spec: {values: {image: {digest: "` + d2 + `"}}}, status: {observedGeneration: 2, history: [{version: 3, status: deployed, chartVersion: 1.0.0}], conditions: [` + ready("True", "UpgradeSucceeded", 2) + `]}}`,
			wantPhase: Landed},
		{name: "HelmRelease reconciling again the release it deployed", applier: FluxHelmRelease{ValuesKey: "image.digest"}, kind: "HelmRelease",
			y:         `{spec: {values: {image: {digest: "` + d2 + `"}}}, status: {observedGeneration: 2, history: [{version: 3, status: deployed, chartVersion: 1.0.0}], conditions: [` + ready("Unknown", "Progressing", 2) + `]}}`,
			wantPhase: Rechecking, wantReason: "Rechecking"},
		{name: "HelmRelease newest release failed", applier: FluxHelmRelease{ValuesKey: "image.digest"}, kind: "HelmRelease",
			y:         `{spec: {values: {image: {digest: "` + d2 + `"}}}, status: {observedGeneration: 2, history: [{version: 3, status: failed}], conditions: [` + ready("False", "UpgradeFailed", 2) + `]}}`,
			wantPhase: Failed, wantReason: "UpgradeFailed"},
		{name: "HelmRelease chart version not yet released", applier: FluxHelmRelease{}, kind: "HelmRelease",
			y:         `{metadata: {annotations: {stagecoach.dev/digest: "` + d2 + `"}}, spec: {chart: {spec: {version: 2.0.0}}}, status: {observedGeneration: 2, history: [{version: 2, status: deployed, chartVersion: 1.0.0}], conditions: [` + ready("True", "UpgradeSucceeded", 2) + `]}}`,
			wantPhase: Progressing, wantReason: "WaitingForRevision"},
		{name: "HelmRelease chart from an OCI registry at the verified digest", applier: FluxHelmRelease{}, kind: "HelmRelease",
			y:         `{metadata: {annotations: {stagecoach.dev/digest: "` + d2 + `"}}, spec: {chart: {spec: {version: 2.0.0}}}, status: {observedGeneration: 2, history: [{version: 3, status: deployed, chartVersion: 2.0.0, ociDigest: "` + d2 + `"}], conditions: [` + ready("True", "UpgradeSucceeded", 2) + `]}}`,
			wantPhase: Landed},
		{name: "HelmRelease chart version pushed again: Flux pulled another digest", applier: FluxHelmRelease{}, kind: "HelmRelease",
			y:         `{metadata: {annotations: {stagecoach.dev/digest: "` + d2 + `"}}, spec: {chart: {spec: {version: 2.0.0}}}, status: {observedGeneration: 2, history: [{version: 3, status: deployed, chartVersion: 2.0.0, ociDigest: "` + d1 + `"}], conditions: [` + ready("True", "UpgradeSucceeded", 2) + `]}}`,
			wantPhase: Failed, wantReason: "TagMoved"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := fluxObj(t, tc.kind, 2, tc.y)
			obs := tc.applier.Observe(obj, d2)
			g.Expect(obs.Phase).To(Equal(tc.wantPhase), obs.Message)
			g.Expect(tc.applier.Observe(cached(t, obj), d2)).To(Equal(obs), "read from the cache")
			if tc.wantReason != "" {
				g.Expect(obs.Reason).To(Equal(tc.wantReason), obs.Message)
			}
		})
	}
}

func TestFluxOCIRepositoryThroughKustomization(t *testing.T) {
	ready := func(status, reason string) string {
		return `{type: Ready, status: "` + status + `", reason: ` + reason + `, message: "m", observedGeneration: 2}`
	}
	repo := `{spec: {ref: {digest: "` + d2 + `"}}, status: {observedGeneration: 2, artifact: {revision: "v2@` + d2 + `"}, conditions: [` + ready("True", "Succeeded") + `]}}`
	repoRechecking := `{spec: {ref: {digest: "` + d2 + `"}}, status: {observedGeneration: 2, artifact: {revision: "v2@` + d2 + `"}, conditions: [` + ready("Unknown", "Progressing") + `]}}`
	older := "v3@sha256:" + strings.Repeat("3", 64)
	cases := []struct {
		name, kustomization string
		repo                string // the Ready OCIRepository at the digest when empty
		wantPhase           Phase
		wantMsg             string
	}{
		{name: "the Kustomization still applies the old artifact",
			kustomization: `{status: {observedGeneration: 2, lastAppliedRevision: "v1@` + d1 + `", conditions: [` + ready("True", "ReconciliationSucceeded") + `]}}`,
			wantPhase:     Progressing, wantMsg: `applied "v1@` + d1 + `", not ` + d2},
		{name: "the Kustomization applied it",
			kustomization: `{status: {observedGeneration: 2, lastAppliedRevision: "v2@` + d2 + `", conditions: [` + ready("True", "ReconciliationSucceeded") + `]}}`,
			wantPhase:     Landed, wantMsg: "artifact v2@" + d2},
		{name: "the Kustomization checks again what it applied",
			kustomization: `{status: {observedGeneration: 2, lastAppliedRevision: "v2@` + d2 + `", conditions: [` + ready("Unknown", "Progressing") + `]}}`,
			wantPhase:     Rechecking, wantMsg: "reconciling generation 2 again"},
		{name: "the Kustomization's health checks failed",
			kustomization: `{status: {observedGeneration: 2, lastAppliedRevision: "v1@` + d1 + `", lastAttemptedRevision: "v2@` + d2 + `", conditions: [` + ready("False", "HealthCheckFailed") + `]}}`,
			wantPhase:     Failed, wantMsg: "HealthCheckFailed"},
		// Rolling back from a release that failed: the failure is the old artifact's, not this one's.
		{name: "the Kustomization's failure is about an older artifact",
			kustomization: `{status: {observedGeneration: 2, lastAppliedRevision: "v0@` + d1 + `", lastAttemptedRevision: "` + older + `", conditions: [` + ready("False", "HealthCheckFailed") + `]}}`,
			wantPhase:     Progressing, wantMsg: "has not tried " + d2 + " yet"},
		{name: "a failure that names the digest is this one's",
			kustomization: `{status: {observedGeneration: 2, lastAttemptedRevision: "` + older + `", conditions: [{type: Ready, status: "False", reason: ArtifactFailed, observedGeneration: 2, message: "failed to download artifact from http://source-controller/ocirepository/dev/payments/` + strings.TrimPrefix(d2, "sha256:") + `.tar.gz"}]}}`,
			wantPhase:     Failed, wantMsg: "ArtifactFailed"},
		{name: "a Stalled Kustomization fails whatever it tried",
			kustomization: `{status: {observedGeneration: 2, lastAttemptedRevision: "` + older + `", conditions: [` + ready("False", "InvalidHealthCheck") + `, {type: Stalled, status: "True", reason: InvalidHealthCheck, message: m, observedGeneration: 2}]}}`,
			wantPhase:     Failed, wantMsg: "InvalidHealthCheck"},
		// The source checking its artifact again hides neither the Kustomization's verdict nor its failure.
		{name: "the source checks again, the Kustomization applied it", repo: repoRechecking,
			kustomization: `{status: {observedGeneration: 2, lastAppliedRevision: "v2@` + d2 + `", conditions: [` + ready("True", "ReconciliationSucceeded") + `]}}`,
			wantPhase:     Rechecking, wantMsg: "OCIRepository"},
		{name: "the source checks again, the Kustomization failed it", repo: repoRechecking,
			kustomization: `{status: {observedGeneration: 2, lastAttemptedRevision: "v2@` + d2 + `", conditions: [` + ready("False", "HealthCheckFailed") + `]}}`,
			wantPhase:     Failed, wantMsg: "HealthCheckFailed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			a := FluxOCIRepository{Kustomization: fluxObj(t, "Kustomization", 2, tc.kustomization)}
			r := repo
			if tc.repo != "" {
				r = tc.repo
			}
			obs := a.Observe(fluxObj(t, "OCIRepository", 2, r), d2)
			g.Expect(obs.Phase).To(Equal(tc.wantPhase), obs.Message)
			g.Expect(obs.Message).To(ContainSubstring(tc.wantMsg))
			// Both objects read from the cache of appliers (checkThrough reads the Kustomization).
			fromCache := FluxOCIRepository{Kustomization: cached(t, a.Kustomization)}
			g.Expect(fromCache.Observe(cached(t, fluxObj(t, "OCIRepository", 2, r)), d2)).To(Equal(obs), "read from the cache")
		})
	}
}

// A Flux GitRepository takes Git commits in spec.ref.commit; the commit has landed when the
// artifact is that commit (Flux writes <branch>@sha1:<SHA>), Ready at the generation, and, through
// applyRef.kustomization, the Kustomization applied that revision.
func TestFluxGitRepository(t *testing.T) {
	c1, c2 := strings.Repeat("a", 40), strings.Repeat("b", 40)
	ready := func(status, reason string) string {
		return `{type: Ready, status: "` + status + `", reason: ` + reason + `, message: "m", observedGeneration: 2}`
	}
	repoAt := func(revision, status, reason string) string {
		return `{spec: {ref: {branch: main, commit: "` + c2 + `"}}, status: {observedGeneration: 2, artifact: {revision: "` + revision + `"}, conditions: [` + ready(status, reason) + `]}}`
	}
	for _, tc := range []struct {
		name, repo, kustomization string
		wantPhase                 Phase
		wantMsg                   string
	}{
		{name: "the artifact is the commit", repo: repoAt("main@sha1:"+c2, "True", "Succeeded"), wantPhase: Landed, wantMsg: "artifact main@sha1:" + c2},
		{name: "the artifact is still the old commit", repo: repoAt("main@sha1:"+c1, "True", "Succeeded"), wantPhase: Progressing,
			wantMsg: `stores artifact "main@sha1:` + c1 + `", not sha1:` + c2},
		{name: "the fetch failed", repo: repoAt("main@sha1:"+c1, "False", "GitOperationFailed"), wantPhase: Failed, wantMsg: "GitOperationFailed"},
		{name: "the Kustomization applied it", repo: repoAt("main@sha1:"+c2, "True", "Succeeded"),
			kustomization: `{status: {observedGeneration: 2, lastAppliedRevision: "main@sha1:` + c2 + `", conditions: [` + ready("True", "ReconciliationSucceeded") + `]}}`,
			wantPhase:     Landed, wantMsg: "applied main@sha1:" + c2},
		{name: "the Kustomization still applies the old commit", repo: repoAt("main@sha1:"+c2, "True", "Succeeded"),
			kustomization: `{status: {observedGeneration: 2, lastAppliedRevision: "main@sha1:` + c1 + `", conditions: [` + ready("True", "ReconciliationSucceeded") + `]}}`,
			wantPhase:     Progressing, wantMsg: `applied "main@sha1:` + c1 + `", not sha1:` + c2},
		{name: "the Kustomization failed the commit", repo: repoAt("main@sha1:"+c2, "True", "Succeeded"),
			kustomization: `{status: {observedGeneration: 2, lastAttemptedRevision: "main@sha1:` + c2 + `", conditions: [` + ready("False", "BuildFailed") + `]}}`,
			wantPhase:     Failed, wantMsg: "BuildFailed"},
		{name: "the Kustomization's failure is an older commit's", repo: repoAt("main@sha1:"+c2, "True", "Succeeded"),
			kustomization: `{status: {observedGeneration: 2, lastAttemptedRevision: "main@sha1:` + c1 + `", conditions: [` + ready("False", "BuildFailed") + `]}}`,
			wantPhase:     Progressing, wantMsg: "has not tried sha1:" + c2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			a := FluxGitRepository{}
			if tc.kustomization != "" {
				a.Kustomizations = []*unstructured.Unstructured{fluxObj(t, "Kustomization", 2, tc.kustomization)}
			}
			obs := a.Observe(fluxObj(t, "GitRepository", 2, tc.repo), "sha1:"+c2)
			g.Expect(obs.Phase).To(Equal(tc.wantPhase), obs.Message)
			g.Expect(obs.Message).To(ContainSubstring(tc.wantMsg))
		})
	}

	t.Run("every Kustomization applying the artifact", func(t *testing.T) {
		applied := func(c string) *unstructured.Unstructured {
			return fluxObj(t, "Kustomization", 2, `{status: {observedGeneration: 2, lastAppliedRevision: "main@sha1:`+c+`", conditions: [`+ready("True", "ReconciliationSucceeded")+`]}}`)
		}
		failed := fluxObj(t, "Kustomization", 2, `{status: {observedGeneration: 2, lastAttemptedRevision: "main@sha1:`+c2+`", conditions: [`+ready("False", "HealthCheckFailed")+`]}}`)
		repo := fluxObj(t, "GitRepository", 2, repoAt("main@sha1:"+c2, "True", "Succeeded"))
		for _, tc := range []struct {
			name           string
			kustomizations []*unstructured.Unstructured
			wantPhase      Phase
		}{
			{name: "both applied it", kustomizations: []*unstructured.Unstructured{applied(c2), applied(c2)}, wantPhase: Landed},
			{name: "one still applies the old commit", kustomizations: []*unstructured.Unstructured{applied(c2), applied(c1)}, wantPhase: Progressing},
			{name: "one failed it", kustomizations: []*unstructured.Unstructured{applied(c1), failed}, wantPhase: Failed},
		} {
			t.Run(tc.name, func(t *testing.T) {
				g := NewWithT(t)
				obs := FluxGitRepository{Kustomizations: tc.kustomizations}.Observe(repo, "sha1:"+c2)
				g.Expect(obs.Phase).To(Equal(tc.wantPhase), obs.Message)
			})
		}
	})

	t.Run("writes and reads the commit", func(t *testing.T) {
		g := NewWithT(t)
		repo := fluxObj(t, "GitRepository", 1, `{spec: {ref: {branch: main}}}`)
		a := FluxGitRepository{}
		g.Expect(a.Revision(repo)).To(BeEmpty())
		g.Expect(a.SetRevision(repo, Version{Digest: "sha1:" + c1, Tag: c1[:7]}, time.Now())).To(Succeed())
		commit, _, _ := unstructured.NestedString(repo.Object, "spec", "ref", "commit")
		branch, _, _ := unstructured.NestedString(repo.Object, "spec", "ref", "branch")
		g.Expect(commit).To(Equal(c1))
		g.Expect(branch).To(Equal("main"), "the branch stays: Flux fetches it at the commit")
		g.Expect(a.Revision(repo)).To(Equal("sha1:" + c1))
		g.Expect(repo.GetAnnotations()).To(HaveKey(RequestedAtAnnotation))
		g.Expect(a.SetRevision(repo, Version{Digest: d1}, time.Now())).To(MatchError(ContainSubstring("takes Git commits (sha1:<SHA>), not " + d1)))
		g.Expect(a.Takes(repo)).To(Equal(GitCommits))
		g.Expect(FluxOCIRepository{}.Takes(repo)).To(Equal(OCIDigests))
	})
}
