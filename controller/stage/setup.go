package stage

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller/freeze"
	"github.com/stagecoach-dev/stagecoach/controller/hooks"
	"github.com/stagecoach-dev/stagecoach/controller/promotion"
	"github.com/stagecoach-dev/stagecoach/internal/authz"
	"github.com/stagecoach-dev/stagecoach/internal/check"
	"github.com/stagecoach-dev/stagecoach/internal/gitwrite"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
	"github.com/stagecoach-dev/stagecoach/internal/runcheck"
	gitsource "github.com/stagecoach-dev/stagecoach/internal/source/git"
	"github.com/stagecoach-dev/stagecoach/internal/source/registry"
	"github.com/stagecoach-dev/stagecoach/internal/verify"
)

// applierIndexKey indexes Stages by the applier they name ("<group>/<Kind>/<name>"), so that an
// event on an applier finds its Stages, and so that Stages claiming the same applier find each other.
const applierIndexKey = ".spec.applyRef"

// upstreamIndexKey indexes Stages by the Stages they follow ("<namespace>/<name>"): their
// upstream and those they depend on, so that a new verified version there wakes them.
const upstreamIndexKey = ".spec.source.upstream"

func upstreamKey(stage *stagecoachv1.Stage) []string {
	var keys []string
	if up, ok := stage.UpstreamKey(); ok {
		keys = append(keys, up.String())
	}
	for _, d := range stage.Spec.DependsOn {
		keys = append(keys, stage.DependencyKey(d).String())
	}
	return keys
}

// applierKey is the index value of an applier in a namespace.
func applierKey(group, kind, name string) string {
	return group + "/" + kind + "/" + name
}

// stageApplierKey is the index value of the applier a Stage names; unresolvable references get a
// key of their own kind so they still meet each other.
func stageApplierKey(stage *stagecoachv1.Stage) string {
	ref := stage.Spec.ApplyRef
	gvk, err := ref.GroupVersionKind()
	if err != nil {
		return applierKey("?", ref.Kind, ref.Name)
	}
	return applierKey(gvk.Group, gvk.Kind, ref.Name)
}

// stageApplierKeys are the index values of the objects a Stage applies through: its applier, and
// the Kustomization that applies an OCIRepository's artifact, whose events must wake it too.
func stageApplierKeys(stage *stagecoachv1.Stage) []string {
	keys := []string{stageApplierKey(stage)}
	if k := stage.Spec.ApplyRef.Kustomization; k != "" {
		keys = append(keys, applierKey(kustomizationGVK.Group, kustomizationGVK.Kind, k))
	}
	return keys
}

// SetupWithManager registers the Stage reconciler, its index and its watches.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &stagecoachv1.Stage{}, applierIndexKey,
		func(o client.Object) []string { return stageApplierKeys(o.(*stagecoachv1.Stage)) }); err != nil {
		return fmt.Errorf("failed to index Stages by applier: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &stagecoachv1.Stage{}, upstreamIndexKey,
		func(o client.Object) []string { return upstreamKey(o.(*stagecoachv1.Stage)) }); err != nil {
		return fmt.Errorf("failed to index Stages by upstream: %w", err)
	}
	if err := promotion.Index(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	// Appliers are watched in the label-selected cache of appliers (NewApplierCache) when there is one.
	watched := mgr.GetCache()
	if r.Appliers != nil && r.Appliers.cache != nil {
		watched = r.Appliers.cache
	}
	r.watcher = &applierWatcher{cache: watched, appliers: r.Appliers, handler: handler.EnqueueRequestsFromMapFunc(r.stagesForApplier),
		namespaces: r.WatchNamespaces}
	if err := r.setupFleet(ctx, mgr); err != nil {
		return err
	}

	r.hookEvents = make(chan event.GenericEvent, 256)
	annotator := promotion.NewPhaseAnnotator(r.Client)
	if err := mgr.Add(annotator); err != nil {
		return fmt.Errorf("failed to add the phase annotator: %w", err)
	}
	if r.PolicyRecheckInterval == 0 {
		r.PolicyRecheckInterval = time.Minute
	}
	r.policies = &policyCheck{reader: r.APIReader, interval: r.PolicyRecheckInterval}
	r.actAs = &authz.Impersonator{Config: mgr.GetConfig(), Options: client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()}}
	r.promotions = r.newRunner(ctx, annotator)
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named("stage").
		For(&stagecoachv1.Stage{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{},
			predicate.AnnotationChangedPredicate{},
		))).
		// Another Stage naming the same applier appearing, changing its applyRef or going away
		// decides who holds the claim.
		Watches(&stagecoachv1.Stage{}, handler.EnqueueRequestsFromMapFunc(r.stagesSharingApplier),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A new or progressing Promotion is the Stage's work; one that finished may also settle
		// a Stage others depend on.
		Watches(&stagecoachv1.Promotion{}, handler.EnqueueRequestsFromMapFunc(r.stagesOfPromotion),
			builder.WithPredicates(promotionNeedsLook{})).
		// An Approval may open the approvals gate.
		Watches(&stagecoachv1.Approval{}, handler.EnqueueRequestsFromMapFunc(
			func(_ context.Context, o client.Object) []reconcile.Request {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.(*stagecoachv1.Approval).Spec.Stage}}}
			})).
		// An upstream Stage (or one depended on) verifying a version offers it downstream (its status changes, so no
		// generation filter here).
		Watches(&stagecoachv1.Stage{}, handler.EnqueueRequestsFromMapFunc(r.stagesFollowing)).
		// A Freeze appearing, changing or going away decides whether Stages may promote.
		Watches(&stagecoachv1.Freeze{}, handler.EnqueueRequestsFromMapFunc(r.stagesFrozenBy)).
		// Notification hooks wake Stages directly.
		WatchesRawSource(source.Channel(r.hookEvents, &handler.EnqueueRequestForObject{})).
		Build(conflictsRequeued{r})
	if err != nil {
		return fmt.Errorf("failed to build the Stage controller: %w", err)
	}
	r.watcher.controller = c
	return nil
}

// conflictsRequeued looks at a Stage again, quietly, when one of its writes lost an
// optimistic-lock race (another write to the object came first, often our own from the reconcile
// before): nothing failed, the next reconcile decides again from the newer object. Logging it as
// an error with a stack trace (158 times at one start at 5,000 Stages) hid the errors that matter.
type conflictsRequeued struct{ reconcile.Reconciler }

const conflictRetry = 100 * time.Millisecond

func (c conflictsRequeued) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	result, err := c.Reconciler.Reconcile(ctx, req)
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		// The manager is stopping (a reconcile timeout is DeadlineExceeded, and is retried):
		// the writes cut short are made again from the objects by the next start, so they
		// are no errors (dozens of them, with stack traces, at every stop under load).
		ctrl.LoggerFrom(ctx).V(1).Info("a reconcile was cut short by the stop", "reason", err.Error())
		return reconcile.Result{}, nil
	}
	if err != nil && onlyConflicts(err) {
		ctrl.LoggerFrom(ctx).V(1).Info("a write lost an optimistic-lock race; looking again", "reason", err.Error())
		// Soon, not at once: by then the cache holds the write that won.
		return reconcile.Result{RequeueAfter: conflictRetry}, nil
	}
	return result, err
}

// onlyConflicts tells whether every error err joins is a Conflict.
func onlyConflicts(err error) bool {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			if !onlyConflicts(e) {
				return false
			}
		}
		return true
	}
	return apierrors.IsConflict(err)
}

// stagesForApplier maps an event on an applier to the Stages naming it (by index) and to the Stage
// its stagecoach.dev/stage label names.
func (r *Reconciler) stagesForApplier(ctx context.Context, obj client.Object) []reconcile.Request {
	if obj.GetNamespace() == "" {
		// A cluster-scoped object is no Stage's applier (checkApplier refuses the kind), and a
		// request without a namespace names no Stage.
		return nil
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	var stages stagecoachv1.StageList
	if err := r.List(ctx, &stages, client.InNamespace(obj.GetNamespace()),
		client.MatchingFields{applierIndexKey: applierKey(gvk.Group, gvk.Kind, obj.GetName())}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "failed to list the Stages of an applier", "applier", obj.GetName())
	}
	seen := map[types.NamespacedName]bool{}
	var reqs []reconcile.Request
	add := func(name string) {
		key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}
		if name != "" && !seen[key] {
			seen[key] = true
			reqs = append(reqs, reconcile.Request{NamespacedName: key})
		}
	}
	for i := range stages.Items {
		add(stages.Items[i].Name)
	}
	add(obj.GetLabels()[stagecoachv1.StageLabel])
	// An Application of a fleet wakes the Stages rolling out its ApplicationSet.
	for _, set := range applicationSetOwners(obj) {
		stages.Items = nil
		if err := r.List(ctx, &stages, client.InNamespace(obj.GetNamespace()),
			client.MatchingFields{applierIndexKey: applierKey(applicationSetGVK.Group, applicationSetGVK.Kind, set)}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "failed to list the Stages of an ApplicationSet", "applicationSet", set)
		}
		for i := range stages.Items {
			add(stages.Items[i].Name)
		}
	}
	return reqs
}

// stagesFrozenBy maps a Freeze event to the Stages it may hold: those of its namespace, or all
// Stages for a cluster-wide Freeze (its selectors are applied when each Stage reconciles).
func (r *Reconciler) stagesFrozenBy(ctx context.Context, obj client.Object) []reconcile.Request {
	f, ok := obj.(*stagecoachv1.Freeze)
	if !ok {
		return nil
	}
	stages, err := freeze.StagesItMayHold(ctx, r, f)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "not waking the Stages of a Freeze")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(stages))
	for i := range stages {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&stages[i])})
	}
	return reqs
}

// StagesForHookEvent finds the Stages whose applier a hook event names.
func (r *Reconciler) StagesForHookEvent(ctx context.Context, e hooks.Event) []reconcile.Request {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(schema.GroupVersionKind{Group: e.Group, Kind: e.Kind})
	obj.SetNamespace(e.Namespace)
	obj.SetName(e.Name)
	return r.stagesForApplier(ctx, obj)
}

// Wake enqueues Stages from a hook; a full queue drops the wake-up (the Stage's own watches and
// requeues still get there) rather than holding the HTTP request.
func (r *Reconciler) Wake(reqs []reconcile.Request) {
	for _, req := range reqs {
		stage := &stagecoachv1.Stage{}
		stage.Namespace, stage.Name = req.Namespace, req.Name
		select {
		case r.hookEvents <- event.GenericEvent{Object: stage}:
		case <-time.After(time.Second):
		}
	}
}

// stagesFollowing maps a Stage event to the Stages whose upstream it is.
func (r *Reconciler) stagesFollowing(ctx context.Context, obj client.Object) []reconcile.Request {
	var stages stagecoachv1.StageList
	if err := r.List(ctx, &stages, client.MatchingFields{upstreamIndexKey: obj.GetNamespace() + "/" + obj.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "failed to list the Stages following a Stage", "stage", obj.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(stages.Items))
	for i := range stages.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&stages.Items[i])})
	}
	return reqs
}

// stagesOfPromotion maps a Promotion event to its Stage and, once it has finished, to the Stages
// that follow or depend on that Stage: a dependency counts only when no Promotion of it is
// unfinished, and its Stage's status may have been written before the Promotion's phase.
func (r *Reconciler) stagesOfPromotion(ctx context.Context, obj client.Object) []reconcile.Request {
	p, ok := obj.(*stagecoachv1.Promotion)
	if !ok {
		return nil
	}
	own := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Spec.Stage}}
	if !plan.IsFinished(p) {
		return []reconcile.Request{own}
	}
	stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Spec.Stage}}
	return append(r.stagesFollowing(ctx, stage), own)
}

// promotionNeedsLook lets through the Promotion events a Stage acts on: a new or deleted
// Promotion, a change of its spec, labels or annotations, and a change of phase (one finishing
// starts the next, and may settle Stages that follow or depend on it). An update of the rest of
// its status is the controller's own write in the reconcile that already acted on it (only the
// controller writes Promotion status): looking again would only repeat that reconcile, two to
// four times per promotion (issue 21).
type promotionNeedsLook struct{}

func (promotionNeedsLook) Update(e event.UpdateEvent) bool {
	old, okOld := e.ObjectOld.(*stagecoachv1.Promotion)
	updated, okNew := e.ObjectNew.(*stagecoachv1.Promotion)
	if !okOld || !okNew {
		return true
	}
	return old.Status.Phase != updated.Status.Phase || old.Generation != updated.Generation ||
		!updated.DeletionTimestamp.IsZero() ||
		!maps.Equal(old.Labels, updated.Labels) || !maps.Equal(old.Annotations, updated.Annotations)
}

func (promotionNeedsLook) Create(event.CreateEvent) bool   { return true }
func (promotionNeedsLook) Delete(event.DeleteEvent) bool   { return true }
func (promotionNeedsLook) Generic(event.GenericEvent) bool { return true }

// stagesSharingApplier maps a Stage event to the other Stages that name the same applier.
func (r *Reconciler) stagesSharingApplier(ctx context.Context, obj client.Object) []reconcile.Request {
	stage, ok := obj.(*stagecoachv1.Stage)
	if !ok {
		return nil
	}
	var stages stagecoachv1.StageList
	if err := r.List(ctx, &stages, client.InNamespace(stage.Namespace),
		client.MatchingFields{applierIndexKey: stageApplierKey(stage)}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "failed to list the Stages sharing an applier", "stage", stage.Name)
		return nil
	}
	var reqs []reconcile.Request
	for i := range stages.Items {
		if stages.Items[i].Name != stage.Name {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&stages.Items[i])})
		}
	}
	return reqs
}

// newRunner builds what moves the Stage's Promotions from the Reconciler's own configuration;
// check runs stop with ctx, and wake the Stage they belong to.
func (r *Reconciler) newRunner(ctx context.Context, annotator *promotion.PhaseAnnotator) *promotion.Runner {
	verdicts := verify.NewCache(verify.DefaultCacheSize)
	if r.GitSource == nil {
		r.GitSource = &gitsource.Source{Reader: r.APIReader}
	}
	r.secrets = &authz.Secrets{Reader: r.APIReader, Client: r.Client, Reviews: &r.authors, Now: r.clock().Now}
	if r.GitSource.MayRead == nil {
		r.GitSource.MayRead = r.authorMayRead
	}
	if r.GitWriter == nil {
		r.GitWriter = gitwrite.New()
	}
	if r.Follower != nil {
		r.Follower.Commits = r.upstreamCommit
		r.Follower.Secrets = r.secrets
	}
	return &promotion.Runner{
		Client: r.Client, APIReader: r.APIReader, Identity: r.Identity, Events: r.Events, FluxEvents: r.FluxEvents,
		Clock: r.Clock, ClusterFreezeNamespace: r.ClusterFreezeNamespace, ServerVersion: r.ServerVersion, Observer: r.Observer,
		RegistrySource: &registry.Source{Lister: r.Registry, Secrets: r.secrets, Verdicts: verdicts},
		Follower:       r.Follower, GitSource: r.GitSource, GitWriter: r.GitWriter, Charts: r.charts(),
		Verdicts: verdicts, RegistryTransport: r.RegistryTransport, SigstoreTrustedRoot: r.SigstoreTrustedRoot,
		Checks: promotion.NewCheckRuns(&check.Runner{PluginDir: r.CheckPluginDir, AllowInternalTargets: r.AllowInternalCheckTargets,
			// A run's deadline counts from its creationTimestamp, the API server's time: the real clock.
			Runs: &runcheck.Runs{Client: r.Client, Reader: r.APIReader, Authors: &r.authors, AsAuthor: r.actAs}},
			ctx, r.Wake),
		Annotator: annotator,
		Attestor:  r.Attestor, Cluster: r.Cluster, Secrets: r.secrets,
	}
}
