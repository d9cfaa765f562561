package e2e

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
)

const argoAPI = "argoproj.io/v1alpha1"

// appSyncs records, from a watch on Applications, when each one began and finished syncing each
// digest (the test's clock, to the millisecond: Argo CD's own times keep whole seconds) and every
// revision it was told to run.
type appSyncs struct {
	mu       sync.Mutex
	started  map[string]time.Time // "<app>@<digest>": an operation for the digest first seen
	done     map[string]time.Time // "<app>@<digest>": operation Succeeded, Synced and Healthy at it
	told     map[string][]string  // app: spec.source.targetRevision values in the order seen
	prefix   string
	revision func(u *unstructured.Unstructured) string
}

func watchAppSyncs(sc *localstack.Scenario, prefix string) *appSyncs {
	a := &appSyncs{started: map[string]time.Time{}, done: map[string]time.Time{}, told: map[string][]string{}, prefix: prefix}
	sc.Watch(argoAPI, "Application", func(at time.Time, u *unstructured.Unstructured) {
		if !strings.HasPrefix(u.GetName(), prefix) {
			return
		}
		a.observe(at, u)
	})
	return a
}

func (a *appSyncs) observe(at time.Time, u *unstructured.Unstructured) {
	a.mu.Lock()
	defer a.mu.Unlock()
	name := u.GetName()
	if rev := localstack.Field(u, "spec", "source", "targetRevision"); rev != "" {
		if t := a.told[name]; len(t) == 0 || t[len(t)-1] != rev {
			a.told[name] = append(t, rev)
		}
	}
	op := localstack.Field(u, "status", "operationState", "phase")
	for _, rev := range []string{localstack.Field(u, "status", "operationState", "operation", "sync", "revision"),
		localstack.Field(u, "status", "operationState", "syncResult", "revision")} {
		if rev == "" || op == "" {
			continue
		}
		if _, ok := a.started[name+"@"+rev]; !ok {
			a.started[name+"@"+rev] = at
		}
	}
	rev := localstack.Field(u, "status", "sync", "revision")
	if op == "Succeeded" && localstack.Field(u, "status", "operationState", "syncResult", "revision") == rev &&
		localstack.Field(u, "status", "sync", "status") == "Synced" && localstack.Field(u, "status", "health", "status") == "Healthy" {
		if _, ok := a.done[name+"@"+rev]; !ok {
			a.done[name+"@"+rev] = at
		}
	}
}

func (a *appSyncs) startedAt(app, digest string) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.started[app+"@"+digest]
}

func (a *appSyncs) doneAt(app, digest string) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.done[app+"@"+digest]
}

func (a *appSyncs) revisions(app string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.told[app])
}

// outOfOrder counts the targets of each wave after the first whose sync of digest began before
// every target of the wave before had finished it, and says which.
func (a *appSyncs) outOfOrder(waves [][]string, digest string) (int, []string) {
	n, which := 0, []string(nil)
	for i := 1; i < len(waves); i++ {
		var prevDone time.Time
		for _, app := range waves[i-1] {
			d := a.doneAt(app, digest)
			if d.IsZero() {
				prevDone = time.Now() // not finished at all: anything started counts as early
				break
			}
			if d.After(prevDone) {
				prevDone = d
			}
		}
		for _, app := range waves[i] {
			if s := a.startedAt(app, digest); !s.IsZero() && s.Before(prevDone) {
				n++
				which = append(which, fmt.Sprintf("%s (wave %d) began %s before wave %d finished", app, i+1, prevDone.Sub(s).Round(time.Millisecond), i))
			}
		}
	}
	return n, which
}

// timeline says, per wave, when its first sync of digest began and its last one finished,
// counted from start ("w1 0.3→4.1 s"): the gaps between waves are what the orchestrator adds.
func (a *appSyncs) timeline(waves [][]string, digest string, start time.Time) string {
	var parts []string
	for i, wave := range waves {
		var first, last time.Time
		for _, app := range wave {
			if s := a.startedAt(app, digest); !s.IsZero() && (first.IsZero() || s.Before(first)) {
				first = s
			}
			if d := a.doneAt(app, digest); d.After(last) {
				last = d
			}
		}
		parts = append(parts, fmt.Sprintf("wave %d %.1f→%.1f s", i+1, first.Sub(start).Seconds(), last.Sub(start).Seconds()))
	}
	return strings.Join(parts, ", ")
}

// fleetAppSet is the shipped example ApplicationSet (manifests/argocd/applicationset-waves), so
// that its ignoreApplicationDifferences and preservedFields are what the test runs, made into
// this scenario's: its name and Stage label, generators, and a template deploying repoURL at
// revision into the namespace each generator's parameters give.
func fleetAppSet(g Gomega, name, repoURL, revision string, generators []any, namespace string) *unstructured.Unstructured {
	set, err := env.ShippedApplicationSet()
	g.Expect(err).NotTo(HaveOccurred())
	ignored, _, _ := unstructured.NestedSlice(set.Object, "spec", "ignoreApplicationDifferences")
	g.Expect(fmt.Sprint(ignored)).To(ContainSubstring("/spec/source/targetRevision"),
		"the shipped ApplicationSet must keep the applicationset-controller off the revision Stagecoach writes")
	set.SetNamespace(localstack.ArgoCDNamespace)
	set.SetName(name)
	set.SetLabels(map[string]string{stagecoachv1.StageLabel: name})
	g.Expect(unstructured.SetNestedSlice(set.Object, generators, "spec", "generators")).To(Succeed())
	g.Expect(unstructured.SetNestedField(set.Object, "{{.name}}", "spec", "template", "metadata", "name")).To(Succeed())
	g.Expect(unstructured.SetNestedStringMap(set.Object, map[string]string{stagecoachv1.StageLabel: name}, "spec", "template", "metadata", "labels")).To(Succeed())
	g.Expect(unstructured.SetNestedField(set.Object, repoURL, "spec", "template", "spec", "source", "repoURL")).To(Succeed())
	g.Expect(unstructured.SetNestedField(set.Object, revision, "spec", "template", "spec", "source", "targetRevision")).To(Succeed())
	g.Expect(unstructured.SetNestedField(set.Object, namespace, "spec", "template", "spec", "destination", "namespace")).To(Succeed())
	return set
}

// listApps lists the Applications an ApplicationSet owns.
func listApps(sc *localstack.Scenario, g Gomega, set string) []unstructured.Unstructured {
	apps := &unstructured.UnstructuredList{}
	apps.SetAPIVersion(argoAPI)
	apps.SetKind("ApplicationList")
	g.Expect(sc.Client.List(sc.Ctx(), apps, client.InNamespace(localstack.ArgoCDNamespace), client.MatchingLabels{stagecoachv1.StageLabel: set})).To(Succeed())
	return apps.Items
}

// expectAllAt checks that every Application of set was synced at revision and is Synced and Healthy.
func expectAllAt(sc *localstack.Scenario, g Gomega, set string, n int, revision string) {
	apps := listApps(sc, g, set)
	g.Expect(apps).To(HaveLen(n))
	for i := range apps {
		u := &apps[i]
		g.Expect(localstack.Field(u, "status", "operationState", "phase")).To(Equal("Succeeded"), "Application %s", u.GetName())
		g.Expect(localstack.Field(u, "status", "sync", "revision")).To(Equal(revision), "Application %s", u.GetName())
		g.Expect(localstack.Field(u, "status", "sync", "status")).To(Equal("Synced"), "Application %s", u.GetName())
		g.Expect(localstack.Field(u, "status", "health", "status")).To(Equal("Healthy"), "Application %s", u.GetName())
	}
}

func intOrPtr(v intstr.IntOrString) *intstr.IntOrString { return &v }

// TestFleetWavesArgoCD rolls a version out in 3 waves over an ApplicationSet's 4 clusters with the
// real applicationset-controller and application-controller: the ApplicationSet (cluster
// generator, the shipped ignoreApplicationDifferences) makes one Application per cluster Secret;
// each cluster is the stack's API server under its own loopback address. Then a version that one
// cluster's admission refuses halts the rollout in its wave and rolls the moved targets back.
func TestFleetWavesArgoCD(t *testing.T) {
	sc := env.Scenario(t)
	_, err := env.StartApplicationSetController(sc.Ctx(), localstack.AppSetOptions{})
	sc.G.Expect(err).NotTo(HaveOccurred())
	argo := sc.InNamespace(localstack.ArgoCDNamespace) // the ApplicationSet, the Stage and its Promotions
	name := "fleet-" + sc.NS[strings.LastIndex(sc.NS, "-")+1:]

	repo := sc.NS + "/fleet"
	release := func(tag string) string {
		return sc.Push(repo, tag, map[string]string{"configmap.yaml": localstack.ConfigMap("fleet", tag)})
	}
	v1, v2, v3 := release("v1.0.0"), release("v2.0.0"), release("v3.0.0")
	sc.G.Expect(sc.ArgoCDOCIRepository(sc.Ctx(), repo)).To(Succeed())

	regions := []string{"eu", "us", "us", "ap"}
	clusterNS := map[string]string{} // cluster (= Application) name → its destination namespace
	for i, r := range regions {
		c := fmt.Sprintf("%s-c%d", name, i+1)
		clusterNS[c] = sc.TargetNamespace(fmt.Sprintf("c%d", i+1))
		sc.FleetCluster(c, map[string]string{"region": r, "stagecoach.dev/e2e-fleet": name},
			map[string]string{"stagecoach.dev/e2e-namespace": clusterNS[c]})
	}
	set := fleetAppSet(sc.G, name, sc.Registry.OCIURL(repo), v1,
		[]any{map[string]any{"clusters": map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"stagecoach.dev/e2e-fleet": name}}}}},
		`{{index .metadata.annotations "stagecoach.dev/e2e-namespace"}}`)
	// Argo CD retries a failed automated sync 5 times with backoff by default (minutes): once is
	// enough to fail here.
	sc.G.Expect(unstructured.SetNestedMap(set.Object, map[string]any{"limit": int64(1), "backoff": map[string]any{"duration": "1s", "factor": int64(1)}},
		"spec", "template", "spec", "syncPolicy", "retry")).To(Succeed())
	syncs := watchAppSyncs(argo, name+"-")
	sc.G.Expect(localstack.Apply(sc.Ctx(), sc.Client, set)).To(Succeed())
	sc.DeleteOnCleanup(set)
	// The applicationset-controller makes the 4 Applications; Argo CD syncs them at v1 in each cluster.
	sc.G.Eventually(func(g Gomega) { expectAllAt(sc, g, name, len(regions), v1) }, localstack.WaitTimeout, time.Second/5).Should(Succeed())

	argo.Stage(name, "fleet", "prod", stagecoachv1.ApplierReference{Kind: "ApplicationSet", Name: name},
		stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: sc.Registry.Repository(repo), Semver: ">=1.0.0"}},
		func(s *stagecoachv1.Stage) {
			s.Spec.Verification = &stagecoachv1.VerificationPolicy{Grace: &metav1.Duration{}, ProgressDeadline: &metav1.Duration{Duration: 2 * time.Minute}}
			s.Spec.Rollback = &stagecoachv1.RollbackPolicy{Automatic: ptrTo(true)}
			s.Spec.Waves = []stagecoachv1.Wave{
				{Name: "canary", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}}, MaxTargets: intOrPtr(intstr.FromInt32(1))},
				{Name: "us", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "us"}}, MaxParallel: intOrPtr(intstr.FromString("100%"))},
				{Name: "the rest"},
			}
		})
	sc.DeleteOnCleanup(&stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: localstack.ArgoCDNamespace, Name: name}})
	app := func(i int) string { return fmt.Sprintf("%s-c%d", name, i) }
	wantWaves := [][]string{{app(1)}, {app(2), app(3)}, {app(4)}}

	t.Run("three waves in order, every target Verified", func(t *testing.T) {
		g := NewWithT(t)
		created := time.Now()
		argo.Promote(name, "v2.0.0", v2)
		tl := argo.WaitVerified(name, v2, created)
		report("%-8s %d Applications in 3 waves (1/2/1), grace 0: %s", "fleet", len(regions), tl)

		s := argo.GetStage(g, name)
		g.Expect(s.Status.Waves).To(HaveLen(3))
		for i, w := range s.Status.Waves {
			g.Expect(w.Digest).To(Equal(v2))
			g.Expect(w.Phase).To(Equal(stagecoachv1.PhaseSucceeded), "wave %q: %s", w.Name, w.Message)
			g.Expect(w.Targets).To(ConsistOf(wantWaves[i]), "wave %q", w.Name)
			g.Expect(w.Completed).To(ConsistOf(wantWaves[i]), "wave %q", w.Name)
			g.Expect(w.StartedAt).NotTo(BeNil(), "wave %q", w.Name)
			g.Expect(w.FinishedAt).NotTo(BeNil(), "wave %q", w.Name)
			if i > 0 {
				prev := s.Status.Waves[i-1]
				g.Expect(w.StartedAt.Before(prev.FinishedAt)).To(BeFalse(), "wave %q started %s, before wave %q finished %s",
					w.Name, w.StartedAt, prev.Name, prev.FinishedAt)
			}
		}
		// Argo CD's own sync times (whole seconds) and the watch's (milliseconds) agree: no
		// Application of a wave began its sync before the wave before had finished.
		apps := map[string]*unstructured.Unstructured{}
		for _, u := range listApps(sc, g, name) {
			apps[u.GetName()] = &u
		}
		for i := 1; i < len(wantWaves); i++ {
			for _, a := range wantWaves[i] {
				started := localstack.Field(apps[a], "status", "operationState", "startedAt")
				for _, b := range wantWaves[i-1] {
					finished := localstack.Field(apps[b], "status", "operationState", "finishedAt")
					g.Expect(started >= finished).To(BeTrue(), "%s (wave %d) began syncing at %s, before %s (wave %d) finished at %s", a, i+1, started, b, i, finished)
				}
			}
		}
		n, which := syncs.outOfOrder(wantWaves, v2)
		g.Expect(n).To(BeZero(), "out-of-order syncs: %v", which)

		// The applicationset-controller keeps what Stagecoach wrote (its template still says v1),
		// through its own reconciles: a change of the ApplicationSet's generators' input is one.
		g.Consistently(func(g Gomega) {
			for _, u := range listApps(sc, g, name) {
				g.Expect(localstack.Field(&u, "spec", "source", "targetRevision")).To(Equal(v2), "Application %s", u.GetName())
				g.Expect(u.GetAnnotations()).To(HaveKey(stagecoachv1.AppliedAtAnnotation), "Application %s: preservedFields", u.GetName())
			}
		}, 3*time.Second, time.Second/5).Should(Succeed())
	})

	t.Run("a target that fails halts its wave and rolls the moved targets back", func(t *testing.T) {
		g := NewWithT(t)
		// The second cluster's admission refuses v3's ConfigMap, as a policy of one cluster would.
		refused := clusterNS[app(2)]
		policy := refuseVersionPolicy(name, refused, "v3.0.0")
		for _, o := range policy {
			g.Expect(localstack.Apply(sc.Ctx(), sc.Client, o)).To(Succeed())
			sc.DeleteOnCleanup(o)
		}
		// The policy is enforced once the API server has read it: a dry-run create tells.
		g.Eventually(func() error {
			cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "probe", "namespace": refused}, "data": map[string]any{"version": "v3.0.0"}}}
			return sc.Client.Create(sc.Ctx(), cm, client.DryRunAll)
		}, time.Minute, time.Second/5).Should(MatchError(ContainSubstring("refused")))

		argo.Promote(name, "v3.0.0", v3)
		var failed *stagecoachv1.Promotion
		g.Eventually(func(g Gomega) {
			var list stagecoachv1.PromotionList
			g.Expect(sc.Client.List(sc.Ctx(), &list, client.InNamespace(localstack.ArgoCDNamespace))).To(Succeed())
			for i := range list.Items {
				p := &list.Items[i]
				if p.Spec.Stage == name && p.Spec.Version != nil && p.Spec.Version.Digest == v3 {
					failed = p
				}
			}
			g.Expect(failed).NotTo(BeNil())
			g.Expect(failed.Status.Phase).To(BeElementOf(stagecoachv1.PhaseFailed, stagecoachv1.PhaseRolledBack), failed.Status.Message)
		}, localstack.WaitTimeout, time.Second/5).Should(Succeed())
		g.Expect(failed.Status.Message).To(ContainSubstring(app(2)))

		g.Eventually(func(g Gomega) {
			s := argo.GetStage(g, name)
			v := meta.FindStatusCondition(s.Status.Conditions, stagecoachv1.ConditionVerified)
			g.Expect(v).NotTo(BeNil())
			g.Expect(v.Status).To(Equal(metav1.ConditionTrue), v.Message)
			g.Expect(v.Reason).To(Equal(stagecoachv1.ReasonRolledBack), v.Message)
			g.Expect(s.Status.Current.Digest).To(Equal(v2))
		}, localstack.WaitTimeout, time.Second/5).Should(Succeed())

		// Every Application runs v2 again; the third wave was never told v3.
		g.Eventually(func(g Gomega) {
			for _, u := range listApps(sc, g, name) {
				g.Expect(localstack.Field(&u, "spec", "source", "targetRevision")).To(Equal(v2), "Application %s", u.GetName())
				g.Expect(localstack.Field(&u, "status", "sync", "revision")).To(Equal(v2), "Application %s", u.GetName())
				g.Expect(localstack.Field(&u, "status", "sync", "status")).To(Equal("Synced"), "Application %s", u.GetName())
			}
		}, localstack.WaitTimeout, time.Second/5).Should(Succeed())
		g.Expect(syncs.revisions(app(1))).To(ContainElement(v3), "the canary was moved to v3 before the failure")
		g.Expect(syncs.revisions(app(4))).NotTo(ContainElement(v3), "the third wave must not start after the failure")
		g.Expect(sc.ConfigMapData(g, clusterNS[app(1)], "fleet")).To(HaveKeyWithValue("version", "v2.0.0"))
		g.Expect(sc.ConfigMapData(g, refused, "fleet")).To(HaveKeyWithValue("version", "v2.0.0"))
		report("%-8s a refused target in wave 2 halted the rollout of v3 and rolled back: %s", "fleet", failed.Status.Message)
	})
}

// refuseVersionPolicy is a ValidatingAdmissionPolicy and its binding that refuse ConfigMaps whose
// data.version is version in namespace ns.
func refuseVersionPolicy(name, ns, version string) []*unstructured.Unstructured {
	policy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
		"metadata": map[string]any{"name": name + "-refuse"},
		"spec": map[string]any{
			"failurePolicy": "Fail",
			"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{
				"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE", "UPDATE"}, "resources": []any{"configmaps"}}}},
			"validations": []any{map[string]any{
				"expression": fmt.Sprintf("!has(object.data) || !('version' in object.data) || object.data.version != %q", version),
				"message":    fmt.Sprintf("%s is refused in this cluster (e2e)", version)}},
		},
	}}
	binding := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
		"metadata": map[string]any{"name": name + "-refuse"},
		"spec": map[string]any{"policyName": name + "-refuse", "validationActions": []any{"Deny"},
			"matchResources": map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": ns}}}},
	}}
	return []*unstructured.Unstructured{policy, binding}
}

func ptrTo[T any](v T) *T { return &v }
