package plan

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// Automation never tries a version twice, except one whose Promotion a freeze stopped before it
// wrote anything, once a person has lifted the freeze (issue 50 item 5: after an Unfreeze of a
// Stage frozen by a foreign commit, automation never offered the newer commit again).
func TestIsNew(t *testing.T) {
	at := func(minute int) *metav1.Time {
		t := metav1.NewTime(time.Date(2026, 12, 7, 12, minute, 0, 0, time.UTC))
		return &t
	}
	const d = "sha1:cbcf0561111111111111111111111111111111111"
	promote := func(phase stagecoachv1.Phase, applied, finished *metav1.Time) stagecoachv1.Promotion {
		return stagecoachv1.Promotion{Spec: stagecoachv1.PromotionSpec{Action: stagecoachv1.ActionPromote, Version: &stagecoachv1.VersionReference{Digest: d}},
			Status: stagecoachv1.PromotionStatus{Phase: phase, AppliedAt: applied, FinishedAt: finished}}
	}
	unfreeze := func(phase stagecoachv1.Phase, finished *metav1.Time) stagecoachv1.Promotion {
		return stagecoachv1.Promotion{Spec: stagecoachv1.PromotionSpec{Action: stagecoachv1.ActionUnfreeze},
			Status: stagecoachv1.PromotionStatus{Phase: phase, FinishedAt: finished}}
	}
	for _, tc := range []struct {
		name       string
		promotions []stagecoachv1.Promotion
		want       bool
	}{
		{name: "never promoted", want: true},
		{name: "promoted before", promotions: []stagecoachv1.Promotion{promote(stagecoachv1.PhaseSucceeded, at(1), at(2))}},
		{name: "running", promotions: []stagecoachv1.Promotion{promote(stagecoachv1.PhaseRunning, nil, nil)}},
		{name: "stopped by a freeze, still frozen", promotions: []stagecoachv1.Promotion{promote(stagecoachv1.PhaseAborted, nil, at(2))}},
		{name: "stopped by a freeze, unfrozen since", promotions: []stagecoachv1.Promotion{promote(stagecoachv1.PhaseAborted, nil, at(2)),
			unfreeze(stagecoachv1.PhaseSucceeded, at(5))}, want: true},
		{name: "an Unfreeze before the stop does not count", promotions: []stagecoachv1.Promotion{unfreeze(stagecoachv1.PhaseSucceeded, at(1)),
			promote(stagecoachv1.PhaseAborted, nil, at(2))}},
		{name: "an Unfreeze not done yet does not count", promotions: []stagecoachv1.Promotion{promote(stagecoachv1.PhaseAborted, nil, at(2)),
			unfreeze(stagecoachv1.PhasePending, nil)}},
		{name: "aborted after it wrote: tried", promotions: []stagecoachv1.Promotion{promote(stagecoachv1.PhaseAborted, at(1), at(2)),
			unfreeze(stagecoachv1.PhaseSucceeded, at(5))}},
		{name: "failed: tried", promotions: []stagecoachv1.Promotion{promote(stagecoachv1.PhaseFailed, nil, at(2)),
			unfreeze(stagecoachv1.PhaseSucceeded, at(5))}},
		{name: "offered again and tried again", promotions: []stagecoachv1.Promotion{promote(stagecoachv1.PhaseAborted, nil, at(2)),
			unfreeze(stagecoachv1.PhaseSucceeded, at(5)), promote(stagecoachv1.PhaseRunning, nil, nil)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stage := &stagecoachv1.Stage{}
			NewWithT(t).Expect(IsNew(stage, &Candidate{Digest: d}, tc.promotions)).To(Equal(tc.want))
		})
	}
}
