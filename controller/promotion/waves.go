package promotion

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/applier"
	"github.com/stagecoach-dev/stagecoach/internal/waves"
)

// step moves a fleet rollout one step: it observes every target, lets the scheduler
// (waves.Schedule) decide, writes status.waves, promotes the targets the decision starts, and
// finishes the Promotion when every wave completed (verified) or the rollout halted (failed, and
// rolled back by finishFailed when rollback is automatic).
func (fleet *Fleet) step(ctx context.Context, run *Run, p *stagecoachv1.Promotion) (time.Duration, error) {
	stage, version := run.stage, p.Status.Version
	in, recheck := fleet.observe(run, p)
	rollback := p.Spec.Action == stagecoachv1.ActionRollback
	d := waves.Schedule(in)
	stage.Status.Waves = d.Waves
	if !d.Complete && !d.Halted {
		// A rollout is not verified until its last wave is: the previous version's Verified
		// must not read as this one's (the seed's Complete condition that stayed True).
		last := "none"
		if c := stage.Status.Current; c != nil && c.Digest != "" {
			last = c.Digest
			if c.Version != "" {
				last = c.Version + "@" + c.Digest
			}
		}
		run.setStageCondition(stagecoachv1.ConditionVerified, metav1.ConditionUnknown, stagecoachv1.ReasonPromoting,
			fmt.Sprintf("%s is rolling out and not verified yet (%s); the last version verified here is %s", versionString(version), d.Message, last))
	}

	switch {
	case stage.Spec.Suspend:
		// Nothing is written and nothing fails while suspended; the waves still say where they are.
		msg := fmt.Sprintf("Stage %s is suspended: the rollout of %s stopped, nothing is written; set spec.suspend to false to go on (%s)",
			stage.Name, versionString(version), d.Message)
		run.setStageCondition(stagecoachv1.ConditionPromoting, metav1.ConditionUnknown, stagecoachv1.ReasonSuspended, msg)
		p.Status.Message = msg
		return 0, run.status.save(ctx, p)
	case d.Refused:
		p.Status.Message = "waiting: " + d.Message
		return 0, run.status.save(ctx, p)
	case d.Halted:
		return 0, run.finishFailed(ctx, p, stagecoachv1.ReasonWaveFailed, d.Message)
	case d.Complete:
		if p.Status.AppliedAt == nil {
			now := metav1.NewTime(run.now)
			p.Status.AppliedAt = &now // every target already ran the version
		}
		run.markLanded(p, d.Message)
		return 0, run.verify(ctx, p, d.Message)
	}

	start := d.Start
	if rollback {
		// A rollback returns every target already moved at once: waiting wave by wave would
		// leave the failed version running longer.
		start = waves.PendingTargets(in.Targets)
	}
	if err := fleet.promote(ctx, run, p, start); err != nil {
		return 0, err
	}
	if len(start) > 0 {
		run.markApplied(p, ", wave by wave")
		stage.Status.LastAppliedDigest = version.Digest
		// The started targets are syncing now: say so, rather than until the next reconcile.
		in.Targets = markSyncing(in.Targets, start)
		stage.Status.Waves = waves.Schedule(in).Waves
	}
	p.Status.Message = d.Message
	run.setStageCondition(stagecoachv1.ConditionPromoting, metav1.ConditionTrue, stagecoachv1.ReasonPromoting,
		fmt.Sprintf("Promotion %s is rolling out %s: %s", p.Name, versionString(version), d.Message))
	return untilEarliest(run.now, d.NextCheck, recheck), run.status.save(ctx, p)
}

// observe observes each target for the Promotion's digest, as the scheduler's input. It also
// returns the earliest time a target's phase changes by time alone (a grace or a deadline ends).
func (fleet *Fleet) observe(run *Run, p *stagecoachv1.Promotion) (waves.Input, time.Time) {
	stage, digest := run.stage, p.Status.Version.Digest
	grace, deadline := stage.GetGrace(), stage.GetProgressDeadline()
	targets := slices.Clone(fleet.Targets)
	var recheck time.Time
	for i := range targets {
		app := fleet.app(targets[i].Name)
		if app == nil {
			continue
		}
		o := waves.ObserveTarget(app, digest, run.now, grace, deadline)
		targets[i].Phase = o.Phase
		if !o.Recheck.IsZero() && (recheck.IsZero() || o.Recheck.Before(recheck)) {
			recheck = o.Recheck
		}
	}
	ws := stage.Spec.Waves
	if p.Spec.Action == stagecoachv1.ActionRollback {
		ws = waves.WithoutSoak(ws) // a rollback does not soak on its way back
	}
	return waves.Input{Stage: stage.Name, Digest: digest, Targets: targets, Waves: ws, AllowPartial: stage.Spec.AllowPartial,
		Previous: stage.Status.Waves, Now: run.now, Suspended: stage.Spec.Suspend}, recheck
}

// promoteWrites is how many Applications promote writes at once. One at a time, a wave
// of 18 took 3 s of writes before its last Application could begin to sync (issue 17); the
// bound keeps a wave of hundreds from bursting the API server.
const promoteWrites = 16

// promote writes the version to each named Application the way the single-Application
// applier does (targetRevision or the plugin env, and a refresh), and stamps when, for that
// target's own progress deadline. The targets of one step are written at once: they start
// together, and each is its own object.
func (fleet *Fleet) promote(ctx context.Context, run *Run, p *stagecoachv1.Promotion, names []string) error {
	if len(names) > 0 {
		if err := run.saveAdoption(ctx); err != nil {
			return err
		}
	}
	v := applier.Version{Digest: p.Status.Version.Digest, Tag: p.Status.Version.Tag}
	// Every change is made before the first write starts: a write decodes the answer into its
	// Application while the others are written, so nothing may read the fleet meanwhile.
	type write struct{ app, orig *unstructured.Unstructured }
	var writes []write
	for _, name := range names {
		app := fleet.app(name)
		if app == nil {
			continue
		}
		orig := app.DeepCopy()
		if err := (applier.ArgoCDApplication{}).SetRevision(app, v, run.now); err != nil {
			return err
		}
		setPromotionAnnotations(app, p, stagecoachv1.PhaseRunning)
		a := app.GetAnnotations()
		a[stagecoachv1.AppliedAtAnnotation] = run.now.UTC().Format(time.RFC3339)
		app.SetAnnotations(a)
		writes = append(writes, write{app: app, orig: orig})
	}
	errs := make([]error, len(writes))
	slots := make(chan struct{}, promoteWrites)
	var wg sync.WaitGroup
	for i, w := range writes {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := run.r.Patch(ctx, w.app, client.MergeFrom(w.orig)); err != nil {
				errs[i] = fmt.Errorf("failed to promote Application %q of Stage %q to %s: %w", w.orig.GetName(), run.stage.Name, v.Digest, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func markSyncing(ts []waves.Target, names []string) []waves.Target {
	out := slices.Clone(ts)
	for i := range out {
		if slices.Contains(names, out[i].Name) {
			out[i].Phase = stagecoachv1.PhaseRunning
		}
	}
	return out
}

// untilEarliest is how long from now until the earliest of the given times (0 when none is set;
// at least a second once one has passed, so that the look happens).
func untilEarliest(now time.Time, ts ...time.Time) time.Duration {
	var first time.Time
	for _, t := range ts {
		if !t.IsZero() && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	if first.IsZero() {
		return 0
	}
	return max(first.Sub(now), time.Second)
}

// Fleet is the rollout of an ApplicationSet with waves, as read in this reconcile: its
// Applications and their clusters. Versions are written per Application by the waves
// (waves.go), never to the ApplicationSet.
type Fleet struct {
	// Apps are the Applications the ApplicationSet owns; Targets the same, with their clusters.
	Apps    []*unstructured.Unstructured
	Targets []waves.Target
}

var _ Rollout = (*Fleet)(nil)

// revision is the digest every Application runs, "" when they differ (a rollout in progress).
func (f *Fleet) revision(*Run) string {
	common := ""
	for i, app := range f.Apps {
		rev := applier.ArgoCDApplication{}.Revision(app)
		if i > 0 && rev != common {
			return ""
		}
		common = rev
	}
	return common
}

func (*Fleet) phaseOnApplier() bool { return false }

// app returns the named Application of the fleet.
func (f *Fleet) app(name string) *unstructured.Unstructured {
	for _, a := range f.Apps {
		if a.GetName() == name {
			return a
		}
	}
	return nil
}
