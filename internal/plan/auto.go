package plan

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// Candidate is a version a Stage's source offers.
type Candidate struct {
	Digest string
	Tag    string
	// VerifiedAt is when the upstream verified it (for soak).
	VerifiedAt *metav1.Time
}

// Gates named in blockedBy.
const (
	GateAuto    = "auto"
	GateHold    = "hold"
	GateFreeze  = "freeze"
	GateSuspend = "suspend"
	GateHistory = "history"
	GateSource  = "source"
	GateSoak    = "soak"
)

// AutoPromote decides whether automation promotes the candidate now, and otherwise lists every
// gate that holds it back. It returns false with no blocks when there is nothing to do (no
// candidate, already running it, or already tried).
func AutoPromote(stage *stagecoachv1.Stage, c *Candidate, promotions []stagecoachv1.Promotion, now time.Time) (bool, []stagecoachv1.GateBlock) {
	if c == nil || (stage.Status.Current != nil && stage.Status.Current.Digest == c.Digest) {
		return false, nil
	}
	failed := slices.Contains(stage.Status.FailedDigests, c.Digest)
	for i := range promotions {
		p := &promotions[i]
		if !failed && p.Spec.Action == stagecoachv1.ActionPromote && p.Spec.Version != nil && p.Spec.Version.Digest == c.Digest {
			return false, nil // tried (or trying) already: never twice automatically
		}
	}
	var blocks []stagecoachv1.GateBlock
	if failed {
		blocks = append(blocks, stagecoachv1.GateBlock{Gate: GateHistory, Reason: stagecoachv1.ReasonPromotionFailed,
			Message: fmt.Sprintf("%s failed in this Stage before; automation never offers it again (a person may still promote it)", c.Digest)})
	}
	if stage.Spec.Suspend {
		blocks = append(blocks, stagecoachv1.GateBlock{Gate: GateSuspend, Reason: stagecoachv1.ReasonSuspended,
			Message: "the Stage is suspended: set spec.suspend to false"})
	}
	if frozen := meta.FindStatusCondition(stage.Status.Conditions, stagecoachv1.ConditionFrozen); frozen != nil && frozen.Status == metav1.ConditionTrue {
		blocks = append(blocks, stagecoachv1.GateBlock{Gate: GateFreeze, Reason: frozen.Reason, Message: frozen.Message})
	}
	if h := stage.Status.Hold; h != nil {
		blocks = append(blocks, stagecoachv1.GateBlock{Gate: GateHold, Reason: h.Reason, Message: h.Message})
	}
	if soak := stage.Spec.Promotion; soak != nil && soak.Soak != nil && c.VerifiedAt != nil {
		if opens := c.VerifiedAt.Add(soak.Soak.Duration); now.Before(opens) {
			until := metav1.NewTime(opens)
			blocks = append(blocks, stagecoachv1.GateBlock{Gate: GateSoak, Reason: "Soaking", Until: &until,
				Message: fmt.Sprintf("verified upstream %s ago; the Stage asks for %s", now.Sub(c.VerifiedAt.Time).Round(time.Second), soak.Soak.Duration)})
		}
	}
	if stage.Spec.Promotion == nil || !stage.Spec.Promotion.Auto {
		blocks = append(blocks, stagecoachv1.GateBlock{Gate: GateAuto, Reason: "Manual",
			Message: "automatic promotion is off for this Stage: create a Promotion to promote it"})
	}
	return len(blocks) == 0, blocks
}

// BlocksEnd is how long until the first gate with a known end opens (0 when none will by itself).
func BlocksEnd(blocks []stagecoachv1.GateBlock, now time.Time) time.Duration {
	var soonest time.Duration
	for _, b := range blocks {
		if b.Until != nil {
			if d := b.Until.Sub(now); d > 0 && (soonest == 0 || d < soonest) {
				soonest = d
			}
		}
	}
	return soonest
}
