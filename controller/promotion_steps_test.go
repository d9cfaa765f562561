package controller

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/applier"
	"github.com/stagecoach-dev/stagecoach/internal/check"
)

// The promotion steps, one at a time, against controller-runtime's fake client (status
// subresource on) and a fake clock: what each step writes to the Promotion, the Stage and the
// applier. The envtest suites in test/integration cover the same paths with a real API server.

var (
	stepNow  = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	digestV1 = "sha256:" + "1111111111111111111111111111111111111111111111111111111111111111"
	digestV2 = "sha256:" + "2222222222222222222222222222222222222222222222222222222222222222"
	appGVK   = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"}
)

type stepFixture struct {
	stage      *stagecoachv1.Stage
	promotions []*stagecoachv1.Promotion
	approvals  []*stagecoachv1.Approval
	freezes    []*stagecoachv1.Freeze
	// appRevision is the Application's targetRevision; appStatus its status as Argo CD wrote it.
	appRevision string
	appStatus   map[string]any
}

type stepEnv struct {
	c      client.Client
	run    *promotionRun
	events *events.FakeRecorder
}

func newStepEnv(t *testing.T, f stepFixture) *stepEnv {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := stagecoachv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	scheme.AddKnownTypeWithName(appGVK, &unstructured.Unstructured{})
	scheme.AddKnownTypeWithName(appGVK.GroupVersion().WithKind("ApplicationList"), &unstructured.UnstructuredList{})

	app := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"source":     map[string]any{"repoURL": "oci://registry.example/deploy/payments", "path": ".", "targetRevision": f.appRevision},
			"syncPolicy": map[string]any{"automated": map[string]any{}},
		},
	}}
	app.SetGroupVersionKind(appGVK)
	app.SetNamespace("prod")
	app.SetName("payments")
	app.SetLabels(map[string]string{stagecoachv1.StageLabel: "payments"})
	if f.appStatus != nil {
		app.Object["status"] = f.appStatus
	}
	objs := []client.Object{f.stage, app, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod"}}}
	for _, p := range f.promotions {
		objs = append(objs, p)
	}
	for _, a := range f.approvals {
		objs = append(objs, a)
	}
	for _, fr := range f.freezes {
		objs = append(objs, fr)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&stagecoachv1.Stage{}, &stagecoachv1.Promotion{}).
		WithIndex(&stagecoachv1.Promotion{}, promotionStageIndexKey, func(o client.Object) []string { return []string{o.(*stagecoachv1.Promotion).Spec.Stage} }).
		WithIndex(&stagecoachv1.Approval{}, approvalStageIndexKey, func(o client.Object) []string { return []string{o.(*stagecoachv1.Approval).Spec.Stage} }).
		Build()
	recorder := events.NewFakeRecorder(100)
	r := &StageReconciler{Client: c, APIReader: c, Events: recorder, Identity: "system:serviceaccount:stagecoach-system:stagecoach-controller",
		Clock: clocktesting.NewFakePassiveClock(stepNow), ClusterFreezeNamespace: "stagecoach-system"}
	r.checks = &checkRuns{runner: &check.Runner{}, baseCtx: t.Context(), wake: r.wake}

	stage := &stagecoachv1.Stage{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(f.stage), stage); err != nil {
		t.Fatal(err)
	}
	writer := &stageStatusWriter{r: r, stage: stage, before: stage.DeepCopy()}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(appGVK)
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(app), obj); err != nil {
		t.Fatal(err)
	}
	run := r.newPromotionRun(stage, obj, applier.For(appGVK.GroupKind(), applier.Options{}), writer.commit)
	if err := run.listPromotions(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := run.loadFreezes(t.Context()); err != nil {
		t.Fatal(err)
	}
	return &stepEnv{c: c, run: run, events: recorder}
}

func stepStage(mutate func(*stagecoachv1.Stage)) *stagecoachv1.Stage {
	s := &stagecoachv1.Stage{
		ObjectMeta: metav1.ObjectMeta{Name: "payments", Namespace: "prod", Generation: 1},
		Spec: stagecoachv1.StageSpec{Service: "payments", Environment: "prod",
			ApplyRef: stagecoachv1.ApplierReference{Kind: "Application", Name: "payments"},
			Source:   stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "payments-staging"}}},
	}
	if mutate != nil {
		mutate(s)
	}
	return s
}

func stepPromotion(name string, action stagecoachv1.PromotionAction, digest string, mutate func(*stagecoachv1.Promotion)) *stagecoachv1.Promotion {
	p := &stagecoachv1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "prod", UID: types.UID("uid-" + name), Generation: 1,
			CreationTimestamp: metav1.NewTime(stepNow.Add(-time.Minute))},
		Spec: stagecoachv1.PromotionSpec{Stage: "payments", Action: action, RequestedBy: "alice"},
	}
	if digest != "" {
		p.Spec.Version = &stagecoachv1.VersionReference{Digest: digest, Tag: "v2.0.0"}
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func running(applied, landed *time.Time) func(*stagecoachv1.Promotion) {
	return func(p *stagecoachv1.Promotion) {
		started := metav1.NewTime(stepNow.Add(-time.Minute))
		p.Status = stagecoachv1.PromotionStatus{Phase: stagecoachv1.PhaseRunning, StartedAt: &started, Version: p.Spec.Version.DeepCopy()}
		if applied != nil {
			at := metav1.NewTime(*applied)
			p.Status.AppliedAt = &at
		}
		if landed != nil {
			at := metav1.NewTime(*landed)
			p.Status.LandedAt = &at
		}
	}
}

func (e *stepEnv) promotion(t *testing.T, name string) *stagecoachv1.Promotion {
	t.Helper()
	p := &stagecoachv1.Promotion{}
	if err := e.c.Get(t.Context(), client.ObjectKey{Namespace: "prod", Name: name}, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func (e *stepEnv) stage(t *testing.T) *stagecoachv1.Stage {
	t.Helper()
	s := &stagecoachv1.Stage{}
	if err := e.c.Get(t.Context(), client.ObjectKey{Namespace: "prod", Name: "payments"}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

func (e *stepEnv) targetRevision(t *testing.T) string {
	t.Helper()
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(appGVK)
	if err := e.c.Get(t.Context(), client.ObjectKey{Namespace: "prod", Name: "payments"}, obj); err != nil {
		t.Fatal(err)
	}
	rev, _, _ := unstructured.NestedString(obj.Object, "spec", "source", "targetRevision")
	return rev
}

func (e *stepEnv) eventReasons() []string {
	var reasons []string
	for {
		select {
		case ev := <-e.events.Events:
			reasons = append(reasons, ev)
		default:
			return reasons
		}
	}
}

func TestStartStep(t *testing.T) {
	frozen := func(s *stagecoachv1.Stage) {
		s.Status.Conditions = []metav1.Condition{{Type: stagecoachv1.ConditionFrozen, Status: metav1.ConditionTrue,
			Reason: stagecoachv1.ReasonForeignWrite, Message: "someone wrote", LastTransitionTime: metav1.NewTime(stepNow)}}
	}
	approvalsRequired := func(s *stagecoachv1.Stage) {
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Approvals: &stagecoachv1.ApprovalPolicy{Required: 1}}
	}
	verifiedV1 := func(s *stagecoachv1.Stage) {
		at := metav1.NewTime(stepNow.Add(-time.Hour))
		s.Status.Current = &stagecoachv1.CurrentVersion{Version: "v1.0.0", Digest: digestV1, VerifiedAt: &at}
		s.Status.LastAppliedDigest = digestV1
	}
	freeze := &stagecoachv1.Freeze{ObjectMeta: metav1.ObjectMeta{Name: "holidays", Namespace: "prod"},
		Spec: stagecoachv1.FreezeSpec{Reason: "holidays"}}
	for _, tc := range []struct {
		name        string
		fixture     stepFixture
		promotion   string
		wantStarted bool
		wantPhase   stagecoachv1.PromotionPhase
		wantMessage string
		wantEvent   string
	}{
		{name: "a promote with every gate open starts",
			fixture:   stepFixture{stage: stepStage(nil), promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, nil)}},
			promotion: "p", wantStarted: true, wantPhase: stagecoachv1.PhaseRunning, wantMessage: "started"},
		{name: "a frozen Stage holds it, saying why",
			fixture:   stepFixture{stage: stepStage(frozen), promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, nil)}},
			promotion: "p", wantPhase: stagecoachv1.PhasePending, wantMessage: "is frozen (someone wrote)"},
		{name: "a missing approval holds it, naming the gate",
			fixture:   stepFixture{stage: stepStage(approvalsRequired), promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, nil)}},
			promotion: "p", wantPhase: stagecoachv1.PhasePending, wantMessage: "waiting: approvals: 0 of 1 approvals for " + digestV2},
		{name: "an approval by someone else lets it start",
			fixture: stepFixture{stage: stepStage(approvalsRequired), promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, nil)},
				approvals: []*stagecoachv1.Approval{{ObjectMeta: metav1.ObjectMeta{Name: "bob", Namespace: "prod"},
					Spec: stagecoachv1.ApprovalSpec{Stage: "payments", Digest: digestV2, Approver: "bob"}}}},
			promotion: "p", wantStarted: true, wantPhase: stagecoachv1.PhaseRunning, wantMessage: "started"},
		{name: "the promoter's own approval does not count",
			fixture: stepFixture{stage: stepStage(approvalsRequired), promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, nil)},
				approvals: []*stagecoachv1.Approval{{ObjectMeta: metav1.ObjectMeta{Name: "alice", Namespace: "prod"},
					Spec: stagecoachv1.ApprovalSpec{Stage: "payments", Digest: digestV2, Approver: "alice"}}}},
			promotion: "p", wantPhase: stagecoachv1.PhasePending, wantMessage: "alice promoted this version and cannot approve it"},
		{name: "a Freeze holds a plain promote",
			fixture:   stepFixture{stage: stepStage(nil), freezes: []*stagecoachv1.Freeze{freeze}, promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, nil)}},
			promotion: "p", wantPhase: stagecoachv1.PhasePending, wantMessage: "Freeze prod/holidays (holidays) holds it"},
		{name: "break-glass passes a Freeze and says so",
			fixture: stepFixture{stage: stepStage(nil), freezes: []*stagecoachv1.Freeze{freeze}, promotions: []*stagecoachv1.Promotion{
				stepPromotion("p", stagecoachv1.ActionPromote, digestV2, func(p *stagecoachv1.Promotion) { p.Spec.BreakGlass = true })}},
			promotion: "p", wantStarted: true, wantPhase: stagecoachv1.PhaseRunning, wantMessage: "started with break-glass although Freeze prod/holidays",
			wantEvent: stagecoachv1.EventBreakGlass},
		{name: "a labelled Promotion is still its requester's: her own approval does not count",
			fixture: stepFixture{stage: stepStage(approvalsRequired), promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2,
				func(p *stagecoachv1.Promotion) { p.Labels = map[string]string{stagecoachv1.AutomaticLabel: "true"} })},
				approvals: []*stagecoachv1.Approval{{ObjectMeta: metav1.ObjectMeta{Name: "alice", Namespace: "prod"},
					Spec: stagecoachv1.ApprovalSpec{Stage: "payments", Digest: digestV2, Approver: "alice"}}}},
			promotion: "p", wantPhase: stagecoachv1.PhasePending, wantMessage: "alice promoted this version and cannot approve it"},
		{name: "a rollback to a digest never verified here is refused, gates or not",
			fixture: stepFixture{stage: stepStage(func(s *stagecoachv1.Stage) { approvalsRequired(s); verifiedV1(s) }),
				promotions: []*stagecoachv1.Promotion{stepPromotion("rb", stagecoachv1.ActionRollback, digestV2, nil)}},
			promotion: "rb", wantPhase: stagecoachv1.PhaseFailed, wantMessage: "was never verified in Stage payments"},
		{name: "a rollback to the last verified version starts without gates",
			fixture: stepFixture{stage: stepStage(func(s *stagecoachv1.Stage) { approvalsRequired(s); verifiedV1(s) }),
				promotions: []*stagecoachv1.Promotion{stepPromotion("rb", stagecoachv1.ActionRollback, digestV1, nil)}},
			promotion: "rb", wantStarted: true, wantPhase: stagecoachv1.PhaseRunning, wantMessage: "started"},
		{name: "a Freeze does not hold a rollback",
			fixture: stepFixture{stage: stepStage(verifiedV1), freezes: []*stagecoachv1.Freeze{freeze},
				promotions: []*stagecoachv1.Promotion{stepPromotion("rb", stagecoachv1.ActionRollback, "", nil)}},
			promotion: "rb", wantStarted: true, wantPhase: stagecoachv1.PhaseRunning, wantMessage: "started"},
		{name: "a cluster-wide Freeze from another namespace than the controller's holds nothing",
			fixture: stepFixture{stage: stepStage(nil), freezes: []*stagecoachv1.Freeze{{ObjectMeta: metav1.ObjectMeta{Name: "everything", Namespace: "team-b"},
				Spec: stagecoachv1.FreezeSpec{Reason: "mine", NamespaceSelector: &metav1.LabelSelector{}}}},
				promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, nil)}},
			promotion: "p", wantStarted: true, wantPhase: stagecoachv1.PhaseRunning, wantMessage: "started"},
		{name: "a cluster-wide Freeze from the controller's namespace holds every namespace",
			fixture: stepFixture{stage: stepStage(nil), freezes: []*stagecoachv1.Freeze{{ObjectMeta: metav1.ObjectMeta{Name: "everything", Namespace: "stagecoach-system"},
				Spec: stagecoachv1.FreezeSpec{Reason: "quarter end", NamespaceSelector: &metav1.LabelSelector{}}}},
				promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, nil)}},
			promotion: "p", wantPhase: stagecoachv1.PhasePending, wantMessage: "Freeze stagecoach-system/everything (quarter end) holds it"},
		{name: "a rollback with nothing verified fails at once",
			fixture:   stepFixture{stage: stepStage(nil), promotions: []*stagecoachv1.Promotion{stepPromotion("rb", stagecoachv1.ActionRollback, "", nil)}},
			promotion: "rb", wantPhase: stagecoachv1.PhaseFailed, wantMessage: "nothing to roll back to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			env := newStepEnv(t, tc.fixture)
			var p *stagecoachv1.Promotion
			for i := range env.run.promotions {
				if env.run.promotions[i].Name == tc.promotion {
					p = &env.run.promotions[i]
				}
			}
			started, err := env.run.start(t.Context(), p)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(started).To(Equal(tc.wantStarted))
			got := env.promotion(t, tc.promotion)
			g.Expect(got.Status.Phase).To(Equal(tc.wantPhase))
			g.Expect(got.Status.Message).To(ContainSubstring(tc.wantMessage))
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
			if tc.wantStarted {
				g.Expect(got.Status.StartedAt.Time).To(BeTemporally("==", stepNow))
				g.Expect(got.Status.Version).NotTo(BeNil())
				if got.Spec.Version != nil {
					g.Expect(got.Status.Version).To(Equal(got.Spec.Version))
				}
			}
			if tc.wantEvent != "" {
				g.Expect(env.eventReasons()).To(ContainElement(ContainSubstring(tc.wantEvent)))
			}
			if p.Spec.BreakGlass && tc.wantStarted {
				// Kept on the Promotion for good, whatever its message says later.
				c := meta.FindStatusCondition(got.Status.Conditions, stagecoachv1.PromotionConditionBreakGlass)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Reason).To(Equal(stagecoachv1.ReasonPassedByBreakGlass))
				g.Expect(c.Message).To(ContainSubstring("alice started with break-glass although Freeze prod/holidays"))
			}
			g.Expect(env.targetRevision(t)).To(BeEmpty(), "starting never applies")
		})
	}
}

func TestProgressStep(t *testing.T) {
	appliedAt := stepNow.Add(-time.Minute)
	longAgo := stepNow.Add(-time.Hour)
	landedStatus := map[string]any{
		"operationState": map[string]any{"phase": "Succeeded", "finishedAt": stepNow.Add(-30 * time.Second).Format(time.RFC3339),
			"syncResult": map[string]any{"revision": digestV2}, "operation": map[string]any{"sync": map[string]any{"revision": digestV2}}},
		"sync":         map[string]any{"status": "Synced", "revision": digestV2},
		"health":       map[string]any{"status": "Healthy"},
		"reconciledAt": stepNow.Add(-10 * time.Second).Format(time.RFC3339),
	}
	verifiedV1 := func(s *stagecoachv1.Stage) {
		verified := metav1.NewTime(longAgo)
		s.Status.Current = &stagecoachv1.CurrentVersion{Version: "v1.0.0", Digest: digestV1, VerifiedAt: &verified}
		s.Status.LastAppliedDigest = digestV1
	}
	noGrace := func(s *stagecoachv1.Stage) {
		verifiedV1(s)
		s.Spec.Verification = &stagecoachv1.VerificationPolicy{Grace: &metav1.Duration{}}
	}
	for _, tc := range []struct {
		name         string
		fixture      stepFixture
		wantPhase    stagecoachv1.PromotionPhase
		wantMessage  string
		wantRevision string
		wantStage    func(g Gomega, s *stagecoachv1.Stage)
	}{
		{name: "a started promote is applied and recorded on the Stage",
			fixture: stepFixture{stage: stepStage(verifiedV1), appRevision: digestV1,
				promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, running(nil, nil))}},
			wantPhase: stagecoachv1.PhaseRunning, wantMessage: "applied v2.0.0@" + digestV2, wantRevision: digestV2,
			wantStage: func(g Gomega, s *stagecoachv1.Stage) { g.Expect(s.Status.LastAppliedDigest).To(Equal(digestV2)) }},
		{name: "a value someone else wrote freezes the Stage instead of being overwritten",
			fixture: stepFixture{stage: stepStage(verifiedV1), appRevision: "sha256:" + "9999999999999999999999999999999999999999999999999999999999999999",
				promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, running(nil, nil))}},
			wantPhase: stagecoachv1.PhaseAborted, wantMessage: "which Stagecoach did not write", wantRevision: "sha256:9999999999999999999999999999999999999999999999999999999999999999",
			wantStage: func(g Gomega, s *stagecoachv1.Stage) {
				frozen := meta.FindStatusCondition(s.Status.Conditions, stagecoachv1.ConditionFrozen)
				g.Expect(frozen).NotTo(BeNil())
				g.Expect(frozen.Reason).To(Equal(stagecoachv1.ReasonForeignWrite))
			}},
		{name: "landed without a grace period is verified at once",
			fixture: stepFixture{stage: stepStage(noGrace), appRevision: digestV2, appStatus: landedStatus,
				promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, running(&appliedAt, nil))}},
			wantPhase: stagecoachv1.PhaseSucceeded, wantMessage: "verified: operation Succeeded", wantRevision: digestV2,
			wantStage: func(g Gomega, s *stagecoachv1.Stage) {
				g.Expect(s.Status.Current.Digest).To(Equal(digestV2))
				g.Expect(s.Status.History).To(HaveLen(1))
				g.Expect(meta.IsStatusConditionTrue(s.Status.Conditions, stagecoachv1.ConditionVerified)).To(BeTrue())
			}},
		{name: "landed with a grace period starts the clock",
			fixture: stepFixture{stage: stepStage(verifiedV1), appRevision: digestV2, appStatus: landedStatus,
				promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, running(&appliedAt, nil))}},
			wantPhase: stagecoachv1.PhaseRunning, wantMessage: "operation Succeeded", wantRevision: digestV2,
			wantStage: func(g Gomega, s *stagecoachv1.Stage) { g.Expect(s.Status.Current.Digest).To(Equal(digestV1)) }},
		{name: "past the deadline the promote fails, is remembered, and rolls back",
			fixture: stepFixture{stage: stepStage(verifiedV1), appRevision: digestV2,
				promotions: []*stagecoachv1.Promotion{stepPromotion("p", stagecoachv1.ActionPromote, digestV2, running(&longAgo, nil))}},
			wantPhase: stagecoachv1.PhaseFailed, wantMessage: "rolling back to v1.0.0@" + digestV1 + " with Promotion p-rollback", wantRevision: digestV2,
			wantStage: func(g Gomega, s *stagecoachv1.Stage) {
				g.Expect(s.Status.FailedDigests).To(ConsistOf(digestV2))
				g.Expect(s.Status.Hold).NotTo(BeNil())
				g.Expect(s.Status.AutomaticRollbacks).To(Equal(int32(1)))
				verified := meta.FindStatusCondition(s.Status.Conditions, stagecoachv1.ConditionVerified)
				g.Expect(verified.Reason).To(Equal(stagecoachv1.ReasonDeadlineExceeded))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			env := newStepEnv(t, tc.fixture)
			_, err := env.run.progress(t.Context(), &env.run.promotions[0])
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(env.run.commit(t.Context())).To(Succeed())
			got := env.promotion(t, "p")
			g.Expect(got.Status.Phase).To(Equal(tc.wantPhase))
			g.Expect(got.Status.Message).To(ContainSubstring(tc.wantMessage))
			g.Expect(env.targetRevision(t)).To(Equal(tc.wantRevision))
			tc.wantStage(g, env.stage(t))
			if tc.wantPhase == stagecoachv1.PhaseFailed {
				rb := env.promotion(t, "p-rollback")
				g.Expect(rb.Spec.Action).To(Equal(stagecoachv1.ActionRollback))
				g.Expect(rb.Spec.Version.Digest).To(Equal(digestV1))
			}
		})
	}
}

// Promotions behind the running one say so, with their place, and are written once.
func TestQueueStepSaysWhatWaits(t *testing.T) {
	g := NewWithT(t)
	appliedAt := stepNow.Add(-time.Minute)
	env := newStepEnv(t, stepFixture{stage: stepStage(nil), appRevision: digestV2, promotions: []*stagecoachv1.Promotion{
		stepPromotion("running", stagecoachv1.ActionPromote, digestV2, running(&appliedAt, nil)),
		stepPromotion("next", stagecoachv1.ActionPromote, digestV1, func(p *stagecoachv1.Promotion) { p.CreationTimestamp = metav1.NewTime(stepNow) }),
	}})
	run, next, err := env.run.queue(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(run.Name).To(Equal("running"))
	g.Expect(next.Name).To(Equal("next"))
	got := env.promotion(t, "next")
	g.Expect(got.Status.Phase).To(Equal(stagecoachv1.PhasePending))
	g.Expect(got.Status.Message).To(Equal("queued: Promotion running runs on Stage payments; this is 1 of 1 waiting"))
	rv := got.ResourceVersion
	// Nothing changed: nothing is written.
	env2 := newStepEnv(t, stepFixture{stage: stepStage(nil), appRevision: digestV2, promotions: []*stagecoachv1.Promotion{
		stepPromotion("running", stagecoachv1.ActionPromote, digestV2, running(&appliedAt, nil)), got}})
	_, _, err = env2.run.queue(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env2.promotion(t, "next").ResourceVersion).To(Equal(rv))
}
