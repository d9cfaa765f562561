package promotion

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller"
)

// At the hour a daylight-saving change repeats or skips, a Stage with a time window still gets its
// Promotion a status at once (the window is evaluated, not looped on), and another namespace's
// Promotion starts meanwhile. The controller's clock is held at the change.
func TestWindowAtADaylightSavingChange(t *testing.T) {
	berlin := stagecoachv1.TimeWindow{Schedule: "0 9 * * *", Duration: metav1.Duration{Duration: 8 * time.Hour}, TimeZone: "Europe/Berlin"}
	tests := []struct {
		name string
		now  time.Time
	}{
		{name: "fall back in Berlin (02:00-03:00 twice)", now: time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC)},
		{name: "spring forward in Berlin (02:00-03:00 skipped)", now: time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			windowed, other := newNamespace(t), newNamespace(t)
			newApplication(t, windowed, "prod", ociSpec(windowed))
			newStage(t, windowed, "prod", func(s *stagecoachv1.Stage) {
				s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Windows: []stagecoachv1.TimeWindow{berlin}}
			})
			app := newApplication(t, other, "prod", ociSpec(other))
			newStage(t, other, "prod", nil)
			startControllerWith(t, nil, func(o *controller.Options) { o.Clock = clocktesting.NewFakePassiveClock(tt.now) })

			newPromotion(t, windowed, "v1", "prod", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
			newPromotion(t, other, "v1", "prod", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
			g.Eventually(func(g Gomega) {
				p := getPromotion(g, t.Context(), windowed, "v1")
				g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhasePending))
				g.Expect(p.Status.Message).To(ContainSubstring("window:"))
			}, timeout, interval).Should(Succeed())
			app.waitForRevision(digest(1), false)
			eventuallyPhase(t, other, "v1", stagecoachv1.PhaseRunning)
		})
	}
}
