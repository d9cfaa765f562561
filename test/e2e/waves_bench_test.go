package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
)

// benchWaves is how many Applications each wave has, and how many clusters (each with the same
// number of Applications of each ApplicationSet) it spans.
var benchWaves = []struct {
	label          string
	apps, clusters int
}{{"w1", 3, 1}, {"w2", 9, 3}, {"w3", 18, 6}}

// benchSyncOptions are the Argo CD sync options of both ApplicationSets' Applications.
// ServerSideApply=true, as operators set it for performance: with client-side apply each sync's
// kubectl apply (dry run and apply) parses the API server's whole OpenAPI document again, which was
// 41% of the application-controller's CPU while a wave of 18 synced on 2 cores.
var benchSyncOptions = []string{"ServerSideApply=true"}

// Benchmark, in the e2e report (issue 17): 30 Applications in 3 waves (3/9/18) over 10 clusters,
// a digest promoted by Stagecoach's waves until every target is Verified (grace 0), against the
// same 30 Applications (another ApplicationSet, the same clusters and wave labels) driven by Argo
// CD's own RollingSync (applicationset-controller --enable-progressive-syncs, 3 steps on the same
// labels, no refresh nudges) from a change of its template's targetRevision until every
// Application is Synced and Healthy at it; both sides with the sync options benchSyncOptions. The two run one after the other in the
// same stack. Out-of-order syncs: an Application of wave N whose sync began before every
// Application of wave N-1 had finished.
//
// Figures, not assertions (timing is the benchmark's to print), apart from the order Stagecoach
// promises: `make bench` runs it (STAGECOACH_E2E_BENCH=1); `make test` skips it.
func TestFleetWavesVsRollingSync(t *testing.T) {
	if os.Getenv("STAGECOACH_E2E_BENCH") == "" {
		t.Skip("a benchmark: make bench runs it (STAGECOACH_E2E_BENCH=1)")
	}
	sc := env.Scenario(t)
	_, err := env.StartApplicationSetController(sc.Ctx(), localstack.AppSetOptions{ProgressiveSyncs: true})
	sc.G.Expect(err).NotTo(HaveOccurred())
	argo := sc.InNamespace(localstack.ArgoCDNamespace)
	id := sc.NS[strings.LastIndex(sc.NS, "-")+1:]
	ours, theirs := "sc-"+id, "rs-"+id

	repo := sc.NS + "/bench"
	release := func(tag string) string {
		return sc.Push(repo, tag, map[string]string{"configmap.yaml": localstack.ConfigMap("bench", tag)})
	}
	v1, v2 := release("v1.0.0"), release("v2.0.0")
	sc.G.Expect(sc.ArgoCDOCIRepository(sc.Ctx(), repo)).To(Succeed())

	// Clusters, and per ApplicationSet one list element per Application: its name, cluster, wave
	// label and a namespace of its own (all clusters are the same API server).
	elements := map[string][]any{}
	waveApps := map[string][][]string{}
	n := 0
	for _, w := range benchWaves {
		perCluster := w.apps / w.clusters
		for range w.clusters {
			n++
			c := sc.FleetCluster(fmt.Sprintf("bench-%s-c%02d", id, n), map[string]string{"wave": w.label}, nil)
			for j := range perCluster {
				for _, set := range []string{ours, theirs} {
					app := fmt.Sprintf("%s-c%02d-%d", set, n, j)
					ns := sc.TargetNamespace(fmt.Sprintf("%s-c%02d-%d", set[:2], n, j))
					elements[set] = append(elements[set], map[string]any{"app": app, "server": c.Server, "namespace": ns, "wave": w.label})
				}
			}
		}
	}
	for _, set := range []string{ours, theirs} {
		for _, w := range benchWaves {
			var apps []string
			for _, e := range elements[set] {
				if m := e.(map[string]any); m["wave"] == w.label {
					apps = append(apps, m["app"].(string))
				}
			}
			waveApps[set] = append(waveApps[set], apps)
		}
	}
	list := func(set string) []any {
		return []any{map[string]any{"list": map[string]any{"elements": elements[set]}}}
	}

	// Ours: the shipped ApplicationSet's settings; theirs: a plain one with RollingSync over the
	// same wave labels (its template's revision must reach the Applications, so nothing is ignored).
	mine := fleetAppSet(sc.G, ours, sc.Registry.OCIURL(repo), v1, list(ours), "{{.namespace}}")
	templateLabels(sc.G, mine, ours)
	rolling := fleetAppSet(sc.G, theirs, sc.Registry.OCIURL(repo), v1, list(theirs), "{{.namespace}}")
	templateLabels(sc.G, rolling, theirs)
	unstructured.RemoveNestedField(rolling.Object, "spec", "ignoreApplicationDifferences")
	unstructured.RemoveNestedField(rolling.Object, "spec", "preservedFields")
	// Both sides sync with server-side apply (benchSyncOptions).
	for _, set := range []*unstructured.Unstructured{mine, rolling} {
		sc.G.Expect(unstructured.SetNestedStringSlice(set.Object, benchSyncOptions, "spec", "template", "spec", "syncPolicy", "syncOptions")).To(Succeed())
	}
	var steps []any
	for _, w := range benchWaves {
		steps = append(steps, map[string]any{"matchExpressions": []any{map[string]any{"key": "wave", "operator": "In", "values": []any{w.label}}}})
	}
	sc.G.Expect(unstructured.SetNestedField(rolling.Object, map[string]any{"type": "RollingSync", "rollingSync": map[string]any{"steps": steps}},
		"spec", "strategy")).To(Succeed())

	syncs := watchAppSyncs(argo, "")
	for _, set := range []*unstructured.Unstructured{mine, rolling} {
		sc.G.Expect(localstack.Apply(sc.Ctx(), sc.Client, set)).To(Succeed())
		sc.DeleteOnCleanup(set)
	}
	total := 0
	for _, w := range benchWaves {
		total += w.apps
	}
	settle := time.Now()
	sc.G.Eventually(func(g Gomega) {
		expectAllAt(sc, g, ours, total, v1)
		expectAllAt(sc, g, theirs, total, v1)
	}, 2*localstack.WaitTimeout, time.Second/5).Should(Succeed())
	report("%-8s %d + %d Applications over 10 clusters synced at v1 in %s", "fleet", total, total, secs(time.Since(settle)))

	argo.Stage(ours, "bench", "prod", stagecoachv1.ApplierReference{Kind: "ApplicationSet", Name: ours},
		stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: sc.Registry.Repository(repo), Semver: ">=1.0.0"}},
		func(s *stagecoachv1.Stage) {
			s.Spec.Verification = &stagecoachv1.VerificationPolicy{Grace: &metav1.Duration{}}
			all := intstr.FromString("100%")
			for _, w := range benchWaves {
				s.Spec.Waves = append(s.Spec.Waves, stagecoachv1.Wave{Name: w.label,
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"wave": w.label}}, MaxParallel: &all})
			}
		})
	sc.DeleteOnCleanup(&stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: localstack.ArgoCDNamespace, Name: ours}})

	// Stagecoach: Promotion → every target Verified.
	start := time.Now()
	argo.Promote(ours, "v2.0.0", v2)
	argo.WaitVerified(ours, v2, start)
	ourTime := time.Since(start)
	ourStart := start
	s := argo.GetStage(sc.G, ours)
	var ourWaves [][]string
	for _, w := range s.Status.Waves {
		ourWaves = append(ourWaves, w.Targets)
	}
	sc.G.Expect(ourWaves).To(HaveLen(len(benchWaves)))
	for i, w := range benchWaves {
		sc.G.Expect(ourWaves[i]).To(ConsistOf(waveApps[ours][i]), "wave %s", w.label)
	}
	ourLate, ourWhich := syncs.outOfOrder(ourWaves, v2)

	// RollingSync: the template's revision changes → every Application Synced and Healthy at it.
	start = time.Now()
	sc.G.Expect(unstructured.SetNestedField(rolling.Object, v2, "spec", "template", "spec", "source", "targetRevision")).To(Succeed())
	sc.G.Expect(localstack.Apply(sc.Ctx(), sc.Client, rolling)).To(Succeed())
	sc.G.Eventually(func(g Gomega) {
		for _, wave := range waveApps[theirs] {
			for _, app := range wave {
				g.Expect(syncs.doneAt(app, v2)).NotTo(BeZero(), "Application %s not yet Synced and Healthy at v2", app)
			}
		}
	}, 10*time.Minute, time.Second/10).Should(Succeed())
	var theirTime time.Duration
	for _, wave := range waveApps[theirs] {
		for _, app := range wave {
			theirTime = max(theirTime, syncs.doneAt(app, v2).Sub(start))
		}
	}
	theirLate, theirWhich := syncs.outOfOrder(waveApps[theirs], v2)

	report("%-8s Stagecoach waves: %d Applications in 3 waves (3/9/18) Verified in %s (grace 0), %d out-of-order syncs", "fleet", total, secs(ourTime), ourLate)
	report("%-8s Argo CD RollingSync: the same %d Applications in 3 steps Synced+Healthy in %s, %d out-of-order syncs", "fleet", total, secs(theirTime), theirLate)
	report("%-8s RollingSync/Stagecoach %.1fx", "fleet", theirTime.Seconds()/ourTime.Seconds())
	report("%-8s Argo CD settings of both: syncOptions %s, --operation-processors %d, fleet clusters' caches without argoproj.io and stagecoach.dev (resource.exclusions)",
		"fleet", strings.Join(benchSyncOptions, ","), localstack.OperationProcessors)
	report("%-8s per wave, first sync began → last finished: Stagecoach %s; RollingSync %s", "fleet",
		syncs.timeline(ourWaves, v2, ourStart), syncs.timeline(waveApps[theirs], v2, start))
	for _, w := range theirWhich {
		t.Logf("RollingSync out of order: %s", w)
	}
	sc.G.Expect(ourLate).To(BeZero(), "Stagecoach's waves out of order: %v", ourWhich)
}

// templateLabels labels each generated Application with its wave (RollingSync's steps select
// Applications by label) besides the Stage label.
func templateLabels(g Gomega, set *unstructured.Unstructured, stage string) {
	g.Expect(unstructured.SetNestedStringMap(set.Object, map[string]string{stagecoachv1.StageLabel: stage, "wave": "{{.wave}}"},
		"spec", "template", "metadata", "labels")).To(Succeed())
	g.Expect(unstructured.SetNestedField(set.Object, "{{.app}}", "spec", "template", "metadata", "name")).To(Succeed())
	g.Expect(unstructured.SetNestedField(set.Object, "{{.server}}", "spec", "template", "spec", "destination", "server")).To(Succeed())
}
