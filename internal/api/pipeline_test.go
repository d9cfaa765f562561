package api

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// A wave reads as the scheduler wrote it: the API derives no phase of its own.
func TestWaveIsTheStatusWave(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status stagecoachv1.WaveStatus
		want   Wave
	}{
		{name: "soaking after its targets are done",
			status: stagecoachv1.WaveStatus{Name: "canary", Phase: stagecoachv1.PhaseSoaking, Message: "2 of 2 done; soaking for 5m",
				Targets: []string{"a", "b"}, Completed: []string{"a", "b"}},
			want: Wave{Name: "canary", Phase: "Soaking", Message: "2 of 2 done; soaking for 5m",
				Targets: []string{"a", "b"}, Completed: []string{"a", "b"}, Failed: []string{}}},
		{name: "a failure within maxFailures keeps it progressing",
			status: stagecoachv1.WaveStatus{Name: "rest", Phase: stagecoachv1.PhaseRunning, Message: "1 failed (1 allowed)",
				Targets: []string{"a", "b", "c"}, Failed: []string{"a"}},
			want: Wave{Name: "rest", Phase: "Running", Message: "1 failed (1 allowed)",
				Targets: []string{"a", "b", "c"}, Completed: []string{}, Failed: []string{"a"}}},
		{name: "an earlier version's Completed reads Succeeded",
			status: decodedWave(t, `{"name":"canary","phase":"Completed","targets":["a"],"completed":["a"]}`),
			want:   Wave{Name: "canary", Phase: "Succeeded", Targets: []string{"a"}, Completed: []string{"a"}, Failed: []string{}}},
		{name: "an earlier version's Progressing reads Running",
			status: decodedWave(t, `{"name":"rest","phase":"Progressing","targets":["b"]}`),
			want:   Wave{Name: "rest", Phase: "Running", Targets: []string{"b"}, Completed: []string{}, Failed: []string{}}},
		{name: "a status without a phase is pending",
			status: stagecoachv1.WaveStatus{Name: "old"},
			want:   Wave{Name: "old", Phase: "Pending", Targets: []string{}, Completed: []string{}, Failed: []string{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(wave(tc.status)).To(Equal(tc.want))
		})
	}
}

// decodedWave is a wave status as a client reads it from the API server.
func decodedWave(t *testing.T, stored string) stagecoachv1.WaveStatus {
	t.Helper()
	var w stagecoachv1.WaveStatus
	if err := json.Unmarshal([]byte(stored), &w); err != nil {
		t.Fatal(err)
	}
	return w
}
