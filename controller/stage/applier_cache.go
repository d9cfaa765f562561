package stage

import (
	"context"
	"fmt"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/applier"
)

// NewApplierCache is the cache of the engines' objects (Applications, Kustomizations, …): only
// those labelled stagecoach.dev/stage, without managedFields. A cluster holds many more of them
// than Stages (4,500 unlabelled Applications beside 500 Stages tripled the controller's memory).
// It is a cache of its own, not ByObject in the manager's, because ByObject needs each kind's CRD
// at start and the controller must run before Argo CD or Flux is installed.
func NewApplierCache(mgr ctrl.Manager, namespaces []string) (cache.Cache, error) {
	labelled, err := labels.NewRequirement(stagecoachv1.StageLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	opts := cache.Options{
		HTTPClient:           mgr.GetHTTPClient(),
		Scheme:               mgr.GetScheme(),
		Mapper:               mgr.GetRESTMapper(),
		DefaultLabelSelector: labels.NewSelector().Add(*labelled),
		DefaultTransform:     SlimCached,
		// A kind no Stage watches is read live, never by starting an informer for one read.
		ReaderFailOnMissingInformer: true,
	}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return cache.New(mgr.GetConfig(), opts)
}

// SlimCached is every cache's transform: objects are kept without managedFields, and engine
// objects (unstructured) as applier.Slim cuts them (at 5,000 Stages the cached Applications were
// two thirds of the controller's heap). Completion rules that read what it drops read their
// applier live (readerFor); applier_cache_readers_test.go holds every other reader to it.
func SlimCached(obj any) (any, error) {
	obj, err := stripManagedFields(obj)
	if err != nil {
		return nil, err
	}
	return applier.Slim(obj)
}

var stripManagedFields = cache.TransformStripManagedFields()

// CacheRunnable starts a cache with the manager's own, before the controllers, on every replica.
type CacheRunnable struct{ cache.Cache }

func (c CacheRunnable) GetCache() cache.Cache { return c.Cache }

// ApplierReader reads appliers from the label-selected cache when that is as good as a live read,
// and live otherwise:
//   - the kind's informer is not running or has not synced: live;
//   - not in the cache (missing, unlabelled, or forbidden to list): live, which tells a missing
//     object from a Forbidden answer and from one that lacks the label;
//   - in the cache but older than the controller's own last write to it (resourceVersion, the
//     write's answer): live, so that no decision is taken from a state before our own write.
type ApplierReader struct {
	cache cache.Cache // nil reads everything live
	live  client.Reader

	mu      sync.Mutex
	watched map[schema.GroupVersionKind]bool
	written map[objectID]string
}

type objectID struct {
	gvk       schema.GroupVersionKind
	namespace string
	name      string
}

var _ client.Reader = (*ApplierReader)(nil)

// watch marks a kind as cached (its informer was started by applierWatcher).
func (a *ApplierReader) watch(gvk schema.GroupVersionKind) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.watched == nil {
		a.watched = map[schema.GroupVersionKind]bool{}
	}
	a.watched[gvk] = true
}

// wrote records the resourceVersion the API server gave an object the controller wrote.
func (a *ApplierReader) wrote(obj client.Object) {
	u, ok := obj.(*unstructured.Unstructured)
	if a == nil || !ok || u.GetResourceVersion() == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.written == nil {
		a.written = map[objectID]string{}
	}
	a.written[objectID{u.GroupVersionKind(), u.GetNamespace(), u.GetName()}] = u.GetResourceVersion()
}

// Get reads an applier: see ApplierReader.
func (a *ApplierReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if u, ok := obj.(*unstructured.Unstructured); ok && a.cache != nil && a.synced(ctx, u) {
		err := a.cache.Get(ctx, key, u, opts...)
		if err == nil && a.fresh(u) {
			return nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			ctrl.LoggerFrom(ctx).V(1).Info("reading the applier live: the cache did not answer", "applier", key, "error", err.Error())
		}
	}
	return a.live.Get(ctx, key, obj, opts...)
}

// List is always live: appliers are read one by one.
func (a *ApplierReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return a.live.List(ctx, list, opts...)
}

// synced tells whether the kind's informer runs and has synced, without waiting for it.
func (a *ApplierReader) synced(ctx context.Context, u *unstructured.Unstructured) bool {
	a.mu.Lock()
	watched := a.watched[u.GroupVersionKind()]
	a.mu.Unlock()
	if !watched {
		return false
	}
	probe := &unstructured.Unstructured{}
	probe.SetGroupVersionKind(u.GroupVersionKind())
	informer, err := a.cache.GetInformer(ctx, probe, cache.BlockUntilSynced(false))
	return err == nil && informer.HasSynced()
}

// fresh tells whether a cached object is at least as new as the controller's last write to it.
func (a *ApplierReader) fresh(u *unstructured.Unstructured) bool {
	a.mu.Lock()
	want, ok := a.written[objectID{u.GroupVersionKind(), u.GetNamespace(), u.GetName()}]
	a.mu.Unlock()
	if !ok {
		return true
	}
	cmp, err := resourceversion.CompareResourceVersion(u.GetResourceVersion(), want)
	return err == nil && cmp >= 0
}

// WriteTrackingClient tells the ApplierReader of every write to an engine object, so that a
// cached read never returns a state older than the controller's own write.
type WriteTrackingClient struct {
	client.Client
	appliers *ApplierReader
}

func (c WriteTrackingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	err := c.Client.Patch(ctx, obj, patch, opts...)
	if err == nil && !isDryRun(opts) {
		c.appliers.wrote(obj)
	}
	return err
}

func (c WriteTrackingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	err := c.Client.Update(ctx, obj, opts...)
	if err == nil {
		c.appliers.wrote(obj)
	}
	return err
}

func isDryRun(opts []client.PatchOption) bool {
	po := &client.PatchOptions{}
	po.ApplyOptions(opts)
	return len(po.DryRun) > 0
}

// applierWatcher starts a watch on an applier kind the first time a Stage names it and its CRD
// exists, so the controller runs without Argo CD or Flux installed and picks them up later
// without a restart.
type applierWatcher struct {
	mu       sync.Mutex
	watching map[schema.GroupVersionKind]bool
	// resources the controller was found allowed to list and watch.
	resources map[schema.GroupVersionResource]bool
	// namespaces the cache watches; none: cluster-wide.
	namespaces []string
	cache      cache.Cache
	controller controller.Controller
	handler    handler.EventHandler
	appliers   *ApplierReader
}

// denied returns the first of list and watch the controller may not do on resource in the
// namespaces it watches ("" when it may do both), asked by SelfSubjectAccessReview. Once a kind
// is watched it is not asked again.
func (w *applierWatcher) denied(ctx context.Context, c client.Client, resource schema.GroupVersionResource) (string, error) {
	w.mu.Lock()
	watched := w.resources[resource]
	w.mu.Unlock()
	if watched {
		return "", nil
	}
	namespaces := w.namespaces
	if len(namespaces) == 0 {
		namespaces = []string{""} // cluster-wide
	}
	for _, ns := range namespaces {
		for _, verb := range []string{"list", "watch"} {
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb,
					Group: resource.Group, Version: resource.Version, Resource: resource.Resource}}}
			if err := c.Create(ctx, review); err != nil {
				return "", err
			}
			if !review.Status.Allowed {
				if ns == "" {
					return verb + " (cluster-wide)", nil
				}
				return verb + " (in namespace " + ns + ")", nil
			}
		}
	}
	w.mu.Lock()
	if w.resources == nil {
		w.resources = map[schema.GroupVersionResource]bool{}
	}
	w.resources[resource] = true
	w.mu.Unlock()
	return "", nil
}

func (w *applierWatcher) ensure(gvk schema.GroupVersionKind) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watching[gvk] {
		return nil
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	if err := w.controller.Watch(source.Kind(w.cache, client.Object(obj), w.handler)); err != nil {
		return fmt.Errorf("failed to watch %s: %w", gvk.GroupKind(), err)
	}
	if w.watching == nil {
		w.watching = map[schema.GroupVersionKind]bool{}
	}
	w.watching[gvk] = true
	w.appliers.watch(gvk)
	return nil
}

// NewApplierReader reads appliers from c where that is as good as a live read, else from live.
func NewApplierReader(c cache.Cache, live client.Reader) *ApplierReader {
	return &ApplierReader{cache: c, live: live}
}

// NewWriteTrackingClient is c, telling appliers of every write it makes to an engine object.
func NewWriteTrackingClient(c client.Client, appliers *ApplierReader) WriteTrackingClient {
	return WriteTrackingClient{Client: c, appliers: appliers}
}
