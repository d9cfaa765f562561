package waves

import (
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// Target is one Application of the ApplicationSet and the cluster it deploys to.
type Target struct {
	// Name of the Application.
	Name string
	// Cluster is the name of its destination cluster.
	Cluster string
	// Labels of the destination cluster (the Argo CD cluster Secret's labels).
	Labels map[string]string
	// Phase for the digest being rolled out; empty counts as Pending.
	Phase v1alpha1.Phase
}

// Input is everything the scheduler decides from.
type Input struct {
	// Stage is the Stage's name: it seeds the order of the targets.
	Stage string
	// Digest being rolled out; wave statuses of another digest are reset.
	Digest string
	// Targets are the ApplicationSet's Applications.
	Targets []Target
	// Waves are the Stage's spec.waves.
	Waves []v1alpha1.Wave
	// AllowPartial accepts a plan that leaves targets out.
	AllowPartial bool
	// Previous is the Stage's status.waves, for the times written once.
	Previous []v1alpha1.WaveStatus
	// Now is the time of the decision.
	Now time.Time
	// Suspended is the Stage's spec.suspend: nothing starts, and nothing is stamped or fails
	// by time meanwhile.
	Suspended bool
}

// WavePlan is one wave's share of the targets, with its limits resolved to numbers.
type WavePlan struct {
	Name        string
	Targets     []string
	MaxParallel int
	MaxFailures int
}

// Decision is what the scheduler decided.
type Decision struct {
	// Plan is every wave's targets, in the order they start.
	Plan []WavePlan
	// Start are the Applications to promote now (never more than the current wave's
	// maxParallel minus its targets already syncing).
	Start []string
	// Waves are the statuses to write to status.waves.
	Waves []v1alpha1.WaveStatus
	// Current is the index of the wave in progress (or soaking, failed, waited on); -1 when
	// complete or refused.
	Current int
	// Complete is true when every wave has completed.
	Complete bool
	// Halted is true when a wave failed (too many failures or past its progressDeadline).
	Halted bool
	// Refused is true when the plan cannot run (targets left out without allowPartial, or an
	// invalid wave); nothing is started.
	Refused bool
	// Message says in one sentence where the rollout stands and, when stuck, what to do.
	Message string
	// LeftOut are the targets no wave takes, as "application (cluster)".
	LeftOut []string
	// Rollback are the targets already moved (syncing, done or failed), to take back to the
	// previous digest when the rollout halts and rollback is automatic; set only when Halted.
	Rollback []string
	// NextCheck is when time alone changes the decision (a soak ends, a deadline passes); zero
	// when nothing is timed.
	NextCheck time.Time
}

// Schedule decides the rollout. It is pure and deterministic: the same input always gives the
// same decision.
func Schedule(in Input) Decision {
	targets := orderTargets(in.Stage, in.Targets)
	d := Decision{Current: -1}

	plan, leftOut, err := planWaves(targets, in.Waves)
	d.Plan = make([]WavePlan, len(plan))
	for i, p := range plan {
		d.Plan[i] = p.WavePlan
	}
	if err != nil {
		return refuse(d, in, err.Error())
	}
	for _, t := range leftOut {
		d.LeftOut = append(d.LeftOut, t.Name+" ("+t.Cluster+")")
	}
	if len(leftOut) > 0 && !in.AllowPartial {
		return refuse(d, in, fmt.Sprintf("the waves leave %d of %d targets out: %s; add a wave that selects them, or set allowPartial: true to leave them out deliberately",
			len(leftOut), len(targets), listSome(d.LeftOut)))
	}

	previous := map[string]v1alpha1.WaveStatus{}
	for _, s := range in.Previous {
		// A status of another digest belongs to an earlier rollout: its times must not leak
		// into this one (a Stage that starts again is not reported complete).
		if s.Digest == in.Digest {
			previous[s.Name] = s
		}
	}
	// stamp gives each status its own time, so that no two statuses share a pointer.
	stamp := func() *metav1.Time { t := metav1.NewTime(in.Now); return &t }

	var waitOn string // why later waves wait; empty while the walk is on the current wave
	completed := 0
	for i, p := range plan {
		st := v1alpha1.WaveStatus{Name: p.Name, Digest: in.Digest, Targets: p.Targets}
		if prev, ok := previous[p.Name]; ok {
			st.StartedAt, st.FinishedAt = prev.StartedAt.DeepCopy(), prev.FinishedAt.DeepCopy()
		}
		var pending []string
		for _, t := range p.members {
			switch t.Phase {
			case v1alpha1.PhaseRunning:
				st.Syncing = append(st.Syncing, t.Name)
			case v1alpha1.PhaseSucceeded:
				st.Completed = append(st.Completed, t.Name)
			case v1alpha1.PhaseFailed:
				st.Failed = append(st.Failed, t.Name)
			default:
				pending = append(pending, t.Name)
			}
		}
		if waitOn != "" {
			st.Phase = v1alpha1.PhasePending
			st.Message = waitOn
			d.Waves = append(d.Waves, st)
			continue
		}
		d.Current = i
		moved := len(st.Syncing) + len(st.Completed) + len(st.Failed)
		if st.StartedAt == nil && !(in.Suspended && moved == 0) {
			// While suspended nothing is promoted, so a wave none of whose targets moved has
			// not started.
			st.StartedAt = stamp()
		}
		counts := fmt.Sprintf("%d of %d targets done, %d syncing, %d failed (maxFailures %d)",
			len(st.Completed), len(p.Targets), len(st.Syncing), len(st.Failed), p.MaxFailures)
		unfinished := len(pending) + len(st.Syncing)
		deadline := in.Waves[i].ProgressDeadline
		halt := func() {
			d.Halted = true
			st.Phase = v1alpha1.PhaseFailed
			if st.FinishedAt == nil {
				st.FinishedAt = stamp()
			}
		}
		switch {
		case len(st.Failed) > p.MaxFailures:
			halt()
			st.Message = fmt.Sprintf("%s: %s failed, more than maxFailures allows; the rollout is halted: fix the failing Applications and promote again, or roll back",
				counts, listSome(st.Failed))
			waitOn = fmt.Sprintf("the rollout is halted: wave %q failed", p.Name)
		case unfinished > 0 && deadline != nil && !in.Suspended && st.StartedAt != nil && in.Now.Sub(st.StartedAt.Time) > deadline.Duration:
			halt()
			st.Message = fmt.Sprintf("%s: not done within its progressDeadline %s (started %s); the rollout is halted: look at %s",
				counts, deadline.Duration, st.StartedAt.UTC().Format(time.RFC3339), listSome(append(slices.Clone(st.Syncing), pending...)))
			waitOn = fmt.Sprintf("the rollout is halted: wave %q passed its progressDeadline", p.Name)
		case unfinished == 0:
			if st.FinishedAt == nil {
				st.FinishedAt = stamp()
			}
			soak := in.Waves[i].Soak
			if len(p.Targets) > 0 && soak != nil && i < len(plan)-1 && in.Now.Before(st.FinishedAt.Add(soak.Duration)) {
				until := st.FinishedAt.Add(soak.Duration)
				st.Phase = v1alpha1.PhaseSoaking
				st.Message = fmt.Sprintf("%s; soaking until %s", counts, until.UTC().Format(time.RFC3339))
				waitOn = fmt.Sprintf("waits for wave %q to soak until %s", p.Name, until.UTC().Format(time.RFC3339))
				d.NextCheck = until
				break
			}
			st.Phase = v1alpha1.PhaseSucceeded
			st.Message = counts
			completed++
		case in.Suspended && moved == 0:
			st.Phase = v1alpha1.PhasePending
			st.Message = fmt.Sprintf("%d targets wait: the Stage is suspended", len(p.Targets))
			waitOn = fmt.Sprintf("waits for wave %q", p.Name)
		default:
			st.Phase = v1alpha1.PhaseRunning
			if free := p.MaxParallel - len(st.Syncing); free > 0 && !in.Suspended {
				start := pending[:min(free, len(pending))]
				d.Start = append(d.Start, start...)
				st.Syncing = append(st.Syncing, start...)
			}
			st.Message = fmt.Sprintf("%d of %d targets done, %d syncing (maxParallel %d), %d failed (maxFailures %d)",
				len(st.Completed), len(p.Targets), len(st.Syncing), p.MaxParallel, len(st.Failed), p.MaxFailures)
			waitOn = fmt.Sprintf("waits for wave %q", p.Name)
			if deadline != nil && !in.Suspended {
				d.NextCheck = st.StartedAt.Add(deadline.Duration)
			}
		}
		d.Waves = append(d.Waves, st)
	}

	switch {
	case d.Halted:
		d.Message = d.Waves[d.Current].Message
		for _, p := range plan {
			for _, t := range p.members {
				if t.Phase == v1alpha1.PhaseRunning || t.Phase == v1alpha1.PhaseSucceeded || t.Phase == v1alpha1.PhaseFailed {
					d.Rollback = append(d.Rollback, t.Name)
				}
			}
		}
	case completed == len(plan):
		d.Complete = true
		d.Current = -1
		d.Message = fmt.Sprintf("all %d waves completed", len(plan))
	default:
		d.Message = fmt.Sprintf("wave %q (%d of %d): %s", plan[d.Current].Name, d.Current+1, len(plan), d.Waves[d.Current].Message)
	}
	if in.Suspended && !d.Complete && !d.Halted && !d.Refused {
		d.Message += " (suspended: nothing is promoted)"
	}
	return d
}
