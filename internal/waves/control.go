package waves

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// PendingTargets names the targets not promoted to the digest yet, in input order: what a
// rollback writes at once.
func PendingTargets(ts []Target) []string {
	var names []string
	for _, t := range ts {
		if t.Phase == "" || t.Phase == v1alpha1.PhasePending {
			names = append(names, t.Name)
		}
	}
	return names
}

// WithoutSoak is the waves with no soak: a rollback returns to a version already verified, and
// waiting between its waves would only keep the failed version running longer.
func WithoutSoak(ws []v1alpha1.Wave) []v1alpha1.Wave {
	out := slices.Clone(ws)
	for i := range out {
		out[i].Soak = nil
	}
	return out
}

// Abort marks the unfinished waves of the digest's rollout Aborted: their message says why, a
// wave already started gets its finishedAt (once), and ended waves are left as they were.
func Abort(statuses []v1alpha1.WaveStatus, digest, why string, now time.Time) []v1alpha1.WaveStatus {
	out := make([]v1alpha1.WaveStatus, len(statuses))
	for i, s := range statuses {
		s = *s.DeepCopy()
		if s.Digest == digest && !s.Phase.Ended() {
			s.Phase, s.Message = v1alpha1.PhaseAborted, why
			if s.StartedAt != nil && s.FinishedAt == nil {
				t := metav1.NewTime(now)
				s.FinishedAt = &t
			}
		}
		out[i] = s
	}
	return out
}
