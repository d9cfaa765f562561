package e2e

import (
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
)

// Every interval, kustomize-controller reconciles a Kustomization again and sets Ready=Unknown
// until that run ends. Such a run checks again what was applied; it does not undo it. So a grace
// period several intervals long must still verify: the clock keeps going through the runs, and
// the verdict waits for the engine's Ready=True.
func TestGraceLongerThanFluxInterval(t *testing.T) {
	sc := env.Scenario(t)
	const interval, grace = 2 * time.Second, 9 * time.Second
	repo, target := sc.NS+"/environments", sc.TargetNamespace("staging")
	_, err := sc.Git.Commit(sc.Ctx(), repo, "staging environment", map[string]string{"staging/configmap.yaml": localstack.SubstitutedConfigMap("payments")})
	sc.G.Expect(err).NotTo(HaveOccurred())
	sc.Apply(localstack.FluxGitKustomizationYAML(sc.NS, "payments-staging", sc.Git.URL(repo), "staging", "staging", target, interval))
	sc.Stage("staging", "payments", "staging", stagecoachv1.ApplierReference{Kind: "Kustomization", Name: "payments-staging"},
		stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "none"}},
		func(s *stagecoachv1.Stage) { s.Spec.Verification.Grace = &metav1.Duration{Duration: grace} })

	// Count the interval runs that start while the version holds through its grace: Ready=Unknown
	// at a generation that had already ended Ready with v1 (status.observedGeneration is it), after
	// such a Ready=True. Stagecoach's own write is a new generation, so the first apply never counts.
	var mu sync.Mutex
	var landed bool
	var reruns int
	sc.Watch("kustomize.toolkit.fluxcd.io/v1", "Kustomization", func(_ time.Time, u *unstructured.Unstructured) {
		mu.Lock()
		defer mu.Unlock()
		observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		status, readyGen := ready(u)
		settled := observed == u.GetGeneration() && readyGen == u.GetGeneration()
		switch {
		case !settled || localstack.Field(u, "spec", "postBuild", "substitute", "STAGECOACH_DIGEST") != digestV1:
			landed = false
		case status == "True":
			landed = true
		case status == "Unknown" && landed:
			reruns++
			landed = false // count each run once
		}
	})

	created := time.Now()
	sc.Promote("staging", "v1.0.0", digestV1)
	tl := sc.WaitVerified("staging", digestV1, created)
	// The grace counts from the Promotion's own landedAt (whole seconds): compare its timestamps, not
	// the times this test's polls saw. The Stage says Verified before its Promotion does (the
	// Stage's history is written first, for crash safety), so wait for the Promotion's verdict.
	p := &stagecoachv1.Promotion{}
	sc.G.Eventually(func(g Gomega) {
		g.Expect(sc.Client.Get(sc.Ctx(), client.ObjectKey{Namespace: sc.NS, Name: tl.Promotion}, p)).To(Succeed())
		g.Expect(p.Status.LandedAt).NotTo(BeNil())
		g.Expect(p.Status.VerifiedAt).NotTo(BeNil())
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
	mu.Lock()
	defer mu.Unlock()
	sc.G.Expect(reruns).To(BeNumerically(">=", 1), "no interval run of the Kustomization started within the grace; the scenario proved nothing")
	sc.G.Expect(p.Status.VerifiedAt.Sub(p.Status.LandedAt.Time)).To(BeNumerically(">=", grace),
		"Promotion %s verified before the grace was over: landed %s, verified %s", p.Name, p.Status.LandedAt, p.Status.VerifiedAt)
	sc.G.Expect(sc.ConfigMapData(sc.G, target, "payments")).To(HaveKeyWithValue("digest", digestV1))
	report("%-8s grace %s through %d Flux interval run(s) of %s: landed→verified %s", "flux", grace, reruns, interval,
		tl.Verified.Sub(tl.Landed).Round(10*time.Millisecond))
}

// digestV1 is a version for Stages whose engine never fetches it (a Kustomization substitutes it).
const digestV1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111"

// ready is the status of an object's Ready condition and the generation it is about ("", 0 when
// it has none).
func ready(u *unstructured.Unstructured) (string, int64) {
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conditions {
		if m, _ := c.(map[string]any); m["type"] == "Ready" {
			s, _ := m["status"].(string)
			gen, _, _ := unstructured.NestedInt64(m, "observedGeneration")
			return s, gen
		}
	}
	return "", 0
}
