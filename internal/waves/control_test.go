package waves

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

func TestPendingTargets(t *testing.T) {
	cases := []struct {
		name string
		in   []Target
		want []string
	}{
		{name: "none", in: nil, want: nil},
		{name: "only pending and unset", in: []Target{{Name: "a", Phase: v1alpha1.PhaseSucceeded}, {Name: "b"}, {Name: "c", Phase: v1alpha1.PhasePending}, {Name: "d", Phase: v1alpha1.PhaseRunning}, {Name: "e", Phase: v1alpha1.PhaseFailed}},
			want: []string{"b", "c"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(PendingTargets(tc.in)).To(Equal(tc.want))
		})
	}
}

func TestWithoutSoak(t *testing.T) {
	in := []v1alpha1.Wave{{Name: "a", Soak: dur(time.Hour)}, {Name: "b"}}
	cases := []struct {
		name  string
		check func(g Gomega, out []v1alpha1.Wave)
	}{
		{name: "soak cleared", check: func(g Gomega, out []v1alpha1.Wave) { g.Expect(out[0].Soak).To(BeNil()) }},
		{name: "input kept", check: func(g Gomega, _ []v1alpha1.Wave) { g.Expect(in[0].Soak).NotTo(BeNil()) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.check(NewWithT(t), WithoutSoak(in)) })
	}
}

func TestAbort(t *testing.T) {
	started := metav1.NewTime(t0)
	finished := metav1.NewTime(t0.Add(time.Minute))
	now := t0.Add(time.Hour)
	in := []v1alpha1.WaveStatus{
		{Name: "done", Digest: d2, Phase: v1alpha1.PhaseSucceeded, Message: "ok", StartedAt: &started, FinishedAt: &finished},
		{Name: "running", Digest: d2, Phase: v1alpha1.PhaseRunning, Message: "1 of 3", StartedAt: &started},
		{Name: "waiting", Digest: d2, Phase: v1alpha1.PhasePending, Message: "waits"},
		{Name: "old", Digest: d1, Phase: v1alpha1.PhaseRunning, Message: "old rollout", StartedAt: &started},
	}
	out := Abort(in, d2, "aborted by x", now)
	cases := []struct {
		name        string
		i           int
		wantPhase   v1alpha1.Phase
		wantMessage string
		wantFinish  *metav1.Time
	}{
		{name: "completed wave kept", i: 0, wantPhase: v1alpha1.PhaseSucceeded, wantMessage: "ok", wantFinish: &finished},
		{name: "running wave finished now", i: 1, wantPhase: v1alpha1.PhaseAborted, wantMessage: "aborted by x", wantFinish: &metav1.Time{Time: now}},
		{name: "waiting wave says why, never started", i: 2, wantPhase: v1alpha1.PhaseAborted, wantMessage: "aborted by x"},
		{name: "another digest untouched", i: 3, wantPhase: v1alpha1.PhaseRunning, wantMessage: "old rollout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(out[tc.i].Message).To(Equal(tc.wantMessage))
			g.Expect(out[tc.i].Phase).To(Equal(tc.wantPhase))
			if tc.wantFinish == nil {
				g.Expect(out[tc.i].FinishedAt).To(BeNil())
			} else {
				g.Expect(out[tc.i].FinishedAt.Equal(tc.wantFinish)).To(BeTrue())
			}
		})
	}
	NewWithT(t).Expect(in[1].FinishedAt).To(BeNil(), "the input must not change")
}
