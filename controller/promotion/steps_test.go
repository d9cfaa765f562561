package promotion

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

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
	// intercept, when set, sees the client's calls (to look at what was written when).
	intercept *interceptor.Funcs
}

type stepEnv struct {
	c      client.Client
	run    *Run
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
	b := fake.NewClientBuilder()
	if f.intercept != nil {
		b = b.WithInterceptorFuncs(*f.intercept)
	}
	c := b.WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&stagecoachv1.Stage{}, &stagecoachv1.Promotion{}).
		WithIndex(&stagecoachv1.Promotion{}, StageIndexKey, func(o client.Object) []string { return []string{o.(*stagecoachv1.Promotion).Spec.Stage} }).
		WithIndex(&stagecoachv1.Approval{}, ApprovalStageIndexKey, func(o client.Object) []string { return []string{o.(*stagecoachv1.Approval).Spec.Stage} }).
		Build()
	recorder := events.NewFakeRecorder(100)
	r := &Runner{Client: c, APIReader: c, Events: recorder, Identity: "system:serviceaccount:stagecoach-system:stagecoach-controller",
		Clock: clocktesting.NewFakePassiveClock(stepNow), ClusterFreezeNamespace: "stagecoach-system"}
	r.Checks = NewCheckRuns(&check.Runner{}, t.Context(), func([]reconcile.Request) {})

	stage := &stagecoachv1.Stage{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(f.stage), stage); err != nil {
		t.Fatal(err)
	}
	writer := &statusWriter{c: c, stage: stage, before: stage.DeepCopy()}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(appGVK)
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(app), obj); err != nil {
		t.Fatal(err)
	}
	run := r.NewRun(stage, obj, ApplierRollout(applier.For(appGVK.GroupKind(), applier.Options{})), writer.commit)
	if err := run.listPromotions(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := run.loadFreezes(t.Context()); err != nil {
		t.Fatal(err)
	}
	return &stepEnv{c: c, run: run, events: recorder}
}

// statusWriter writes the Stage's status as controller/stage's writer does: a merge patch of what
// changed, under an optimistic lock, stamped with the generation it saw.
type statusWriter struct {
	c             client.Client
	stage, before *stagecoachv1.Stage
}

func (w *statusWriter) commit(ctx context.Context) error {
	w.stage.Status.ObservedGeneration = w.stage.Generation
	if err := w.c.Status().Patch(ctx, w.stage, client.MergeFromWithOptions(w.before, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	w.before = w.stage.DeepCopy()
	return nil
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
