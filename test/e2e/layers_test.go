package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
)

const kustomizationAPI = "kustomize.toolkit.fluxcd.io/v1"

// layerKustomizationYAML is a Flux Kustomization named name that applies folder ./name of the
// GitRepository source into namespace target, with empty postBuild substitutions for Stagecoach
// to fill; labelled for the Stage of the same name when stage is true. dependsOn lists Flux's own
// dependencies (for the chain Flux drives itself).
func layerKustomizationYAML(namespace, name, source, target string, stage bool, dependsOn ...string) string {
	labels := "{}"
	if stage {
		labels = "{stagecoach.dev/stage: " + name + "}"
	}
	deps := ""
	if len(dependsOn) > 0 {
		deps = "  dependsOn: [" + strings.Join(mapStrings(dependsOn, func(d string) string { return "{name: " + d + "}" }), ", ") + "]\n"
	}
	return fmt.Sprintf(`
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: %[2]s, namespace: %[1]s, labels: %[5]s}
spec:
  interval: 10m
  prune: true
  wait: true
  timeout: 1m
  path: ./%[2]s
  targetNamespace: %[4]s
  sourceRef: {kind: GitRepository, name: %[3]s}
  postBuild: {substitute: {}}
%[6]s`, namespace, name, source, target, labels, deps)
}

func gitRepositoryYAML(namespace, name, url string) string {
	return fmt.Sprintf(`
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  interval: 10m
  url: %[3]s
  ref: {branch: main}
`, namespace, name, url)
}

func mapStrings(in []string, f func(string) string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = f(s)
	}
	return out
}

// layers sets up, in the scenario, a git repository with one folder per layer (a ConfigMap named
// after it, substituted by Stagecoach), the GitRepository "layers", and a Kustomization and a
// Stage per layer; deps[name] are the Stage's spec.dependsOn. The versions come from the registry
// repository repo. mutate may change a Stage before it is created.
func layers(sc *localstack.Scenario, repo string, names []string, deps map[string][]stagecoachv1.StageDependency,
	mutate func(*stagecoachv1.Stage)) (target string) {
	sc.T.Helper()
	target = sc.TargetNamespace("layers")
	files := map[string]string{}
	for _, n := range names {
		files[n+"/configmap.yaml"] = localstack.SubstitutedConfigMap(n)
	}
	gitRepo := sc.NS + "/layers"
	_, err := sc.Git.Commit(sc.Ctx(), gitRepo, "layers", files)
	sc.G.Expect(err).NotTo(HaveOccurred())
	sc.Apply(gitRepositoryYAML(sc.NS, "layers", sc.Git.URL(gitRepo)))
	for _, n := range names {
		sc.Apply(layerKustomizationYAML(sc.NS, n, "layers", target, true))
		sc.Stage(n, n, "prod", stagecoachv1.ApplierReference{Kind: "Kustomization", Name: n},
			stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: sc.Registry.Repository(repo), Semver: ">=1.0.0"}},
			func(s *stagecoachv1.Stage) {
				s.Spec.DependsOn = deps[n]
				if mutate != nil {
					mutate(s)
				}
			})
	}
	return target
}

// chainClock records, from watches, when each Stage became Verified at a digest and when each
// Kustomization was given a digest by Stagecoach (applied) and was Ready with it (landed).
type chainClock struct {
	mu                        sync.Mutex
	verified, applied, landed map[string]time.Time // key: name + " " + digest
}

func watchChain(sc *localstack.Scenario) *chainClock {
	c := &chainClock{verified: map[string]time.Time{}, applied: map[string]time.Time{}, landed: map[string]time.Time{}}
	first := func(m map[string]time.Time, key string, at time.Time) {
		if _, ok := m[key]; !ok {
			m[key] = at
		}
	}
	sc.Watch(stagecoachv1.GroupVersion.String(), "Stage", func(at time.Time, u *unstructured.Unstructured) {
		digest := localstack.Field(u, "status", "current", "digest")
		if v := condition(u, stagecoachv1.ConditionVerified); digest != "" && v != nil && v["status"] == "True" {
			c.mu.Lock()
			first(c.verified, u.GetName()+" "+digest, at)
			c.mu.Unlock()
		}
	})
	sc.Watch(kustomizationAPI, "Kustomization", func(at time.Time, u *unstructured.Unstructured) {
		digest := localstack.Field(u, "spec", "postBuild", "substitute", "STAGECOACH_DIGEST")
		if digest == "" {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		first(c.applied, u.GetName()+" "+digest, at)
		observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		if status, gen := ready(u); status == "True" && gen == u.GetGeneration() && observed == u.GetGeneration() {
			first(c.landed, u.GetName()+" "+digest, at)
		}
	})
	return c
}

func (c *chainClock) at(m map[string]time.Time, name, digest string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return m[name+" "+digest]
}

// Layers base → mgmt → apps of real Flux Kustomizations: while base moves to a new version and
// kustomize-controller is held (SIGSTOP: base's status update arrives only after mgmt's and apps'
// Promotions were created), mgmt and apps wait, say why, and leave their Kustomizations alone;
// once base's status arrives, each layer starts only after the one below is Verified and settled.
func TestLayeredKustomizationsWaitForSettledBase(t *testing.T) {
	sc := env.Scenario(t)
	repo := sc.NS + "/platform"
	v1 := sc.Push(repo, "v1.0.0", map[string]string{"configmap.yaml": localstack.ConfigMap("platform", "v1.0.0")})
	v2 := sc.Push(repo, "v2.0.0", map[string]string{"configmap.yaml": localstack.ConfigMap("platform", "v2.0.0")})
	target := layers(sc, repo, []string{"base", "mgmt", "apps"}, map[string][]stagecoachv1.StageDependency{
		"mgmt": {{Stage: "base"}},
		"apps": {{Stage: "base", Version: ">=1.0.0"}, {Stage: "mgmt"}},
	}, nil)
	clock := watchChain(sc)

	for _, layer := range []string{"base", "mgmt", "apps"} {
		created := time.Now()
		sc.Promote(layer, "v1.0.0", v1)
		sc.WaitVerified(layer, v1, created)
	}

	kustomize := sc.Process(localstack.KustomizeController)
	sc.G.Expect(kustomize).NotTo(BeNil())
	sc.G.Expect(kustomize.Pause()).To(Succeed())
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = kustomize.Resume()
		}
	})

	// base moves to v2: Stagecoach writes the Kustomization, whose status stays behind while
	// kustomize-controller is held.
	baseV2 := sc.Promote("base", "v2.0.0", v2)
	sc.G.Eventually(func(g Gomega) {
		p := &stagecoachv1.Promotion{}
		g.Expect(sc.Client.Get(sc.Ctx(), client.ObjectKeyFromObject(baseV2), p)).To(Succeed())
		g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhaseRunning))
		g.Expect(p.Status.AppliedAt).NotTo(BeNil())
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())

	// apps' spec changes (and mgmt's) while base's status has not arrived.
	appsV2 := sc.Promote("apps", "v2.0.0", v2)
	mgmtV2 := sc.Promote("mgmt", "v2.0.0", v2)
	for _, p := range []*stagecoachv1.Promotion{appsV2, mgmtV2} {
		sc.G.Eventually(func(g Gomega) {
			got := &stagecoachv1.Promotion{}
			g.Expect(sc.Client.Get(sc.Ctx(), client.ObjectKeyFromObject(p), got)).To(Succeed())
			g.Expect(got.Status.Phase).To(Equal(stagecoachv1.PhasePending))
			g.Expect(got.Status.Message).To(ContainSubstring("dependsOn: depends on Stage " + sc.NS + "/base: still promoting"))
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
	}
	sc.G.Consistently(func(g Gomega) {
		for _, layer := range []string{"mgmt", "apps"} {
			k := sc.Get(g, kustomizationAPI, "Kustomization", layer)
			g.Expect(localstack.Field(k, "spec", "postBuild", "substitute", "STAGECOACH_DIGEST")).To(Equal(v1), "%s was applied before base settled", layer)
		}
		base := sc.Get(g, kustomizationAPI, "Kustomization", "base")
		observed, _, _ := unstructured.NestedInt64(base.Object, "status", "observedGeneration")
		g.Expect(observed).To(BeNumerically("<", base.GetGeneration()), "base's status arrived while kustomize-controller was held")
	}, 3*time.Second, time.Second/10).Should(Succeed())

	sc.G.Expect(kustomize.Resume()).To(Succeed())
	resumed = true
	for _, layer := range []string{"base", "mgmt", "apps"} {
		sc.WaitVerified(layer, v2, time.Time{})
	}
	sc.G.Eventually(func(g Gomega) {
		for _, layer := range []string{"base", "mgmt", "apps"} {
			g.Expect(sc.ConfigMapData(g, target, layer)).To(HaveKeyWithValue("digest", v2))
		}
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())

	// Order: each layer was applied only after the one below was Verified at v2.
	for _, pair := range [][2]string{{"base", "mgmt"}, {"mgmt", "apps"}, {"base", "apps"}} {
		below, above := clock.at(clock.verified, pair[0], v2), clock.at(clock.applied, pair[1], v2)
		sc.G.Expect(below).NotTo(BeZero(), "no Verified of %s at v2 seen", pair[0])
		sc.G.Expect(above).NotTo(BeZero(), "no apply of %s at v2 seen", pair[1])
		sc.G.Expect(above.After(below)).To(BeTrue(), "%s applied at %s, before %s was Verified at %s", pair[1], above, pair[0], below)
	}
	for _, p := range []*stagecoachv1.Promotion{appsV2, mgmtV2} {
		got := &stagecoachv1.Promotion{}
		sc.G.Expect(sc.Client.Get(sc.Ctx(), client.ObjectKeyFromObject(p), got)).To(Succeed())
		sc.G.Expect(got.Status.Gates).To(ContainElement(And(HaveField("Gate", stagecoachv1.GateDependsOn), HaveField("Passed", true))))
	}
	report("%-8s layers base→mgmt→apps: mgmt applied %s after base Verified, apps %s after mgmt Verified", "layers",
		clock.at(clock.applied, "mgmt", v2).Sub(clock.at(clock.verified, "base", v2)).Round(10*time.Millisecond),
		clock.at(clock.applied, "apps", v2).Sub(clock.at(clock.verified, "mgmt", v2)).Round(10*time.Millisecond))
}

// A dependsOn cycle is refused (Ready=False, the cycle listed); a Kubernetes version prerequisite
// holds a Promotion while the API server (v1.35.4 here) does not meet it, and passes when it does.
func TestLayersRefuseCycleAndCheckKubernetesVersion(t *testing.T) {
	sc := env.Scenario(t)
	repo := sc.NS + "/platform"
	v1 := sc.Push(repo, "v1.0.0", map[string]string{"configmap.yaml": localstack.ConfigMap("platform", "v1.0.0")})
	layers(sc, repo, []string{"ring-a", "ring-b", "future", "current"}, map[string][]stagecoachv1.StageDependency{
		"ring-a": {{Stage: "ring-b"}},
		"ring-b": {{Stage: "ring-a"}},
	}, func(s *stagecoachv1.Stage) {
		switch s.Name {
		case "future":
			s.Spec.Prerequisites = &stagecoachv1.Prerequisites{KubernetesVersion: ">=9.0.0"}
		case "current":
			s.Spec.Prerequisites = &stagecoachv1.Prerequisites{KubernetesVersion: ">=1.35.0 <2.0.0"}
		}
	})

	t.Run("cycle refused", func(t *testing.T) {
		sc := sc.For(t)
		for _, c := range [][2]string{{"ring-a", "ring-b"}, {"ring-b", "ring-a"}} {
			sc.G.Eventually(func(g Gomega) {
				r := meta.FindStatusCondition(sc.GetStage(g, c[0]).Status.Conditions, stagecoachv1.ConditionReady)
				g.Expect(r).NotTo(BeNil())
				g.Expect(r.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(r.Reason).To(Equal(stagecoachv1.ReasonDependencyCycle))
				g.Expect(r.Message).To(ContainSubstring(fmt.Sprintf("%[1]s/%[2]s -> %[1]s/%[3]s -> %[1]s/%[2]s", sc.NS, c[0], c[1])))
			}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
		}
		p := sc.Promote("ring-a", "v1.0.0", v1)
		sc.G.Consistently(func(g Gomega) {
			got := &stagecoachv1.Promotion{}
			g.Expect(sc.Client.Get(sc.Ctx(), client.ObjectKeyFromObject(p), got)).To(Succeed())
			g.Expect(got.Status.Phase).To(BeElementOf(stagecoachv1.Phase(""), stagecoachv1.PhasePending))
			g.Expect(localstack.Field(sc.Get(g, kustomizationAPI, "Kustomization", "ring-a"), "spec", "postBuild", "substitute", "STAGECOACH_DIGEST")).To(BeEmpty())
		}, 2*time.Second, time.Second/10).Should(Succeed())
	})

	t.Run("kubernetes version not met", func(t *testing.T) {
		sc := sc.For(t)
		p := sc.Promote("future", "v1.0.0", v1)
		sc.G.Eventually(func(g Gomega) {
			got := &stagecoachv1.Promotion{}
			g.Expect(sc.Client.Get(sc.Ctx(), client.ObjectKeyFromObject(p), got)).To(Succeed())
			g.Expect(got.Status.Phase).To(Equal(stagecoachv1.PhasePending))
			g.Expect(got.Status.Message).To(ContainSubstring(`prerequisites: the API server runs Kubernetes v1.35.4, which does not meet spec.prerequisites.kubernetesVersion ">=9.0.0"`))
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
		sc.G.Expect(localstack.Field(sc.Get(sc.G, kustomizationAPI, "Kustomization", "future"), "spec", "postBuild", "substitute", "STAGECOACH_DIGEST")).To(BeEmpty())
	})

	t.Run("kubernetes version met", func(t *testing.T) {
		sc := sc.For(t)
		created := time.Now()
		p := sc.Promote("current", "v1.0.0", v1)
		sc.WaitVerified("current", v1, created)
		got := &stagecoachv1.Promotion{}
		sc.G.Expect(sc.Client.Get(sc.Ctx(), client.ObjectKeyFromObject(p), got)).To(Succeed())
		sc.G.Expect(got.Status.Gates).To(ContainElement(And(HaveField("Gate", stagecoachv1.GatePrereqs), HaveField("Passed", true),
			HaveField("Message", ContainSubstring(`v1.35.4`)))))
	})
}
