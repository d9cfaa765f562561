package waves

import (
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

const d1, d2 = "sha256:1111", "sha256:2222"

// fleet makes one Application per cluster, clusters named <region>-<n> and labelled region and
// name, in the order of the regions given.
func fleet(regions ...any) []Target {
	var ts []Target
	for i := 0; i < len(regions); i += 2 {
		region, n := regions[i].(string), regions[i+1].(int)
		for k := 1; k <= n; k++ {
			c := fmt.Sprintf("%s-%d", region, k)
			ts = append(ts, Target{Name: "app-" + c, Cluster: c, Labels: map[string]string{"region": region, "name": c}})
		}
	}
	return ts
}

func num(n int) *intstr.IntOrString    { v := intstr.FromInt32(int32(n)); return &v }
func pct(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
func dur(d time.Duration) *metav1.Duration {
	return &metav1.Duration{Duration: d}
}
func match(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

// seedWaves is the seed's "infinite loop" ProgressiveSync: a canary in eu-west-1, one cluster in
// every other region, then the rest 25% at a time. The third selector is empty, so it matches the
// clusters earlier waves took too (the case the seed's own test missed).
func seedWaves() []v1alpha1.Wave {
	return []v1alpha1.Wave{
		{Name: "one cluster as canary in eu-west-1", MaxTargets: num(1), MaxParallel: num(1), Selector: match("region", "eu-west-1")},
		{Name: "one cluster as canary in every other region", MaxTargets: num(3), MaxParallel: num(3), ShuffleKey: "region",
			Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "region", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"eu-west-1"}}}}},
		{Name: "rollout to remaining clusters", MaxTargets: pct("100%"), MaxParallel: pct("25%"), Selector: &metav1.LabelSelector{}},
	}
}

// run plays the engine: what was started is Running at the next step, and a step later Succeeded (or
// Failed when fail says so). It returns every decision until the rollout completes, halts or is
// refused, and stops at limit steps.
func run(in Input, fail func(name string) bool, limit int) []Decision {
	phase := map[string]v1alpha1.Phase{}
	for _, t := range in.Targets {
		phase[t.Name] = t.Phase
	}
	var out []Decision
	for step := 0; step < limit; step++ {
		for i := range in.Targets {
			in.Targets[i].Phase = phase[in.Targets[i].Name]
		}
		d := Schedule(in)
		out = append(out, d)
		if d.Complete || d.Halted || d.Refused {
			break
		}
		for name, p := range phase {
			if p == v1alpha1.PhaseRunning {
				phase[name] = v1alpha1.PhaseSucceeded
				if fail != nil && fail(name) {
					phase[name] = v1alpha1.PhaseFailed
				}
			}
		}
		for _, name := range d.Start {
			phase[name] = v1alpha1.PhaseRunning
		}
		in.Previous = d.Waves
		in.Now = in.Now.Add(time.Minute)
	}
	return out
}

func last(ds []Decision) Decision { return ds[len(ds)-1] }

func regionsOf(ts []Target, names []string) []string {
	byName := map[string]string{}
	for _, t := range ts {
		byName[t.Name] = t.Labels["region"]
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = byName[n]
	}
	return out
}

func TestSchedule(t *testing.T) {
	cases := []struct {
		name  string
		in    Input
		fail  func(string) bool
		check func(g *WithT, in Input, ds []Decision)
	}{
		{
			name: "seed infinite loop layout completes and terminates",
			in:   Input{Stage: "payments", Digest: d1, Targets: fleet("eu-west-1", 3, "eu-central-1", 3, "us-east-1", 3, "ap-south-1", 3), Waves: seedWaves(), Now: t0},
			check: func(g *WithT, in Input, ds []Decision) {
				d := last(ds)
				g.Expect(d.Complete).To(BeTrue(), d.Message)
				// 2 steps per batch (start, land): wave 1 in one batch, wave 2 in one, wave 3 in
				// four of 2, then the decision that sees it complete.
				g.Expect(ds).To(HaveLen(2*(1+1+4) + 1))
				g.Expect(d.Plan[0].Targets).To(HaveLen(1))
				g.Expect(regionsOf(in.Targets, d.Plan[0].Targets)).To(Equal([]string{"eu-west-1"}))
				g.Expect(regionsOf(in.Targets, d.Plan[1].Targets)).To(ConsistOf("eu-central-1", "us-east-1", "ap-south-1"))
				// The rest: 12 - 1 - 3 = 8, 25% of 8 = 2 at a time.
				g.Expect(d.Plan[2].Targets).To(HaveLen(8))
				g.Expect(d.Plan[2].MaxParallel).To(Equal(2))
				for _, w := range d.Waves {
					g.Expect(w.Phase).To(Equal(v1alpha1.PhaseSucceeded))
					g.Expect(w.Completed).To(ConsistOf(toAny(w.Targets)...))
					g.Expect(w.StartedAt).NotTo(BeNil())
					g.Expect(w.FinishedAt).NotTo(BeNil())
				}
				g.Expect(d.Message).To(Equal("all 3 waves completed"))
			},
		},
		{
			name: "percentages scale against the clusters not yet taken: 4 clusters, 1 then 100% is 3",
			in: Input{Stage: "payments", Digest: d1, Targets: fleet("c", 4), Now: t0, Waves: []v1alpha1.Wave{
				{Name: "one cluster", MaxTargets: num(1), MaxParallel: num(1), Selector: match("name", "c-1")},
				{Name: "everything else", MaxTargets: pct("100%"), MaxParallel: pct("25%"), Selector: &metav1.LabelSelector{}},
			}},
			check: func(g *WithT, in Input, ds []Decision) {
				d := ds[0]
				g.Expect(d.Plan[0].Targets).To(Equal([]string{"app-c-1"}))
				g.Expect(d.Plan[1].Targets).To(HaveLen(3))
				g.Expect(d.Plan[1].Targets).NotTo(ContainElement("app-c-1"))
				g.Expect(d.Plan[1].MaxParallel).To(Equal(1), "25% of 3 rounds up to 1")
				g.Expect(last(ds).Complete).To(BeTrue())
			},
		},
		{
			name: "percentage rounds up: 10% of 3 takes 1, 50% of 3 takes 2",
			in: Input{Stage: "payments", Digest: d1, Targets: fleet("a", 3, "b", 3), AllowPartial: true, Now: t0, Waves: []v1alpha1.Wave{
				{Name: "a", MaxTargets: pct("10%"), Selector: match("region", "a")},
				{Name: "b", MaxTargets: pct("50%"), MaxParallel: pct("1%"), Selector: match("region", "b")},
			}},
			check: func(g *WithT, in Input, ds []Decision) {
				g.Expect(ds[0].Plan[0].Targets).To(HaveLen(1))
				g.Expect(ds[0].Plan[1].Targets).To(HaveLen(2))
				g.Expect(ds[0].Plan[1].MaxParallel).To(Equal(1))
				g.Expect(ds[0].LeftOut).To(HaveLen(3))
			},
		},
		{
			name: "shuffleKey alternates across 3 regions",
			in: Input{Stage: "payments", Digest: d1, Targets: fleet("eu-west-1", 3, "eu-central-1", 3, "us-east-1", 3), Now: t0, Waves: []v1alpha1.Wave{
				{Name: "one per region", MaxTargets: num(3), MaxParallel: num(3), ShuffleKey: "region"},
				{Name: "rest", MaxParallel: pct("100%"), ShuffleKey: "region"},
			}},
			check: func(g *WithT, in Input, ds []Decision) {
				d := ds[0]
				g.Expect(regionsOf(in.Targets, d.Plan[0].Targets)).To(ConsistOf("eu-west-1", "eu-central-1", "us-east-1"))
				rest := regionsOf(in.Targets, d.Plan[1].Targets)
				g.Expect(rest).To(HaveLen(6))
				for i := 0; i < 6; i += 3 {
					g.Expect(rest[i:i+3]).To(ConsistOf("eu-west-1", "eu-central-1", "us-east-1"), "round %d", i/3)
				}
				g.Expect(d.Start).To(Equal(d.Plan[0].Targets))
			},
		},
		{
			name: "without shuffleKey a 3-target wave may take two clusters of one region",
			in: Input{Stage: "payments", Digest: d1, Targets: fleet("eu-west-1", 3, "eu-central-1", 3, "us-east-1", 3), AllowPartial: true, Now: t0, Waves: []v1alpha1.Wave{
				{Name: "three", MaxTargets: num(3)},
			}},
			check: func(g *WithT, in Input, ds []Decision) {
				// Not a property of the scheduler, a check that the case above tests something:
				// the plain order of this Stage puts two clusters of a region in the first three.
				rs := regionsOf(in.Targets, ds[0].Plan[0].Targets)
				slices.Sort(rs)
				g.Expect(slices.Compact(rs)).To(HaveLen(2))
			},
		},
		{
			name: "maxFailures as integer: one failure is reported and the rollout goes on",
			in: Input{Stage: "payments", Digest: d1, Targets: fleet("a", 4), Now: t0, Waves: []v1alpha1.Wave{
				{Name: "all", MaxParallel: num(2), MaxFailures: num(1)},
			}},
			fail: func(n string) bool { return n == "app-a-2" },
			check: func(g *WithT, in Input, ds []Decision) {
				d := last(ds)
				g.Expect(d.Complete).To(BeTrue(), d.Message)
				g.Expect(d.Halted).To(BeFalse())
				g.Expect(d.Waves[0].Failed).To(Equal([]string{"app-a-2"}))
				g.Expect(d.Waves[0].Completed).To(HaveLen(3))
				g.Expect(d.Waves[0].Message).To(ContainSubstring("1 failed (maxFailures 1)"))
			},
		},
		{
			name: "maxFailures as integer: one failure too many halts",
			in: Input{Stage: "payments", Digest: d1, Targets: fleet("a", 4), Now: t0, Waves: []v1alpha1.Wave{
				{Name: "all", MaxParallel: num(4), MaxFailures: num(1)},
			}},
			fail: func(n string) bool { return n == "app-a-2" || n == "app-a-3" },
			check: func(g *WithT, in Input, ds []Decision) {
				d := last(ds)
				g.Expect(d.Halted).To(BeTrue())
				g.Expect(d.Complete).To(BeFalse())
				g.Expect(d.Waves[0].Phase).To(Equal(v1alpha1.PhaseFailed))
				g.Expect(d.Message).To(ContainSubstring("app-a-2"))
				g.Expect(d.Message).To(ContainSubstring("halted"))
			},
		},
		{
			name: "maxFailures as percentage rounds down: 25% of 8 allows 2, 3 halt",
			in: Input{Stage: "payments", Digest: d1, Targets: fleet("a", 8), Now: t0, Waves: []v1alpha1.Wave{
				{Name: "all", MaxParallel: num(8), MaxFailures: pct("25%")},
			}},
			fail: func(n string) bool { return n == "app-a-1" || n == "app-a-2" || n == "app-a-3" },
			check: func(g *WithT, in Input, ds []Decision) {
				g.Expect(ds[0].Plan[0].MaxFailures).To(Equal(2))
				g.Expect(last(ds).Halted).To(BeTrue())
			},
		},
		{
			name: "maxFailures as percentage: 30% of 8 is 2, two failures go on",
			in: Input{Stage: "payments", Digest: d1, Targets: fleet("a", 8), Now: t0, Waves: []v1alpha1.Wave{
				{Name: "all", MaxParallel: num(8), MaxFailures: pct("30%")},
			}},
			fail: func(n string) bool { return n == "app-a-1" || n == "app-a-2" },
			check: func(g *WithT, in Input, ds []Decision) {
				g.Expect(ds[0].Plan[0].MaxFailures).To(Equal(2))
				g.Expect(last(ds).Complete).To(BeTrue())
			},
		},
		{
			name: "maxFailures default 0: the first failure halts and names what to roll back",
			in: Input{Stage: "payments", Digest: d1, Targets: fleet("a", 2, "b", 4), Now: t0, Waves: []v1alpha1.Wave{
				{Name: "a", Selector: match("region", "a"), MaxParallel: num(2)},
				{Name: "b", Selector: match("region", "b"), MaxParallel: num(2)},
			}},
			fail: func(n string) bool { return n == "app-b-1" || n == "app-b-2" || n == "app-b-3" || n == "app-b-4" },
			check: func(g *WithT, in Input, ds []Decision) {
				d := last(ds)
				g.Expect(d.Halted).To(BeTrue())
				g.Expect(d.Start).To(BeEmpty())
				// Both of wave a (done) and the two of wave b that were tried (failed); the two
				// of wave b never started stay out.
				g.Expect(d.Rollback).To(HaveLen(4))
				g.Expect(d.Rollback).To(ContainElements("app-a-1", "app-a-2"))
				g.Expect(d.Waves[1].Phase).To(Equal(v1alpha1.PhaseFailed))
				g.Expect(d.Waves[1].FinishedAt).NotTo(BeNil())
			},
		},
		{
			name: "partial plan refused, naming the targets left out",
			in: Input{Stage: "payments", Digest: d1, Targets: fleet("a", 2, "b", 2), Now: t0, Waves: []v1alpha1.Wave{
				{Name: "a only", Selector: match("region", "a")},
			}},
			check: func(g *WithT, in Input, ds []Decision) {
				d := ds[0]
				g.Expect(d.Refused).To(BeTrue())
				g.Expect(d.Start).To(BeEmpty())
				g.Expect(d.LeftOut).To(ConsistOf("app-b-1 (b-1)", "app-b-2 (b-2)"))
				g.Expect(d.Message).To(ContainSubstring("leave 2 of 4 targets out"))
				g.Expect(d.Message).To(ContainSubstring("app-b-1 (b-1)"))
				g.Expect(d.Message).To(ContainSubstring("allowPartial: true"))
				g.Expect(d.Waves[0].Phase).To(Equal(v1alpha1.PhasePending))
			},
		},
		{
			name: "partial plan allowed with allowPartial: the left-out targets are never started",
			in: Input{Stage: "payments", Digest: d1, Targets: fleet("a", 2, "b", 2), AllowPartial: true, Now: t0, Waves: []v1alpha1.Wave{
				{Name: "a only", Selector: match("region", "a")},
			}},
			check: func(g *WithT, in Input, ds []Decision) {
				d := last(ds)
				g.Expect(d.Complete).To(BeTrue())
				g.Expect(d.LeftOut).To(HaveLen(2))
				for _, d := range ds {
					g.Expect(d.Start).NotTo(ContainElements("app-b-1", "app-b-2"))
				}
			},
		},
		{
			name: "maxTargets smaller than the matching clusters leaves clusters out and is refused",
			in: Input{Stage: "payments", Digest: d1, Targets: fleet("a", 3), Now: t0, Waves: []v1alpha1.Wave{
				{Name: "two", MaxTargets: num(2)},
			}},
			check: func(g *WithT, in Input, ds []Decision) {
				g.Expect(ds[0].Refused).To(BeTrue())
				g.Expect(ds[0].LeftOut).To(HaveLen(1))
			},
		},
		{
			name: "absent selector takes every cluster; an empty one too",
			in: Input{Stage: "payments", Digest: d1, Targets: fleet("a", 2, "b", 2), Now: t0, Waves: []v1alpha1.Wave{
				{Name: "absent", MaxTargets: num(2)},
				{Name: "empty", Selector: &metav1.LabelSelector{}},
			}},
			check: func(g *WithT, in Input, ds []Decision) {
				g.Expect(ds[0].Refused).To(BeFalse(), ds[0].Message)
				g.Expect(ds[0].Plan[0].Targets).To(HaveLen(2))
				g.Expect(ds[0].Plan[1].Targets).To(HaveLen(2))
			},
		},
		{
			name: "invalid selector refused, naming the wave",
			in: Input{Stage: "payments", Digest: d1, Targets: fleet("a", 2), Now: t0, Waves: []v1alpha1.Wave{
				{Name: "bad", Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "region", Operator: "Near"}}}},
			}},
			check: func(g *WithT, in Input, ds []Decision) {
				g.Expect(ds[0].Refused).To(BeTrue())
				g.Expect(ds[0].Message).To(ContainSubstring(`wave "bad" has an invalid selector`))
				g.Expect(ds[0].Message).To(ContainSubstring("spec.waves[0].selector"))
			},
		},
		{
			name: "maxParallel is never exceeded and the next wave waits for the current one",
			in: Input{Stage: "payments", Digest: d1, Targets: fleet("a", 5, "b", 5), Now: t0, Waves: []v1alpha1.Wave{
				{Name: "a", Selector: match("region", "a"), MaxParallel: num(2)},
				{Name: "b", Selector: match("region", "b"), MaxParallel: pct("60%")},
			}},
			check: func(g *WithT, in Input, ds []Decision) {
				g.Expect(last(ds).Complete).To(BeTrue())
				g.Expect(ds[0].Plan[1].MaxParallel).To(Equal(3))
				for i, d := range ds {
					if d.Current < 0 {
						continue
					}
					g.Expect(len(d.Waves[d.Current].Syncing)).To(BeNumerically("<=", d.Plan[d.Current].MaxParallel), "step %d", i)
					for _, name := range d.Start {
						g.Expect(d.Plan[d.Current].Targets).To(ContainElement(name), "step %d starts outside the current wave", i)
					}
				}
				g.Expect(ds[0].Waves[1].Message).To(Equal(`waits for wave "a"`))
			},
		},
		{
			name: "soak holds the next wave and tells when it ends",
			in: Input{Stage: "payments", Digest: d1, Targets: fleet("a", 1, "b", 1), Now: t0, Waves: []v1alpha1.Wave{
				{Name: "a", Selector: match("region", "a"), Soak: dur(30 * time.Minute)},
				{Name: "b", Selector: match("region", "b"), Soak: dur(time.Hour)},
			}},
			check: func(g *WithT, in Input, ds []Decision) {
				d := last(ds)
				g.Expect(d.Complete).To(BeTrue())
				// a: started t0, done at t0+2m, soaks to t0+32m; b then runs 2 steps; the
				// last wave's soak does not delay the end.
				soaking := ds[2]
				g.Expect(soaking.Waves[0].Phase).To(Equal(v1alpha1.PhaseSoaking))
				g.Expect(soaking.NextCheck).To(Equal(t0.Add(32 * time.Minute)))
				g.Expect(soaking.Waves[1].Message).To(ContainSubstring(`waits for wave "a" to soak until 2026-12-01T10:32:00Z`))
				g.Expect(soaking.Start).To(BeEmpty())
				g.Expect(len(ds)).To(Equal(3 + 30 + 2))
			},
		},
		{
			name: "progressDeadline halts a wave that does not finish in time",
			in: Input{Stage: "payments", Digest: d1, Now: t0,
				Targets:  []Target{{Name: "app-1", Cluster: "c1", Phase: v1alpha1.PhaseRunning}, {Name: "app-2", Cluster: "c2"}},
				Waves:    []v1alpha1.Wave{{Name: "w", ProgressDeadline: dur(10 * time.Minute)}},
				Previous: []v1alpha1.WaveStatus{{Name: "w", Digest: d1, StartedAt: &metav1.Time{Time: t0.Add(-11 * time.Minute)}}},
			},
			check: func(g *WithT, in Input, ds []Decision) {
				d := ds[0]
				g.Expect(d.Halted).To(BeTrue())
				g.Expect(d.Message).To(ContainSubstring("progressDeadline 10m0s"))
				g.Expect(d.Message).To(ContainSubstring("app-1, app-2"))
				g.Expect(d.Rollback).To(Equal([]string{"app-1"}))
			},
		},
		{
			name: "no waves with allowPartial completes at once; without it everything is left out",
			in:   Input{Stage: "payments", Digest: d1, Targets: fleet("a", 1), Now: t0},
			check: func(g *WithT, in Input, ds []Decision) {
				g.Expect(ds[0].Refused).To(BeTrue())
				in.AllowPartial = true
				g.Expect(Schedule(in).Complete).To(BeTrue())
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			in := tc.in
			in.Targets = slices.Clone(tc.in.Targets)
			ds := run(in, tc.fail, 200)
			g.Expect(len(ds)).To(BeNumerically("<", 200), "the rollout did not end")
			tc.check(g, in, ds)
		})
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func TestScheduleOrder(t *testing.T) {
	targets := fleet("eu-west-1", 4, "us-east-1", 4)
	waves := []v1alpha1.Wave{{Name: "all", MaxParallel: num(1)}}
	first := func(stage string) string {
		d := Schedule(Input{Stage: stage, Digest: d1, Targets: slices.Clone(targets), Waves: waves, Now: t0})
		return d.Start[0]
	}
	cases := []struct {
		name  string
		check func(g *WithT)
	}{
		{name: "the same Stage name always gives the same order, whatever the input order", check: func(g *WithT) {
			a := Schedule(Input{Stage: "payments", Digest: d1, Targets: slices.Clone(targets), Waves: waves, Now: t0})
			reversed := slices.Clone(targets)
			slices.Reverse(reversed)
			b := Schedule(Input{Stage: "payments", Digest: d1, Targets: reversed, Waves: waves, Now: t0.Add(time.Hour)})
			g.Expect(b.Plan).To(Equal(a.Plan))
		}},
		{name: "two Stage names give different first targets", check: func(g *WithT) {
			g.Expect(first("payments")).NotTo(Equal(first("checkout")))
		}},
		{name: "different names spread the canary over the fleet", check: func(g *WithT) {
			seen := map[string]bool{}
			for i := range 40 {
				seen[first(fmt.Sprintf("service-%d", i))] = true
			}
			g.Expect(len(seen)).To(BeNumerically(">=", 5))
		}},
		{name: "repeated target names count once", check: func(g *WithT) {
			twice := append(slices.Clone(targets), targets[0])
			d := Schedule(Input{Stage: "payments", Digest: d1, Targets: twice, Waves: waves, Now: t0})
			g.Expect(d.Plan[0].Targets).To(HaveLen(len(targets)))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.check(NewWithT(t)) })
	}
}

func TestScheduleTimes(t *testing.T) {
	started := metav1.NewTime(t0.Add(-time.Hour))
	finished := metav1.NewTime(t0.Add(-30 * time.Minute))
	waves := []v1alpha1.Wave{{Name: "a", Selector: match("region", "a")}, {Name: "b", Selector: match("region", "b")}}
	done := func(ts []Target) []Target {
		for i := range ts {
			ts[i].Phase = v1alpha1.PhaseSucceeded
		}
		return ts
	}
	cases := []struct {
		name  string
		in    Input
		check func(g *WithT, d Decision)
	}{
		{
			name: "startedAt and finishedAt are never overwritten by later reconciles",
			in: Input{Stage: "payments", Digest: d1, Targets: done(fleet("a", 1, "b", 1)), Waves: waves, Now: t0,
				Previous: []v1alpha1.WaveStatus{
					{Name: "a", Digest: d1, StartedAt: &started, FinishedAt: &finished},
					{Name: "b", Digest: d1, StartedAt: &started, FinishedAt: &finished},
				}},
			check: func(g *WithT, d Decision) {
				g.Expect(d.Complete).To(BeTrue())
				for _, w := range d.Waves {
					g.Expect(w.StartedAt.Time).To(Equal(started.Time), w.Name)
					g.Expect(w.FinishedAt.Time).To(Equal(finished.Time), w.Name)
				}
			},
		},
		{
			name: "times are set once when missing",
			in:   Input{Stage: "payments", Digest: d1, Targets: done(fleet("a", 1, "b", 1)), Waves: waves, Now: t0},
			check: func(g *WithT, d Decision) {
				g.Expect(d.Waves[0].StartedAt.Time).To(Equal(t0))
				g.Expect(d.Waves[0].FinishedAt.Time).To(Equal(t0))
			},
		},
		{
			name: "a new digest resets wave status: a completed rollout that starts again is not complete",
			in: Input{Stage: "payments", Digest: d2, Targets: fleet("a", 1, "b", 1), Waves: waves, Now: t0,
				Previous: []v1alpha1.WaveStatus{
					{Name: "a", Digest: d1, Phase: v1alpha1.PhaseSucceeded, StartedAt: &started, FinishedAt: &finished, Completed: []string{"app-a-1"}},
					{Name: "b", Digest: d1, Phase: v1alpha1.PhaseSucceeded, StartedAt: &started, FinishedAt: &finished, Completed: []string{"app-b-1"}},
				}},
			check: func(g *WithT, d Decision) {
				g.Expect(d.Complete).To(BeFalse())
				g.Expect(d.Start).To(Equal([]string{"app-a-1"}))
				g.Expect(d.Waves[0].Digest).To(Equal(d2))
				g.Expect(d.Waves[0].Phase).To(Equal(v1alpha1.PhaseRunning))
				g.Expect(d.Waves[0].StartedAt.Time).To(Equal(t0))
				g.Expect(d.Waves[0].FinishedAt).To(BeNil())
				g.Expect(d.Waves[0].Completed).To(BeEmpty())
				g.Expect(d.Waves[1].Phase).To(Equal(v1alpha1.PhasePending))
				g.Expect(d.Waves[1].StartedAt).To(BeNil())
				g.Expect(d.Waves[1].FinishedAt).To(BeNil())
			},
		},
		{
			name: "a suspended rollout starts nothing and stamps no wave started",
			in: Input{Stage: "payments", Digest: d1, Suspended: true, Targets: []Target{
				{Name: "app-a-1", Cluster: "a-1", Labels: map[string]string{"region": "a"}, Phase: v1alpha1.PhaseSucceeded},
				{Name: "app-b-1", Cluster: "b-1", Labels: map[string]string{"region": "b"}, Phase: v1alpha1.PhasePending},
			}, Waves: waves, Now: t0, Previous: []v1alpha1.WaveStatus{{Name: "a", Digest: d1, StartedAt: &started, FinishedAt: &finished}}},
			check: func(g *WithT, d Decision) {
				g.Expect(d.Start).To(BeEmpty())
				g.Expect(d.Waves[0].Phase).To(Equal(v1alpha1.PhaseSucceeded))
				g.Expect(d.Waves[1].StartedAt).To(BeNil(), d.Waves[1].Message)
				g.Expect(d.Waves[1].Syncing).To(BeEmpty())
				g.Expect(d.Waves[1].Phase).To(Equal(v1alpha1.PhasePending))
				g.Expect(d.Message).To(ContainSubstring("suspended"))
			},
		},
		{
			name: "a suspended rollout does not fail by time: a wave past its progressDeadline stays as it is",
			in: Input{Stage: "payments", Digest: d1, Suspended: true, Targets: []Target{
				{Name: "app-a-1", Cluster: "a-1", Labels: map[string]string{"region": "a"}, Phase: v1alpha1.PhaseRunning},
				{Name: "app-b-1", Cluster: "b-1", Labels: map[string]string{"region": "b"}, Phase: v1alpha1.PhasePending},
			}, Waves: []v1alpha1.Wave{{Name: "a", Selector: match("region", "a"), ProgressDeadline: dur(time.Minute)}, {Name: "b", Selector: match("region", "b")}},
				Now: t0, Previous: []v1alpha1.WaveStatus{{Name: "a", Digest: d1, StartedAt: &started}}},
			check: func(g *WithT, d Decision) {
				g.Expect(d.Halted).To(BeFalse())
				g.Expect(d.Waves[0].Phase).To(Equal(v1alpha1.PhaseRunning))
				g.Expect(d.Waves[0].FinishedAt).To(BeNil())
			},
		},
		{
			name: "a finished wave whose target fails later keeps finishedAt and halts",
			in: Input{Stage: "payments", Digest: d1, Targets: []Target{
				{Name: "app-a-1", Cluster: "a-1", Labels: map[string]string{"region": "a"}, Phase: v1alpha1.PhaseFailed},
				{Name: "app-b-1", Cluster: "b-1", Labels: map[string]string{"region": "b"}, Phase: v1alpha1.PhaseRunning},
			}, Waves: waves, Now: t0, Previous: []v1alpha1.WaveStatus{
				{Name: "a", Digest: d1, StartedAt: &started, FinishedAt: &finished},
				{Name: "b", Digest: d1, StartedAt: &finished},
			}},
			check: func(g *WithT, d Decision) {
				g.Expect(d.Halted).To(BeTrue())
				g.Expect(d.Waves[0].FinishedAt.Time).To(Equal(finished.Time))
				g.Expect(d.Rollback).To(ConsistOf("app-a-1", "app-b-1"))
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.check(NewWithT(t), Schedule(tc.in)) })
	}
}

// BenchmarkSchedule decides one step of a 1,000-target rollout in 4 waves, half-way through the
// third wave (the plan is recomputed on every reconcile, so this is the per-reconcile cost).
func BenchmarkSchedule(b *testing.B) {
	targets := fleet("eu-west-1", 250, "eu-central-1", 250, "us-east-1", 250, "ap-south-1", 250)
	waves := []v1alpha1.Wave{
		{Name: "canary", MaxTargets: num(1), Selector: match("region", "eu-west-1")},
		{Name: "one per region", MaxTargets: num(3), MaxParallel: num(3), ShuffleKey: "region",
			Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "region", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"eu-west-1"}}}}},
		{Name: "a quarter", MaxTargets: pct("25%"), MaxParallel: pct("10%"), ShuffleKey: "region"},
		{Name: "the rest", MaxParallel: pct("25%"), Selector: &metav1.LabelSelector{}},
	}
	in := Input{Stage: "payments", Digest: d1, Targets: targets, Waves: waves, Now: t0}
	d := Schedule(in)
	done := map[string]bool{}
	for _, p := range d.Plan[:2] {
		for _, n := range p.Targets {
			done[n] = true
		}
	}
	for _, n := range d.Plan[2].Targets[:len(d.Plan[2].Targets)/2] {
		done[n] = true
	}
	for i := range in.Targets {
		if done[in.Targets[i].Name] {
			in.Targets[i].Phase = v1alpha1.PhaseSucceeded
		}
	}
	if d := Schedule(in); d.Current != 2 || len(d.Start) == 0 {
		b.Fatalf("the benchmark's rollout is not in the third wave: %s", d.Message)
	}
	b.ReportAllocs()
	for b.Loop() {
		Schedule(in)
	}
}
