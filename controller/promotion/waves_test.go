package promotion

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/applier"
)

// TestPromoteTargets: a step's targets are written together, each with the digest, the refresh
// request and the Promotion's annotations; a write that fails is named and does not keep the
// others from being written.
func TestPromoteTargets(t *testing.T) {
	const targets = promoteWrites + 4 // more than are written at once
	for _, tc := range []struct {
		name string
		// failing is the Application whose write the API server refuses ("" for none).
		failing string
		// together: the first promoteWrites writes each wait until that many are in flight.
		together bool
	}{
		{name: "every target is written, promoteWrites at a time", together: true},
		{name: "a refused write is named and the other targets are still written", failing: "payments-c07"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var mu sync.Mutex
			inFlight, most, waited := 0, 0, 0
			full, fill := make(chan struct{}), sync.Once{}
			intercept := &interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if obj.GetObjectKind().GroupVersionKind().Kind != "Application" {
					return c.Patch(ctx, obj, patch, opts...)
				}
				if obj.GetName() == tc.failing {
					return errors.New("admission refused the write")
				}
				mu.Lock()
				inFlight++
				most = max(most, inFlight)
				wait := tc.together && waited < promoteWrites
				if wait {
					waited++
				}
				if inFlight == promoteWrites {
					fill.Do(func() { close(full) })
				}
				mu.Unlock()
				defer func() { mu.Lock(); inFlight--; mu.Unlock() }()
				if wait {
					// Written one after another, the first write would wait here alone.
					select {
					case <-full:
					case <-time.After(5 * time.Second):
						return fmt.Errorf("%s: no %d writes were in flight together", obj.GetName(), promoteWrites)
					}
				}
				return c.Patch(ctx, obj, patch, opts...)
			}}
			env := newStepEnv(t, stepFixture{stage: stepStage(nil), intercept: intercept})
			fleet := &Fleet{}
			var names []string
			for i := range targets {
				app := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
					"source": map[string]any{"repoURL": "oci://registry.example/deploy/payments", "path": ".", "targetRevision": digestV1}}}}
				app.SetGroupVersionKind(appGVK)
				app.SetNamespace("prod")
				app.SetName(fmt.Sprintf("payments-c%02d", i))
				g.Expect(env.c.Create(t.Context(), app)).To(Succeed())
				fleet.Apps = append(fleet.Apps, app)
				names = append(names, app.GetName())
			}
			p := stepPromotion("p", stagecoachv1.ActionPromote, digestV2, running(nil, nil))

			err := fleet.promote(t.Context(), env.run, p, names)

			if tc.failing != "" {
				g.Expect(err).To(MatchError(ContainSubstring(fmt.Sprintf("Application %q of Stage %q", tc.failing, "payments"))))
				g.Expect(err).To(MatchError(ContainSubstring("admission refused the write")))
			} else {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(most).To(Equal(promoteWrites), "writes in flight at once")
			}
			for _, name := range names {
				app := &unstructured.Unstructured{}
				app.SetGroupVersionKind(appGVK)
				g.Expect(env.c.Get(t.Context(), client.ObjectKey{Namespace: "prod", Name: name}, app)).To(Succeed())
				want, refresh := digestV2, "normal"
				if name == tc.failing {
					want, refresh = digestV1, ""
				}
				g.Expect(applier.ArgoCDApplication{}.Revision(app)).To(Equal(want), "Application %s", name)
				g.Expect(app.GetAnnotations()[applier.RefreshAnnotation]).To(Equal(refresh), "Application %s", name)
				if name != tc.failing {
					g.Expect(app.GetAnnotations()).To(HaveKeyWithValue(stagecoachv1.PromotionAnnotation, "p"), "Application %s", name)
					g.Expect(app.GetAnnotations()).To(HaveKeyWithValue(stagecoachv1.AppliedAtAnnotation, stepNow.Format(time.RFC3339)), "Application %s", name)
				}
			}
		})
	}
}
