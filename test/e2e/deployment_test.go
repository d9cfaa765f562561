package e2e

import (
	"fmt"
	"strings"
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

// progressingReason is where Kubernetes' deployment controller says how a rollout went: with the
// status of the generation it wrote (status.observedGeneration), NewReplicaSetAvailable once the
// new ReplicaSet has all its replicas (at once for replicas: 0), ProgressDeadlineExceeded when
// spec.progressDeadlineSeconds passed first.
const progressingReason = `status.conditions.#(type=="Progressing").reason`

// A Deployment is promoted through spec.applyRef.set on its image, against the real deployment
// controller of kube-controller-manager (replicas 0: no kubelet needed): the version lands and
// verifies by completion rules on the status that controller writes. A rule that can never hold
// fails the next version at the progress deadline, and the previous version is applied again.
func TestDeploymentApplierWithCompletionRules(t *testing.T) {
	sc := env.Scenario(t)
	repo := sc.NS + "/web"
	v1 := sc.Push(repo, "v1.0.0", map[string]string{"configmap.yaml": localstack.ConfigMap("web", "v1.0.0")})
	v2 := sc.Push(repo, "v2.0.0", map[string]string{"configmap.yaml": localstack.ConfigMap("web", "v2.0.0")})
	image := func(digest string) string { return sc.Registry.Repository(repo) + "@" + digest }

	// The install's RBAC lets the controller patch only the built-in kinds: an operator grants it the
	// kind a Stage applies (read everywhere for the watch that wakes it; patch here only).
	grantDeployments(sc)
	sc.Apply(fmt.Sprintf(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {stagecoach.dev/stage: web}}
spec:
  replicas: 0
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: %s}]
`, sc.Registry.Repository(repo)+":initial"))

	const deadline = 15 * time.Second
	sc.Stage("web", "web", "dev",
		stagecoachv1.ApplierReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web",
			Set: []stagecoachv1.FieldSetting{{Path: "/spec/template/spec/containers/0/image", Value: "{{ .Image }}"}}},
		stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: sc.Registry.Repository(repo), Semver: ">=1.0.0"}},
		func(s *stagecoachv1.Stage) {
			s.Spec.Author = localstack.AdminAuthor()
			s.Spec.Completion = &stagecoachv1.CompletionRules{ObservedCompletion: &stagecoachv1.ObservedCompletion{
				Succeeded: &stagecoachv1.FieldMatch{Key: progressingReason, Value: "NewReplicaSetAvailable"},
				Failed:    &stagecoachv1.FieldMatch{Key: progressingReason, Value: "ProgressDeadlineExceeded"},
			}}
			s.Spec.Verification.ProgressDeadline = &metav1.Duration{Duration: deadline}
		})
	sc.G.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(sc.GetStage(g, "web").Status.Conditions, stagecoachv1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "Stage web Ready: %s: %s", c.Reason, c.Message)
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())

	t.Run("lands and verifies", func(t *testing.T) {
		sc := sc.For(t)
		created := time.Now()
		sc.Promote("web", "v1.0.0", v1)
		tl := sc.WaitVerified("web", v1, created)
		// What the deployment controller wrote, and that Stagecoach owns exactly the image field.
		// Eventually: the API server bumps a Deployment's generation on an annotation change too,
		// and Stagecoach annotates the verified phase, so the controller observes once more.
		var d *unstructured.Unstructured
		sc.G.Eventually(func(g Gomega) {
			d = sc.Get(g, "apps/v1", "Deployment", "web")
			observed, _, _ := unstructured.NestedInt64(d.Object, "status", "observedGeneration")
			g.Expect(observed).To(Equal(d.GetGeneration()))
			g.Expect(condition(d, "Progressing")).To(HaveKeyWithValue("reason", "NewReplicaSetAvailable"))
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
		sc.G.Expect(containerImage(d)).To(Equal(image(v1)))
		sc.G.Expect(managerOwnsImage(d, "stagecoach")).To(BeTrue(), "field manager stagecoach does not own the container image: %v", d.GetManagedFields())
		report("%-8s Deployment (kube-controller-manager) %s", "generic", tl)
	})

	t.Run("a rule that never holds fails at the deadline and rolls back", func(t *testing.T) {
		sc := sc.For(t)
		setSucceeded := func(value string) { setWebSucceeded(sc, value) }
		setSucceeded("NeverWrittenByKubernetes")
		p := sc.Promote("web", "v2.0.0", v2)
		var applied, failed time.Time
		var sawRolloutDone bool
		got := &stagecoachv1.Promotion{}
		sc.G.Eventually(func(g Gomega) {
			g.Expect(sc.Client.Get(sc.Ctx(), client.ObjectKeyFromObject(p), got)).To(Succeed())
			if applied.IsZero() && got.Status.AppliedAt != nil {
				applied = time.Now()
			}
			if got.Status.Phase == stagecoachv1.PhaseRunning {
				// The real controller finishes the rollout of v2: only the rule keeps it from landing.
				d := sc.Get(g, "apps/v1", "Deployment", "web")
				observed, _, _ := unstructured.NestedInt64(d.Object, "status", "observedGeneration")
				if containerImage(d) == image(v2) && observed == d.GetGeneration() && condition(d, "Progressing")["reason"] == "NewReplicaSetAvailable" {
					sawRolloutDone = true
				}
			}
			g.Expect(got.Status.Phase).To(Equal(stagecoachv1.PhaseFailed), "Promotion %s: %s", got.Name, got.Status.Message)
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
		failed = time.Now()
		sc.G.Expect(applied).NotTo(BeZero(), "the Promotion of v2 was never seen applied")
		sc.G.Expect(sawRolloutDone).To(BeTrue(), "the deployment controller never finished the rollout of v2")
		// The deadline counts from the Promotion's own appliedAt; its timestamps are whole seconds, so
		// compare them rather than the times this poll saw (which lag by up to a poll and a second).
		sc.G.Expect(got.Status.AppliedAt).NotTo(BeNil())
		sc.G.Expect(got.Status.FinishedAt).NotTo(BeNil())
		sc.G.Expect(got.Status.FinishedAt.Sub(got.Status.AppliedAt.Time)).To(BeNumerically(">=", deadline),
			"Promotion %s failed before its progress deadline: applied %s, finished %s", got.Name, got.Status.AppliedAt, got.Status.FinishedAt)
		sc.G.Expect(got.Status.Message).To(ContainSubstring("rolling back to v1.0.0"))

		// The automatic Rollback applies v1 again at once.
		sc.G.Eventually(func(g Gomega) {
			g.Expect(containerImage(sc.Get(g, "apps/v1", "Deployment", "web"))).To(Equal(image(v1)), "the Deployment is not back on v1")
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
		// The person who acts fixes the rule: the Rollback lands by it, and v2's Promotion says it was rolled back.
		setSucceeded("NewReplicaSetAvailable")
		sc.G.Eventually(func(g Gomega) {
			g.Expect(sc.Client.Get(sc.Ctx(), client.ObjectKeyFromObject(p), got)).To(Succeed())
			g.Expect(got.Status.Phase).To(Equal(stagecoachv1.PhaseRolledBack), "Promotion %s: %s", got.Name, got.Status.Message)
			s := sc.GetStage(g, "web")
			g.Expect(s.Status.Current).NotTo(BeNil())
			g.Expect(s.Status.Current.Digest).To(Equal(v1))
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
		report("%-8s Deployment rule that never holds: applied→failed %s (deadline %s), rolled back to v1", "generic",
			failed.Sub(applied).Round(10*time.Millisecond), deadline)
	})

	// Issue 53: a release that never lands is rolled back by a person in one command, at once:
	// the Rollback preempts the running promote, long before its progress deadline.
	t.Run("a person's Rollback preempts a release that never lands", func(t *testing.T) {
		sc := sc.For(t)
		setSucceeded := func(value string) { setWebSucceeded(sc, value) }
		setSucceeded("NeverWrittenByKubernetes")
		v3 := sc.Push(repo, "v3.0.0", map[string]string{"configmap.yaml": localstack.ConfigMap("web", "v3.0.0")})
		p := sc.Promote("web", "v3.0.0", v3)
		got := &stagecoachv1.Promotion{}
		sc.G.Eventually(func(g Gomega) {
			g.Expect(sc.Client.Get(sc.Ctx(), client.ObjectKeyFromObject(p), got)).To(Succeed())
			g.Expect(got.Status.AppliedAt).NotTo(BeNil())
			g.Expect(containerImage(sc.Get(g, "apps/v1", "Deployment", "web"))).To(Equal(image(v3)))
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())

		requested := time.Now()
		rollback := &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: sc.NS, GenerateName: "web-rollback-"},
			Spec: stagecoachv1.PromotionSpec{Stage: "web", Action: stagecoachv1.ActionRollback, RequestedBy: localstack.AdminUser, Reason: "v3 never becomes available"}}
		sc.G.Expect(sc.Client.Create(sc.Ctx(), rollback)).To(Succeed())
		var written, rolledOut time.Time
		sc.G.Eventually(func(g Gomega) {
			d := sc.Get(g, "apps/v1", "Deployment", "web")
			if written.IsZero() && containerImage(d) == image(v1) {
				written = time.Now()
			}
			g.Expect(written).NotTo(BeZero(), "the Deployment is not back on v1")
			observed, _, _ := unstructured.NestedInt64(d.Object, "status", "observedGeneration")
			g.Expect(observed).To(Equal(d.GetGeneration()))
			g.Expect(condition(d, "Progressing")).To(HaveKeyWithValue("reason", "NewReplicaSetAvailable"))
			rolledOut = time.Now()
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
		sc.G.Expect(sc.Client.Get(sc.Ctx(), client.ObjectKeyFromObject(p), got)).To(Succeed())
		sc.G.Expect(got.Status.Phase).To(Equal(stagecoachv1.PhaseAborted), "Promotion %s: %s", got.Name, got.Status.Message)
		sc.G.Expect(got.Status.Message).To(ContainSubstring("preempted by Rollback " + rollback.Name))
		sc.G.Expect(got.Status.VerifiedAt).To(BeNil())
		sc.G.Expect(got.Status.FinishedAt.Sub(got.Status.AppliedAt.Time)).To(BeNumerically("<", deadline), "preempted before the deadline")

		setSucceeded("NewReplicaSetAvailable")
		sc.G.Eventually(func(g Gomega) {
			rb := &stagecoachv1.Promotion{}
			g.Expect(sc.Client.Get(sc.Ctx(), client.ObjectKeyFromObject(rollback), rb)).To(Succeed())
			g.Expect(rb.Status.Phase).To(Equal(stagecoachv1.PhaseSucceeded), "Rollback %s: %s", rb.Name, rb.Status.Message)
			g.Expect(sc.GetStage(g, "web").Status.Current.Digest).To(Equal(v1))
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
		report("%-8s a person's Rollback of a release that never lands: requested→written %s, the deployment controller's own rollout of it %s (deadline %s)",
			"preempt", written.Sub(requested).Round(10*time.Millisecond), rolledOut.Sub(written).Round(10*time.Millisecond), deadline)
	})
}

// setWebSucceeded sets the progressing reason that means Stage web's Deployment succeeded (a value
// Kubernetes never writes keeps every version from landing).
func setWebSucceeded(sc *localstack.Scenario, value string) {
	sc.G.Eventually(func(g Gomega) {
		stage := sc.GetStage(g, "web")
		stage.Spec.Completion.ObservedCompletion.Succeeded = &stagecoachv1.FieldMatch{Key: progressingReason, Value: value}
		g.Expect(sc.Client.Update(sc.Ctx(), stage)).To(Succeed())
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
}

// grantDeployments gives Stagecoach's controller what an operator would for a Deployment applier:
// read Deployments (its watch is cluster-wide) and patch them in the scenario's namespace only.
func grantDeployments(sc *localstack.Scenario) {
	sc.T.Helper()
	sc.Apply(fmt.Sprintf(deploymentGrantYAML, sc.NS))
}

func containerImage(d *unstructured.Unstructured) string {
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(containers) == 0 {
		return ""
	}
	image, _ := containers[0].(map[string]any)["image"].(string)
	return image
}

// condition is the status condition of type t (nil when absent).
func condition(u *unstructured.Unstructured, t string) map[string]any {
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conditions {
		if m, _ := c.(map[string]any); m["type"] == t {
			return m
		}
	}
	return nil
}

// managerOwnsImage reports whether manager's server-side apply owns the first container's image.
func managerOwnsImage(d *unstructured.Unstructured, manager string) bool {
	for _, mf := range d.GetManagedFields() {
		if mf.Manager != manager || mf.Operation != metav1.ManagedFieldsOperationApply || mf.FieldsV1 == nil {
			continue
		}
		raw := string(mf.FieldsV1.Raw)
		return containsAll(raw, `"f:containers"`, `"f:image"`)
	}
	return false
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
