package v1alpha1

import "encoding/json"

// Phase is where something Stagecoach runs stands: a Promotion, a wave of a fleet rollout, one
// target of a wave, a step of the plan. It is one vocabulary, so that the same state has the same
// word wherever it is shown; each kind uses the subset its field's documentation names.
type Phase string

const (
	// PhasePending has not started: it waits for its turn, a gate, a slot or an earlier wave.
	PhasePending Phase = "Pending"
	// PhaseRunning has started and not ended: a version is being applied or landing.
	PhaseRunning Phase = "Running"
	// PhaseSoaking has landed and waits out a soak before what follows it starts (waves).
	PhaseSoaking Phase = "Soaking"
	// PhaseSucceeded has ended with its version landed and verified.
	PhaseSucceeded Phase = "Succeeded"
	// PhaseFailed has ended without its version landed.
	PhaseFailed Phase = "Failed"
	// PhaseRolledBack failed and was rolled back to the last verified version (Promotions).
	PhaseRolledBack Phase = "RolledBack"
	// PhaseAborted was cancelled by an Abort Promotion (Promotions, waves).
	PhaseAborted Phase = "Aborted"
)

// Phases is the whole vocabulary, in the order of a life.
var Phases = []Phase{PhasePending, PhaseRunning, PhaseSoaking, PhaseSucceeded, PhaseFailed, PhaseRolledBack, PhaseAborted}

// legacyPhases are the words waves used before there was one vocabulary. A wave status written by
// an earlier controller (or by one still running during an upgrade) carries them; reading
// maps them, so that no reader has to know them.
var legacyPhases = map[Phase]Phase{"Progressing": PhaseRunning, "Completed": PhaseSucceeded}

// Ended says the phase is final.
func (p Phase) Ended() bool {
	switch p {
	case PhaseSucceeded, PhaseFailed, PhaseRolledBack, PhaseAborted:
		return true
	}
	return false
}

// current is the phase in today's words.
func (p Phase) current() Phase {
	if c, ok := legacyPhases[p]; ok {
		return c
	}
	return p
}

// UnmarshalJSON reads a wave's status, its phase in today's words. It is the struct's (not the
// phase's): the unstructured converter sets string fields directly and calls only a struct's.
func (w *WaveStatus) UnmarshalJSON(data []byte) error {
	type plain WaveStatus // without this method
	if err := json.Unmarshal(data, (*plain)(w)); err != nil {
		return err
	}
	w.Phase = w.Phase.current()
	return nil
}
