package applier

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// Helm charts by version (Applier.PinsTag): the engine is given a chart version, a registry tag, and
// pulls whatever the tag names when it pulls. The gates judge a digest, so the tag is tied to
// that digest where the engine pulls it: Stagecoach resolves it in the chart's own repository
// before it writes, when the version lands, and while it runs. That needs the chart to come from
// an OCI registry: an HTTPS Helm repository (index.yaml) names no digest for a version, and Flux
// records none of what it pulled from one.

// ChartSource is where the engine of an applier given a chart version pulls the chart from.
type ChartSource struct {
	// Repository is the chart's OCI repository (host/path/chart, no scheme); "" when the chart
	// does not come from an OCI registry (NotOCI says why) or is not known yet (HelmRepository).
	Repository string
	// From says, for messages, where the object takes the chart from.
	From string
	// NotOCI says why no digest can be tied to the version ("" when Repository is set).
	NotOCI string
	// HelmRepository is the Flux HelmRepository the chart comes from, when only that object
	// tells the repository: read it and complete the source with WithHelmRepository.
	HelmRepository *types.NamespacedName
	// Chart is the chart's name in its repository.
	Chart string
}

// ChartOf returns where obj's engine pulls the chart of a version given by its chart version;
// ok is false when obj is given a digest.
func ChartOf(a Applier, obj *unstructured.Unstructured) (ChartSource, bool) {
	if !a.PinsTag(obj) {
		return ChartSource{}, false
	}
	return a.ChartSource(obj), true
}

// notOCIHTTPS is why a chart from an HTTPS Helm repository cannot be tied to a digest.
const notOCIHTTPS = "an HTTPS Helm repository, whose index names no digest for a chart version (and where a pushed 1.2.3+build matches the version 1.2.3)"

// chartIn is the chart an Argo CD Helm source pulls: repoURL is a Helm OCI repository
// (registry/path, with or without oci://) or an HTTPS Helm repository.
func chartIn(repoURL, chart, from string) ChartSource {
	src := ChartSource{From: from, Chart: chart}
	lower := strings.ToLower(repoURL)
	base := strings.Trim(strings.TrimPrefix(repoURL, "oci://"), "/")
	switch {
	case strings.HasPrefix(lower, "https://"), strings.HasPrefix(lower, "http://"):
		src.NotOCI = notOCIHTTPS
	case base == "" || chart == "":
		src.NotOCI = "no repository and chart to pull from"
	default:
		src.Repository = base + "/" + strings.Trim(chart, "/")
	}
	return src
}

// WithHelmRepository completes a Flux chart source with the HelmRepository it names (nil when
// it cannot be read; why says why).
func (c ChartSource) WithHelmRepository(repo *unstructured.Unstructured, why string) ChartSource {
	if c.HelmRepository == nil {
		return c
	}
	key := *c.HelmRepository
	c.HelmRepository = nil
	if repo == nil {
		c.NotOCI = fmt.Sprintf("HelmRepository '%s' cannot be read (%s), so where Flux pulls the chart from is unknown", key, why)
		return c
	}
	url, _, _ := unstructured.NestedString(repo.Object, "spec", "url")
	kind, _, _ := unstructured.NestedString(repo.Object, "spec", "type")
	c.From += fmt.Sprintf(", url %q", url)
	if kind != "oci" || !strings.HasPrefix(url, "oci://") {
		c.NotOCI = notOCIHTTPS + "; Flux records no OCI digest (status.history ociDigest) of what it pulled from it"
		return c
	}
	c.Repository = strings.Trim(strings.TrimPrefix(url, "oci://"), "/") + "/" + strings.Trim(c.Chart, "/")
	return c
}

// SameRepository reports whether two OCI repository names name one repository (registry
// defaults and an oci:// prefix aside).
func SameRepository(a, b string) bool {
	norm := func(s string) string {
		s = strings.Trim(strings.TrimPrefix(s, "oci://"), "/")
		if r, err := name.NewRepository(s, name.WeakValidation); err == nil {
			return r.Name()
		}
		return s
	}
	return norm(a) == norm(b)
}

// ChartSource implements Applier: the promoted source's repoURL and chart.
func (a ArgoCDApplication) ChartSource(obj *unstructured.Unstructured) ChartSource {
	p, ok := a.promotedSource(obj)
	if !ok || p.chart() == "" {
		return ChartSource{NotOCI: "no Helm chart source"}
	}
	repoURL, _ := p.source["repoURL"].(string)
	return chartIn(repoURL, p.chart(), fmt.Sprintf("%s repoURL %q, chart %q", p.path(), repoURL, p.chart()))
}

// PulledTag implements Applier: targetRevision is the tag as a chart version (1.2.3+build
// for the tag 1.2.3_build), which Helm pulls as the tag again.
func (ArgoCDApplication) PulledTag(tag string) string { return tag }

// ChartSource implements Applier: the chart of spec.chart.spec, from the HelmRepository its
// sourceRef names (read by the caller).
func (h FluxHelmRelease) ChartSource(obj *unstructured.Unstructured) ChartSource {
	if ref, ok, _ := unstructured.NestedMap(obj.Object, "spec", "chartRef"); ok && len(ref) > 0 {
		return ChartSource{From: fmt.Sprintf("spec.chartRef (%v %v)", ref["kind"], ref["name"]),
			NotOCI: "a chart named by spec.chartRef has no chart version to write; make the OCIRepository it names the Stage's applier (promoted by digest)"}
	}
	spec, _, _ := unstructured.NestedMap(obj.Object, "spec", "chart", "spec")
	chart, _ := spec["chart"].(string)
	kind, _, _ := unstructured.NestedString(spec, "sourceRef", "kind")
	refName, _, _ := unstructured.NestedString(spec, "sourceRef", "name")
	ns, _, _ := unstructured.NestedString(spec, "sourceRef", "namespace")
	if ns == "" {
		ns = obj.GetNamespace()
	}
	src := ChartSource{Chart: chart, From: fmt.Sprintf("spec.chart.spec: chart %q from %s '%s/%s'", chart, kind, ns, refName)}
	if kind != "HelmRepository" || refName == "" || chart == "" {
		src.NotOCI = fmt.Sprintf("a chart from a %s is built from files, with no registry digest behind its version", kind)
		return src
	}
	src.HelmRepository = &types.NamespacedName{Namespace: ns, Name: refName}
	return src
}

// PulledTag implements Applier: the chart version Stagecoach writes (fluxChartVersion), as
// the registry tag Flux pulls for it.
func (FluxHelmRelease) PulledTag(tag string) string {
	return strings.ReplaceAll(fluxChartVersion(tag), "+", "_")
}

// fluxChartVersion is the chart version written for a tag: without a leading "v", and with the
// build metadata Helm pushes as "_" given back its "+". An exact version, so Flux pulls that very
// tag from an OCI repository rather than the newest that matches a range.
func fluxChartVersion(tag string) string {
	return chartVersion(strings.TrimPrefix(tag, "v"))
}

// Drifted implements the check of a version given by chart version after it was verified: the
// newest release Flux records runs another chart version, or an OCI digest that is not the
// verified one ("" when it runs what was verified, or no release is recorded). Flux upgrades on
// its own interval: a version pushed again (or a 1.2.3+build that the version matches) is
// installed without Stagecoach writing anything.
func (h FluxHelmRelease) Drifted(obj *unstructured.Unstructured, digest string) (string, bool) {
	if h.ValuesKey != "" || h.Revision(obj) != digest {
		return "", false
	}
	history, _, _ := unstructured.NestedSlice(obj.Object, "status", "history")
	if len(history) == 0 {
		return "", false
	}
	latest, _ := history[0].(map[string]any)
	runs, _ := latest["chartVersion"].(string)
	ociDigest, _ := latest["ociDigest"].(string)
	written := h.chartVersion(obj)
	switch {
	case runs != written:
		return fmt.Sprintf("%s: the newest release (%v, %v) runs chart %s, not the verified %s (%s)", describeKind(obj),
			latest["version"], latest["status"], runs, written, digest), true
	case ociDigest != "" && ociDigest != digest:
		return fmt.Sprintf("%s: the newest release (%v, %v) runs chart %s at OCI digest %s, not the verified %s: the version was pushed again",
			describeKind(obj), latest["version"], latest["status"], runs, ociDigest, digest), true
	}
	return "", false
}

// sameVersionCore: two chart versions differ only in build metadata (1.2.3 and 1.2.3+x), which
// a version constraint ignores.
func sameVersionCore(a, b string) bool {
	core := func(v string) string { c, _, _ := strings.Cut(v, "+"); return c }
	return a != b && core(a) == core(b)
}

// chartMismatch is the failure of a HelmRelease whose newest release runs a chart version that
// only matched the one written (build metadata aside).
func chartMismatch(obj *unstructured.Unstructured, runs, written, digest string) Observation {
	return Observation{Phase: Failed, Reason: stagecoachv1.ReasonTagMoved, Message: fmt.Sprintf(
		"%s: newest release runs chart %s, which only matches the version %s written for the verified %s: another chart than the verified one was pulled",
		describeKind(obj), runs, written, digest)}
}
