package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
)

// The apps teams already have (issue 30), on the real engines.

// notFrozen checks that a Stage never froze (a write it did not make would freeze it).
func notFrozen(g Gomega, s *stagecoachv1.Stage) {
	f := meta.FindStatusCondition(s.Status.Conditions, stagecoachv1.ConditionFrozen)
	if f != nil {
		g.Expect(f.Status).NotTo(Equal(metav1.ConditionTrue), "Stage %s froze: %s", s.Name, f.Message)
	}
}

// TestAppOfAppsArgoCD: an unlabelled app-of-apps parent (selfHeal) syncs, from the stack's git
// server, a labelled child Application whose Git copy leaves out targetRevision. The
// application-controller runs as its own service account here (not as the stack's break-glass
// admin), so the Application guard judges its writes as in a real install: it creates the child,
// Stagecoach promotes three versions through it, the parent stays Synced (its copy names no
// revision, so Stagecoach's is no difference) and its self-heal writes nothing back, and no Stage
// freezes. (The parent's prune of a labelled child is judged in test/integration/admission.)
func TestAppOfAppsArgoCD(t *testing.T) {
	sc := env.Scenario(t)
	ctx := sc.Ctx()
	restore, err := env.RunArgoCDAppControllerAs(ctx, localstack.ArgoCDAppControllerSA, "system:serviceaccounts", "system:serviceaccounts:argocd")
	sc.G.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 2*time.Minute)
		defer cancel()
		if err := restore(ctx); err != nil {
			t.Errorf("failed to run the application-controller as the admin again: %v", err)
		}
	})

	repo := sc.NS + "/payments"
	files := func(tag string) map[string]string {
		return map[string]string{"configmap.yaml": localstack.ConfigMap("payments", tag)}
	}
	digests := map[string]string{}
	for _, tag := range []string{"v1.0.0", "v2.0.0", "v3.0.0"} {
		digests[tag] = sc.Push(repo, tag, files(tag))
	}
	sc.G.Expect(sc.ArgoCDOCIRepository(ctx, repo)).To(Succeed())
	target := sc.TargetNamespace("prod")

	parent, child := "apps", "payments-prod"
	gitRepo := sc.NS + "-apps"
	_, err = sc.Git.Commit(ctx, gitRepo, "the payments Application", map[string]string{
		"apps/" + child + ".yaml": localstack.ChildApplicationYAML(sc.NS, child, sc.Registry.OCIURL(repo), child, target)})
	sc.G.Expect(err).NotTo(HaveOccurred())

	// Every sync status the parent reports, in order.
	var mu sync.Mutex
	var parentStates []string
	sc.Watch(argoAPI, "Application", func(_ time.Time, u *unstructured.Unstructured) {
		if u.GetName() != parent {
			return
		}
		s := localstack.Field(u, "status", "sync", "status")
		mu.Lock()
		defer mu.Unlock()
		if n := len(parentStates); s != "" && (n == 0 || parentStates[n-1] != s) {
			parentStates = append(parentStates, s)
		}
	})
	sc.Apply(localstack.AppOfAppsYAML(sc.NS, parent, sc.Git.URL(gitRepo), "apps"))

	created := time.Now()
	sc.G.Eventually(func(g Gomega) {
		p := sc.Get(g, argoAPI, "Application", parent)
		g.Expect(localstack.Field(p, "status", "sync", "status")).To(Equal("Synced"))
		g.Expect(localstack.Field(p, "status", "operationState", "phase")).To(Equal("Succeeded"), localstack.Field(p, "status", "operationState", "message"))
		c := sc.Get(g, argoAPI, "Application", child)
		g.Expect(c.GetLabels()).To(HaveKeyWithValue(stagecoachv1.StageLabel, child))
	}, localstack.WaitTimeout, time.Second/5).Should(Succeed(), "the parent did not create its labelled child")
	report("%-8s the parent created its labelled child from Git in %s", "app-of-apps", time.Since(created).Round(10*time.Millisecond))

	sc.Stage(child, "payments", "prod", stagecoachv1.ApplierReference{Kind: "Application", Name: child},
		stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: sc.Registry.Repository(repo), Semver: ">=1.0.0"}}, nil)
	sc.G.Eventually(func(g Gomega) {
		s := sc.GetStage(g, child)
		g.Expect(meta.IsStatusConditionTrue(s.Status.Conditions, stagecoachv1.ConditionReady)).To(BeTrue())
		g.Expect(meta.IsStatusConditionTrue(s.Status.Conditions, stagecoachv1.ConditionMediated)).To(BeTrue())
	}, localstack.WaitTimeout, time.Second/5).Should(Succeed())

	for _, tag := range []string{"v1.0.0", "v2.0.0", "v3.0.0"} {
		if !t.Run("promote "+tag, func(t *testing.T) {
			sc := sc.For(t)
			d := digests[tag]
			promoted := time.Now()
			sc.Promote(child, tag, d)
			tl := sc.WaitVerified(child, d, promoted)
			report("%-8s promote %s → Verified %s: %s", "app-of-apps", tag, tl.Verified.Sub(promoted).Round(10*time.Millisecond), tl)
			g := sc.G
			c := sc.Get(g, argoAPI, "Application", child)
			g.Expect(localstack.Field(c, "spec", "source", "targetRevision")).To(Equal(d))
			g.Expect(sc.ConfigMapData(g, target, "payments")).To(HaveKeyWithValue("version", tag))
			p := sc.Get(g, argoAPI, "Application", parent)
			g.Expect(localstack.Field(p, "status", "sync", "status")).To(Equal("Synced"))
			notFrozen(g, sc.GetStage(g, child))
		}) {
			return
		}
	}

	t.Run("the parent's self-heal leaves the digest, and the parent stayed Synced", func(t *testing.T) {
		g := NewWithT(t)
		// The stack refreshes every Application every 10 s: two rounds of the parent's self-heal.
		g.Consistently(func(g Gomega) {
			c := sc.Get(g, argoAPI, "Application", child)
			g.Expect(localstack.Field(c, "spec", "source", "targetRevision")).To(Equal(digests["v3.0.0"]))
			g.Expect(localstack.Field(sc.Get(g, argoAPI, "Application", parent), "status", "sync", "status")).To(Equal("Synced"))
			notFrozen(g, sc.GetStage(g, child))
		}, 25*time.Second, time.Second).Should(Succeed())
		mu.Lock()
		defer mu.Unlock()
		g.Expect(parentStates).NotTo(BeEmpty())
		first := strings.Index(strings.Join(parentStates, ","), "Synced")
		g.Expect(first).To(BeNumerically(">=", 0))
		g.Expect(strings.Join(parentStates, ",")[first:]).To(Equal("Synced"), "the parent left Synced: %v", parentStates)
	})
}

// environmentsAppSet is an ApplicationSet in Argo CD's namespace whose list generator makes one
// Application per environment (no waves), each labelled for its own Stage (<name>-<env>) and
// deploying repoURL at revision into that environment's namespace.
func environmentsAppSet(name, repoURL, revision string, targets map[string]string) *unstructured.Unstructured {
	var elements []any
	for _, e := range []string{"dev", "staging", "prod"} {
		elements = append(elements, map[string]any{"env": e, "namespace": targets[e]})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": argoAPI, "kind": "ApplicationSet",
		"metadata": map[string]any{"name": name, "namespace": localstack.ArgoCDNamespace},
		"spec": map[string]any{
			"goTemplate":        true,
			"goTemplateOptions": []any{"missingkey=error"},
			"generators":        []any{map[string]any{"list": map[string]any{"elements": elements}}},
			"template": map[string]any{
				"metadata": map[string]any{"name": name + "-{{.env}}", "labels": map[string]any{stagecoachv1.StageLabel: name + "-{{.env}}"}},
				"spec": map[string]any{
					"project":     "default",
					"source":      map[string]any{"repoURL": repoURL, "path": ".", "targetRevision": revision},
					"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "{{.namespace}}"},
					"syncPolicy":  map[string]any{"automated": map[string]any{"prune": true, "selfHeal": true}},
				},
			},
		},
	}}
}

// TestApplicationSetPerEnvironmentArgoCD: an ApplicationSet (list generator) makes dev, staging
// and prod Applications, each the applier of its own Stage. Without ignoreApplicationDifferences
// the applicationset-controller would write its template's targetRevision back over each
// promotion: every Stage says so (Mediated=False, naming the ApplicationSet and the entry to add)
// before anything is promoted. With the entry, the three Stages promote and the
// applicationset-controller leaves the digests alone.
func TestApplicationSetPerEnvironmentArgoCD(t *testing.T) {
	sc := env.Scenario(t)
	ctx := sc.Ctx()
	_, err := env.StartApplicationSetController(ctx, localstack.AppSetOptions{})
	sc.G.Expect(err).NotTo(HaveOccurred())
	argo := sc.InNamespace(localstack.ArgoCDNamespace) // the ApplicationSet's namespace: its Applications and Stages live there
	name := "envs-" + sc.NS[strings.LastIndex(sc.NS, "-")+1:]
	envs := []string{"dev", "staging", "prod"}

	repo := sc.NS + "/envs"
	v1 := sc.Push(repo, "v1.0.0", map[string]string{"configmap.yaml": localstack.ConfigMap("envs", "v1.0.0")})
	v2 := sc.Push(repo, "v2.0.0", map[string]string{"configmap.yaml": localstack.ConfigMap("envs", "v2.0.0")})
	sc.G.Expect(sc.ArgoCDOCIRepository(ctx, repo)).To(Succeed())
	targets := map[string]string{}
	for _, e := range envs {
		targets[e] = sc.TargetNamespace(e)
	}
	set := environmentsAppSet(name, sc.Registry.OCIURL(repo), v1, targets)
	sc.G.Expect(localstack.Apply(ctx, sc.Client, set.DeepCopy())).To(Succeed())
	sc.DeleteOnCleanup(set)
	sc.G.Eventually(func(g Gomega) {
		for _, e := range envs {
			u := argo.Get(g, argoAPI, "Application", name+"-"+e)
			g.Expect(localstack.Field(u, "status", "sync", "status")).To(Equal("Synced"), "Application %s", u.GetName())
			g.Expect(localstack.Field(u, "status", "health", "status")).To(Equal("Healthy"), "Application %s", u.GetName())
		}
	}, localstack.WaitTimeout, time.Second/5).Should(Succeed())

	for _, e := range envs {
		stage := name + "-" + e
		argo.Stage(stage, "envs", e, stagecoachv1.ApplierReference{Kind: "Application", Name: stage},
			stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: sc.Registry.Repository(repo), Semver: ">=1.0.0"}}, nil)
		sc.DeleteOnCleanup(&stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: localstack.ArgoCDNamespace, Name: stage}})
	}

	if !t.Run("without ignoreApplicationDifferences every Stage says the ApplicationSet would revert it", func(t *testing.T) {
		g := NewWithT(t)
		for _, e := range envs {
			stage := name + "-" + e
			g.Eventually(func(g Gomega) {
				s := argo.GetStage(g, stage)
				m := meta.FindStatusCondition(s.Status.Conditions, stagecoachv1.ConditionMediated)
				g.Expect(m).NotTo(BeNil())
				g.Expect(m.Status).To(Equal(metav1.ConditionFalse), m.Message)
				g.Expect(m.Reason).To(Equal(stagecoachv1.ReasonApplierRevertedByApplicationSet), m.Message)
				g.Expect(m.Message).To(ContainSubstring(fmt.Sprintf("Application '%s/%s' is generated by ApplicationSet '%s/%s'",
					localstack.ArgoCDNamespace, stage, localstack.ArgoCDNamespace, name)))
				g.Expect(m.Message).To(ContainSubstring("add to the ApplicationSet's spec.ignoreApplicationDifferences the entry {jsonPointers: [/spec/source/targetRevision]}"))
				g.Expect(meta.IsStatusConditionTrue(s.Status.Conditions, stagecoachv1.ConditionReady)).To(BeTrue(), "a person may still promote")
			}, localstack.WaitTimeout, time.Second/5).Should(Succeed())
		}
	}) {
		return
	}

	t.Run("with ignoreApplicationDifferences the three Stages promote and stay promoted", func(t *testing.T) {
		sc := sc.For(t)
		g := sc.G
		fixed := set.DeepCopy()
		g.Expect(unstructured.SetNestedSlice(fixed.Object, []any{map[string]any{"jsonPointers": []any{"/spec/source/targetRevision"}}},
			"spec", "ignoreApplicationDifferences")).To(Succeed())
		g.Expect(unstructured.SetNestedStringSlice(fixed.Object, []string{stagecoachv1.VersionAnnotation, stagecoachv1.PromotionAnnotation, stagecoachv1.PhaseAnnotation},
			"spec", "preservedFields", "annotations")).To(Succeed())
		fixedAt := time.Now()
		g.Expect(localstack.Apply(ctx, sc.Client, fixed)).To(Succeed())
		// Each Stage looks again when Argo CD next writes its Application's status (every 10 s here).
		g.Eventually(func(g Gomega) {
			for _, e := range envs {
				s := argo.GetStage(g, name+"-"+e)
				g.Expect(meta.IsStatusConditionTrue(s.Status.Conditions, stagecoachv1.ConditionMediated)).To(BeTrue(), "Stage %s", s.Name)
			}
		}, localstack.WaitTimeout, time.Second/5).Should(Succeed())
		report("%-8s 3 Stages Mediated=True %s after ignoreApplicationDifferences was added", "appset", time.Since(fixedAt).Round(10*time.Millisecond))

		for _, e := range envs {
			stage := name + "-" + e
			promoted := time.Now()
			argo.For(t).Promote(stage, "v2.0.0", v2)
			tl := argo.For(t).WaitVerified(stage, v2, promoted)
			report("%-8s promote v2.0.0 → Verified %s: %s", "appset", tl.Verified.Sub(promoted).Round(10*time.Millisecond), tl)
			g.Expect(sc.ConfigMapData(g, targets[e], "envs")).To(HaveKeyWithValue("version", "v2.0.0"))
		}
		// The applicationset-controller reconciles on every change of its Applications: it has had
		// its chances to revert; the digests stay and no Stage froze.
		g.Consistently(func(g Gomega) {
			for _, e := range envs {
				u := argo.Get(g, argoAPI, "Application", name+"-"+e)
				g.Expect(localstack.Field(u, "spec", "source", "targetRevision")).To(Equal(v2), "Application %s", u.GetName())
				g.Expect(u.GetAnnotations()).To(HaveKeyWithValue(stagecoachv1.PromotionAnnotation, Not(BeEmpty())), "Application %s", u.GetName())
				notFrozen(g, argo.GetStage(g, name+"-"+e))
			}
		}, 15*time.Second, time.Second).Should(Succeed())
	})
}
