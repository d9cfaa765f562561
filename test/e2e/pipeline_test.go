package e2e

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/e2e/stack"
)

// One service, two environments on the real engines: dev is applied by a Flux OCIRepository and
// the Kustomization through it, prod by an Argo CD Application with an OCI source. A person
// promotes v1 to dev; prod follows dev automatically. Both must reach Verified at v1's digest, and
// the engines themselves must show v1 applied.
func TestOCIPipelineFluxDevArgoCDProd(t *testing.T) {
	sc := env.Scenario(t)
	repo := sc.NS + "/payments"
	manifests := func(version string) map[string]string {
		return map[string]string{"configmap.yaml": stack.ConfigMap("payments", version)}
	}
	v0 := sc.Push(repo, "v0.0.0", manifests("v0.0.0"))
	v1 := sc.Push(repo, "v1.0.0", manifests("v1.0.0"))

	devNS, prodNS := sc.TargetNamespace("dev"), sc.TargetNamespace("prod")
	sc.FluxOCISource("payments-dev", repo, "v0.0.0", "dev", devNS)
	sc.ArgoCDOCIApplication("payments-prod", repo, v0, "prod", prodNS)
	sc.Stage("dev", "payments", "dev",
		stagecoachv1.ApplierReference{Kind: "OCIRepository", Name: "payments-dev", Kustomization: "payments-dev-apply"},
		// Until the registry source lands, dev takes versions only from people's Promotions.
		stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "none"}}, nil)
	sc.Stage("prod", "payments", "prod",
		stagecoachv1.ApplierReference{Kind: "Application", Name: "payments-prod"},
		stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "dev"}},
		func(s *stagecoachv1.Stage) { s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true} })
	// Both environments run v0 before anything is promoted.
	sc.G.Eventually(func(g Gomega) {
		g.Expect(sc.ConfigMapData(g, devNS, "payments")).To(HaveKeyWithValue("version", "v0.0.0"))
		g.Expect(sc.ConfigMapData(g, prodNS, "payments")).To(HaveKeyWithValue("version", "v0.0.0"))
	}, stack.WaitTimeout, time.Second).Should(Succeed())

	created := time.Now()
	sc.Promote("dev", "v1.0.0", v1)
	dev := sc.WaitVerified("dev", v1, created)
	prod := sc.WaitVerified("prod", v1, time.Time{})

	// What the engines report, not only what Stagecoach concluded.
	g := sc.G
	oci := sc.Get(g, "source.toolkit.fluxcd.io/v1", "OCIRepository", "payments-dev")
	g.Expect(unstructured.NestedString(oci.Object, "status", "artifact", "digest")).To(Equal(v1))
	kus := sc.Get(g, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", "payments-dev-apply")
	g.Expect(unstructured.NestedString(kus.Object, "status", "lastAppliedRevision")).To(HaveSuffix(v1))
	app := sc.Get(g, "argoproj.io/v1alpha1", "Application", "payments-prod")
	g.Expect(unstructured.NestedString(app.Object, "spec", "source", "targetRevision")).To(Equal(v1))
	g.Expect(unstructured.NestedString(app.Object, "status", "sync", "status")).To(Equal("Synced"))
	g.Expect(unstructured.NestedString(app.Object, "status", "sync", "revision")).To(Equal(v1))
	g.Expect(unstructured.NestedString(app.Object, "status", "health", "status")).To(Equal("Healthy"))
	g.Expect(sc.ConfigMapData(g, devNS, "payments")).To(HaveKeyWithValue("version", "v1.0.0"))
	g.Expect(sc.ConfigMapData(g, prodNS, "payments")).To(HaveKeyWithValue("version", "v1.0.0"))

	report("%s", dev)
	report("%s", prod)
	report("prod's auto-promotion was first seen %s after dev was Verified", prod.Created.Sub(dev.Verified).Round(10*time.Millisecond))
}
