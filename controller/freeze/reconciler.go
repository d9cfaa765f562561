// Package freeze keeps each Freeze's status: which Stages it holds and whether it is Active. It
// holds nothing itself: the Stage reconciler decides, by the same rule (plan.ActiveFreezes).
package freeze

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
)

// Reconciler says on each Freeze which Stages it holds (status.stages) and whether it is
// Active, from the same rule the Stages decide by (plan.ActiveFreezes). It never holds a Stage
// itself: the Stage reconciler does, and sets the Stage's Frozen condition.
type Reconciler struct {
	client.Client
	// APIReader reads namespaces' labels for cluster-wide Freezes (namespaces are not cached).
	APIReader              client.Reader
	ClusterFreezeNamespace string
	Clock                  clock.PassiveClock
}

// Reconcile writes the Freeze's status, and asks to be looked at again when it ends.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	freeze := &stagecoachv1.Freeze{}
	if err := r.Get(ctx, req.NamespacedName, freeze); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := r.Clock.Now()
	before := freeze.DeepCopy()
	held, err := r.heldStages(ctx, freeze, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	freeze.Status.Stages = held
	freeze.Status.ObservedGeneration = freeze.Generation
	active := metav1.Condition{Type: stagecoachv1.FreezeConditionActive, ObservedGeneration: freeze.Generation}
	var requeue time.Duration
	switch {
	case freeze.Spec.Until != nil && !now.Before(freeze.Spec.Until.Time):
		active.Status, active.Reason = metav1.ConditionFalse, stagecoachv1.ReasonFreezeEnded
		active.Message = "ended at " + freeze.Spec.Until.UTC().Format(time.RFC3339)
	case freeze.Spec.NamespaceSelector != nil && freeze.Namespace != r.ClusterFreezeNamespace:
		active.Status, active.Reason = metav1.ConditionFalse, stagecoachv1.ReasonFreezeNotHonoured
		active.Message = fmt.Sprintf("a Freeze with spec.namespaceSelector holds Stages only from namespace %s; this one holds nothing: "+
			"drop namespaceSelector, or create it there", r.ClusterFreezeNamespace)
	default:
		active.Status, active.Reason = metav1.ConditionTrue, stagecoachv1.ReasonFreezeHolding
		active.Message = fmt.Sprintf("holds %d Stage(s) until it is deleted", len(held))
		if until := freeze.Spec.Until; until != nil {
			active.Message = fmt.Sprintf("holds %d Stage(s) until %s", len(held), until.UTC().Format(time.RFC3339))
			requeue = until.Sub(now) + time.Second
		}
	}
	meta.SetStatusCondition(&freeze.Status.Conditions, active)
	if equality.Semantic.DeepEqual(before.Status, freeze.Status) {
		return ctrl.Result{RequeueAfter: requeue}, nil
	}
	if err := r.Status().Patch(ctx, freeze, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// heldStages lists the Stages the Freeze holds now, as namespace/name.
func (r *Reconciler) heldStages(ctx context.Context, freeze *stagecoachv1.Freeze, now time.Time) ([]string, error) {
	stages, err := StagesItMayHold(ctx, r, freeze)
	if err != nil {
		return nil, err
	}
	nsLabels := map[string]map[string]string{}
	var held []string
	for i := range stages {
		stage := &stages[i]
		labels, ok := nsLabels[stage.Namespace]
		if !ok && freeze.Spec.NamespaceSelector != nil {
			ns := &corev1.Namespace{}
			if err := r.APIReader.Get(ctx, client.ObjectKey{Name: stage.Namespace}, ns); err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("failed to read namespace %q for Freeze %s/%s: %w", stage.Namespace, freeze.Namespace, freeze.Name, err)
			}
			labels = ns.Labels
			nsLabels[stage.Namespace] = labels
		}
		if len(plan.ActiveFreezes(stage, labels, []stagecoachv1.Freeze{*freeze}, r.ClusterFreezeNamespace, now)) > 0 {
			held = append(held, stage.Namespace+"/"+stage.Name)
		}
	}
	return held, nil
}

// StagesItMayHold lists the Stages a Freeze may hold: those of its namespace, or every Stage
// for a cluster-wide one (plan.ActiveFreezes applies its selectors).
func StagesItMayHold(ctx context.Context, c client.Reader, freeze *stagecoachv1.Freeze) ([]stagecoachv1.Stage, error) {
	var opts []client.ListOption
	if freeze.Spec.NamespaceSelector == nil {
		opts = append(opts, client.InNamespace(freeze.Namespace))
	}
	var stages stagecoachv1.StageList
	if err := c.List(ctx, &stages, opts...); err != nil {
		return nil, fmt.Errorf("failed to list the Stages Freeze %s/%s may hold: %w", freeze.Namespace, freeze.Name, err)
	}
	return stages.Items, nil
}

// SetupWithManager watches Freezes, and Stages (a Stage created or relabelled may be held).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("freeze").
		For(&stagecoachv1.Freeze{}).
		Watches(&stagecoachv1.Stage{}, handler.EnqueueRequestsFromMapFunc(r.freezesFor)).
		Complete(r)
}

// freezesFor maps a Stage to the Freezes that may hold it: those of its namespace and the
// cluster-wide ones.
func (r *Reconciler) freezesFor(ctx context.Context, o client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, ns := range []string{o.GetNamespace(), r.ClusterFreezeNamespace} {
		var list stagecoachv1.FreezeList
		if err := r.List(ctx, &list, client.InNamespace(ns)); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "failed to list the Freezes that may hold a Stage", "namespace", ns)
			return nil
		}
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		if ns == r.ClusterFreezeNamespace {
			break
		}
	}
	return reqs
}
