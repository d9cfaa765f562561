package plan

import (
	"fmt"
	"strings"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// Admission is whether the next waiting Promotion may start, before its gates are asked.
type Admission struct {
	// Wait, when set, says why the Promotion waits (a Frozen Stage, a suspended one, a Freeze).
	Wait string
	// Fail, when set, ends the Promotion as Failed: there is nothing it could do.
	Fail string
	// BreakGlass says what break-glass let the Promotion pass, when it did.
	BreakGlass string
	// Version is what the Promotion will apply.
	Version *stagecoachv1.VersionReference
	// RunGates: a promote passes the gates and the checks before apply; a rollback returns to what
	// ran before and passes them.
	RunGates bool
	// Resumes: a person promoted, so automation may resume and rollbacks count afresh.
	Resumes bool
}

// Admit decides whether a waiting Promotion may start on the Stage, held by the Freezes that hold
// it now.
func Admit(stage *stagecoachv1.Stage, p *stagecoachv1.Promotion, freezes []stagecoachv1.Freeze) Admission {
	if wait := waitForFrozenStage(stage, p); wait != "" {
		return Admission{Wait: wait}
	}
	if stage.Spec.Suspend {
		return Admission{Wait: "waiting: Stage " + stage.Name + " is suspended"}
	}
	var a Admission
	if a.Wait, a.BreakGlass = waitForFreezes(p, freezes); a.Wait != "" {
		return Admission{Wait: a.Wait}
	}
	rollback := p.Spec.Action == stagecoachv1.ActionRollback
	a.RunGates = p.Spec.Action == stagecoachv1.ActionPromote
	a.Resumes = a.RunGates && !IsAutomatic(p)
	a.Version = p.Spec.Version
	if rollback && (a.Version == nil || a.Version.Digest == "") {
		cur := stage.Status.Current
		if cur == nil || cur.Digest == "" {
			return Admission{Fail: "nothing to roll back to: Stage " + stage.Name + " has no verified version"}
		}
		a.Version = &stagecoachv1.VersionReference{Digest: cur.Digest, Tag: cur.Version}
	}
	if rollback && !wasVerified(stage, a.Version.Digest) {
		// A rollback passes the gates only because it returns to what was verified here.
		return Admission{Fail: fmt.Sprintf("not rolled back: %s was never verified in Stage %s; a Rollback returns only to the "+
			"last verified version or a verified entry of status.history. Promote it instead (stagecoach promote), and it passes the gates",
			a.Version.Digest, stage.Name)}
	}
	return a
}

// WasVerified reports whether the Stage ran digest verified: its current version, or a
// Succeeded entry of its history.
func wasVerified(stage *stagecoachv1.Stage, digest string) bool {
	if cur := stage.Status.Current; cur != nil && cur.Digest == digest {
		return true
	}
	for _, h := range stage.Status.History {
		if h.Digest == digest && h.Phase == stagecoachv1.PhaseSucceeded {
			return true
		}
	}
	return false
}

// WaitingForGates is the waiting message of a Promotion that its gates hold.
func WaitingForGates(blocks []stagecoachv1.GateBlock) string {
	msgs := make([]string, 0, len(blocks))
	for _, b := range blocks {
		msgs = append(msgs, b.Gate+": "+b.Message)
	}
	return "waiting: " + strings.Join(msgs, "; ")
}
