package records

import (
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// Step is one record a Promotion owes its Stage's stream. Its Seq and Prev are the writer's to
// set: they depend on the stream's head when it is written.
type Step struct {
	Promotion *stagecoachv1.Promotion
	// Index is the step's place among its Promotion's steps.
	Index  int
	At     time.Time
	Record Record
}

// OwedSteps are the steps the Promotions owe the stream, oldest first.
func OwedSteps(stage *stagecoachv1.Stage, promotions []*stagecoachv1.Promotion, stream string) []Step {
	byName := make(map[string]*stagecoachv1.Promotion, len(promotions))
	for _, p := range promotions {
		byName[p.Name] = p
	}
	var owed []Step
	for _, p := range promotions {
		steps := promotionSteps(stage, p, byName, stream)
		owed = append(owed, steps[stepsDone(p, steps):]...)
	}
	sort.SliceStable(owed, func(i, j int) bool {
		a, b := owed[i], owed[j]
		switch {
		case !a.At.Equal(b.At):
			return a.At.Before(b.At)
		case !a.Promotion.CreationTimestamp.Equal(&b.Promotion.CreationTimestamp):
			return a.Promotion.CreationTimestamp.Before(&b.Promotion.CreationTimestamp)
		case a.Promotion.Name != b.Promotion.Name:
			return a.Promotion.Name < b.Promotion.Name
		}
		return a.Index < b.Index
	})
	return owed
}

// stepsDone is how many of a Promotion's steps are in the stream: up to the one its
// status.record names.
func stepsDone(p *stagecoachv1.Promotion, steps []Step) int {
	if p.Status.Record == nil {
		return 0
	}
	for i, s := range steps {
		if string(s.Record.Action) == p.Status.Record.Action {
			return i + 1
		}
	}
	return 0
}

// promotionSteps are the records a Promotion's status shows it owes, in order, built from what
// its status holds (so a retry builds the same bytes). byName holds the Stage's Promotions (a
// rollback names the version of the one it rolled back).
func promotionSteps(stage *stagecoachv1.Stage, p *stagecoachv1.Promotion, byName map[string]*stagecoachv1.Promotion, stream string) []Step {
	st := p.Status
	base := Record{APIVersion: APIVersion, Stream: stream, Actor: p.Spec.RequestedBy,
		Stage: StageRef{Namespace: stage.Namespace, Name: stage.Name}, Service: stage.Spec.Service, Environment: stage.Spec.Environment}
	finished := st.Phase == stagecoachv1.PhaseSucceeded || st.Phase == stagecoachv1.PhaseFailed || st.Phase == stagecoachv1.PhaseRolledBack
	var out []Step
	add := func(at *metav1.Time, r Record) {
		r.Times.Recorded = NewTime(at.Time)
		out = append(out, Step{Promotion: p, Index: len(out), At: at.Time, Record: r})
	}
	switch p.Spec.Action {
	case stagecoachv1.ActionPromote, "":
		if st.AppliedAt == nil || versionOf(st.Version) == nil {
			return nil // never applied: nothing happened on the Stage
		}
		r := base
		r.Action, r.Verdict, r.Version = ActionPromote, VerdictSucceeded, versionOf(st.Version)
		r.Times.Started, r.Times.Finished = timeOf(st.StartedAt), timeOf(st.AppliedAt)
		for _, g := range st.Gates {
			if g.Passed {
				r.Gates = append(r.Gates, Gate{Name: g.Gate, Evidence: g.Message})
			}
		}
		if p.Spec.BreakGlass {
			reason := p.Spec.Reason
			if reason == "" {
				reason = "break-glass (no reason given)"
			}
			r.BreakGlass = &BreakGlass{Reason: reason}
		}
		add(st.AppliedAt, r)
		if !finished || st.FinishedAt == nil {
			return out
		}
		v := base
		v.Action, v.Version = ActionVerify, versionOf(st.Version)
		v.Times.Started, v.Times.Finished = timeOf(st.AppliedAt), timeOf(st.FinishedAt)
		switch {
		case st.Phase == stagecoachv1.PhaseSucceeded:
			v.Verdict = VerdictVerified
		case st.LandedAt == nil && st.FinishedAt.Sub(st.AppliedAt.Time) >= stage.GetProgressDeadline():
			v.Verdict = verdictDeadlineExceeded
		default:
			v.Verdict = VerdictFailed
		}
		add(st.FinishedAt, v)
	case stagecoachv1.ActionRollback:
		if !finished || st.FinishedAt == nil || versionOf(st.Version) == nil || (st.AppliedAt == nil && st.Phase != stagecoachv1.PhaseSucceeded) {
			return nil
		}
		r := base
		r.Action, r.Restored = actionRollback, versionOf(st.Version)
		r.Verdict = verdictRolledBack
		if st.Phase != stagecoachv1.PhaseSucceeded {
			r.Verdict = VerdictFailed
		}
		// The version rolled back: the failed Promotion's, else what ran before the restored one.
		if failed := byName[p.Annotations[stagecoachv1.RollbackOfAnnotation]]; failed != nil {
			r.Version = versionOf(failed.Status.Version)
		}
		for i := 0; r.Version == nil && i < len(stage.Status.History); i++ {
			if h := stage.Status.History[i]; h.Promotion != p.Name && h.Digest != "" && h.Digest != st.Version.Digest {
				r.Version = &Version{Digest: h.Digest, Tag: h.Version}
			}
		}
		if r.Version == nil {
			r.Version = r.Restored
		}
		r.Times.Started, r.Times.Finished = timeOf(st.StartedAt), timeOf(st.FinishedAt)
		add(st.FinishedAt, r)
	case stagecoachv1.ActionFreeze, stagecoachv1.ActionUnfreeze:
		if st.Phase != stagecoachv1.PhaseSucceeded || st.FinishedAt == nil {
			return nil
		}
		r := base
		r.Action = ActionFreeze
		if p.Spec.Action == stagecoachv1.ActionUnfreeze {
			r.Action = actionUnfreeze
		} else {
			// A freeze that names a version (one that failed after release) excludes it downstream.
			r.Version = versionOf(p.Spec.Version)
		}
		r.Times.Finished = timeOf(st.FinishedAt)
		add(st.FinishedAt, r)
	}
	return out
}

// versionOf is a Promotion's version as a record names it; nil without a digest.
func versionOf(v *stagecoachv1.VersionReference) *Version {
	if v == nil || v.Digest == "" {
		return nil
	}
	return &Version{Digest: v.Digest, Tag: v.Tag}
}

func timeOf(t *metav1.Time) *Time {
	if t == nil {
		return nil
	}
	return newTimePtr(t.Time)
}
