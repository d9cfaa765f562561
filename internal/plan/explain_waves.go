package plan

import (
	"fmt"
	"slices"
	"strings"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// WaveExplanation is one wave of a fleet rollout as `stagecoach plan` shows it: where it stands
// and, per target, what it waits on.
type WaveExplanation struct {
	Name    string             `json:"name"`
	Digest  string             `json:"digest,omitempty"`
	Phase   stagecoachv1.Phase `json:"phase,omitempty"`
	Message string             `json:"message,omitempty"`
	// Targets are the wave's Applications, each with what it waits on ("" once done).
	Targets []TargetExplanation `json:"targets,omitempty"`
}

// TargetExplanation is one Application of a wave and what it waits on.
type TargetExplanation struct {
	Name string `json:"name"`
	// Phase of the target, in the words of the wave's: Pending, Running, Succeeded or Failed.
	Phase stagecoachv1.Phase `json:"phase"`
	// WaitsOn is what the target waits on; empty when it waits on nothing.
	WaitsOn string `json:"waitsOn,omitempty"`
}

// explainWaves turns status.waves into what each target waits on: a target of a wave that has
// not started waits on that wave's message (an earlier wave, a soak, a halt); in a wave under
// way it is Running (waits on Argo CD), Pending (waits for a free slot of maxParallel), Succeeded
// or Failed.
func explainWaves(statuses []stagecoachv1.WaveStatus) []WaveExplanation {
	out := make([]WaveExplanation, 0, len(statuses))
	for _, w := range statuses {
		we := WaveExplanation{Name: w.Name, Digest: w.Digest, Phase: w.Phase, Message: w.Message}
		for _, t := range w.Targets {
			te := TargetExplanation{Name: t}
			switch {
			case slices.Contains(w.Completed, t):
				te.Phase = stagecoachv1.PhaseSucceeded
			case slices.Contains(w.Failed, t):
				te.Phase = stagecoachv1.PhaseFailed
			case slices.Contains(w.Syncing, t):
				te.Phase, te.WaitsOn = stagecoachv1.PhaseRunning, "waits on Argo CD to sync it, healthy, at the version"
			case w.Phase == stagecoachv1.PhaseRunning:
				te.Phase, te.WaitsOn = stagecoachv1.PhasePending, "waits on a free slot (maxParallel) in its wave"
			default:
				te.Phase, te.WaitsOn = stagecoachv1.PhasePending, w.Message
			}
			we.Targets = append(we.Targets, te)
		}
		out = append(out, we)
	}
	return out
}

// wavesLines says the waves for people: one line a wave, then its targets grouped by phase.
func wavesLines(ws []WaveExplanation) []string {
	var lines []string
	for i, w := range ws {
		lines = append(lines, fmt.Sprintf("wave %d/%d %q: %s: %s", i+1, len(ws), w.Name, orDash(string(w.Phase)), orDash(w.Message)))
		var order []stagecoachv1.Phase
		groups := map[stagecoachv1.Phase][]string{}
		waits := map[stagecoachv1.Phase]string{}
		for _, t := range w.Targets {
			if _, ok := groups[t.Phase]; !ok {
				order = append(order, t.Phase)
			}
			groups[t.Phase] = append(groups[t.Phase], t.Name)
			waits[t.Phase] = t.WaitsOn
		}
		for _, phase := range order {
			line := fmt.Sprintf("  %s: %s", phase, strings.Join(groups[phase], ", "))
			if waits[phase] != "" {
				line += " (" + waits[phase] + ")"
			}
			lines = append(lines, line)
		}
	}
	return lines
}
