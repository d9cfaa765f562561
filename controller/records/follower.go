package records

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	recordsource "github.com/stagecoach-dev/stagecoach/internal/source/records"
)

// FollowerStatus writes what the follower of an upstreamRecords source knows on the Stage: the
// newest upstream record read (status.upstreamSeen), Ready=False while the records cannot be
// checked or are older than maxAge, and the records skipped in the Ready message.
func FollowerStatus(follower *recordsource.Source, stage *stagecoachv1.Stage) {
	if stage.Spec.Source.UpstreamRecords == nil || follower == nil {
		return
	}
	st := follower.State(stage)
	// After a failed read the view still holds what was read before: a mark a person cleared is
	// not put back until a read succeeds. A stale stream was read all right: its mark moves.
	read := st.Reason == "" || st.Reason == stagecoachv1.ReasonUpstreamStale
	if st.Seen != nil && read {
		stage.Status.UpstreamSeen = &stagecoachv1.UpstreamSeen{Seq: st.Seen.Seq, Digest: st.Seen.Digest}
	}
	if c := stage.Status.Candidate; c != nil && st.Reason == "" {
		// A read succeeded since automation last looked (a Promotion may hold it back): the
		// source's old complaint no longer holds.
		kept := c.BlockedBy[:0]
		for _, b := range c.BlockedBy {
			if b.Gate != stagecoachv1.GateSource || (b.Reason != stagecoachv1.ReasonUpstreamUnreadable &&
				b.Reason != stagecoachv1.ReasonUpstreamUntrusted && b.Reason != stagecoachv1.ReasonUpstreamStale) {
				kept = append(kept, b)
			}
		}
		c.BlockedBy = kept
	}
	ready := meta.FindStatusCondition(stage.Status.Conditions, stagecoachv1.ConditionReady)
	switch {
	case ready == nil || ready.Status != metav1.ConditionTrue:
	case st.Reason != "":
		setCondition(stage, stagecoachv1.ConditionReady, metav1.ConditionFalse, st.Reason, st.Message)
	case st.Skipped > 0:
		setCondition(stage, stagecoachv1.ConditionReady, metav1.ConditionTrue, ready.Reason, fmt.Sprintf(
			"%s; %d upstream record(s) skipped: no trusted key in --upstream-trust signed them", ready.Message, st.Skipped))
	}
}

// setCondition sets one condition of the Stage for its current generation.
func setCondition(stage *stagecoachv1.Stage, condType string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&stage.Status.Conditions, metav1.Condition{
		Type: condType, Status: status, Reason: reason, Message: message, ObservedGeneration: stage.Generation,
	})
}
