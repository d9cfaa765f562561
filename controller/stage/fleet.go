package stage

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller/promotion"
	"github.com/stagecoach-dev/stagecoach/internal/applier"
	"github.com/stagecoach-dev/stagecoach/internal/waves"
)

// A fleet rollout (DESIGN §4.3): a Stage whose applyRef is an ApplicationSet with spec.waves
// promotes the Applications the ApplicationSet owns, wave by wave (controller/promotion/waves.go). Its
// clusters are the Argo CD cluster Secrets of the ApplicationSet's own namespace, which is the
// Stage's namespace: Argo CD keeps ApplicationSets and cluster Secrets in its namespace, so the
// Stage lives there too; a cluster Secret elsewhere is not read.

var (
	applicationGVK    = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"}
	applicationSetGVK = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "ApplicationSet"}
)

// applicationOwnerIndexKey indexes Applications by the ApplicationSets owning them.
const applicationOwnerIndexKey = ".metadata.ownerReferences.applicationSet"

// wavesIndexKey indexes Stages that roll out in waves, so that a cluster Secret event reaches
// only those of its namespace.
const wavesIndexKey = ".spec.waves"

// ClusterSecretCache keeps only Argo CD cluster Secrets in the cache: the controller lists and
// watches Secrets for fleet rollouts, and must not hold every Secret of the cluster in memory.
func ClusterSecretCache(o *cache.Options) {
	if o.ByObject == nil {
		o.ByObject = map[client.Object]cache.ByObject{}
	}
	o.ByObject[&corev1.Secret{}] = cache.ByObject{
		Label: labels.SelectorFromSet(labels.Set{waves.SecretTypeLabel: waves.SecretTypeCluster}),
	}
}

// applicationSetOwners are the names of the ApplicationSets owning an object.
func applicationSetOwners(o client.Object) []string {
	var names []string
	for _, ref := range o.GetOwnerReferences() {
		if ref.Kind == applicationSetGVK.Kind && strings.HasPrefix(ref.APIVersion, applicationSetGVK.Group+"/") {
			names = append(names, ref.Name)
		}
	}
	return names
}

// setupFleet registers the index of Stages with waves.
func (r *Reconciler) setupFleet(ctx context.Context, mgr ctrl.Manager) error {
	r.fleet = &fleetWatches{cache: mgr.GetCache()}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &stagecoachv1.Stage{}, wavesIndexKey, func(o client.Object) []string {
		if s := o.(*stagecoachv1.Stage); len(s.Spec.Waves) > 0 {
			return []string{"true"}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("failed to index Stages by waves: %w", err)
	}
	return nil
}

// fleetWatches starts, the first time a Stage rolls out in waves, the index of Applications by
// owner and the watch of cluster Secrets: a controller without such Stages neither lists
// Secrets nor needs Argo CD installed.
type fleetWatches struct {
	mu      sync.Mutex
	started bool
	// cache is the manager's: it holds every Application (the generated ones need not carry the
	// Stage label the cache of appliers selects on) and the cluster Secrets (label-selected).
	cache cache.Cache
}

func (r *Reconciler) ensureFleetWatches(ctx context.Context) error {
	f := r.fleet
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.started {
		return nil
	}
	app := &unstructured.Unstructured{}
	app.SetGroupVersionKind(applicationGVK)
	if err := f.cache.IndexField(ctx, app, applicationOwnerIndexKey, applicationSetOwners); err != nil {
		return fmt.Errorf("failed to index Applications by ApplicationSet: %w", err)
	}
	// Application events reach the Stage through stagesForApplier (by owner).
	if err := r.watcher.controller.Watch(source.Kind(f.cache, client.Object(app), r.watcher.handler)); err != nil {
		return fmt.Errorf("failed to watch the Applications of ApplicationSets: %w", err)
	}
	if err := r.watcher.controller.Watch(source.Kind(f.cache, client.Object(&corev1.Secret{}),
		handler.EnqueueRequestsFromMapFunc(r.stagesForClusterSecret))); err != nil {
		return fmt.Errorf("failed to watch Argo CD cluster Secrets: %w", err)
	}
	f.started = true
	return nil
}

// stagesForClusterSecret maps a cluster Secret event to the Stages of its namespace with waves
// whose selectors match its labels (an update is mapped for the old labels and the new).
func (r *Reconciler) stagesForClusterSecret(ctx context.Context, obj client.Object) []reconcile.Request {
	if obj.GetLabels()[waves.SecretTypeLabel] != waves.SecretTypeCluster {
		return nil
	}
	var stages stagecoachv1.StageList
	if err := r.List(ctx, &stages, client.InNamespace(obj.GetNamespace()), client.MatchingFields{wavesIndexKey: "true"}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "failed to list the Stages with waves for a cluster Secret", "secret", obj.GetName())
		return nil
	}
	var reqs []reconcile.Request
	for i := range stages.Items {
		if wavesMayMatch(stages.Items[i].Spec.Waves, obj.GetLabels()) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&stages.Items[i])})
		}
	}
	return reqs
}

// wavesMayMatch reports whether any wave's selector matches the labels; an invalid selector
// counts as a match, so the Stage gets to say what is wrong with it.
func wavesMayMatch(ws []stagecoachv1.Wave, set map[string]string) bool {
	for _, w := range ws {
		if w.Selector == nil {
			return true
		}
		sel, err := metav1.LabelSelectorAsSelector(w.Selector)
		if err != nil || sel.Matches(labels.Set(set)) {
			return true
		}
	}
	return false
}

// chooseFleet makes an ApplicationSet with waves the Stage's engine when its Applications can be
// promoted and the wave plan takes them all (or allowPartial says leaving some out is meant).
func (r *Reconciler) chooseFleet(ctx context.Context, stage *stagecoachv1.Stage, v *applierVerdict) error {
	described := fmt.Sprintf("ApplicationSet '%s/%s'", stage.Namespace, stage.Spec.ApplyRef.Name)
	notReady := func(reason, msg string, stalled bool) error {
		v.ready, v.reason, v.message, v.stalled = false, reason, msg, stalled
		return nil
	}
	if len(stage.Spec.Waves) == 0 {
		return notReady(stagecoachv1.ReasonApplierNotSupported, fmt.Sprintf(
			"%s is promoted in waves only: add spec.waves (one wave with an empty selector takes every cluster), or point spec.applyRef at an Application", described), true)
	}
	if _, err := r.RESTMapper.RESTMapping(applicationGVK.GroupKind(), applicationGVK.Version); err != nil {
		return notReady(stagecoachv1.ReasonApplierUnreadable, described+" cannot be promoted: the Argo CD Application CRD is not installed", false)
	}
	if err := r.ensureFleetWatches(ctx); err != nil {
		return err
	}
	fleet, problems, err := r.readFleet(ctx, v.obj)
	if err != nil {
		return err
	}
	if len(fleet.Apps) == 0 {
		v.retry = true
		return notReady(stagecoachv1.ReasonApplierUnreadable, fmt.Sprintf(
			"%s owns no Applications yet: check its generators, or wait for the applicationset-controller to create them", described), false)
	}
	for _, app := range fleet.Apps {
		blocking, unmediated := applier.ArgoCDApplication{}.Validate(app)
		if blocking != nil {
			return notReady(blocking.Reason, fmt.Sprintf("%s: %s (fix the ApplicationSet's template)", described, blocking.Message), false)
		}
		if unmediated != nil && v.unmediated == nil {
			v.unmediated = unmediated
		}
	}
	// Said first: an unlabelled target is not guarded at all, whatever else decides what it runs.
	if p := unlabelledTargets(stage.Name, described, fleet.Apps); p != nil {
		v.unmediated = p
	}
	if len(problems) > 0 {
		return notReady(stagecoachv1.ReasonWavePlanRefused, fmt.Sprintf("%s: %s", described, strings.Join(problems, "; ")), false)
	}
	d := waves.Schedule(waves.Input{Stage: stage.Name, Targets: fleet.Targets, Waves: stage.Spec.Waves, AllowPartial: stage.Spec.AllowPartial})
	if d.Refused {
		return notReady(stagecoachv1.ReasonWavePlanRefused, fmt.Sprintf("%s: %s", described, d.Message), true)
	}
	v.fleet = fleet
	v.message = fmt.Sprintf("%s is readable and labelled for this Stage; its %d Applications roll out in %d waves", described, len(fleet.Apps), len(d.Plan))
	return nil
}

// unlabelledTargets is why a fleet is not mediated while some of its Applications lack the
// label stagecoach.dev/stage=<stage>: the Application guard selects Applications by that label,
// so anyone who may edit an unlabelled one can change what it runs. nil when all carry it.
func unlabelledTargets(stage, described string, apps []*unstructured.Unstructured) *applier.Problem {
	var missing []string
	for _, app := range apps {
		switch value, ok := app.GetLabels()[stagecoachv1.StageLabel]; {
		case !ok:
			missing = append(missing, app.GetName())
		case value != stage:
			missing = append(missing, fmt.Sprintf("%s (labelled for Stage %q)", app.GetName(), value))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	const most = 5
	listed := strings.Join(missing[:min(len(missing), most)], ", ")
	if len(missing) > most {
		listed += fmt.Sprintf(" and %d more", len(missing)-most)
	}
	return &applier.Problem{Reason: stagecoachv1.ReasonTargetsUnlabelled, Message: fmt.Sprintf(
		"%d of the %d Applications of %s lack the label %s=%s (%s): the Application guard does not cover them, so anyone who may edit them can change what they run; "+
			"add %s: %s to the ApplicationSet's spec.template.metadata.labels (its spec is guarded: ask a break-glass member)",
		len(missing), len(apps), described, stagecoachv1.StageLabel, stage, listed, stagecoachv1.StageLabel, stage)}
}

// readFleet reads the ApplicationSet's Applications (by the owner index) and its namespace's
// cluster Secrets from the cache, and resolves each Application's cluster.
func (r *Reconciler) readFleet(ctx context.Context, appSet *unstructured.Unstructured) (*promotion.Fleet, []string, error) {
	apps := &unstructured.UnstructuredList{}
	apps.SetGroupVersionKind(applicationGVK.GroupVersion().WithKind("ApplicationList"))
	if err := r.fleet.cache.List(ctx, apps, client.InNamespace(appSet.GetNamespace()),
		client.MatchingFields{applicationOwnerIndexKey: appSet.GetName()}); err != nil {
		return nil, nil, fmt.Errorf("failed to list the Applications of ApplicationSet %q: %w", appSet.GetName(), err)
	}
	var secrets corev1.SecretList
	if err := r.fleet.cache.List(ctx, &secrets, client.InNamespace(appSet.GetNamespace()),
		client.MatchingLabels{waves.SecretTypeLabel: waves.SecretTypeCluster}); err != nil {
		return nil, nil, fmt.Errorf("failed to list the Argo CD cluster Secrets of namespace %q: %w", appSet.GetNamespace(), err)
	}
	raw := make([]unstructured.Unstructured, 0, len(secrets.Items))
	for i := range secrets.Items {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&secrets.Items[i])
		if err != nil {
			return nil, nil, fmt.Errorf("failed to read cluster Secret %q: %w", secrets.Items[i].Name, err)
		}
		raw = append(raw, unstructured.Unstructured{Object: m})
	}
	targets, problems := waves.ResolveTargets(appSet, apps.Items, raw)
	fleet := &promotion.Fleet{Targets: targets}
	for _, app := range waves.Owned(appSet, apps.Items) {
		fleet.Apps = append(fleet.Apps, app.DeepCopy())
	}
	return fleet, problems, nil
}
