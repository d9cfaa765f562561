package e2e

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
)

// A Job run gates a promotion end to end: after each version lands on a Deployment, the Stage's
// verification check creates a Job of the version's tests; kube-controller-manager's Job controller
// creates its Pod and, once the Pod has ended (the stand-in kubelet exits it with the code the
// rendered template asks for), writes the Job's conditions, which decide the check. v1's tests pass
// and v1 verifies; v2's fail, so v2 is rolled back to v1, whose tests run again.
func TestJobRunGatesThePromotion(t *testing.T) {
	sc := env.Scenario(t)
	sc.RunPods()
	repo := sc.NS + "/web"
	v1 := sc.Push(repo, "v1.0.0", map[string]string{"configmap.yaml": localstack.ConfigMap("web", "v1.0.0")})
	v2 := sc.Push(repo, "v2.0.0", map[string]string{"configmap.yaml": localstack.ConfigMap("web", "v2.0.0")})

	grantDeployments(sc)
	sc.Apply(localstack.JobGrantYAML(sc.NS))
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

	// The tests of v2.0.0 exit 1.
	tests := runtime.RawExtension{Raw: fmt.Appendf(nil, `{"apiVersion":"batch/v1","kind":"Job",
		"spec":{"backoffLimit":0,"template":{
			"metadata":{"annotations":{%q:"{{if eq .Version \"v2.0.0\"}}1{{else}}0{{end}}"}},
			"spec":{"restartPolicy":"Never","containers":[{"name":"tests","image":"%s@{{.Digest}}","args":["--stage={{.Stage}}","--version={{.Version}}"]}]}}}}`,
		localstack.ExitCodeAnnotation, sc.Registry.Repository(repo))}
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
			s.Spec.Verification.Checks = []stagecoachv1.Check{{Name: "integration", Run: &stagecoachv1.RunCheck{Template: tests}}}
		})
	sc.G.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(sc.GetStage(g, "web").Status.Conditions, stagecoachv1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "Stage web Ready: %s: %s", c.Reason, c.Message)
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())

	jobsOf := func(g Gomega) []batchv1.Job {
		var jobs batchv1.JobList
		g.Expect(sc.Client.List(sc.Ctx(), &jobs, client.InNamespace(sc.NS), client.MatchingLabels{stagecoachv1.RunCheckLabel: "integration"})).To(Succeed())
		return jobs.Items
	}
	// finished is the Job's terminal condition as the Job controller wrote it.
	finished := func(job *batchv1.Job) *batchv1.JobCondition {
		for i, c := range job.Status.Conditions {
			if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
				return &job.Status.Conditions[i]
			}
		}
		return nil
	}

	t.Run("the tests pass and the version verifies", func(t *testing.T) {
		sc := sc.For(t)
		created := time.Now()
		p := sc.Promote("web", "v1.0.0", v1)
		tl := sc.WaitVerified("web", v1, created)
		got := &stagecoachv1.Promotion{}
		sc.G.Expect(sc.Client.Get(sc.Ctx(), client.ObjectKeyFromObject(p), got)).To(Succeed())
		jobs := jobsOf(sc.G)
		sc.G.Expect(jobs).To(HaveLen(1))
		job := &jobs[0]
		sc.G.Expect(job.Spec.Template.Spec.Containers[0].Args).To(Equal([]string{"--stage=web", "--version=v1.0.0"}))
		sc.G.Expect(job.OwnerReferences).To(ConsistOf(HaveField("UID", got.UID)))
		sc.G.Expect(finished(job)).To(HaveField("Type", batchv1.JobComplete))
		// The Job controller, not the test, counted the Pod it made.
		sc.G.Expect(job.Status.Succeeded).To(Equal(int32(1)))
		sc.G.Expect(got.Status.Gates).To(ContainElement(And(HaveField("Gate", "check/integration"), HaveField("Passed", true),
			HaveField("Message", ContainSubstring("Job "+sc.NS+"/"+job.Name)))))
		report("%-8s Job run after landing (kube-controller-manager's Job controller) %s", "run", tl)
	})

	t.Run("the tests fail and the version is rolled back", func(t *testing.T) {
		sc := sc.For(t)
		p := sc.Promote("web", "v2.0.0", v2)
		got := &stagecoachv1.Promotion{}
		var landed, failed time.Time
		sc.G.Eventually(func(g Gomega) {
			g.Expect(sc.Client.Get(sc.Ctx(), client.ObjectKeyFromObject(p), got)).To(Succeed())
			if landed.IsZero() && got.Status.LandedAt != nil {
				landed = time.Now()
			}
			g.Expect(got.Status.Phase).To(BeElementOf(stagecoachv1.PhaseFailed, stagecoachv1.PhaseRolledBack), "Promotion %s: %s", got.Name, got.Status.Message)
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
		failed = time.Now()
		sc.G.Expect(got.Status.LandedAt).NotTo(BeNil(), "v2 failed before it landed: %s", got.Status.Message)
		sc.G.Expect(got.Status.Message).To(ContainSubstring(`check "integration" failed`))
		sc.G.Expect(got.Status.Gates).To(ContainElement(And(HaveField("Gate", "check/integration"), HaveField("Passed", false),
			HaveField("Message", ContainSubstring(`status.conditions.#(type=="Failed").status is "True"`)))))

		// The rollback applies v1 again, its tests run again and pass, and v2's Promotion says so.
		sc.G.Eventually(func(g Gomega) {
			g.Expect(sc.Client.Get(sc.Ctx(), client.ObjectKeyFromObject(p), got)).To(Succeed())
			g.Expect(got.Status.Phase).To(Equal(stagecoachv1.PhaseRolledBack), "Promotion %s: %s", got.Name, got.Status.Message)
			s := sc.GetStage(g, "web")
			g.Expect(s.Status.Current).NotTo(BeNil())
			g.Expect(s.Status.Current.Digest).To(Equal(v1))
			g.Expect(containerImage(sc.Get(g, "apps/v1", "Deployment", "web"))).To(Equal(sc.Registry.Repository(repo) + "@" + v1))
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
		verdicts := map[string]int{}
		for _, job := range jobsOf(sc.G) {
			c := finished(&job)
			sc.G.Expect(c).NotTo(BeNil(), "Job %s has not finished", job.Name)
			verdicts[string(c.Type)+" "+job.Spec.Template.Spec.Containers[0].Args[1]]++
		}
		sc.G.Expect(verdicts).To(Equal(map[string]int{"Complete --version=v1.0.0": 2, "Failed --version=v2.0.0": 1}))
		if !landed.IsZero() {
			report("%-8s Job run that fails: landed→failed %s, rolled back to v1", "run", failed.Sub(landed).Round(10*time.Millisecond))
		}
	})
}
