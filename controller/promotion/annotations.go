package promotion

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// The applier's phase annotation (stagecoach.dev/phase, for the engine's UI and notifications)
// follows a verified Promotion's result instead of preceding it. An Application is the costliest
// object a promotion writes (the API server answers 100 Application writes at once about twice
// as slowly as 100 Promotion status writes; make bench-scale prints both), and when many
// promotions land at once their results should not queue behind it: the annotations are written
// by PhaseAnnotator, a couple at a time, while the Stage workers go on. The order the annotations
// tell stays the order of the Promotions: before a Promotion writes the applier, the previous
// one's pending annotation is written (flush). A controller that stops with annotations pending
// leaves Running on a finished Promotion; the next reconcile queues the phase it ended in
// (catchUpAnnotations).

// phaseAnnotatorWorkers is how many annotations are written at once.
const phaseAnnotatorWorkers = 2

// phaseAnnotation is the phase to write on an applier, for the Promotion its annotations name.
type phaseAnnotation struct {
	promotion string
	phase     stagecoachv1.Phase
}

// PhaseAnnotator writes appliers' final phase annotations in the background.
type PhaseAnnotator struct {
	client client.Client
	queue  workqueue.TypedRateLimitingInterface[objectID]

	mu sync.Mutex
	// want holds the annotations queued and not yet taken by a worker (the newest per applier).
	want map[objectID]phaseAnnotation
	// writing holds the appliers a worker writes now; the channel closes when it is done.
	writing map[objectID]chan struct{}
}

func NewPhaseAnnotator(c client.Client) *PhaseAnnotator {
	return &PhaseAnnotator{
		client: c,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[objectID](),
			workqueue.TypedRateLimitingQueueConfig[objectID]{Name: "phase-annotations"}),
		want:    map[objectID]phaseAnnotation{},
		writing: map[objectID]chan struct{}{},
	}
}

// objectID names an applier object.
type objectID struct {
	gvk       schema.GroupVersionKind
	namespace string
	name      string
}

func applierID(obj *unstructured.Unstructured) objectID {
	return objectID{obj.GroupVersionKind(), obj.GetNamespace(), obj.GetName()}
}

// enqueue asks for the annotation to be written soon.
func (a *PhaseAnnotator) enqueue(id objectID, ann phaseAnnotation) {
	a.mu.Lock()
	a.want[id] = ann
	a.mu.Unlock()
	a.queue.Add(id)
}

// pending tells whether an annotation of the applier is queued or being written.
func (a *PhaseAnnotator) pending(id objectID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, queued := a.want[id]
	_, writing := a.writing[id]
	return queued || writing
}

// flush writes the applier's pending annotation now (or waits for the worker writing it), so that
// a new Promotion's write to the applier comes after it.
func (a *PhaseAnnotator) flush(ctx context.Context, id objectID) error {
	a.mu.Lock()
	ann, queued := a.want[id]
	delete(a.want, id)
	done := a.writing[id]
	a.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if !queued {
		return nil
	}
	return a.write(ctx, id, ann)
}

// Start runs the workers until ctx ends (a manager Runnable: only the leader writes).
func (a *PhaseAnnotator) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	for range phaseAnnotatorWorkers {
		wg.Go(func() {
			for a.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	a.queue.ShutDown()
	wg.Wait()
	return nil
}

// next writes one queued annotation; false once the queue is shut down.
func (a *PhaseAnnotator) next(ctx context.Context) bool {
	id, shutdown := a.queue.Get()
	if shutdown {
		return false
	}
	defer a.queue.Done(id)
	a.mu.Lock()
	ann, ok := a.want[id]
	if !ok {
		a.mu.Unlock()
		return true // flushed already
	}
	delete(a.want, id)
	done := make(chan struct{})
	a.writing[id] = done
	a.mu.Unlock()

	err := a.write(ctx, id, ann)

	a.mu.Lock()
	delete(a.writing, id)
	close(done)
	if err != nil {
		if _, newer := a.want[id]; !newer {
			a.want[id] = ann
		}
	}
	a.mu.Unlock()
	if err != nil && ctx.Err() != nil {
		return true // stopping: the next start catches up (catchUpAnnotations)
	}
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("writing the applier's phase annotation failed; trying again", "applier", id.namespace+"/"+id.name,
			"kind", id.gvk.Kind, "promotion", ann.promotion, "error", err.Error())
		a.queue.AddRateLimited(id)
		return true
	}
	a.queue.Forget(id)
	return true
}

// write sets the phase annotation if the applier's annotations still name the Promotion: a JSON
// patch whose test fails changes nothing, and a newer Promotion's annotations stay.
func (a *PhaseAnnotator) write(ctx context.Context, id objectID, ann phaseAnnotation) error {
	pointer := func(key string) string {
		return "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
	}
	patch, err := json.Marshal([]map[string]string{
		{"op": "test", "path": pointer(stagecoachv1.PromotionAnnotation), "value": ann.promotion},
		{"op": "add", "path": pointer(stagecoachv1.PhaseAnnotation), "value": string(ann.phase)},
	})
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(id.gvk)
	obj.SetNamespace(id.namespace)
	obj.SetName(id.name)
	err = a.client.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, patch))
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsInvalid(err):
		// The test failed: another Promotion's annotations are there now (or none are).
		ctrl.LoggerFrom(ctx).V(1).Info("not annotating the applier: it names another Promotion now", "applier", id.namespace+"/"+id.name,
			"promotion", ann.promotion)
		return nil
	}
	return fmt.Errorf("failed to annotate %s %s/%s with phase %s of Promotion %s: %w", id.gvk.Kind, id.namespace, id.name, ann.phase, ann.promotion, err)
}

// annotateVerified writes the applier's phase annotation of a Promotion that was verified.
func (run *Run) annotateVerified(ctx context.Context, p *stagecoachv1.Promotion) error {
	return run.annotateEnded(ctx, p, stagecoachv1.PhaseSucceeded)
}

// annotateEnded writes the applier's phase annotation of an ended Promotion: in the background
// (PhaseAnnotator) when the controller runs one and the applier is one object, else now (a
// fleet's Applications are annotated together, by the rollout).
func (run *Run) annotateEnded(ctx context.Context, p *stagecoachv1.Promotion, phase stagecoachv1.Phase) error {
	a := run.r.Annotator
	if a == nil || !run.annotatesApplier() {
		return run.annotate(ctx, p, phase)
	}
	// One write queued or in flight is enough: the worker retries it until it lands.
	if id := applierID(run.obj); !a.pending(id) {
		a.enqueue(id, phaseAnnotation{promotion: p.Name, phase: phase})
	}
	return nil
}

// flushAnnotations writes the applier's pending phase annotation before a new Promotion writes
// the applier, so that the annotations tell the Promotions in their order. (The applier read
// before may predate that write: annotationBase keeps the new Promotion's patch whole.)
func (run *Run) flushAnnotations(ctx context.Context) error {
	if run.r.Annotator == nil || run.obj == nil {
		return nil
	}
	return run.r.Annotator.flush(ctx, applierID(run.obj))
}

// annotationBase is the object a patch of the Promotion annotations is computed against: obj
// without them, so that the patch always carries all three. The object read may predate the
// phase annotator's last write (a Running read then, Succeeded now), and a merge patch leaves out
// what it takes for unchanged.
func annotationBase(obj *unstructured.Unstructured) *unstructured.Unstructured {
	base := obj.DeepCopy()
	annotations := base.GetAnnotations()
	for _, key := range []string{stagecoachv1.VersionAnnotation, stagecoachv1.PromotionAnnotation, stagecoachv1.PhaseAnnotation} {
		delete(annotations, key)
	}
	base.SetAnnotations(annotations)
	return base
}

// catchUpAnnotations finishes the applier's phase annotation for a Promotion that ended without
// it: the controller stopped with the annotation pending (or its writes failed until then), so
// the applier still says Running.
func (run *Run) catchUpAnnotations(ctx context.Context) error {
	if run.obj == nil {
		return nil
	}
	annotations := run.obj.GetAnnotations()
	if annotations[stagecoachv1.PhaseAnnotation] != string(stagecoachv1.PhaseRunning) {
		return nil
	}
	for i := range run.promotions {
		p := &run.promotions[i]
		if p.Name != annotations[stagecoachv1.PromotionAnnotation] {
			continue
		}
		phase := p.Status.Phase
		if phase != stagecoachv1.PhaseSucceeded && phase != stagecoachv1.PhaseFailed {
			return nil
		}
		return run.annotateEnded(ctx, p, phase)
	}
	return nil
}

// annotate keeps the applier's stagecoach.dev annotations current, for notification templates.
func (run *Run) annotate(ctx context.Context, p *stagecoachv1.Promotion, phase stagecoachv1.Phase) error {
	if !run.annotatesApplier() {
		return nil
	}
	orig := annotationBase(run.obj)
	setPromotionAnnotations(run.obj, p, phase)
	if err := run.r.Patch(ctx, run.obj, client.MergeFrom(orig)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to annotate %s %q: %w", run.obj.GetKind(), run.obj.GetName(), err)
	}
	return nil
}

// annotatesApplier reports whether the applier object carries the Promotion annotations: it is
// readable, and is not a fleet's ApplicationSet (its Applications say it per target).
func (run *Run) annotatesApplier() bool {
	return run.obj != nil && (run.rollout == nil || run.rollout.phaseOnApplier())
}
