package plan

import (
	"fmt"
	"time"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/applier"
)

// Step is what happens next to a running Promotion.
type Step string

const (
	// StepApply writes the version to the applier.
	StepApply Step = "Apply"
	// StepWait waits for the engine; nothing changes.
	StepWait Step = "Wait"
	// StepLanded records that the engine proved the version runs; the grace period starts.
	StepLanded Step = "Landed"
	// StepUnlanded records that the proof went away within the grace period.
	StepUnlanded Step = "Unlanded"
	// StepVerify finishes the Promotion: the version held for the grace period.
	StepVerify Step = "Verify"
	// StepFail finishes the Promotion as failed.
	StepFail Step = "Fail"
)

// Decision is the next step for a running Promotion, why, and when to look again.
type Decision struct {
	Step    Step
	Reason  string
	Message string
	// RequeueAfter is when the decision may change without any event (grace, deadline).
	RequeueAfter time.Duration
}

// Progress decides the next step of a running Promotion from what the applier reports about its
// version. grace is how long landed must hold; deadline is how long after apply it may take.
func Progress(p *stagecoachv1.Promotion, obs applier.Observation, now time.Time, grace, deadline time.Duration) Decision {
	st := p.Status
	if st.AppliedAt == nil {
		return Decision{Step: StepApply, Reason: stagecoachv1.ReasonPromoting, Message: "applying the version"}
	}
	switch obs.Phase {
	case applier.Failed:
		return Decision{Step: StepFail, Reason: obs.Reason, Message: obs.Message}
	case applier.Landed:
		if st.LandedAt == nil {
			if grace <= 0 {
				// Nothing to hold: landed is verified (landedAt is still recorded on the way).
				return Decision{Step: StepVerify, Reason: stagecoachv1.ReasonVerified, Message: obs.Message}
			}
			return Decision{Step: StepLanded, Reason: stagecoachv1.ReasonLanded, Message: obs.Message, RequeueAfter: grace + time.Second}
		}
		// status.landedAt keeps whole seconds: count from the end of its second, so that the grace
		// is never cut short by the rounding. held is negative within landedAt's own second; the
		// requeue must still wait until the grace ends (a clamped held would ask for no requeue).
		if held := now.Sub(st.LandedAt.Time) - time.Second; grace > 0 && held < grace {
			return Decision{Step: StepWait, Reason: stagecoachv1.ReasonLanded, RequeueAfter: grace - held,
				Message: fmt.Sprintf("landed %s ago; verified once it holds for %s: %s", max(held, 0).Round(time.Second), grace, obs.Message)}
		}
		return Decision{Step: StepVerify, Reason: stagecoachv1.ReasonVerified, Message: obs.Message}
	case applier.Rechecking:
		if st.LandedAt != nil {
			// The engine re-runs its checks of what it proved (a Flux interval run): the grace clock
			// keeps going, and the verdict waits for the engine's. An engine stuck there for longer
			// than the progress deadline past the grace fails the Promotion.
			left := st.LandedAt.Add(time.Second + grace + deadline).Sub(now)
			if left <= 0 {
				return Decision{Step: StepFail, Reason: stagecoachv1.ReasonDeadlineExceeded, Message: fmt.Sprintf(
					"the engine did not finish checking the landed version again within the progress deadline of %s: %s", deadline, obs.Message)}
			}
			return Decision{Step: StepWait, Reason: stagecoachv1.ReasonLanded, RequeueAfter: left,
				Message: "landed; waiting for the engine to finish checking it again: " + obs.Message}
		}
		// Not landed yet: the engine's earlier success says nothing about this version.
		obs.Reason = stagecoachv1.ReasonWaitingForReady
	}
	if left := st.AppliedAt.Add(deadline).Sub(now); left <= 0 {
		return Decision{Step: StepFail, Reason: stagecoachv1.ReasonDeadlineExceeded, Message: fmt.Sprintf(
			"the version did not land within the progress deadline of %s: %s", deadline, obs.Message)}
	} else if st.LandedAt != nil {
		return Decision{Step: StepUnlanded, Reason: obs.Reason, Message: "landed, then lost it within the grace period: " + obs.Message, RequeueAfter: left}
	} else {
		return Decision{Step: StepWait, Reason: obs.Reason, Message: obs.Message, RequeueAfter: left}
	}
}

// DeadlineLeft is how long a running Promotion has left before its progress deadline, counted
// from when it applied (or started, before it applied); false when it has not started.
func DeadlineLeft(p *stagecoachv1.Promotion, deadline time.Duration, now time.Time) (time.Duration, bool) {
	if p == nil || p.Status.StartedAt == nil {
		return 0, false
	}
	since := p.Status.StartedAt.Time
	if p.Status.AppliedAt != nil {
		since = p.Status.AppliedAt.Time
	}
	return since.Add(deadline).Sub(now), true
}
