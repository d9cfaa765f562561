package api

import (
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
			status: stagecoachv1.WaveStatus{Name: "canary", Phase: stagecoachv1.WaveSoaking, Message: "2 of 2 done; soaking for 5m",
				Targets: []string{"a", "b"}, Completed: []string{"a", "b"}},
			want: Wave{Name: "canary", Phase: "Soaking", Message: "2 of 2 done; soaking for 5m",
				Targets: []string{"a", "b"}, Completed: []string{"a", "b"}, Failed: []string{}}},
		{name: "a failure within maxFailures keeps it progressing",
			status: stagecoachv1.WaveStatus{Name: "rest", Phase: stagecoachv1.WaveProgressing, Message: "1 failed (1 allowed)",
				Targets: []string{"a", "b", "c"}, Failed: []string{"a"}},
			want: Wave{Name: "rest", Phase: "Progressing", Message: "1 failed (1 allowed)",
				Targets: []string{"a", "b", "c"}, Completed: []string{}, Failed: []string{"a"}}},
		{name: "a status without a phase is pending",
			status: stagecoachv1.WaveStatus{Name: "old"},
			want:   Wave{Name: "old", Phase: "Pending", Targets: []string{}, Completed: []string{}, Failed: []string{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(wave(tc.status)).To(Equal(tc.want))
		})
	}
}
