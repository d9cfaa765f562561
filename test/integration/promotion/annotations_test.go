package promotion

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller"
)

// interceptingPatches has the controller's client send every Patch through patch.
func interceptingPatches(patch func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, po ...client.PatchOption) error) func(*controller.Options) {
	return func(o *controller.Options) {
		o.NewClient = func(cfg *rest.Config, opts client.Options) (client.Client, error) {
			c, err := client.NewWithWatch(cfg, opts)
			if err != nil {
				return nil, err
			}
			return interceptor.NewClient(c, interceptor.Funcs{Patch: patch}), nil
		}
	}
}

// refusingPhaseWrites makes the controller's writes of one final phase to the Application of
// namespace ns fail while refuse says so, and counts them.
func refusingPhaseWrites(ns string, phase stagecoachv1.Phase, refuse func() bool, refused *atomic.Int32) func(*controller.Options) {
	return interceptingPatches(func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, po ...client.PatchOption) error {
		if u, ok := obj.(*unstructured.Unstructured); ok && u.GetKind() == "Application" && u.GetNamespace() == ns {
			data, err := patch.Data(obj)
			// A merge patch names the annotation, a JSON patch its path.
			names := strings.Contains(string(data), stagecoachv1.PhaseAnnotation) || strings.Contains(string(data), "stagecoach.dev~1phase")
			if err == nil && names && strings.Contains(string(data), `"`+string(phase)+`"`) && refuse() {
				refused.Add(1)
				return errors.New("injected: the Application's annotation was not written")
			}
		}
		return c.Patch(ctx, obj, patch, po...)
	})
}

// The Application's phase annotation arrives even when writing it fails at first (it is tried
// again), and when the controller stops before writing it (the next one writes it).
func TestPhaseAnnotationArrivesAfterFailedWrites(t *testing.T) {
	cases := []struct {
		name      string
		operation string
		phase     stagecoachv1.Phase
		// restart: every write of the phase fails until the controller stops; a new one starts.
		restart bool
	}{
		{name: "verified, first write fails", operation: "Succeeded", phase: stagecoachv1.PhaseSucceeded},
		{name: "failed, first write fails", operation: "Failed", phase: stagecoachv1.PhaseFailed},
		{name: "verified, controller stops before writing it", operation: "Succeeded", phase: stagecoachv1.PhaseSucceeded, restart: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			app := newApplication(t, ns, "payments", ociSpec(ns))
			noRollback := false
			newStage(t, ns, "payments", func(s *stagecoachv1.Stage) {
				s.Spec.Rollback = &stagecoachv1.RollbackPolicy{Automatic: &noRollback}
			})
			var refused atomic.Int32
			refuse := func() bool { return tc.restart || refused.Load() == 0 }
			ctl := startControllerWith(t, nil, refusingPhaseWrites(ns, tc.phase, refuse, &refused))

			newPromotion(t, ns, "v1", "payments", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
			app.deploy(digest(1), false, tc.operation, "Healthy")
			eventuallyPhase(t, ns, "v1", tc.phase)
			g.Eventually(refused.Load, timeout, interval).Should(BeNumerically(">=", 1), "the annotation's write must have been refused")
			if tc.restart {
				ctl.stop()
				g.Expect(app.get().GetAnnotations()).To(HaveKeyWithValue(stagecoachv1.PhaseAnnotation, "Running"))
				startController(t, nil)
			}
			g.Eventually(func() map[string]string { return app.get().GetAnnotations() }, timeout, interval).
				Should(HaveKeyWithValue(stagecoachv1.PhaseAnnotation, string(tc.phase)))
			g.Expect(app.get().GetAnnotations()).To(HaveKeyWithValue(stagecoachv1.PromotionAnnotation, "v1"))
		})
	}
}

// The annotations tell the Promotions in their order: a verified Promotion's Succeeded (written
// after its result) comes before the next Promotion's Running, even when that one starts at once.
func TestPhaseAnnotationsKeepTheOrderOfPromotions(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	app := newApplication(t, ns, "payments", ociSpec(ns))
	newStage(t, ns, "payments", nil)

	// Every state of the annotations the API server stored, in order.
	watcher, err := client.NewWithWatch(env.Config, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion("argoproj.io/v1alpha1")
	list.SetKind("ApplicationList")
	w, err := watcher.Watch(t.Context(), list, client.InNamespace(ns))
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	var seen []string
	go func() {
		for ev := range w.ResultChan() {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok {
				a := u.GetAnnotations()
				if state := a[stagecoachv1.PromotionAnnotation] + " " + a[stagecoachv1.PhaseAnnotation]; state != " " {
					mu.Lock()
					if len(seen) == 0 || seen[len(seen)-1] != state {
						seen = append(seen, state)
					}
					mu.Unlock()
				}
			}
		}
	}()
	// The background write of a phase is slow, so that the next Promotion starts while it is
	// queued or under way.
	startControllerWith(t, nil, interceptingPatches(func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, po ...client.PatchOption) error {
		if patch.Type() == types.JSONPatchType && obj.GetNamespace() == ns {
			time.Sleep(time.Second)
		}
		return c.Patch(ctx, obj, patch, po...)
	}))

	newPromotion(t, ns, "v1", "payments", stagecoachv1.ActionPromote, digest(1), "v1")
	eventuallyPhase(t, ns, "v1", stagecoachv1.PhaseRunning)
	newPromotion(t, ns, "v2", "payments", stagecoachv1.ActionPromote, digest(2), "v2")
	app.deploy(digest(1), false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, "v1", stagecoachv1.PhaseSucceeded)
	app.deploy(digest(2), false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, "v2", stagecoachv1.PhaseSucceeded)
	g.Eventually(func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}, timeout, interval).Should(Equal([]string{"v1 Running", "v1 Succeeded", "v2 Running", "v2 Succeeded"}))
}
