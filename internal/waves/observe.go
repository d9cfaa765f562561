package waves

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/applier"
)

// Observed is one target's phase for a digest, why, and when time alone may change it.
type Observed struct {
	Phase   v1alpha1.Phase
	Message string
	// Recheck is when the phase may change without any write to the Application (its grace
	// ends, its deadline passes); zero when only an event can change it.
	Recheck time.Time
}

// ObserveTarget tells where one Application stands for the digest, with the same proof as a
// single Application (applier.ArgoCDApplication.Observe): Pending while it is told to run
// something else; Succeeded once it has landed and held for grace (counted from the sync's
// finishedAt, so no memory is needed between reconciles); Failed when the sync of the digest
// failed, or it has not landed within deadline of the time Stagecoach wrote it (the
// AppliedAtAnnotation); Running otherwise.
func ObserveTarget(app *unstructured.Unstructured, digest string, now time.Time, grace, deadline time.Duration) Observed {
	engine := applier.ArgoCDApplication{}
	if engine.Revision(app) != digest {
		return Observed{Phase: v1alpha1.PhasePending, Message: "not promoted yet"}
	}
	obs := engine.Observe(app, digest)
	landedAt := nestedString(app, "status", "operationState", "finishedAt")
	if obs.Phase == applier.Progressing {
		written, _ := time.Parse(time.RFC3339, app.GetAnnotations()[v1alpha1.AppliedAtAnnotation]) // zero: not proven
		if at, ok := engine.AlreadyLive(app, digest, written); ok {
			obs = applier.Observation{Phase: applier.Landed, Message: fmt.Sprintf(
				"Argo CD compared it at %s after the digest was written: Synced at %s and Healthy, nothing to sync (its last sync, of another revision, ended %s)",
				at, digest, nestedString(app, "status", "operationState", "phase"))}
			landedAt = at
		}
	}
	switch obs.Phase {
	case applier.Failed:
		return Observed{Phase: v1alpha1.PhaseFailed, Message: obs.Message}
	case applier.Landed:
		finished, err := time.Parse(time.RFC3339, landedAt)
		if err != nil {
			return Observed{Phase: v1alpha1.PhaseSucceeded, Message: obs.Message}
		}
		// finishedAt keeps whole seconds: count from the end of its second.
		held := finished.Add(time.Second + grace)
		if grace > 0 && now.Before(held) {
			return Observed{Phase: v1alpha1.PhaseRunning, Message: "landed, holding for the grace period: " + obs.Message, Recheck: held}
		}
		return Observed{Phase: v1alpha1.PhaseSucceeded, Message: obs.Message}
	}
	if applied, err := time.Parse(time.RFC3339, app.GetAnnotations()[v1alpha1.AppliedAtAnnotation]); err == nil && deadline > 0 {
		// Seconds again: the deadline is never cut short by the rounding.
		end := applied.Add(time.Second + deadline)
		if !now.Before(end) {
			return Observed{Phase: v1alpha1.PhaseFailed, Message: fmt.Sprintf("did not land within the progress deadline of %s: %s", deadline, obs.Message)}
		}
		return Observed{Phase: v1alpha1.PhaseRunning, Message: obs.Message, Recheck: end}
	}
	return Observed{Phase: v1alpha1.PhaseRunning, Message: obs.Message}
}

func nestedString(obj *unstructured.Unstructured, path ...string) string {
	s, _, _ := unstructured.NestedString(obj.Object, path...)
	return s
}
