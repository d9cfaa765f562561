package plan

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

const d3 = "sha256:3333333333333333333333333333333333333333333333333333333333333333"

// historyStage runs d1 (verified) and remembers how its Promotions of d2 and d3 ended.
func historyStage(entries ...stagecoachv1.HistoryEntry) *stagecoachv1.Stage {
	return &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "prod"},
		Status: stagecoachv1.StageStatus{Current: &stagecoachv1.CurrentVersion{Digest: d1, Version: "v1.0.0"}, History: entries}}
}

func entry(digest string, action stagecoachv1.PromotionAction, phase stagecoachv1.Phase) stagecoachv1.HistoryEntry {
	return stagecoachv1.HistoryEntry{Digest: digest, Action: action, Phase: phase, Promotion: digest[7:11] + "-" + string(phase)}
}

// A Rollback passes no gates because it returns to what the Stage verified: a version its
// history holds only as Failed (promoted, never verified), RolledBack or Aborted was never
// verified, and a Rollback to it is refused.
func TestWasVerified(t *testing.T) {
	promote := stagecoachv1.ActionPromote
	tests := []struct {
		name   string
		stage  *stagecoachv1.Stage
		digest string
		want   bool
	}{
		{name: "the current version", stage: historyStage(), digest: d1, want: true},
		{name: "a Succeeded entry of the history", stage: historyStage(entry(d2, promote, stagecoachv1.PhaseSucceeded)), digest: d2, want: true},
		{name: "a Succeeded rollback to it", stage: historyStage(entry(d2, stagecoachv1.ActionRollback, stagecoachv1.PhaseSucceeded)), digest: d2, want: true},
		{name: "a Failed entry: promoted, never verified", stage: historyStage(entry(d2, promote, stagecoachv1.PhaseFailed)), digest: d2, want: false},
		{name: "a RolledBack entry", stage: historyStage(entry(d2, promote, stagecoachv1.PhaseRolledBack)), digest: d2, want: false},
		{name: "an Aborted entry", stage: historyStage(entry(d2, promote, stagecoachv1.PhaseAborted)), digest: d2, want: false},
		{name: "failed once, verified later", digest: d2, want: true,
			stage: historyStage(entry(d2, promote, stagecoachv1.PhaseSucceeded), entry(d2, promote, stagecoachv1.PhaseFailed))},
		{name: "another digest's success does not count", stage: historyStage(entry(d3, promote, stagecoachv1.PhaseSucceeded),
			entry(d2, promote, stagecoachv1.PhaseFailed)), digest: d2, want: false},
		{name: "never here", stage: historyStage(), digest: d3, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(wasVerified(tt.stage, tt.digest)).To(Equal(tt.want))
		})
	}
}

// Admit refuses a Rollback to a version that failed here, before any gate is asked; a Rollback to
// a verified one starts without them.
func TestAdmitRollbackOnlyToVerified(t *testing.T) {
	stage := historyStage(entry(d2, stagecoachv1.ActionPromote, stagecoachv1.PhaseFailed), entry(d3, stagecoachv1.ActionPromote, stagecoachv1.PhaseSucceeded))
	stage.Spec.Promotion = &stagecoachv1.PromotionPolicy{Approvals: &stagecoachv1.ApprovalPolicy{Required: 2}}
	tests := []struct {
		name     string
		digest   string
		wantFail string
	}{
		{name: "to the version that failed here: refused", digest: d2,
			wantFail: "not rolled back: " + d2 + " was never verified in Stage prod"},
		{name: "to a verified entry of the history", digest: d3},
		{name: "to the current version", digest: d1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := promo("rb", 0, stagecoachv1.PhasePending, stagecoachv1.ActionRollback, false)
			p.Spec.Version.Digest = tt.digest
			a := Admit(stage, &p, nil)
			g.Expect(a.RunGates).To(BeFalse())
			if tt.wantFail != "" {
				g.Expect(a.Fail).To(ContainSubstring(tt.wantFail))
				return
			}
			g.Expect(a.Fail).To(BeEmpty())
			g.Expect(a.Wait).To(BeEmpty())
			g.Expect(a.Version.Digest).To(Equal(tt.digest))
		})
	}
}

// Stagecoach's own writes are the version being applied, what it last wrote or runs, and what
// any of the Stage's Promotions applied. A digest a Promotion carried but never applied (it
// ended before apply) is someone else's write when the applier runs it.
func TestIsForeignWrite(t *testing.T) {
	now := metav1.Now()
	promotion := func(digest string, applied bool, phase stagecoachv1.Phase) stagecoachv1.Promotion {
		p := stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: digest[7:11]},
			Spec:   stagecoachv1.PromotionSpec{Stage: "prod", Action: stagecoachv1.ActionPromote, Version: &stagecoachv1.VersionReference{Digest: digest}},
			Status: stagecoachv1.PromotionStatus{Phase: phase, Version: &stagecoachv1.VersionReference{Digest: digest}}}
		if applied {
			p.Status.AppliedAt = &now
		}
		return p
	}
	neverStarted := promotion(d3, false, stagecoachv1.PhaseAborted)
	neverStarted.Status.Version = nil // superseded while waiting
	stage := historyStage()
	stage.Status.LastAppliedDigest = "v9.9.9"
	tests := []struct {
		name       string
		promotions []stagecoachv1.Promotion
		current    string
		want       bool
	}{
		{name: "nothing written", current: "", want: false},
		{name: "the version being applied", current: d3, want: false},
		{name: "what the Stage last wrote (or adopted)", current: "v9.9.9", want: false},
		{name: "what the Stage runs", current: d1, want: false},
		{name: "what another Promotion applied (its Stage status write was lost)", current: d2,
			promotions: []stagecoachv1.Promotion{promotion(d2, true, stagecoachv1.PhaseFailed)}, want: false},
		{name: "what another Promotion carried but aborted before applying", current: d2,
			promotions: []stagecoachv1.Promotion{promotion(d2, false, stagecoachv1.PhaseAborted)}, want: true},
		{name: "what another Promotion carried but failed before applying (its applier unusable until the deadline)", current: d2,
			promotions: []stagecoachv1.Promotion{promotion(d2, false, stagecoachv1.PhaseFailed)}, want: true},
		{name: "a Promotion that never started names no version", current: d2,
			promotions: []stagecoachv1.Promotion{neverStarted}, want: true},
		{name: "a value no one here wrote", current: "v8.8.8",
			promotions: []stagecoachv1.Promotion{promotion(d2, true, stagecoachv1.PhaseSucceeded)}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(IsForeignWrite(stage, tt.promotions, tt.current, d3)).To(Equal(tt.want))
		})
	}
}
