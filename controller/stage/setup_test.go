package stage

import (
	"context"
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

type reconcileFunc func(context.Context, reconcile.Request) (reconcile.Result, error)

func (f reconcileFunc) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return f(ctx, req)
}

// What the Stage controller's wrapper makes of a reconcile's error: a lost optimistic-lock race
// and a stop are no errors; anything else is, and a reconcile timeout is retried as one.
func TestConflictsRequeued(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "stagecoach.dev", Resource: "stages"}, "web", errors.New("the object has been modified"))
	for _, tc := range []struct {
		name        string
		ctx         func(context.Context) context.Context
		err         error
		wantErr     bool
		wantRequeue bool
	}{
		{name: "a conflict is looked at again soon, quietly", err: fmt.Errorf("failed to patch: %w", conflict), wantRequeue: true},
		{name: "conflicts joined are one", err: errors.Join(conflict, conflict), wantRequeue: true},
		{name: "another error is an error", err: errors.Join(conflict, errors.New("forbidden")), wantErr: true},
		{name: "a write cut short by the stop is no error", err: fmt.Errorf("failed to patch: %w", context.Canceled),
			ctx: func(ctx context.Context) context.Context {
				ctx, cancel := context.WithCancel(ctx)
				cancel()
				return ctx
			}},
		{name: "a reconcile timeout is an error, so it is retried", err: fmt.Errorf("failed to patch: %w", context.DeadlineExceeded), wantErr: true,
			ctx: func(ctx context.Context) context.Context {
				ctx, cancel := context.WithTimeout(ctx, 0)
				t.Cleanup(cancel)
				return ctx
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := t.Context()
			if tc.ctx != nil {
				ctx = tc.ctx(ctx)
			}
			inner := reconcileFunc(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, tc.err })
			result, err := conflictsRequeued{inner}.Reconcile(ctx, reconcile.Request{})
			if tc.wantErr {
				g.Expect(err).To(HaveOccurred())
			} else {
				g.Expect(err).NotTo(HaveOccurred())
			}
			g.Expect(result.RequeueAfter > 0).To(Equal(tc.wantRequeue))
		})
	}
}

// Which Promotion updates wake its Stage: not the controller's own status writes that keep the phase.
func TestPromotionNeedsLook(t *testing.T) {
	base := func() *stagecoachv1.Promotion {
		return &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "prod", Generation: 1},
			Spec:   stagecoachv1.PromotionSpec{Stage: "payments"},
			Status: stagecoachv1.PromotionStatus{Phase: stagecoachv1.PhaseRunning, Message: "applied; waiting for the engine"}}
	}
	for _, tc := range []struct {
		name   string
		change func(p *stagecoachv1.Promotion)
		want   bool
	}{
		{name: "a new message only", change: func(p *stagecoachv1.Promotion) { p.Status.Message = "operation Succeeded; waiting for Healthy" }, want: false},
		{name: "landed at, same phase", change: func(p *stagecoachv1.Promotion) { now := metav1.Now(); p.Status.LandedAt = &now }, want: false},
		{name: "finished", change: func(p *stagecoachv1.Promotion) { p.Status.Phase = stagecoachv1.PhaseSucceeded }, want: true},
		{name: "a spec change", change: func(p *stagecoachv1.Promotion) { p.Generation = 2 }, want: true},
		{name: "an annotation", change: func(p *stagecoachv1.Promotion) {
			p.Annotations = map[string]string{stagecoachv1.RollbackOfAnnotation: "q"}
		}, want: true},
		{name: "deleted", change: func(p *stagecoachv1.Promotion) { now := metav1.Now(); p.DeletionTimestamp = &now }, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			old, updated := base(), base()
			tc.change(updated)
			g.Expect(promotionNeedsLook{}.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: updated})).To(Equal(tc.want))
		})
	}
	g := NewWithT(t)
	g.Expect(promotionNeedsLook{}.Create(event.CreateEvent{Object: base()})).To(BeTrue())
	g.Expect(promotionNeedsLook{}.Delete(event.DeleteEvent{Object: base()})).To(BeTrue())
}
