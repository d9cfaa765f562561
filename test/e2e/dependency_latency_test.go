package e2e

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
)

// chainLevels is how many layers each chain has (levels-1 dependency edges are measured).
const chainLevels = 3

// Benchmark, in the e2e report: the latency one dependency level adds, for a chain of Flux
// Kustomizations ordered by Stagecoach's spec.dependsOn and, in the same run at the same time, the
// same chain ordered by Flux's own spec.dependsOn (kustomize-controller retries a dependent whose
// dependency is not ready after --requeue-dependency, 30 s by default; nothing wakes it sooner).
//
// Stagecoach, per level: dependency Verified → dependent applied (what dependsOn adds; goal ≤ 1 s),
// and dependency landed → dependent landed (grace 0, so the same span as Flux's). Flux, per level:
// dependency Ready at the new revision → dependent Ready at it.
//
// Figures, not assertions (timing is the benchmark's to print): `make bench` runs it
// (STAGECOACH_E2E_BENCH=1); `make test` skips it, it waits Flux's 30 s per level.
func TestDependencyLatencyPerLevel(t *testing.T) {
	if os.Getenv("STAGECOACH_E2E_BENCH") == "" {
		t.Skip("a benchmark: make bench runs it (STAGECOACH_E2E_BENCH=1)")
	}
	sc := env.Scenario(t)
	repo := sc.NS + "/chain"
	v1 := sc.Push(repo, "v1.0.0", map[string]string{"configmap.yaml": localstack.ConfigMap("chain", "v1.0.0")})
	var ours, theirs []string
	deps := map[string][]stagecoachv1.StageDependency{}
	for i := range chainLevels {
		ours = append(ours, fmt.Sprintf("sc-%d", i))
		theirs = append(theirs, fmt.Sprintf("fx-%d", i))
		if i > 0 {
			deps[ours[i]] = []stagecoachv1.StageDependency{{Stage: ours[i-1]}}
		}
	}
	layers(sc, repo, ours, deps, func(s *stagecoachv1.Stage) {
		s.Spec.Verification.Grace = &metav1.Duration{} // as Flux: Ready is done
	})
	clock := watchChain(sc)

	// Flux's chain: its own GitRepository and Kustomizations, fx-i depending on fx-(i-1).
	fluxRepo := sc.NS + "/fluxchain"
	files := func(revision string) map[string]string {
		f := map[string]string{}
		for _, n := range theirs {
			f[n+"/configmap.yaml"] = localstack.ConfigMap(n, revision)
		}
		return f
	}
	_, err := sc.Git.Commit(sc.Ctx(), fluxRepo, "A", files("A"))
	sc.G.Expect(err).NotTo(HaveOccurred())
	target := sc.TargetNamespace("fluxchain")
	sc.Apply(gitRepositoryYAML(sc.NS, "fluxchain", sc.Git.URL(fluxRepo)))
	for i, n := range theirs {
		var dependsOn []string
		if i > 0 {
			dependsOn = []string{theirs[i-1]}
		}
		sc.Apply(layerKustomizationYAML(sc.NS, n, "fluxchain", target, false, dependsOn...))
	}
	var mu sync.Mutex
	fluxReady := map[string]time.Time{} // name + " " + commit
	sc.Watch(kustomizationAPI, "Kustomization", func(at time.Time, u *unstructured.Unstructured) {
		if !strings.HasPrefix(u.GetName(), "fx-") {
			return
		}
		revision := localstack.Field(u, "status", "lastAppliedRevision")
		if status, gen := ready(u); status != "True" || gen != u.GetGeneration() || revision == "" {
			return
		}
		commit := revision[strings.LastIndex(revision, ":")+1:]
		mu.Lock()
		defer mu.Unlock()
		if _, ok := fluxReady[u.GetName()+" "+commit]; !ok {
			fluxReady[u.GetName()+" "+commit] = at
		}
	})
	readyAt := func(name, commit string) time.Time {
		mu.Lock()
		defer mu.Unlock()
		return fluxReady[name+" "+commit]
	}
	// Flux's chain settles at A first (it waits up to 30 s per level here too).
	sc.G.Eventually(func(g Gomega) {
		for _, n := range theirs {
			k := sc.Get(g, kustomizationAPI, "Kustomization", n)
			status, _ := ready(k)
			g.Expect(status).To(Equal("True"), "Kustomization %s is not Ready", n)
		}
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())

	// Both chains start at once: every Promotion of ours, a new commit for theirs.
	start := time.Now()
	for _, n := range ours {
		sc.Promote(n, "v1.0.0", v1)
	}
	commitB, err := sc.Git.Commit(sc.Ctx(), fluxRepo, "B", files("B"))
	sc.G.Expect(err).NotTo(HaveOccurred())
	sc.MergePatch("source.toolkit.fluxcd.io/v1", "GitRepository", "fluxchain",
		fmt.Sprintf(`{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":%q}}}`, start.Format(time.RFC3339Nano)))

	sc.WaitVerified(ours[len(ours)-1], v1, start)
	sc.G.Eventually(func(g Gomega) {
		g.Expect(readyAt(theirs[len(theirs)-1], commitB)).NotTo(BeZero(), "Kustomization %s is not Ready at %s", theirs[len(theirs)-1], commitB)
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())

	var added, ourLevel, fluxLevel time.Duration
	for i := 1; i < chainLevels; i++ {
		verifiedBelow := clock.at(clock.verified, ours[i-1], v1)
		appliedHere := clock.at(clock.applied, ours[i], v1)
		landedBelow, landedHere := clock.at(clock.landed, ours[i-1], v1), clock.at(clock.landed, ours[i], v1)
		fluxBelow, fluxHere := readyAt(theirs[i-1], commitB), readyAt(theirs[i], commitB)
		for what, at := range map[string]time.Time{"Verified of " + ours[i-1]: verifiedBelow, "apply of " + ours[i]: appliedHere,
			"landing of " + ours[i-1]: landedBelow, "landing of " + ours[i]: landedHere,
			"Ready of " + theirs[i-1]: fluxBelow, "Ready of " + theirs[i]: fluxHere} {
			sc.G.Expect(at).NotTo(BeZero(), "no %s seen", what)
		}
		sc.G.Expect(appliedHere.After(verifiedBelow)).To(BeTrue(), "%s applied before %s was Verified", ours[i], ours[i-1])
		added += appliedHere.Sub(verifiedBelow)
		ourLevel += landedHere.Sub(landedBelow)
		fluxLevel += fluxHere.Sub(fluxBelow)
		report("%-8s level %d: Stagecoach dependsOn %s→%s applied %s after Verified, landed→landed %s; Flux dependsOn %s→%s Ready→Ready %s", "deps", i,
			ours[i-1], ours[i], secs(appliedHere.Sub(verifiedBelow)), secs(landedHere.Sub(landedBelow)), theirs[i-1], theirs[i], secs(fluxHere.Sub(fluxBelow)))
	}
	edges := time.Duration(chainLevels - 1)
	added, ourLevel, fluxLevel = added/edges, ourLevel/edges, fluxLevel/edges
	report("%-8s per dependency level (mean of %d): Stagecoach adds %s (goal ≤ 1 s), %s landed→landed; Flux dependsOn %s; Flux/Stagecoach %.1fx",
		"deps", chainLevels-1, secs(added), secs(ourLevel), secs(fluxLevel), fluxLevel.Seconds()/ourLevel.Seconds())
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
