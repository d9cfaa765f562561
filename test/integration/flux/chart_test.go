package flux

import (
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// pushChart starts an in-memory registry (once per test) and pushes a new artifact as repo:tag,
// returning the registry's host and the digest.
func pushChart(t *testing.T, host *string, repo, tag string) string {
	t.Helper()
	g := NewWithT(t)
	if *host == "" {
		srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
		t.Cleanup(srv.Close)
		*host = strings.TrimPrefix(srv.URL, "http://")
	}
	img, err := random.Image(64, 1)
	g.Expect(err).NotTo(HaveOccurred())
	ref, err := name.NewTag(*host + "/" + repo + ":" + tag)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(remote.Write(ref, img, remote.WithContext(t.Context()))).To(Succeed())
	d, err := img.Digest()
	g.Expect(err).NotTo(HaveOccurred())
	return d.String()
}

func helmRepository(t *testing.T, ns, name string, spec map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion("source.toolkit.fluxcd.io/v1")
	u.SetKind("HelmRepository")
	u.SetNamespace(ns)
	u.SetName(name)
	NewWithT(t).Expect(env.Client.Create(t.Context(), u)).To(Succeed())
}

func helmReleaseFrom(t *testing.T, ns, name, repository string) *fluxObject {
	t.Helper()
	return createFlux(t, "helm.toolkit.fluxcd.io/v2", "HelmRelease", ns, name, map[string]any{"interval": "5m",
		"chart": map[string]any{"spec": map[string]any{"chart": "payments", "version": "0.1.0",
			"sourceRef": map[string]any{"kind": "HelmRepository", "name": repository}}}})
}

// released plays helm-controller: Ready for the generation, the newest release at chartVersion
// (and ociDigest, when set).
func (f *fluxObject) released(chartVersion, ociDigest string) {
	f.succeeded("UpgradeSucceeded", func(u *unstructured.Unstructured) {
		now := time.Now().UTC().Format(time.RFC3339)
		release := map[string]any{"name": u.GetName(), "namespace": u.GetNamespace(), "version": int64(2),
			"status": "deployed", "chartName": "payments", "chartVersion": chartVersion, "appVersion": chartVersion,
			"configDigest": "sha256:abc", "digest": "sha256:def", "firstDeployed": now, "lastDeployed": now}
		if ociDigest != "" {
			release["ociDigest"] = ociDigest
		}
		_ = unstructured.SetNestedSlice(u.Object, []any{release}, "status", "history")
	})
}

func mediated(g Gomega, t *testing.T, ns, name string) *metav1.Condition {
	s := &stagecoachv1.Stage{}
	g.Expect(env.Client.Get(t.Context(), clientKey(ns, name), s)).To(Succeed())
	for i, c := range s.Status.Conditions {
		if c.Type == stagecoachv1.ConditionMediated {
			return &s.Status.Conditions[i]
		}
	}
	return nil
}

func eventuallyMediated(t *testing.T, ns, name string, status metav1.ConditionStatus, reason, msg string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		c := mediated(g, t, ns, name)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(status), c.Message)
		g.Expect(c.Reason).To(Equal(reason), c.Message)
		g.Expect(c.Message).To(ContainSubstring(msg))
	}, timeout, interval).Should(Succeed())
}

func chartVersion(f *fluxObject) string {
	v, _, _ := unstructured.NestedString(f.get().Object, "spec", "chart", "spec", "version")
	return v
}

func promoteVersion(t *testing.T, ns, name, stage, digest, tag string) {
	t.Helper()
	NewWithT(t).Expect(env.Client.Create(t.Context(), &stagecoachv1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       stagecoachv1.PromotionSpec{Stage: stage, Version: &stagecoachv1.VersionReference{Digest: digest, Tag: tag}},
	})).To(Succeed())
}

// Issue 37 items 3 and 4 on Flux: a HelmRelease given a chart version is Mediated by version only
// from an OCI HelmRepository, whose tag is resolved before the write and whose release Flux
// records with the OCI digest; landed only at the exact version written, and once verified, a
// release Flux installs on its own (a 1.0.0+x the version 1.0.0 matches) turns the Stage
// Mediated=False TagMoved. From an HTTPS HelmRepository (no digest behind a version, none
// recorded) the Stage is Mediated=False and promotes nothing by version.
func TestHelmReleaseByChartVersion(t *testing.T) {
	ns := newNamespace(t)
	var host string
	v1 := pushChart(t, &host, "charts/payments", "1.0.0")
	helmRepository(t, ns, "oci-charts", map[string]any{"type": "oci", "url": "oci://" + host + "/charts", "interval": "5m"})
	helmRepository(t, ns, "https-charts", map[string]any{"url": "https://charts.example", "interval": "5m"})
	prod := helmReleaseFrom(t, ns, "prod", "oci-charts")
	newStage(t, ns, "prod", "HelmRelease", nil)
	web := helmReleaseFrom(t, ns, "web", "https-charts")
	newStage(t, ns, "web", "HelmRelease", nil)

	t.Run("from an OCI HelmRepository", func(t *testing.T) {
		g := NewWithT(t)
		eventuallyMediated(t, ns, "prod", metav1.ConditionTrue, stagecoachv1.ReasonMediatedByVersion,
			"resolves the tag in the chart's own repository "+host+"/charts/payments")
		repushed := pushChart(t, &host, "charts/payments", "1.0.0")
		promoteVersion(t, ns, "prod-v1", "prod", v1, "v1.0.0")
		refused := eventuallyPhase(t, ns, "prod-v1", stagecoachv1.PhaseFailed)
		g.Expect(refused.Status.Message).To(ContainSubstring(`not applied (TagMismatch): tag "1.0.0" of ` + host + "/charts/payments names " + repushed + ", not " + v1))
		g.Expect(chartVersion(prod)).To(Equal("0.1.0"), "nothing written")

		promoteVersion(t, ns, "prod-v1b", "prod", repushed, "v1.0.0")
		prod.waitFor(func(*unstructured.Unstructured) bool { return chartVersion(prod) == "1.0.0" })
		prod.progressing()
		prod.released("1.0.0", repushed)
		eventuallyPhase(t, ns, "prod-v1b", stagecoachv1.PhaseSucceeded)

		// helm-controller upgrades on its own interval to a 1.0.0+x that the version matches.
		prod.released("1.0.0+x", "")
		eventuallyMediated(t, ns, "prod", metav1.ConditionFalse, stagecoachv1.ReasonTagMoved,
			"runs chart 1.0.0+x, not the verified 1.0.0 ("+repushed+")")
	})

	t.Run("from an HTTPS HelmRepository", func(t *testing.T) {
		g := NewWithT(t)
		eventuallyMediated(t, ns, "web", metav1.ConditionFalse, stagecoachv1.ReasonChartNotInRegistry,
			`HelmRepository '`+ns+`/https-charts', url "https://charts.example": an HTTPS Helm repository`)
		promoteVersion(t, ns, "web-v1", "web", v1, "1.0.0")
		refused := eventuallyPhase(t, ns, "web-v1", stagecoachv1.PhaseFailed)
		g.Expect(refused.Status.Message).To(ContainSubstring("not applied (ChartNotInRegistry)"))
		g.Expect(chartVersion(web)).To(Equal("0.1.0"), "nothing written")
	})
}
