package check

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// recordedRuns answers each attempt from outcomes, in order, and records what it was asked.
type recordedRuns struct {
	outcomes []Outcome
	attempts []int
	timeouts []time.Duration
}

func (r *recordedRuns) Run(_ context.Context, _ string, _ *v1alpha1.RunCheck, _ Input, attempt int, timeout time.Duration) Outcome {
	r.attempts = append(r.attempts, attempt)
	r.timeouts = append(r.timeouts, timeout)
	return r.outcomes[len(r.attempts)-1]
}

// A run check is retried like the others (each attempt a new run, numbered from 1 so that only the
// first may adopt an earlier one), stops at a permanent failure, and has a 10m timeout by default.
func TestRunCheckAttempts(t *testing.T) {
	tests := []struct {
		name         string
		retries      int32
		timeout      *time.Duration
		outcomes     []Outcome
		wantPassed   bool
		wantAttempts []int
		wantTimeout  time.Duration
		wantMessage  string
	}{
		{name: "passes at once", retries: 2, outcomes: []Outcome{{Passed: true, Message: "Job shop/x completed"}},
			wantPassed: true, wantAttempts: []int{1}, wantTimeout: DefaultRunTimeout, wantMessage: `check "job" passed: Job shop/x completed`},
		{name: "passes on retry", retries: 2, outcomes: []Outcome{{Message: "failed"}, {Passed: true, Message: "ok"}},
			wantPassed: true, wantAttempts: []int{1, 2}, wantTimeout: DefaultRunTimeout},
		{name: "a permanent failure is not retried", retries: 2, outcomes: []Outcome{{Message: "may not create jobs.batch", Permanent: true}},
			wantAttempts: []int{1}, wantTimeout: DefaultRunTimeout, wantMessage: `check "job" failed: may not create jobs.batch`},
		{name: "its own timeout", timeout: new(time.Minute), outcomes: []Outcome{{Message: "did not complete"}},
			wantAttempts: []int{1}, wantTimeout: time.Minute, wantMessage: `check "job" failed: did not complete`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			runs := &recordedRuns{outcomes: tt.outcomes}
			c := v1alpha1.Check{Name: "job", Run: &v1alpha1.RunCheck{}, Retries: tt.retries}
			if tt.timeout != nil {
				c.Timeout = &metav1.Duration{Duration: *tt.timeout}
			}
			r := &Runner{Runs: runs, Backoff: func(int) time.Duration { return 0 }}
			res := r.Run(t.Context(), c, testInput())
			g.Expect(res.Passed).To(Equal(tt.wantPassed))
			g.Expect(runs.attempts).To(Equal(tt.wantAttempts))
			g.Expect(res.Attempts).To(Equal(len(tt.wantAttempts)))
			g.Expect(runs.timeouts[0]).To(Equal(tt.wantTimeout))
			if tt.wantMessage != "" {
				g.Expect(res.Message).To(Equal(tt.wantMessage))
			}
		})
	}
}
