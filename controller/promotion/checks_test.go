package promotion

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/check"
	plugincheck "github.com/stagecoach-dev/stagecoach/plugin/check"
)

// A check run of a Promotion that is gone (or ended) while its checks run is stopped and dropped
// by the next reconcile of its Stage; runs of other Stages and of unfinished Promotions stay.
func TestCheckRunsRetain(t *testing.T) {
	cases := []struct {
		name        string
		sweepStage  types.NamespacedName
		unfinished  []types.UID
		wantKept    int
		wantStopped bool
	}{
		{name: "the Promotion is still unfinished", sweepStage: types.NamespacedName{Namespace: "ns", Name: "prod"},
			unfinished: []types.UID{"p1"}, wantKept: 1},
		{name: "the Promotion is gone", sweepStage: types.NamespacedName{Namespace: "ns", Name: "prod"},
			wantKept: 0, wantStopped: true},
		{name: "another Stage's sweep leaves it alone", sweepStage: types.NamespacedName{Namespace: "ns", Name: "staging"},
			wantKept: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			// The check's endpoint answers only when the caller gives up, and says so.
			called, stopped := make(chan struct{}), make(chan struct{})
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				close(called)
				select {
				case <-r.Context().Done():
					close(stopped)
				case <-release:
				}
			}))
			defer srv.Close()
			defer close(release)

			var mu sync.Mutex
			var woken []reconcile.Request
			runs := &CheckRuns{runner: &check.Runner{AllowInternalTargets: true}, baseCtx: t.Context(), wake: func(r []reconcile.Request) {
				mu.Lock()
				defer mu.Unlock()
				woken = append(woken, r...)
			}}
			prod := types.NamespacedName{Namespace: "ns", Name: "prod"}
			p := &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p1", UID: "p1"}}
			checks := []stagecoachv1.Check{{Name: "slow", HTTP: &stagecoachv1.HTTPCheck{URL: srv.URL},
				Timeout: &metav1.Duration{Duration: time.Minute}}}
			_, done := runs.poll(p, prod, checks, check.Input{Stage: "prod", Phase: plugincheck.PhasePostApply}, time.Now())
			g.Expect(done).To(BeFalse())
			g.Eventually(called, 5*time.Second).Should(BeClosed(), "the check never called its endpoint")

			unfinished := map[types.UID]bool{}
			for _, uid := range tc.unfinished {
				unfinished[uid] = true
			}
			runs.Retain(tc.sweepStage, unfinished)
			g.Expect(runs.size()).To(Equal(tc.wantKept))
			if tc.wantStopped {
				g.Eventually(stopped, 5*time.Second).Should(BeClosed(), "the dropped run's check was not stopped")
				// A dropped run wakes nobody, even once its check returns.
				g.Consistently(func() []reconcile.Request {
					mu.Lock()
					defer mu.Unlock()
					return woken
				}, 200*time.Millisecond).Should(BeEmpty())
				return
			}
			g.Consistently(stopped, 200*time.Millisecond).ShouldNot(BeClosed(), "a kept run was stopped")
		})
	}
}

// Results a reconcile took are served again, without running the checks, to a poll soon after
// (a reconcile on a cache that does not show the Promotion's write yet); a poll after that
// window runs them afresh.
func TestCheckRunsServeTakenResults(t *testing.T) {
	cases := []struct {
		name      string
		pollAfter time.Duration
		wantDone  bool
		wantCalls int32
	}{
		{name: "a poll right after the results were taken", pollAfter: time.Second, wantDone: true, wantCalls: 1},
		{name: "a poll after the window", pollAfter: takenResultsServed + time.Second, wantDone: false, wantCalls: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }))
			defer srv.Close()
			runs := &CheckRuns{runner: &check.Runner{AllowInternalTargets: true}, baseCtx: t.Context(), wake: func([]reconcile.Request) {}}
			prod := types.NamespacedName{Namespace: "ns", Name: "prod"}
			p := &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p1", UID: "p1"}}
			checks := []stagecoachv1.Check{{Name: "smoke", HTTP: &stagecoachv1.HTTPCheck{URL: srv.URL}}}
			in := check.Input{Stage: "prod", Phase: plugincheck.PhasePostApply}
			taken := time.Now()
			g.Eventually(func() bool { _, done := runs.poll(p, prod, checks, in, taken); return done }, 5*time.Second).Should(BeTrue())
			runs.forget(p, plugincheck.PhasePostApply, taken)

			results, done := runs.poll(p, prod, checks, in, taken.Add(tc.pollAfter))
			g.Expect(done).To(Equal(tc.wantDone))
			if tc.wantDone {
				g.Expect(results).To(ConsistOf(HaveField("Passed", true)))
			}
			g.Eventually(calls.Load, 5*time.Second).Should(Equal(tc.wantCalls))
			g.Consistently(calls.Load, 200*time.Millisecond).Should(Equal(tc.wantCalls))
		})
	}
}

// Checks cut short because the controller stops are no verdict: a reconcile still finishing
// polls and gets nothing (it must not fail the Promotion with "gave up"), nobody is woken, and
// no new run starts while the controller stops.
func TestCheckRunsStoppingDecidesNothing(t *testing.T) {
	cases := []struct {
		name string
		// pollWhileStopped polls once more after the manager's context ended.
		pollWhileStopped bool
	}{
		{name: "the run's results are dropped"},
		{name: "a poll while stopping starts no run", pollWhileStopped: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var calls atomic.Int32
			called := make(chan struct{}, 4)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				called <- struct{}{}
				<-r.Context().Done()
			}))
			defer srv.Close()
			manager, stop := context.WithCancel(t.Context())
			var woken atomic.Int32
			runs := &CheckRuns{runner: &check.Runner{AllowInternalTargets: true}, baseCtx: manager,
				wake: func([]reconcile.Request) { woken.Add(1) }}
			prod := types.NamespacedName{Namespace: "ns", Name: "prod"}
			p := &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p1", UID: "p1"}}
			checks := []stagecoachv1.Check{{Name: "slow", HTTP: &stagecoachv1.HTTPCheck{URL: srv.URL},
				Timeout: &metav1.Duration{Duration: time.Minute}}}
			in := check.Input{Stage: "prod", Phase: plugincheck.PhasePostApply}
			_, done := runs.poll(p, prod, checks, in, time.Now())
			g.Expect(done).To(BeFalse())
			g.Eventually(called, 5*time.Second).Should(Receive())

			stop()
			g.Eventually(runs.size, 5*time.Second).Should(BeZero(), "the stopped run's results were kept")
			if tc.pollWhileStopped {
				results, done := runs.poll(p, prod, checks, in, time.Now())
				g.Expect(done).To(BeFalse())
				g.Expect(results).To(BeEmpty())
				g.Expect(runs.size()).To(BeZero())
			}
			g.Consistently(func() int32 { return woken.Load() + calls.Load() }, 300*time.Millisecond).Should(Equal(int32(1)),
				"a stopped run woke its Stage, or a new run started")
		})
	}
}
