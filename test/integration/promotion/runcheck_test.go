package promotion

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/runcheck"
)

// testJob is a run template: a Job running the version's tests, the digest in its image and the
// tag in its arguments (a template's strings are rendered for the version).
func testJob(extra string) runtime.RawExtension {
	return runtime.RawExtension{Raw: fmt.Appendf(nil, `{"apiVersion":"batch/v1","kind":"Job",
		"metadata":{"labels":{"team":"payments"}},
		"spec":{"backoffLimit":0,"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"tests",
			"image":"registry.example/payments-tests@{{.Digest}}","args":["--version={{.Version}}","--stage={{.Stage}}"%s]}]}}}}`, extra)}
}

// playJobController completes the Jobs of ns as kube-controller-manager's Job controller reports
// them (no kubelet runs here): a Job whose arguments hold --fail fails, one holding --hang never
// finishes, every other succeeds. It stops with the test.
func playJobController(t *testing.T, ns string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var jobs batchv1.JobList
			if err := env.Client.List(ctx, &jobs, client.InNamespace(ns)); err == nil {
				for i := range jobs.Items {
					finishJob(ctx, &jobs.Items[i])
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
}

// finishJob writes a Job's status the way the Job controller does when its one pod ends: the
// start time, the pod counted, then the terminal condition after its criteria condition.
func finishJob(ctx context.Context, job *batchv1.Job) {
	if len(job.Status.Conditions) > 0 || len(job.Spec.Template.Spec.Containers) == 0 {
		return
	}
	args := strings.Join(job.Spec.Template.Spec.Containers[0].Args, " ")
	if strings.Contains(args, "--hang") {
		return
	}
	_ = writeJobStatus(ctx, job, strings.Contains(args, "--fail"))
}

// writeJobStatus ends a Job's one pod, failed or succeeded, in its status.
func writeJobStatus(ctx context.Context, job *batchv1.Job, fail bool) error {
	start := job.CreationTimestamp
	job.Status.StartTime = &start
	job.Status.Active, job.Status.Ready, job.Status.Terminating = 0, new(int32(0)), new(int32(0))
	now := metav1.Now()
	condition := func(t batchv1.JobConditionType, reason string) batchv1.JobCondition {
		return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, LastProbeTime: now, LastTransitionTime: now}
	}
	if fail {
		job.Status.Failed = 1
		job.Status.Conditions = []batchv1.JobCondition{condition(batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded),
			condition(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded)}
	} else {
		job.Status.Succeeded = 1
		job.Status.CompletionTime = &now
		job.Status.Conditions = []batchv1.JobCondition{condition(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached),
			condition(batchv1.JobComplete, batchv1.JobReasonCompletionsReached)}
	}
	return env.Client.Status().Update(ctx, job)
}

func jobsOf(g Gomega, ctx context.Context, ns, check string) []batchv1.Job {
	var jobs batchv1.JobList
	g.Expect(env.Client.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{stagecoachv1.RunCheckLabel: check})).To(Succeed())
	return jobs.Items
}

// A Job run after landing decides the promote: created for the version (rendered), owned by the
// Promotion, labelled, judged by the Job's own conditions; a failed one rolls the version back;
// only the newest runs are kept.
func TestRunCheckAfterLanding(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	app := newApplication(t, ns, "web", ociSpec(ns))
	newStage(t, ns, "web", func(s *stagecoachv1.Stage) {
		s.Spec.Author = author.DeepCopy()
		s.Spec.Verification.Checks = []stagecoachv1.Check{{Name: "integration", Run: &stagecoachv1.RunCheck{
			Template: testJob(`,"{{if eq .Version \"v3.0.0\"}}--fail{{end}}"`), Keep: 2}}}
	})
	playJobController(t, ns)
	startController(t, nil)

	promoteAndLand(t, ns, "web", app, "web-v1", 1)
	v1 := getPromotion(g, t.Context(), ns, "web-v1")
	jobs := jobsOf(g, t.Context(), ns, "integration")
	g.Expect(jobs).To(HaveLen(1))
	job := jobs[0]
	g.Expect(job.Name).To(HavePrefix("web-integration-"))
	g.Expect(job.Spec.Template.Spec.Containers[0].Image).To(Equal("registry.example/payments-tests@" + digest(1)))
	g.Expect(job.Spec.Template.Spec.Containers[0].Args).To(Equal([]string{"--version=v1.0.0", "--stage=web", ""}))
	g.Expect(job.Labels).To(Equal(map[string]string{"team": "payments", stagecoachv1.PromotionStageLabel: "web",
		stagecoachv1.RunCheckLabel: "integration", stagecoachv1.RunPhaseLabel: "post-apply", stagecoachv1.RunPromotionLabel: string(v1.UID)}))
	g.Expect(job.OwnerReferences).To(ConsistOf(And(HaveField("Kind", "Promotion"), HaveField("Name", "web-v1"), HaveField("UID", v1.UID))))
	g.Expect(job.Annotations).To(HaveKeyWithValue(runcheck.VerdictAnnotation, "passed"))
	// The gate names the run and the rule that decided.
	g.Expect(v1.Status.Gates).To(ContainElement(And(HaveField("Gate", "check/integration"), HaveField("Passed", true),
		HaveField("Message", And(ContainSubstring("Job "+ns+"/"+job.Name), ContainSubstring(`status.conditions.#(type=="Complete").status is "True"`))))))

	// v3's run fails: the promote fails, and the rollback to v1 runs the check again (and passes).
	newPromotion(t, ns, "web-v3", "web", stagecoachv1.ActionPromote, digest(3), "v3.0.0")
	app.deploy(digest(3), false, "Succeeded", "Healthy")
	app.waitForRevision(digest(1), false)
	app.deploy(digest(1), false, "Succeeded", "Healthy")
	failed := eventuallyPhase(t, ns, "web-v3", stagecoachv1.PhaseRolledBack)
	g.Expect(failed.Status.Message).To(ContainSubstring(`landed, but check "integration" failed`))
	g.Expect(failed.Status.Gates).To(ContainElement(And(HaveField("Gate", "check/integration"), HaveField("Passed", false),
		HaveField("Message", ContainSubstring(`status.conditions.#(type=="Failed").status is "True"`)))))
	g.Expect(app.desiredRevision(app.get())).To(Equal(digest(1)))

	// Three runs were made (v1, v3, the rollback's); keep 2 leaves the newest two, v1's deleted.
	g.Eventually(func(g Gomega) {
		var names []string
		for _, j := range jobsOf(g, t.Context(), ns, "integration") {
			if j.DeletionTimestamp == nil {
				names = append(names, j.Name)
			}
		}
		g.Expect(names).To(HaveLen(2))
		g.Expect(names).NotTo(ContainElement(job.Name))
	}, timeout, interval).Should(Succeed())
}

// A run before apply that cannot be made, or does not finish in time, keeps the version from being
// applied, with a reason naming the object and the fix; nothing is created for someone who may not.
func TestRunCheckRefusals(t *testing.T) {
	startController(t, nil)
	tina := &stagecoachv1.StageAuthor{User: "tina"}
	for _, tc := range []struct {
		name        string
		author      *stagecoachv1.StageAuthor
		grantJobs   bool // RBAC lets tina create Jobs in the namespace
		template    runtime.RawExtension
		timeout     time.Duration
		wantMessage string
		wantJobs    int
	}{
		{name: "an author who may not create Jobs", author: tina, template: testJob(""),
			wantMessage: "the Stage's author tina may not create jobs.batch in namespace %s, so the controller creates no run for them: grant tina create on jobs.batch there"},
		{name: "no author", template: testJob(""),
			wantMessage: "Stage 'web' names no spec.author, and the controller creates a run (jobs.batch) only as whoever wrote the Stage's checks"},
		{name: "a template that does not render", author: author, template: testJob(`,"{{.Versoin}}"`),
			wantMessage: `its run template does not render: spec.template.spec.containers[0].args[2]: template: spec.template.spec.containers[0].args[2]:1:2: executing "spec.template.spec.containers[0].args[2]" at <.Versoin>: can't evaluate field Versoin`},
		{name: "a kind the cluster does not serve", author: author,
			template:    runtime.RawExtension{Raw: []byte(`{"apiVersion":"example.dev/v1","kind":"Gadget","spec":{}}`)},
			wantMessage: "the cluster serves no Gadget of apiVersion example.dev/v1: install its CRD"},
		{name: "a kind without default rules", author: author,
			template:    runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","data":{"v":"{{.Version}}"}}`)},
			wantMessage: "ConfigMap has no default completion rules (only batch Jobs and Tekton PipelineRuns and TaskRuns do): set the check's run.completion"},
		{name: "a run that does not finish in time", author: tina, grantJobs: true, template: testJob(`,"--hang"`), timeout: 3 * time.Second,
			wantMessage: "did not complete within 3s", wantJobs: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			if tc.grantJobs {
				grantJobs(t, ns, "tina")
			}
			playJobController(t, ns)
			app := newApplication(t, ns, "web", ociSpec(ns))
			newStage(t, ns, "web", func(s *stagecoachv1.Stage) {
				s.Spec.Author = tc.author.DeepCopy()
				c := stagecoachv1.Check{Name: "integration", Run: &stagecoachv1.RunCheck{Template: tc.template}}
				if tc.timeout > 0 {
					c.Timeout = &metav1.Duration{Duration: tc.timeout}
				}
				s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Checks: []stagecoachv1.Check{c}}
			})
			newPromotion(t, ns, "web-v1", "web", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
			failed := eventuallyPhase(t, ns, "web-v1", stagecoachv1.PhaseFailed)
			want := tc.wantMessage
			if strings.Contains(want, "%s") {
				want = fmt.Sprintf(want, ns)
			}
			g.Expect(failed.Status.Message).To(And(HavePrefix("not applied: "), ContainSubstring(`check "integration" failed`), ContainSubstring(want)))
			g.Expect(failed.Status.AppliedAt).To(BeNil())
			g.Expect(app.desiredRevision(app.get())).NotTo(Equal(digest(1)))
			g.Expect(jobsOf(g, t.Context(), ns, "integration")).To(HaveLen(tc.wantJobs))
		})
	}
}

// A run that passes before apply lets the version through; its author needs only create on the
// kind (RBAC asked as a SubjectAccessReview), not the controller's rights.
func TestRunCheckBeforeApplyAsAnAuthorWhoMay(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	grantJobs(t, ns, "tina")
	playJobController(t, ns)
	app := newApplication(t, ns, "web", ociSpec(ns))
	newStage(t, ns, "web", func(s *stagecoachv1.Stage) {
		s.Spec.Author = &stagecoachv1.StageAuthor{User: "tina"}
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Checks: []stagecoachv1.Check{{Name: "migrate-dry-run",
			Run: &stagecoachv1.RunCheck{Template: testJob("")}}}}
	})
	startController(t, nil)
	promoteAndLand(t, ns, "web", app, "web-v1", 1)
	p := getPromotion(g, t.Context(), ns, "web-v1")
	g.Expect(p.Status.Gates).To(ContainElement(And(HaveField("Gate", "check/migrate-dry-run"), HaveField("Passed", true))))
	jobs := jobsOf(g, t.Context(), ns, "migrate-dry-run")
	g.Expect(jobs).To(HaveLen(1))
	g.Expect(jobs[0].Labels).To(HaveKeyWithValue(stagecoachv1.RunPhaseLabel, "pre-apply"))
	// The check's timeout (10m by default) bounds the Job: the Job controller stops a run the
	// check stopped reading.
	g.Expect(jobs[0].Spec.ActiveDeadlineSeconds).To(HaveValue(Equal(int64(600))))
}

// A Job that looks like the check's run (its labels, owned by the Promotion, finished) never
// decides it: here the run the controller made before it restarted is completed by someone who may
// write Jobs' status. The restarted controller marks it abandoned, makes its own run, and that
// run's failure is the verdict.
func TestRunCheckLookAlikeNeverDecides(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	app := newApplication(t, ns, "web", ociSpec(ns))
	newStage(t, ns, "web", func(s *stagecoachv1.Stage) {
		s.Spec.Author = author.DeepCopy()
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Checks: []stagecoachv1.Check{{Name: "integration",
			Run: &stagecoachv1.RunCheck{Template: testJob(`,"--fail"`)}}}}
	})
	first := startController(t, nil)
	newPromotion(t, ns, "web-v1", "web", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
	var planted batchv1.Job
	g.Eventually(func(g Gomega) {
		jobs := jobsOf(g, t.Context(), ns, "integration")
		g.Expect(jobs).To(HaveLen(1))
		planted = jobs[0]
	}, timeout, interval).Should(Succeed())
	first.stop()
	g.Expect(writeJobStatus(t.Context(), getJob(g, t.Context(), ns, planted.Name), false)).To(Succeed())
	g.Expect(getJob(g, t.Context(), ns, planted.Name).Status.Conditions).NotTo(BeEmpty())

	playJobController(t, ns)
	startController(t, nil)
	failed := eventuallyPhase(t, ns, "web-v1", stagecoachv1.PhaseFailed)
	jobs := jobsOf(g, t.Context(), ns, "integration")
	g.Expect(jobs).To(HaveLen(2))
	var own batchv1.Job
	for _, j := range jobs {
		if j.Name != planted.Name {
			own = j
		}
	}
	g.Expect(failed.Status.Gates).To(ContainElement(And(HaveField("Gate", "check/integration"), HaveField("Passed", false),
		HaveField("Message", And(ContainSubstring("Job "+ns+"/"+own.Name), Not(ContainSubstring(planted.Name)))))))
	g.Expect(failed.Status.AppliedAt).To(BeNil())
	g.Expect(app.desiredRevision(app.get())).NotTo(Equal(digest(1)))
	g.Expect(getJob(g, t.Context(), ns, planted.Name).Annotations).To(HaveKeyWithValue(runcheck.VerdictAnnotation, "abandoned"))
	g.Expect(own.Annotations).To(HaveKeyWithValue(runcheck.VerdictAnnotation, "failed"))
}

func getJob(g Gomega, ctx context.Context, ns, name string) *batchv1.Job {
	var job batchv1.Job
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &job)).To(Succeed())
	return &job
}

// A run check the API server refuses: a run must be a template with a kind, and a check exactly one
// of http, plugin and run.
func TestRunCheckValidation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		check   stagecoachv1.Check
		wantErr string
	}{
		{name: "run and http", check: stagecoachv1.Check{Name: "x", Run: &stagecoachv1.RunCheck{Template: testJob("")},
			HTTP: &stagecoachv1.HTTPCheck{URL: "https://tests.example/"}}, wantErr: "a check must set exactly one of http, plugin or run"},
		{name: "a template without a kind", check: stagecoachv1.Check{Name: "x", Run: &stagecoachv1.RunCheck{
			Template: runtime.RawExtension{Raw: []byte(`{"apiVersion":"batch/v1","spec":{}}`)}}}, wantErr: "spec.verification.checks[0].run.template.kind: Required value"},
		{name: "keep beyond 20", check: stagecoachv1.Check{Name: "x", Run: &stagecoachv1.RunCheck{Template: testJob(""), Keep: 21}},
			wantErr: "spec.verification.checks[0].run.keep in body should be less than or equal to 20"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			env.CreatePlaceholderUpstream(t, ns)
			stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: stagecoachv1.StageSpec{
				Service: "payments", Environment: "web", ApplyRef: stagecoachv1.ApplierReference{Kind: "Application", Name: "web"},
				Source:       stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "none"}},
				Verification: &stagecoachv1.VerificationPolicy{Checks: []stagecoachv1.Check{tc.check}}}}
			err := env.Client.Create(t.Context(), stage)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.wantErr))
		})
	}
}

// grantJobs lets user create Jobs in ns, for the test's lifetime (the namespace goes with it).
func grantJobs(t *testing.T, ns, user string) {
	t.Helper()
	g := NewWithT(t)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job-creator"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job-creator"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	g.Expect(env.Client.Create(t.Context(), role)).To(Succeed())
	g.Expect(env.Client.Create(t.Context(), binding)).To(Succeed())
}
