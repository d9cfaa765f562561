package localstack

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// Timeouts of scenario waits: engines reconcile within seconds here, but CI machines are slow.
const (
	WaitTimeout = 3 * time.Minute
	pollEvery   = 100 * time.Millisecond
)

// Scenario is one test's share of the stack: its own namespace, builders for the objects of a
// pipeline, and, when the test fails, what every component logged while it ran.
type Scenario struct {
	*Stack
	T  *testing.T
	G  *WithT
	NS string

	logStart map[string]int64
}

// Scenario starts a scenario in a new namespace named after the test.
func (s *Stack) Scenario(t *testing.T) *Scenario {
	t.Helper()
	sc := &Scenario{Stack: s, T: t, G: NewWithT(t), NS: namespaceFor(t.Name()), logStart: map[string]int64{}}
	entries, _ := os.ReadDir(s.LogDir)
	for _, e := range entries {
		if fi, err := e.Info(); err == nil {
			sc.logStart[e.Name()] = fi.Size()
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			sc.dumpLogs()
		}
	})
	sc.G.Expect(s.Namespace(t.Context(), sc.NS)).To(Succeed())
	return sc
}

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

func namespaceFor(testName string) string {
	n := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(testName), "-"), "-")
	if len(n) > 50 {
		n = n[:50]
	}
	return fmt.Sprintf("%s-%d", n, time.Now().UnixMilli()%100000)
}

// dumpLogs prints, per component, what it logged during the scenario: the lines that name the
// scenario's namespace (Stagecoach's controller: every line), at most the last 60.
func (sc *Scenario) dumpLogs() {
	entries, err := os.ReadDir(sc.LogDir)
	if err != nil {
		sc.T.Logf("cannot read the logs in %s: %v", sc.LogDir, err)
		return
	}
	var b strings.Builder
	for _, e := range entries {
		path := sc.LogDir + "/" + e.Name()
		all := strings.HasPrefix(e.Name(), StagecoachController) || strings.HasPrefix(e.Name(), Fixtures)
		lines := linesSince(path, sc.logStart[e.Name()], func(l string) bool { return all || strings.Contains(l, sc.NS) })
		if len(lines) == 0 {
			continue
		}
		skipped := ""
		if len(lines) > 60 {
			skipped = fmt.Sprintf(" (last 60 of %d)", len(lines))
			lines = lines[len(lines)-60:]
		}
		fmt.Fprintf(&b, "\n===== %s%s =====\n%s\n", path, skipped, strings.Join(lines, "\n"))
	}
	sc.T.Logf("component logs during %s (namespace %s; full logs in %s):%s", sc.T.Name(), sc.NS, sc.LogDir, b.String())
}

func linesSince(path string, offset int64, keep func(string) bool) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		return nil
	}
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1024*1024), 1024*1024)
	for sc.Scan() {
		if keep(sc.Text()) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// TargetNamespace creates the namespace an environment of the scenario deploys into.
func (sc *Scenario) TargetNamespace(environment string) string {
	sc.T.Helper()
	ns := sc.NS + "-" + environment
	sc.G.Expect(sc.Namespace(sc.Ctx(), ns)).To(Succeed())
	return ns
}

// ConfigMapData reads a ConfigMap's data (what an engine applied).
func (sc *Scenario) ConfigMapData(g Gomega, namespace, name string) map[string]string {
	cm := &corev1.ConfigMap{}
	g.Expect(sc.Client.Get(sc.Ctx(), client.ObjectKey{Namespace: namespace, Name: name}, cm)).To(Succeed())
	return cm.Data
}

// Ctx is the test's context.
func (sc *Scenario) Ctx() context.Context { return sc.T.Context() }

// Apply server-side applies YAML into the scenario's namespace (objects without a namespace get it).
func (sc *Scenario) Apply(yaml string) {
	sc.T.Helper()
	objs, err := decodeYAML([]byte(yaml))
	sc.G.Expect(err).NotTo(HaveOccurred())
	for _, o := range objs {
		if o.GetNamespace() == "" {
			o.SetNamespace(sc.NS)
		}
		sc.G.Expect(Apply(sc.Ctx(), sc.Client, o)).To(Succeed())
	}
}

// Push pushes a plain-manifests artifact to repo:tag and returns its digest.
func (sc *Scenario) Push(repo, tag string, files map[string]string) string {
	sc.T.Helper()
	d, err := sc.Registry.PushManifests(sc.Ctx(), repo, tag, files)
	sc.G.Expect(err).NotTo(HaveOccurred())
	return d
}

// ConfigMap is a manifest of one ConfigMap whose data names the version, the simplest object
// that Argo CD and Flux both count as healthy without workload controllers.
func ConfigMap(name, version string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  version: %q\n", name, version)
}

// FluxOCISourceYAML is a Flux OCIRepository (plain HTTP, selecting the plain-manifests layer) at
// tag and the Kustomization named <name>-apply that applies its artifact into namespace target;
// both in namespace and carrying the stagecoach.dev/stage label of stage.
func FluxOCISourceYAML(namespace, name, url, tag, stage, target string) string {
	return fmt.Sprintf(`
apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: %[2]s, namespace: %[1]s, labels: {stagecoach.dev/stage: %[5]s}}
spec:
  interval: 1m
  url: %[3]s
  insecure: true
  ref: {tag: %[4]s}
  layerSelector: {mediaType: %[7]q, operation: extract}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: %[2]s-apply, namespace: %[1]s, labels: {stagecoach.dev/stage: %[5]s}}
spec:
  interval: 1m
  prune: true
  wait: true
  timeout: 1m
  path: ./
  targetNamespace: %[6]s
  sourceRef: {kind: OCIRepository, name: %[2]s}
`, namespace, name, url, tag, stage, target, ManifestsLayerType)
}

// FluxGitKustomizationYAML is a Flux GitRepository named <name>-environments (branch main of url)
// and the Kustomization name that applies its folder path into namespace target, reconciling
// every interval, with empty postBuild substitutions for Stagecoach to fill; both in namespace,
// the Kustomization carrying the stagecoach.dev/stage label of stage.
func FluxGitKustomizationYAML(namespace, name, url, path, stage, target string, interval time.Duration) string {
	return fmt.Sprintf(`
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: %[2]s-environments, namespace: %[1]s}
spec:
  interval: 1m
  url: %[3]s
  ref: {branch: main}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: %[2]s, namespace: %[1]s, labels: {stagecoach.dev/stage: %[5]s}}
spec:
  interval: %[7]s
  prune: true
  wait: true
  timeout: 1m
  path: ./%[4]s
  targetNamespace: %[6]s
  sourceRef: {kind: GitRepository, name: %[2]s-environments}
  postBuild: {substitute: {}}
`, namespace, name, url, path, stage, target, interval)
}

// SubstitutedConfigMap is a ConfigMap named name whose data names the version and digest through
// a Kustomization's postBuild substitution, which Stagecoach writes (defaults for before the
// first promotion).
func SubstitutedConfigMap(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: %s
data:
  version: "${STAGECOACH_VERSION:=none}"
  digest: "${STAGECOACH_DIGEST:=none}"
`, name)
}

// ArgoCDOCIApplicationYAML is an automated Argo CD Application in namespace that syncs an OCI
// source (repoURL at revision) into namespace target, carrying the stagecoach.dev/stage label.
func ArgoCDOCIApplicationYAML(namespace, name, repoURL, revision, stage, target string) string {
	return fmt.Sprintf(`
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: %[2]s, namespace: %[1]s, labels: {stagecoach.dev/stage: %[5]s}}
spec:
  project: default
  source: {repoURL: %[3]s, path: ., targetRevision: %[4]q}
  destination: {server: https://kubernetes.default.svc, namespace: %[6]s}
  syncPolicy:
    automated: {prune: true, selfHeal: true}
`, namespace, name, repoURL, revision, stage, target)
}

// ArgoCDPluginApplicationYAML is an automated Argo CD Application in namespace that renders path
// of the Git repository repoURL (branch main) through the Stagecoach config management plugin into
// namespace target, carrying the stagecoach.dev/stage label. Stagecoach writes the promoted digest
// to the plugin's STAGECOACH_DIGEST.
func ArgoCDPluginApplicationYAML(namespace, name, repoURL, path, stage, target string) string {
	return fmt.Sprintf(`
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: %[2]s, namespace: %[1]s, labels: {stagecoach.dev/stage: %[5]s}}
spec:
  project: default
  source: {repoURL: %[3]s, path: %[4]s, targetRevision: main, plugin: {name: %[7]s}}
  destination: {server: https://kubernetes.default.svc, namespace: %[6]s}
  syncPolicy:
    automated: {prune: true, selfHeal: true}
`, namespace, name, repoURL, path, stage, target, PluginName)
}

// FluxOCISource applies FluxOCISourceYAML in the scenario's namespace; the repository starts at tag.
func (sc *Scenario) FluxOCISource(name, repo, tag, stage, target string) {
	sc.T.Helper()
	sc.Apply(FluxOCISourceYAML(sc.NS, name, sc.Registry.OCIURL(repo), tag, stage, target))
}

// ArgoCDOCIApplication registers repo with Argo CD and applies an automated Application in the
// scenario's namespace that syncs it (OCI source at revision) into namespace target.
func (sc *Scenario) ArgoCDOCIApplication(name, repo, revision, stage, target string) {
	sc.T.Helper()
	sc.G.Expect(sc.ArgoCDOCIRepository(sc.Ctx(), repo)).To(Succeed())
	sc.Apply(ArgoCDOCIApplicationYAML(sc.NS, name, sc.Registry.OCIURL(repo), revision, stage, target))
}

// Stage creates a Stage; mutate fills in what differs from the defaults (grace 1s, no gates).
func (sc *Scenario) Stage(name, service, environment string, applyRef stagecoachv1.ApplierReference, source stagecoachv1.StageSource,
	mutate func(*stagecoachv1.Stage)) *stagecoachv1.Stage {
	sc.T.Helper()
	s := &stagecoachv1.Stage{
		ObjectMeta: metav1.ObjectMeta{Namespace: sc.NS, Name: name},
		Spec: stagecoachv1.StageSpec{Service: service, Environment: environment, ApplyRef: applyRef, Source: source,
			Verification: &stagecoachv1.VerificationPolicy{Grace: &metav1.Duration{Duration: time.Second}}},
	}
	if mutate != nil {
		mutate(s)
	}
	sc.G.Expect(sc.Client.Create(sc.Ctx(), s)).To(Succeed())
	return s
}

// Promote asks, as the admin, for digest (tag) on stage.
func (sc *Scenario) Promote(stage, tag, digest string) *stagecoachv1.Promotion {
	sc.T.Helper()
	p := &stagecoachv1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: sc.NS, GenerateName: stage + "-"},
		Spec: stagecoachv1.PromotionSpec{Stage: stage, RequestedBy: AdminUser, Reason: "e2e: " + sc.T.Name(),
			Version: &stagecoachv1.VersionReference{Digest: digest, Tag: tag}},
	}
	sc.G.Expect(sc.Client.Create(sc.Ctx(), p)).To(Succeed())
	return p
}

// GetStage reads a Stage of the scenario.
func (sc *Scenario) GetStage(g Gomega, name string) *stagecoachv1.Stage {
	s := &stagecoachv1.Stage{}
	g.Expect(sc.Client.Get(sc.Ctx(), client.ObjectKey{Namespace: sc.NS, Name: name}, s)).To(Succeed())
	return s
}

// Get reads an Argo CD or Flux object of the scenario.
func (sc *Scenario) Get(g Gomega, apiVersion, kind, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	g.Expect(sc.Client.Get(sc.Ctx(), client.ObjectKey{Namespace: sc.NS, Name: name}, u)).To(Succeed())
	return u
}

// Field reads a string field of an object ("" when missing), for assertions.
func Field(u *unstructured.Unstructured, path ...string) string {
	v, _, _ := unstructured.NestedString(u.Object, path...)
	return v
}

// Timeline is when one promotion of one Stage reached each step, as seen by polling every 100 ms
// (the status timestamps have only second resolution).
type Timeline struct {
	Stage, Promotion, Digest string
	// Requested is when the version was asked for: the test created the Promotion, or the version
	// became eligible (upstream Verified) for an automatic one.
	Requested, Applied, Landed, Verified time.Time
}

// LeadTime is requested → Verified.
func (tl Timeline) LeadTime() time.Duration { return tl.Verified.Sub(tl.Requested) }

func (tl Timeline) String() string {
	r := func(d time.Duration) string { return d.Round(10 * time.Millisecond).String() }
	return fmt.Sprintf("%-8s lead time %7s  (requested→applied %s [Stagecoach], applied→landed %s [engine], landed→verified %s [grace])",
		tl.Stage, r(tl.LeadTime()), r(tl.Applied.Sub(tl.Requested)), r(tl.Landed.Sub(tl.Applied)), r(tl.Verified.Sub(tl.Landed)))
}

// WaitVerified waits until stage runs digest and is Verified, following the Promotion that
// carries it. requested is when the version was asked for (see Timeline); when zero, it is when
// the Promotion is first seen.
func (sc *Scenario) WaitVerified(stage, digest string, requested time.Time) Timeline {
	sc.T.Helper()
	tl := Timeline{Stage: stage, Digest: digest, Requested: requested}
	seen := func(t *time.Time, ok bool) {
		if ok && t.IsZero() {
			*t = time.Now()
		}
	}
	sc.G.Eventually(func(g Gomega) {
		var list stagecoachv1.PromotionList
		g.Expect(sc.Client.List(sc.Ctx(), &list, client.InNamespace(sc.NS))).To(Succeed())
		for i := range list.Items {
			p := &list.Items[i]
			if p.Spec.Stage != stage || p.Spec.Action != stagecoachv1.ActionPromote || p.Spec.Version == nil || p.Spec.Version.Digest != digest {
				continue
			}
			tl.Promotion = p.Name
			seen(&tl.Requested, true)
			seen(&tl.Applied, p.Status.AppliedAt != nil)
			seen(&tl.Landed, p.Status.LandedAt != nil)
			g.Expect(p.Status.Phase).NotTo(BeElementOf(stagecoachv1.PhaseFailed, stagecoachv1.PhaseRolledBack, stagecoachv1.PhaseAborted),
				"Promotion %s of %s failed: %s", p.Name, digest, p.Status.Message)
		}
		g.Expect(tl.Promotion).NotTo(BeEmpty(), "no Promotion of %s on Stage %s yet", digest, stage)
		s := sc.GetStage(g, stage)
		v := meta.FindStatusCondition(s.Status.Conditions, stagecoachv1.ConditionVerified)
		g.Expect(v).NotTo(BeNil(), "Stage %s has no Verified condition", stage)
		g.Expect(s.Status.Current).NotTo(BeNil())
		g.Expect(s.Status.Current.Digest).To(Equal(digest), "Stage %s runs %s", stage, s.Status.Current.Digest)
		g.Expect(v.Status).To(Equal(metav1.ConditionTrue), "Stage %s Verified: %s", stage, v.Message)
		seen(&tl.Verified, true)
	}, WaitTimeout, pollEvery).Should(Succeed())
	// A step skipped between two polls counts as reached when the next one was seen.
	if tl.Landed.IsZero() {
		tl.Landed = tl.Verified
	}
	if tl.Applied.IsZero() {
		tl.Applied = tl.Landed
	}
	return tl
}
