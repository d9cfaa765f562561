package plan

import (
	"slices"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// HistoryLimit bounds status.history; older entries live in the records.
const historyLimit = 20

// FailedDigestsLimit bounds status.failedDigests.
const failedDigestsLimit = 32

// RollsBack reports whether a failed Promotion is followed by an automatic rollback: a promote
// (a rollback that fails is not rolled back), the Stage rolls back automatically and has not
// used up its limit, and there is a verified version to return to that is not the failed one.
func RollsBack(stage *stagecoachv1.Stage, failed *stagecoachv1.Promotion) bool {
	cur, v := stage.Status.Current, failed.Status.Version
	return failed.Spec.Action == stagecoachv1.ActionPromote && stage.GetAutomaticRollback() &&
		stage.Status.AutomaticRollbacks < stage.GetRollbackLimit() &&
		cur != nil && cur.Digest != "" && (v == nil || cur.Digest != v.Digest)
}

// HoldReason is why automation holds after a Promotion failed.
func HoldReason(failed *stagecoachv1.Promotion) string {
	if failed.Spec.Action == stagecoachv1.ActionRollback {
		return stagecoachv1.ReasonRollbackFailed
	}
	return stagecoachv1.ReasonPromotionFailed
}

// RecordFailedDigest remembers a version whose promote failed, so that automation never offers
// it again; only promotes count, and the list is bounded (oldest forgotten first).
func RecordFailedDigest(st *stagecoachv1.StageStatus, p *stagecoachv1.Promotion) {
	if p.Spec.Action != stagecoachv1.ActionPromote || p.Status.Version == nil || slices.Contains(st.FailedDigests, p.Status.Version.Digest) {
		return
	}
	st.FailedDigests = append(st.FailedDigests, p.Status.Version.Digest)
	if n := len(st.FailedDigests); n > failedDigestsLimit {
		st.FailedDigests = st.FailedDigests[n-failedDigestsLimit:]
	}
}

// InHistory reports whether a Promotion's end is recorded on the Stage already.
func InHistory(st *stagecoachv1.StageStatus, promotion string) bool {
	return slices.ContainsFunc(st.History, func(h stagecoachv1.HistoryEntry) bool { return h.Promotion == promotion })
}

// AddHistory records a finished Promotion on the Stage once (keyed by Promotion, so a retry after
// a crash adds nothing), newest first, bounded.
func AddHistory(st *stagecoachv1.StageStatus, entry stagecoachv1.HistoryEntry) {
	if InHistory(st, entry.Promotion) {
		return
	}
	st.History = append([]stagecoachv1.HistoryEntry{entry}, st.History...)
	if len(st.History) > historyLimit {
		st.History = st.History[:historyLimit]
	}
}

// IsForeignWrite reports whether the applier's current revision was written by someone other
// than this Stage: it is none of nothing, the version being applied, what the Stage last wrote
// or runs, and what any of its Promotions applied (a write whose Stage status was lost to a
// conflict is still Stagecoach's).
func IsForeignWrite(stage *stagecoachv1.Stage, promotions []stagecoachv1.Promotion, current, applying string) bool {
	known := []string{"", applying, stage.Status.LastAppliedDigest}
	if stage.Status.Current != nil {
		known = append(known, stage.Status.Current.Digest)
	}
	for _, other := range promotions {
		if other.Status.AppliedAt != nil && other.Status.Version != nil {
			known = append(known, other.Status.Version.Digest)
		}
	}
	return !slices.Contains(known, current)
}

// NeedsAdoption reports whether the Stage has yet to take its applier over: it has no record of
// doing so, has applied and verified nothing, and none of its Promotions applied anything (a
// Stage that applied before status.adopted existed took over long ago).
func NeedsAdoption(stage *stagecoachv1.Stage, promotions []stagecoachv1.Promotion) bool {
	st := stage.Status
	if st.Adopted != nil || st.LastAppliedDigest != "" || st.Current != nil || len(st.History) > 0 {
		return false
	}
	for _, p := range promotions {
		if p.Status.AppliedAt != nil {
			return false
		}
	}
	return true
}
