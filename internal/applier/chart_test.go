package applier

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// Issue 37 item 4: where the engine pulls a chart given by version is what the tag is resolved
// in, and what is compared with the repository the Stage's versions are judged in.
func TestChartSource(t *testing.T) {
	argo := func(source string) *unstructured.Unstructured {
		return app(t, "spec: {source: "+source+", syncPolicy: {automated: {}}}")
	}
	helmRelease := func(spec string) *unstructured.Unstructured { return fluxObj(t, "HelmRelease", 1, "{spec: "+spec+"}") }
	for _, tc := range []struct {
		name       string
		applier    Applier
		obj        *unstructured.Unstructured
		wantPinned bool
		wantRepo   string
		wantNotOCI string
		wantRef    *types.NamespacedName
		wantFrom   string
	}{
		{name: "Argo CD Helm OCI repository without a scheme", applier: ArgoCDApplication{},
			obj:        argo(`{repoURL: registry.example/charts, chart: payments, targetRevision: 1.0.0}`),
			wantPinned: true, wantRepo: "registry.example/charts/payments", wantFrom: `spec.source repoURL "registry.example/charts", chart "payments"`},
		{name: "Argo CD Helm OCI repository with oci://", applier: ArgoCDApplication{},
			obj:        argo(`{repoURL: "oci://registry.example/charts/", chart: payments, targetRevision: 1.0.0}`),
			wantPinned: true, wantRepo: "registry.example/charts/payments"},
		{name: "Argo CD HTTPS Helm repository", applier: ArgoCDApplication{},
			obj:        argo(`{repoURL: "https://charts.example", chart: payments, targetRevision: 1.0.0}`),
			wantPinned: true, wantNotOCI: "an HTTPS Helm repository", wantFrom: `repoURL "https://charts.example"`},
		{name: "Argo CD OCI source is given the digest", applier: ArgoCDApplication{},
			obj: argo(`{repoURL: oci://registry.example/deploy/payments, targetRevision: "` + d1 + `"}`)},
		{name: "completion rules on top", applier: WithCompletion{Applier: ArgoCDApplication{}},
			obj:        argo(`{repoURL: registry.example/charts, chart: payments, targetRevision: 1.0.0}`),
			wantPinned: true, wantRepo: "registry.example/charts/payments"},
		{name: "HelmRelease from a HelmRepository: read it", applier: FluxHelmRelease{},
			obj:        helmRelease(`{chart: {spec: {chart: payments, version: 1.0.0, sourceRef: {kind: HelmRepository, name: charts}}}}`),
			wantPinned: true, wantRef: &types.NamespacedName{Namespace: "dev", Name: "charts"}, wantFrom: `chart "payments" from HelmRepository 'dev/charts'`},
		{name: "HelmRelease from a HelmRepository of another namespace", applier: FluxHelmRelease{},
			obj:        helmRelease(`{chart: {spec: {chart: payments, version: 1.0.0, sourceRef: {kind: HelmRepository, name: charts, namespace: flux-system}}}}`),
			wantPinned: true, wantRef: &types.NamespacedName{Namespace: "flux-system", Name: "charts"}},
		{name: "HelmRelease from a GitRepository", applier: FluxHelmRelease{},
			obj:        helmRelease(`{chart: {spec: {chart: ./charts/payments, version: 1.0.0, sourceRef: {kind: GitRepository, name: config}}}}`),
			wantPinned: true, wantNotOCI: "from a GitRepository is built from files"},
		{name: "HelmRelease with chartRef", applier: FluxHelmRelease{},
			obj:        helmRelease(`{chartRef: {kind: OCIRepository, name: payments}}`),
			wantPinned: true, wantNotOCI: "make the OCIRepository it names the Stage's applier"},
		{name: "HelmRelease by values key is given the digest", applier: FluxHelmRelease{ValuesKey: "image.digest"},
			obj: helmRelease(`{chart: {spec: {chart: payments, version: 1.0.0, sourceRef: {kind: HelmRepository, name: charts}}}}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			src, pinned := ChartOf(tc.applier, tc.obj)
			g.Expect(pinned).To(Equal(tc.wantPinned))
			if !pinned {
				g.Expect(src).To(Equal(ChartSource{}))
				return
			}
			g.Expect(src.Repository).To(Equal(tc.wantRepo))
			g.Expect(src.HelmRepository).To(Equal(tc.wantRef))
			g.Expect(src.From).To(ContainSubstring(tc.wantFrom))
			if tc.wantNotOCI == "" {
				g.Expect(src.NotOCI).To(BeEmpty())
			} else {
				g.Expect(src.NotOCI).To(ContainSubstring(tc.wantNotOCI))
			}
			cachedSrc, _ := ChartOf(tc.applier, cached(t, tc.obj))
			g.Expect(cachedSrc).To(Equal(src), "read from the cache")
		})
	}
}

// A Flux chart is in an OCI registry only from a HelmRepository of type oci: an HTTPS one has
// no digest behind a version (and Flux records none).
func TestChartSourceWithHelmRepository(t *testing.T) {
	hr := fluxObj(t, "HelmRelease", 1, `{spec: {chart: {spec: {chart: payments, version: 1.0.0, sourceRef: {kind: HelmRepository, name: charts}}}}}`)
	src, _ := ChartOf(FluxHelmRelease{}, hr)
	for _, tc := range []struct {
		name, repo, why      string
		wantRepo, wantNotOCI string
	}{
		{name: "OCI HelmRepository", repo: `{spec: {type: oci, url: "oci://registry.example/charts"}}`, wantRepo: "registry.example/charts/payments"},
		{name: "HTTPS HelmRepository", repo: `{spec: {url: "https://charts.example"}}`, wantNotOCI: "Flux records no OCI digest"},
		{name: "HTTPS HelmRepository that says oci", repo: `{spec: {type: oci, url: "https://charts.example"}}`, wantNotOCI: "an HTTPS Helm repository"},
		{name: "unreadable HelmRepository", why: "not found", wantNotOCI: "HelmRepository 'dev/charts' cannot be read (not found)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var repo *unstructured.Unstructured
			if tc.repo != "" {
				repo = fluxObj(t, "HelmRepository", 1, tc.repo)
			}
			got := src.WithHelmRepository(repo, tc.why)
			g.Expect(got.HelmRepository).To(BeNil())
			g.Expect(got.Repository).To(Equal(tc.wantRepo))
			if tc.wantNotOCI == "" {
				g.Expect(got.NotOCI).To(BeEmpty())
			} else {
				g.Expect(got.NotOCI).To(ContainSubstring(tc.wantNotOCI))
			}
		})
	}
}

func TestSameRepository(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"registry.example/charts/payments", "registry.example/charts/payments", true},
		{"oci://registry.example/charts/payments", "registry.example/charts/payments/", true},
		{"docker.io/library/payments", "payments", true},
		{"registry.example/charts/payments", "registry.example/deploy/payments", false},
		{"registry.example/charts/payments", "mirror.example/charts/payments", false},
	} {
		t.Run(tc.a+" "+tc.b, func(t *testing.T) {
			NewWithT(t).Expect(SameRepository(tc.a, tc.b)).To(Equal(tc.want))
		})
	}
}

// The tag resolved is the one the engine pulls: Argo CD pulls the tag itself (its chart version
// has "+" where the tag has "_"); Flux is written the version without "v", an exact version, so
// that it pulls that very tag and no 1.2.3+build that a range would match.
func TestPulledTagAndWrittenVersion(t *testing.T) {
	for _, tc := range []struct {
		tag, wantArgo, wantFlux, wantFluxWritten string
	}{
		{tag: "1.2.3", wantArgo: "1.2.3", wantFlux: "1.2.3", wantFluxWritten: "1.2.3"},
		{tag: "v1.2.3", wantArgo: "v1.2.3", wantFlux: "1.2.3", wantFluxWritten: "1.2.3"},
		{tag: "1.2.3_build.7", wantArgo: "1.2.3_build.7", wantFlux: "1.2.3_build.7", wantFluxWritten: "1.2.3+build.7"},
	} {
		t.Run(tc.tag, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(ArgoCDApplication{}.PulledTag(tc.tag)).To(Equal(tc.wantArgo))
			g.Expect(FluxHelmRelease{}.PulledTag(tc.tag)).To(Equal(tc.wantFlux))
			obj := fluxObj(t, "HelmRelease", 1, `{spec: {chart: {spec: {chart: payments, version: 1.0.0}}}}`)
			g.Expect(FluxHelmRelease{}.SetRevision(obj, Version{Digest: d2, Tag: tc.tag}, time.Now())).To(Succeed())
			written, _, _ := unstructured.NestedString(obj.Object, "spec", "chart", "spec", "version")
			g.Expect(written).To(Equal(tc.wantFluxWritten))
		})
	}
}

// Issue 37 item 3 (Flux): landed only at the exact chart version written and, when Flux records
// one, the verified OCI digest; a 1.2.3+x that the version 1.2.3 matched fails at once.
func TestFluxHelmReleaseLandsOnlyAtTheExactVersion(t *testing.T) {
	ready := `{type: Ready, status: "True", reason: UpgradeSucceeded, message: m, observedGeneration: 2}`
	release := func(version, chartVersion, ociDigest string) string {
		r := `{metadata: {annotations: {stagecoach.dev/digest: "` + d2 + `"}}, spec: {chart: {spec: {chart: payments, version: "` + version + `"}}}, status: {observedGeneration: 2, history: [{version: 3, status: deployed, chartVersion: "` + chartVersion + `"`
		if ociDigest != "" {
			r += `, ociDigest: "` + ociDigest + `"`
		}
		return r + `}], conditions: [` + ready + `]}}`
	}
	for _, tc := range []struct {
		name, y    string
		wantPhase  Phase
		wantReason string
		wantMsg    string
	}{
		{name: "the exact version at the verified digest", y: release("1.2.3", "1.2.3", d2), wantPhase: Landed},
		{name: "the exact version with build metadata", y: release("1.2.3+build.7", "1.2.3+build.7", d2), wantPhase: Landed},
		{name: "a 1.2.3+x pushed since matched 1.2.3", y: release("1.2.3", "1.2.3+x", ""), wantPhase: Failed, wantReason: "TagMoved",
			wantMsg: "newest release runs chart 1.2.3+x, which only matches the version 1.2.3 written for the verified " + d2},
		{name: "1.2.3 when 1.2.3+build.7 was written", y: release("1.2.3+build.7", "1.2.3", ""), wantPhase: Failed, wantReason: "TagMoved"},
		{name: "the version pushed again", y: release("1.2.3", "1.2.3", d1), wantPhase: Failed, wantReason: "TagMoved"},
		{name: "the release before", y: release("1.2.3", "1.2.2", d1), wantPhase: Progressing, wantReason: "WaitingForRevision"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := fluxObj(t, "HelmRelease", 2, tc.y)
			obs := FluxHelmRelease{}.Observe(obj, d2)
			g.Expect(obs.Phase).To(Equal(tc.wantPhase), obs.Message)
			g.Expect(obs.Message).To(ContainSubstring(tc.wantMsg))
			if tc.wantReason != "" {
				g.Expect(obs.Reason).To(Equal(tc.wantReason), obs.Message)
			}
		})
	}
	t.Run("a release of an older generation is no proof either way", func(t *testing.T) {
		g := NewWithT(t)
		obj := fluxObj(t, "HelmRelease", 3, release("1.2.3", "1.2.3+x", ""))
		g.Expect(FluxHelmRelease{}.Observe(obj, d2).Phase).To(Equal(Progressing))
	})
}

// Issue 37 item 3: after the version was verified, Flux upgrades on its own interval; the newest
// release it records tells whether it still runs the verified chart.
func TestFluxHelmReleaseDrifted(t *testing.T) {
	hr := func(written, chartVersion, ociDigest string) *unstructured.Unstructured {
		y := `{metadata: {annotations: {stagecoach.dev/digest: "` + d2 + `"}}, spec: {chart: {spec: {chart: payments, version: "` + written + `"}}}`
		if chartVersion != "" {
			y += `, status: {history: [{version: 4, status: deployed, chartVersion: "` + chartVersion + `", ociDigest: "` + ociDigest + `"}]}`
		}
		return fluxObj(t, "HelmRelease", 2, y+`}`)
	}
	for _, tc := range []struct {
		name    string
		applier Applier
		obj     *unstructured.Unstructured
		digest  string
		wantMsg string
	}{
		{name: "runs the verified chart", applier: FluxHelmRelease{}, obj: hr("1.2.3", "1.2.3", d2), digest: d2},
		{name: "no release recorded", applier: FluxHelmRelease{}, obj: hr("1.2.3", "", ""), digest: d2},
		{name: "upgraded to a 1.2.3+x the version matches", applier: FluxHelmRelease{}, obj: hr("1.2.3", "1.2.3+x", ""), digest: d2,
			wantMsg: "runs chart 1.2.3+x, not the verified 1.2.3 (" + d2 + ")"},
		{name: "the version pushed again", applier: WithCompletion{Applier: FluxHelmRelease{}}, obj: hr("1.2.3", "1.2.3", d1), digest: d2,
			wantMsg: "at OCI digest " + d1 + ", not the verified " + d2},
		{name: "another version is being promoted", applier: FluxHelmRelease{}, obj: hr("1.2.3", "1.2.2", d1), digest: d1},
		{name: "by values key", applier: FluxHelmRelease{ValuesKey: "image.digest"}, obj: hr("1.2.3", "1.2.3+x", ""), digest: d2},
		{name: "Argo CD reports nothing of the kind", applier: ArgoCDApplication{}, obj: app(t, "spec: {source: {repoURL: r, chart: c}}"), digest: d2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			msg, drifted := tc.applier.Drifted(tc.obj, tc.digest)
			g.Expect(drifted).To(Equal(tc.wantMsg != ""), msg)
			g.Expect(msg).To(ContainSubstring(tc.wantMsg))
		})
	}
}
