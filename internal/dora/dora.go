// Package dora computes the four DORA keys of a delivery pipeline from the objects alone (Stages
// and their Promotions), so that a team without Prometheus gets the same numbers as the metrics.
// The rules of what counts (a change, a failure, a restore, when a version was first seen) live
// here once: internal/metrics observes with the same functions, which is why the two agree.
//
//	keys := dora.Compute(stages, promotions, now.Add(-30*24*time.Hour), now)
//	for _, k := range keys {
//		fmt.Println(k.Service, k.Environment, k.Deployments, k.ChangeFailureRate)
//	}
package dora

import (
	"sort"
	"time"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// IsChange reports whether a finished Promotion counts as a change: a promote that was applied and
// ended Verified, Failed or RolledBack. Aborted promotes never ran, and rollbacks, freezes and
// unfreezes are not changes.
func IsChange(p *stagecoachv1.Promotion) bool {
	if p.Spec.Action != stagecoachv1.ActionPromote && p.Spec.Action != "" {
		return false
	}
	switch p.Status.Phase {
	case stagecoachv1.PhaseSucceeded, stagecoachv1.PhaseFailed, stagecoachv1.PhaseRolledBack:
		return p.Status.FinishedAt != nil
	}
	return false
}

// IsFailure reports whether a change failed (it failed, or it failed and was rolled back).
func IsFailure(p *stagecoachv1.Promotion) bool {
	return IsChange(p) && (p.Status.Phase == stagecoachv1.PhaseFailed || p.Status.Phase == stagecoachv1.PhaseRolledBack)
}

// IsDeployment reports whether a change is a deployment: a promote verified in its Stage.
func IsDeployment(p *stagecoachv1.Promotion) bool {
	return IsChange(p) && p.Status.Phase == stagecoachv1.PhaseSucceeded && p.Status.VerifiedAt != nil
}

// restores reports whether a finished Promotion put a verified version in its Stage (a promote or
// a rollback): the end of a failure.
func restores(p *stagecoachv1.Promotion) bool {
	return (p.Spec.Action == stagecoachv1.ActionPromote || p.Spec.Action == stagecoachv1.ActionRollback || p.Spec.Action == "") &&
		p.Status.Phase == stagecoachv1.PhaseSucceeded && p.Status.VerifiedAt != nil
}

// digest is the version a Promotion applied (status), or asked for (spec).
func digest(p *stagecoachv1.Promotion) string {
	if v := p.Status.Version; v != nil && v.Digest != "" {
		return v.Digest
	}
	if v := p.Spec.Version; v != nil {
		return v.Digest
	}
	return ""
}

// Chain is the Stage and the Stages it follows through spec.source.upstream, the Stage itself
// first and the pipeline's first Stage last. A missing upstream or a cycle ends the chain.
func Chain(stages []stagecoachv1.Stage, stage *stagecoachv1.Stage) []*stagecoachv1.Stage {
	byKey := make(map[[2]string]*stagecoachv1.Stage, len(stages))
	for i := range stages {
		byKey[[2]string{stages[i].Namespace, stages[i].Name}] = &stages[i]
	}
	chain := []*stagecoachv1.Stage{stage}
	seen := map[[2]string]bool{{stage.Namespace, stage.Name}: true}
	for s := stage; s.Spec.Source.Upstream != nil; {
		up := s.Spec.Source.Upstream
		key := [2]string{up.Namespace, up.Stage}
		if key[0] == "" {
			key[0] = s.Namespace
		}
		next, ok := byKey[key]
		if !ok || seen[key] {
			break
		}
		seen[key] = true
		chain = append(chain, next)
		s = next
	}
	return chain
}

// FirstSeen is when the pipeline first saw a version, the start of lead time: the earliest of
// the first Stage's sighting of it in its registry (status.candidate.firstSeen, which automation
// keeps on the Promotion it creates as FirstSeenAnnotation) and the creation of the earliest
// Promotion of that digest in any Stage of the chain (all there is for versions that come from
// people or an upstream). Stagecoach records no registry push time.
func FirstSeen(chain []*stagecoachv1.Stage, promotions []stagecoachv1.Promotion, d string) (time.Time, bool) {
	in := make(map[[2]string]bool, len(chain))
	for _, s := range chain {
		in[[2]string{s.Namespace, s.Name}] = true
	}
	var first time.Time
	for i := range promotions {
		p := &promotions[i]
		if d == "" || digest(p) != d || !in[[2]string{p.Namespace, p.Spec.Stage}] {
			continue
		}
		t := p.CreationTimestamp.Time
		if seen, ok := seenAt(p); ok && seen.Before(t) {
			t = seen
		}
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	return first, !first.IsZero()
}

// seenAt is when the source first offered a Promotion's version, when automation kept it.
func seenAt(p *stagecoachv1.Promotion) (time.Time, bool) {
	s, ok := p.Annotations[stagecoachv1.FirstSeenAnnotation]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, s)
	return t, err == nil
}

// LeadTime is how long a deployment took from the version's first sighting to Verified here.
func LeadTime(chain []*stagecoachv1.Stage, promotions []stagecoachv1.Promotion, p *stagecoachv1.Promotion) (time.Duration, bool) {
	if !IsDeployment(p) {
		return 0, false
	}
	first, ok := FirstSeen(chain, promotions, digest(p))
	if !ok {
		first = p.CreationTimestamp.Time
	}
	return max(p.Status.VerifiedAt.Sub(first), 0), true
}

// RestoreStart is when the failure that a verified Promotion ends began: the end of the first
// failed change in the Stage since the last verified version before it. ok is false when nothing
// had failed. promotions may hold other Stages' Promotions and p itself; both are skipped.
//
// A Stage runs one Promotion at a time, so its Promotions are ordered by when they started (then
// created, then named): status times keep whole seconds, and a fast engine fails a version in
// the same second as the one before it was verified.
func RestoreStart(promotions []stagecoachv1.Promotion, p *stagecoachv1.Promotion) (time.Time, bool) {
	if !restores(p) {
		return time.Time{}, false
	}
	var before []*stagecoachv1.Promotion
	for i := range promotions {
		q := &promotions[i]
		if q.UID != p.UID && q.Namespace == p.Namespace && q.Spec.Stage == p.Spec.Stage && q.Status.FinishedAt != nil && runsBefore(q, p) {
			before = append(before, q)
		}
	}
	sort.Slice(before, func(i, j int) bool { return runsBefore(before[i], before[j]) })
	var start time.Time
	for i := len(before) - 1; i >= 0; i-- {
		q := before[i]
		if restores(q) {
			break
		}
		if IsFailure(q) {
			start = q.Status.FinishedAt.Time
		}
	}
	return start, !start.IsZero()
}

// runsBefore orders one Stage's Promotions by when they started, then were created, then by name.
func runsBefore(a, b *stagecoachv1.Promotion) bool {
	ta, tb := startOf(a), startOf(b)
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	if ca, cb := a.CreationTimestamp.Time, b.CreationTimestamp.Time; !ca.Equal(cb) {
		return ca.Before(cb)
	}
	return a.Name < b.Name
}

func startOf(p *stagecoachv1.Promotion) time.Time {
	if p.Status.StartedAt != nil {
		return p.Status.StartedAt.Time
	}
	return p.CreationTimestamp.Time
}

// Durations summarises observed durations.
type Durations struct {
	Count  int           `json:"count"`
	Sum    time.Duration `json:"-"`
	Mean   time.Duration `json:"-"`
	Median time.Duration `json:"-"`
	// Seconds, for JSON and YAML readers.
	SumSeconds    float64 `json:"sumSeconds"`
	MeanSeconds   float64 `json:"meanSeconds"`
	MedianSeconds float64 `json:"medianSeconds"`
}

func summarise(ds []time.Duration) Durations {
	if len(ds) == 0 {
		return Durations{}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	median := ds[len(ds)/2]
	if len(ds)%2 == 0 {
		median = (ds[len(ds)/2-1] + ds[len(ds)/2]) / 2
	}
	mean := sum / time.Duration(len(ds))
	return Durations{Count: len(ds), Sum: sum, Mean: mean, Median: median,
		SumSeconds: sum.Seconds(), MeanSeconds: mean.Seconds(), MedianSeconds: median.Seconds()}
}

// Keys are the four keys of one Stage (one service in one environment) over a window.
type Keys struct {
	Namespace   string `json:"namespace"`
	Stage       string `json:"stage"`
	Service     string `json:"service"`
	Environment string `json:"environment"`
	// Deployments are the promotes verified in the window; DeploymentsPerDay spreads them over it.
	Deployments       int     `json:"deployments"`
	DeploymentsPerDay float64 `json:"deploymentsPerDay"`
	// LeadTime runs from the version's first sighting in the pipeline to Verified here.
	LeadTime Durations `json:"leadTime"`
	// Changes are the promotes that finished in the window (verified, failed or rolled back);
	// Failures those that failed; ChangeFailureRate is Failures/Changes (0 without changes).
	Changes           int     `json:"changes"`
	Failures          int     `json:"failures"`
	ChangeFailureRate float64 `json:"changeFailureRate"`
	// TimeToRestore runs from a failure to the next verified version, for restores in the window.
	TimeToRestore Durations `json:"timeToRestore"`
}

// Compute returns the keys of every Stage over [since, until], ordered by service, environment,
// namespace and name. An event counts in the window by when it ended (verified or finished).
func Compute(stages []stagecoachv1.Stage, promotions []stagecoachv1.Promotion, since, until time.Time) []Keys {
	type acc struct {
		keys           Keys
		lead, restores []time.Duration
	}
	byStage := map[[2]string]*acc{}
	for i := range stages {
		s := &stages[i]
		byStage[[2]string{s.Namespace, s.Name}] = &acc{keys: Keys{Namespace: s.Namespace, Stage: s.Name,
			Service: s.Spec.Service, Environment: s.Spec.Environment}}
	}
	within := func(t time.Time) bool { return !t.Before(since) && !t.After(until) }
	for i := range promotions {
		p := &promotions[i]
		a, ok := byStage[[2]string{p.Namespace, p.Spec.Stage}]
		if !ok {
			continue
		}
		if IsChange(p) && within(p.Status.FinishedAt.Time) {
			a.keys.Changes++
			if IsFailure(p) {
				a.keys.Failures++
			}
		}
		if restores(p) && within(p.Status.VerifiedAt.Time) {
			if IsDeployment(p) {
				a.keys.Deployments++
				stage := stageOf(stages, p)
				if d, ok := LeadTime(Chain(stages, stage), promotions, p); ok {
					a.lead = append(a.lead, d)
				}
			}
			if start, ok := RestoreStart(promotions, p); ok {
				a.restores = append(a.restores, p.Status.VerifiedAt.Sub(start))
			}
		}
	}
	days := until.Sub(since).Hours() / 24
	out := make([]Keys, 0, len(byStage))
	for _, a := range byStage {
		k := a.keys
		if days > 0 {
			k.DeploymentsPerDay = float64(k.Deployments) / days
		}
		if k.Changes > 0 {
			k.ChangeFailureRate = float64(k.Failures) / float64(k.Changes)
		}
		k.LeadTime, k.TimeToRestore = summarise(a.lead), summarise(a.restores)
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Service != b.Service {
			return a.Service < b.Service
		}
		if a.Environment != b.Environment {
			return a.Environment < b.Environment
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Stage < b.Stage
	})
	return out
}

func stageOf(stages []stagecoachv1.Stage, p *stagecoachv1.Promotion) *stagecoachv1.Stage {
	for i := range stages {
		if stages[i].Namespace == p.Namespace && stages[i].Name == p.Spec.Stage {
			return &stages[i]
		}
	}
	return nil
}
