package applier

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const (
	commitSHA = "0123456789abcdef0123456789abcdef01234567"
	// chartAndValues: an OCI Helm chart (promoted) with its value files from Git, pinned.
	chartAndValues = `{sources: [
	  {name: chart, repoURL: oci://r/charts/web, targetRevision: "` + d1 + `", helm: {valueFiles: [$values/prod/values.yaml]}},
	  {repoURL: https://git/config.git, targetRevision: ` + commitSHA + `, ref: values}],
	  syncPolicy: {automated: {}}}`
)

func TestArgoCDValidateMultiSource(t *testing.T) {
	cases := []struct {
		name, source, spec string
		wantBlocking       string
		wantUnmediated     string
		wantMessageContain string
	}{
		{name: "no applyRef.source: which source is promoted is not known", spec: chartAndValues,
			wantBlocking: "ApplierMultiSource", wantMessageContain: `("chart" (oci://r/charts/web), "https://git/config.git"): set applyRef.source`},
		{name: "by name, the other source pinned to a commit", source: "chart", spec: chartAndValues},
		{name: "by repoURL", source: "oci://r/charts/web", spec: chartAndValues},
		{name: "names no source", source: "app", spec: chartAndValues,
			wantBlocking: "ApplierSourceNotFound", wantMessageContain: `applyRef.source "app" names none of the sources of Application 'prod/payments'`},
		{name: "a repoURL two sources share", source: "oci://r/a",
			spec:         `{sources: [{repoURL: oci://r/a}, {repoURL: oci://r/a, path: other}], syncPolicy: {automated: {}}}`,
			wantBlocking: "ApplierSourceNotFound", wantMessageContain: "names spec.sources[0] and spec.sources[1]"},
		{name: "the values on a branch", source: "chart",
			spec: `{sources: [{name: chart, repoURL: oci://r/charts/web, helm: {valueFiles: [$values/prod/values.yaml]}},
			  {repoURL: https://git/config.git, targetRevision: main, ref: values}], syncPolicy: {automated: {}}}`,
			wantUnmediated: "SourceUnpinned", wantMessageContain: `renders spec.sources[1] "https://git/config.git" at "main" (a Git source is pinned only by a 40-hex commit SHA) besides the promoted spec.sources[0]`},
		{name: "another source at HEAD", source: "chart",
			spec:           `{sources: [{name: chart, repoURL: oci://r/charts/web}, {name: extra, repoURL: https://git/extra.git, path: x}], syncPolicy: {automated: {}}}`,
			wantUnmediated: "SourceUnpinned", wantMessageContain: `spec.sources[1] "extra" (https://git/extra.git) at "HEAD"`},
		{name: "another OCI source pinned by digest", source: "chart",
			spec: `{sources: [{name: chart, repoURL: oci://r/charts/web}, {repoURL: oci://r/extra, targetRevision: "` + d2 + `"}], syncPolicy: {automated: {}}}`},
		{name: "a chart version is not a pin", source: "app",
			spec:           `{sources: [{name: app, repoURL: oci://r/app}, {repoURL: https://charts.example, chart: redis, targetRevision: 19.0.1}], syncPolicy: {automated: {}}}`,
			wantUnmediated: "SourceUnpinned", wantMessageContain: `at "19.0.1"`},
		// Issue 37 item 6: a pin is judged by the kind of source that reads it.
		{name: "a 40-hex tag of an OCI source is not a pin", source: "chart",
			spec:           `{sources: [{name: chart, repoURL: oci://r/charts/web}, {repoURL: oci://r/extra, targetRevision: "` + commitSHA + `"}], syncPolicy: {automated: {}}}`,
			wantUnmediated: "SourceUnpinned", wantMessageContain: `spec.sources[1] "oci://r/extra" at "` + commitSHA + `" (an OCI source is pinned only by a digest`},
		{name: "a 64-hex Git revision is looked up among refs first: not a pin", source: "chart",
			spec:           `{sources: [{name: chart, repoURL: oci://r/charts/web}, {repoURL: https://git/extra.git, targetRevision: "` + d2[len("sha256:"):] + `"}], syncPolicy: {automated: {}}}`,
			wantUnmediated: "SourceUnpinned", wantMessageContain: `(a Git source is pinned only by a 40-hex commit SHA)`},
		{name: "a digest on a Git source is not a pin", source: "chart",
			spec:           `{sources: [{name: chart, repoURL: oci://r/charts/web}, {repoURL: https://git/extra.git, targetRevision: "` + d2 + `"}], syncPolicy: {automated: {}}}`,
			wantUnmediated: "SourceUnpinned", wantMessageContain: `spec.sources[1] "https://git/extra.git" at "` + d2 + `"`},
		{name: "a chart from a chart repository at a digest-looking version is not a pin", source: "app",
			spec:           `{sources: [{name: app, repoURL: oci://r/app}, {repoURL: https://charts.example, chart: redis, targetRevision: "` + commitSHA + `"}], syncPolicy: {automated: {}}}`,
			wantUnmediated: "SourceUnpinned", wantMessageContain: `(a chart version from a chart repository can be pushed again)`},
		{name: "another pinned source's value file from a URL", source: "app",
			spec: `{sources: [{name: app, repoURL: oci://r/app}, {repoURL: https://git/config.git, targetRevision: ` + commitSHA + `, path: charts/x,
			  helm: {valueFiles: [values.yaml, "https://values.example/prod.yaml"]}}], syncPolicy: {automated: {}}}`,
			wantUnmediated: "SourceUnpinned", wantMessageContain: `spec.sources[1] "https://git/config.git" value file https://values.example/prod.yaml (a URL serves what it likes)`},
		{name: "another pinned source's value files in its repository", source: "app",
			spec: `{sources: [{name: app, repoURL: oci://r/app}, {repoURL: https://git/config.git, targetRevision: ` + commitSHA + `, path: charts/x,
			  helm: {valueFiles: [values.yaml]}}], syncPolicy: {automated: {}}}`},
		{name: "value files inside the chart count as on one source", source: "chart",
			spec:           `{sources: [{name: chart, repoURL: oci://r/charts/web, helm: {valueFiles: [prod.yaml]}}], syncPolicy: {automated: {}}}`,
			wantUnmediated: "NotMediated", wantMessageContain: "spec.sources[0].helm.valueFiles"},
		{name: "the promoted source is Git without the plugin", source: "https://git/config.git",
			spec:         chartAndValues,
			wantBlocking: "ApplierNotOCI", wantMessageContain: "set spec.sources[1].plugin.name: stagecoach"},
		{name: "one source named by applyRef.source", source: "oci://r/p", spec: `{source: {repoURL: oci://r/p}, syncPolicy: {automated: {}}}`},
		{name: "one source applyRef.source does not name", source: "chart", spec: `{source: {repoURL: oci://r/p}, syncPolicy: {automated: {}}}`,
			wantBlocking: "ApplierSourceNotFound", wantMessageContain: `the only source of Application 'prod/payments' is "oci://r/p"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := app(t, "spec: "+tc.spec)
			a := ArgoCDApplication{Source: tc.source}
			blocking, unmediated := a.Validate(obj)
			fromCache, unmediatedFromCache := a.Validate(cached(t, obj))
			g.Expect(fromCache).To(Equal(blocking))
			g.Expect(unmediatedFromCache).To(Equal(unmediated))
			var message string
			switch {
			case tc.wantBlocking != "":
				g.Expect(blocking).NotTo(BeNil())
				g.Expect(blocking.Reason).To(Equal(tc.wantBlocking))
				message = blocking.Message
			case tc.wantUnmediated != "":
				g.Expect(blocking).To(BeNil())
				g.Expect(unmediated).NotTo(BeNil())
				g.Expect(unmediated.Reason).To(Equal(tc.wantUnmediated))
				message = unmediated.Message
			default:
				g.Expect(blocking).To(BeNil())
				g.Expect(unmediated).To(BeNil())
			}
			g.Expect(message).To(ContainSubstring(tc.wantMessageContain))
		})
	}
}

func TestArgoCDSetRevisionMultiSource(t *testing.T) {
	cases := []struct {
		name, spec, before string
		check              func(g Gomega, obj *unstructured.Unstructured)
	}{
		{name: "OCI chart: its targetRevision, the values source untouched", spec: chartAndValues, before: d1,
			check: func(g Gomega, obj *unstructured.Unstructured) {
				sources, _, _ := unstructured.NestedSlice(obj.Object, "spec", "sources")
				g.Expect(sources[0]).To(HaveKeyWithValue("targetRevision", d2))
				g.Expect(sources[1]).To(HaveKeyWithValue("targetRevision", commitSHA))
			}},
		{name: "plugin source second: its env", spec: `{sources: [
			  {repoURL: https://git/config.git, targetRevision: ` + commitSHA + `, ref: values},
			  {name: chart, repoURL: https://git/app.git, targetRevision: main, plugin: {name: stagecoach}}]}`,
			check: func(g Gomega, obj *unstructured.Unstructured) {
				env, _, _ := unstructured.NestedSlice(obj.Object, "spec", "sources")
				plugin := env[1].(map[string]any)["plugin"].(map[string]any)
				g.Expect(plugin["env"]).To(ConsistOf(
					map[string]any{"name": "STAGECOACH_DIGEST", "value": d2},
					map[string]any{"name": "STAGECOACH_VERSION", "value": "v2.0.0"}))
				g.Expect(env[1]).To(HaveKeyWithValue("targetRevision", "main"))
				g.Expect(env[0]).NotTo(HaveKey("plugin"))
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := app(t, "spec: "+tc.spec)
			a := ArgoCDApplication{Source: "chart"}
			g.Expect(a.Revision(cached(t, obj))).To(Equal(tc.before))
			expectSameWrite(t, g, obj, func(u *unstructured.Unstructured) error {
				return a.SetRevision(u, Version{Digest: d2, Tag: "v2.0.0"}, time.Now())
			})
			g.Expect(a.SetRevision(obj, Version{Digest: d2, Tag: "v2.0.0"}, time.Now())).To(Succeed())
			g.Expect(a.Revision(obj)).To(Equal(d2))
			g.Expect(obj.GetAnnotations()).To(HaveKeyWithValue("argocd.argoproj.io/refresh", "normal"))
			tc.check(g, obj)
		})
	}
	t.Run("no source named: refused, saying why", func(t *testing.T) {
		g := NewWithT(t)
		obj := app(t, "spec: "+chartAndValues)
		err := ArgoCDApplication{}.SetRevision(obj, Version{Digest: d2}, time.Now())
		g.Expect(err).To(MatchError(ContainSubstring("set applyRef.source")))
		g.Expect(ArgoCDApplication{}.Revision(obj)).To(BeEmpty())
	})
}

// Landed proof reads the promoted source's entry of each list Argo CD keeps per source.
func TestArgoCDObserveMultiSource(t *testing.T) {
	landed := func(chartRev, valuesRev string) string {
		return `{sync: {status: Synced, revisions: ["` + chartRev + `", "` + valuesRev + `"]}, health: {status: Healthy},
		  operationState: {phase: Succeeded, finishedAt: "2026-11-30T10:00:00Z", operation: {sync: {revisions: ["` + chartRev + `", "` + valuesRev + `"]}},
		    syncResult: {revisions: ["` + chartRev + `", "` + valuesRev + `"]}},
		  reconciledAt: "2026-11-30T10:00:01Z"}`
	}
	pluginSecond := `spec: {sources: [{repoURL: https://git/config.git, targetRevision: ` + commitSHA + `, ref: values},
	  {name: chart, repoURL: https://git/app.git, plugin: {name: stagecoach}}]}
`
	chartSecond := `spec: {sources: [{repoURL: https://git/config.git, targetRevision: ` + commitSHA + `, ref: values},
	  {name: chart, repoURL: oci://r/charts/web, targetRevision: "` + d2 + `", helm: {valueFiles: [$values/prod/values.yaml]}}]}
`
	pluginStatus := func(digest string) string {
		sources := `[{repoURL: https://git/config.git}, {repoURL: https://git/app.git, plugin: {env: [{name: STAGECOACH_DIGEST, value: "` + digest + `"}]}}]`
		return `{sync: {status: Synced, revisions: [` + commitSHA + `, 0a1b2c], comparedTo: {sources: ` + sources + `}}, health: {status: Healthy},
		  operationState: {phase: Succeeded, finishedAt: "2026-11-30T10:00:00Z", syncResult: {revisions: [` + commitSHA + `, 0a1b2c], sources: ` + sources + `}},
		  reconciledAt: "2026-11-30T10:00:01Z"}`
	}
	cases := []struct {
		name, app, status string
		wantPhase         Phase
		wantMsg           string
	}{
		{name: "landed at the chart's index", app: "spec: " + chartAndValues + "\n", status: landed(d2, commitSHA), wantPhase: Landed},
		{name: "the digest at another source's index is no proof", app: "spec: " + chartAndValues + "\n", status: landed(commitSHA, d2),
			wantPhase: Progressing, wantMsg: "waiting for Argo CD to sync"},
		{name: "a single revision field is not read for a multi-source Application",
			app: "spec: " + chartAndValues + "\n",
			status: `{sync: {status: Synced, revision: "` + d2 + `"}, health: {status: Healthy},
			  operationState: {phase: Succeeded, finishedAt: "2026-11-30T10:00:00Z", syncResult: {revision: "` + d2 + `"}}, reconciledAt: "2026-11-30T10:00:01Z"}`,
			wantPhase: Progressing},
		{name: "sync of the digest failed", app: "spec: " + chartAndValues + "\n",
			status:    `{operationState: {phase: Failed, message: "boom", operation: {sync: {revisions: ["` + d2 + `", "` + commitSHA + `"]}}}}`,
			wantPhase: Failed, wantMsg: "ended Failed: boom"},
		// Issue 37 item 8: with the promoted source first, reading index 0 passed every case above.
		{name: "an OCI chart second: landed at its index", app: chartSecond, status: landed(commitSHA, d2), wantPhase: Landed},
		{name: "an OCI chart second: the digest at the values' index is no proof", app: chartSecond, status: landed(d2, commitSHA),
			wantPhase: Progressing, wantMsg: "waiting for Argo CD to sync"},
		{name: "an OCI chart second: its sync failed", app: chartSecond,
			status:    `{operationState: {phase: Failed, message: "boom", operation: {sync: {revisions: ["` + commitSHA + `", "` + d2 + `"]}}}}`,
			wantPhase: Failed, wantMsg: "ended Failed: boom"},
		{name: "an OCI chart second: another source's failed sync at the digest is not the chart's", app: chartSecond,
			status:    `{operationState: {phase: Failed, message: "boom", operation: {sync: {revisions: ["` + d2 + `", "` + d1 + `"]}}}}`,
			wantPhase: Progressing},
		{name: "plugin source landed by its env at its index", app: pluginSecond, status: pluginStatus(d2), wantPhase: Landed},
		{name: "plugin source at the old digest", app: pluginSecond, status: pluginStatus(d1), wantPhase: Progressing},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := appWithStatus(t, tc.app, tc.status)
			a := ArgoCDApplication{Source: "chart"}
			obs := a.Observe(obj.DeepCopy(), d2)
			g.Expect(obs.Phase).To(Equal(tc.wantPhase), obs.Message)
			g.Expect(obs.Message).To(ContainSubstring(tc.wantMsg))
			g.Expect(a.Observe(cached(t, obj), d2)).To(Equal(obs))
			if tc.wantPhase == Landed {
				obj.SetAnnotations(nil)
				at, live := a.AlreadyLive(cached(t, obj), d2, time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
				g.Expect(live).To(BeTrue())
				g.Expect(at).To(Equal("2026-11-30T10:00:01Z"))
			}
		})
	}
}

// A Helm chart from a chart registry is given the chart version (the tag), with the digest
// verified behind it recorded beside; landed proof reads the version Argo CD synced, and the
// digest the object records must be the one promoted.
func TestArgoCDHelmChart(t *testing.T) {
	const chartSpec = `{source: {repoURL: registry.example/charts, chart: payments, targetRevision: 1.0.0}, syncPolicy: {automated: {}}}`
	g := NewWithT(t)
	obj := app(t, "spec: "+chartSpec)
	a := ArgoCDApplication{}
	blocking, unmediated := a.Validate(obj)
	g.Expect(blocking).To(BeNil())
	g.Expect(unmediated).To(BeNil())
	g.Expect(a.PinsTag(obj)).To(BeTrue())
	g.Expect(WithCompletion{Applier: a}.PinsTag(obj)).To(BeTrue(), "completion rules on top keep it tag-pinned")
	g.Expect(a.PinsTag(app(t, "spec: {source: {repoURL: oci://r/p}}"))).To(BeFalse())

	g.Expect(a.SetRevision(obj, Version{Digest: d2}, time.Now())).To(MatchError(ContainSubstring("has no tag")))
	expectSameWrite(t, g, obj, func(u *unstructured.Unstructured) error {
		return a.SetRevision(u, Version{Digest: d2, Tag: "1.1.0_build.7"}, time.Now())
	})
	g.Expect(a.SetRevision(obj, Version{Digest: d2, Tag: "1.1.0_build.7"}, time.Now())).To(Succeed())
	rev, _, _ := unstructured.NestedString(obj.Object, "spec", "source", "targetRevision")
	g.Expect(rev).To(Equal("1.1.0+build.7"), "Helm pushes version 1.1.0+build.7 as the tag 1.1.0_build.7")
	g.Expect(a.Revision(obj)).To(Equal(d2))
	g.Expect(a.Revision(cached(t, obj))).To(Equal(d2))

	landedAt := func(version string) string {
		return `{sync: {status: Synced, revision: "` + version + `"}, health: {status: Healthy},
		  operationState: {phase: Succeeded, finishedAt: "2026-11-30T10:00:00Z", syncResult: {revision: "` + version + `"}},
		  reconciledAt: "2026-11-30T10:00:01Z"}`
	}
	for _, tc := range []struct {
		name, status, digest string
		wantPhase            Phase
		wantMsg              string
	}{
		{name: "synced at the version", status: landedAt("1.1.0+build.7"), digest: d2, wantPhase: Landed,
			wantMsg: "Argo CD pins the chart version, not " + d2},
		{name: "synced at the version before", status: landedAt("1.0.0"), digest: d2, wantPhase: Progressing},
		{name: "another digest recorded beside the version", status: landedAt("1.1.0+build.7"), digest: d1, wantPhase: Progressing,
			wantMsg: `carries chart payments 1.1.0+build.7 for "` + d2 + `", not ` + d1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			withStatus := obj.DeepCopy()
			status := app(t, "status: "+tc.status)
			withStatus.Object["status"] = status.Object["status"]
			obs := a.Observe(withStatus, tc.digest)
			g.Expect(obs.Phase).To(Equal(tc.wantPhase), obs.Message)
			g.Expect(obs.Message).To(ContainSubstring(tc.wantMsg))
			g.Expect(a.Observe(cached(t, withStatus), tc.digest)).To(Equal(obs))
		})
	}
}
