package plan

import (
	"fmt"
	"sort"
	"time"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// IsFinished reports whether a Promotion has reached a final phase.
func IsFinished(p *stagecoachv1.Promotion) bool {
	switch p.Status.Phase {
	case stagecoachv1.PhaseSucceeded, stagecoachv1.PhaseFailed, stagecoachv1.PhaseRolledBack, stagecoachv1.PhaseAborted:
		return true
	}
	return false
}

// IsAutomatic reports whether automation created the Promotion.
func IsAutomatic(p *stagecoachv1.Promotion) bool {
	return p.Labels[stagecoachv1.AutomaticLabel] == "true"
}

// Queued is a Stage's Promotions in the order they act.
type Queued struct {
	// Running is the one Promotion applying a version (at most one runs).
	Running *stagecoachv1.Promotion
	// Next is the waiting Promotion to start when none runs.
	Next *stagecoachv1.Promotion
	// Waiting are the waiting Promotions in the order they will start (Next first).
	Waiting []*stagecoachv1.Promotion
	// Superseded are waiting automatic Promotions that a newer automatic one replaces.
	Superseded []*stagecoachv1.Promotion
	// Controls are waiting Freeze, Unfreeze and Abort Promotions: they apply no version, so they act at
	// once, whatever runs or waits (an Unfreeze must not wait behind what the freeze holds).
	Controls []*stagecoachv1.Promotion
	// Preempted is the running promote that Next, a Rollback, stops: a fix never waits behind a
	// release that does not land (or lands and fails its checks) until its progress deadline.
	Preempted *stagecoachv1.Promotion
}

// Queue orders a Stage's Promotions. Waiting Promotions start in creation order, except that a
// Rollback goes first (it restores what ran before), then a break-glass one (it exists to pass
// what holds the others). A waiting Rollback preempts a running promote (Preempted); a running
// Rollback is never preempted. A running Promotion is never superseded by a newer version, and
// neither is one a person created.
func Queue(promotions []stagecoachv1.Promotion) Queued {
	var q Queued
	var waiting []*stagecoachv1.Promotion
	for i := range promotions {
		p := &promotions[i]
		switch {
		case p.DeletionTimestamp != nil || IsFinished(p):
		case p.Spec.Action == stagecoachv1.ActionFreeze || p.Spec.Action == stagecoachv1.ActionUnfreeze || p.Spec.Action == stagecoachv1.ActionAbort:
			q.Controls = append(q.Controls, p)
		case p.Status.Phase == stagecoachv1.PhaseRunning:
			if q.Running == nil || before(p, q.Running) {
				q.Running = p
			}
		default:
			waiting = append(waiting, p)
		}
	}
	sort.Slice(waiting, func(i, j int) bool {
		if pi, pj := priority(waiting[i]), priority(waiting[j]); pi != pj {
			return pi < pj
		}
		return before(waiting[i], waiting[j])
	})
	var newestAuto *stagecoachv1.Promotion
	for _, p := range waiting {
		if IsAutomatic(p) && p.Spec.Action == stagecoachv1.ActionPromote {
			newestAuto = p
		}
	}
	for _, p := range waiting {
		if IsAutomatic(p) && p.Spec.Action == stagecoachv1.ActionPromote && p != newestAuto {
			q.Superseded = append(q.Superseded, p)
			continue
		}
		q.Waiting = append(q.Waiting, p)
		if q.Next == nil {
			q.Next = p
		}
	}
	sort.Slice(q.Controls, func(i, j int) bool { return before(q.Controls[i], q.Controls[j]) })
	// Never the promote an automatic Rollback was made for: that one is failing already (its
	// Rollback exists before its own status says Failed), and finishes Failed, then RolledBack.
	if q.Running != nil && q.Running.Spec.Action == stagecoachv1.ActionPromote && q.Next != nil && q.Next.Spec.Action == stagecoachv1.ActionRollback &&
		q.Next.Annotations[stagecoachv1.RollbackOfAnnotation] != q.Running.Name {
		q.Preempted = q.Running
	}
	return q
}

// Supersedable reports whether a newer Promotion may replace the running one (spec.promotion.
// supersede): a promote that has not landed, created by automation (unless the Stage says Never)
// or by a person (when it says All). A Rollback, or a promote that landed, never is.
func Supersedable(stage *stagecoachv1.Stage, running *stagecoachv1.Promotion) bool {
	if running == nil || running.Spec.Action != stagecoachv1.ActionPromote || running.Status.LandedAt != nil || running.Status.VerifiedAt != nil {
		return false
	}
	policy := stagecoachv1.SupersedeAutomatic
	if p := stage.Spec.Promotion; p != nil && p.Supersede != "" {
		policy = p.Supersede
	}
	switch policy {
	case stagecoachv1.SupersedeAll:
		return true
	case stagecoachv1.SupersedeAutomatic:
		return IsAutomatic(running)
	}
	return false
}

// priority ranks waiting Promotions: rollbacks, then break-glass, then the rest.
func priority(p *stagecoachv1.Promotion) int {
	switch {
	case p.Spec.Action == stagecoachv1.ActionRollback:
		return 0
	case p.Spec.BreakGlass:
		return 1
	}
	return 2
}

// before orders Promotions by creation time. Creation times have one-second resolution, so
// automation also stamps the exact time (CreatedAtAnnotation); the name breaks remaining ties.
func before(a, b *stagecoachv1.Promotion) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	ta, errA := time.Parse(time.RFC3339Nano, a.Annotations[stagecoachv1.CreatedAtAnnotation])
	tb, errB := time.Parse(time.RFC3339Nano, b.Annotations[stagecoachv1.CreatedAtAnnotation])
	if errA == nil && errB == nil && !ta.Equal(tb) {
		return ta.Before(tb)
	}
	return a.Name < b.Name
}

// QueuedMessage says why a waiting Promotion has not started although its turn may come: what
// runs or starts before it, and its place in the queue. Empty for the Promotion whose turn it is
// (its own start says why it waits, if it does).
func (q Queued) QueuedMessage(p *stagecoachv1.Promotion) string {
	ahead := q.Running
	for i, w := range q.Waiting {
		if w != p {
			continue
		}
		if i == 0 && q.Running == nil {
			return ""
		}
		if i > 0 && ahead == nil {
			ahead = q.Waiting[0]
		}
		verb := "runs"
		if q.Running == nil {
			verb = "starts first"
		}
		return fmt.Sprintf("queued: Promotion %s %s on Stage %s; this is %d of %d waiting", ahead.Name, verb, p.Spec.Stage, i+1, len(q.Waiting))
	}
	return ""
}
