package metrics

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/dora"
)

// Observer records the event series of Promotions as they land and finish. The Promotion status
// writer calls it after each save that lands or finishes one, so each event is observed once.
type Observer struct {
	// Reader reads Stages and Promotions (the manager's cache).
	Reader client.Reader
	// APIReader reads appliers, which the cache does not hold.
	APIReader client.Reader
	Vectors   *Vectors
}

func with(l prometheus.Labels, kv ...string) prometheus.Labels {
	out := make(prometheus.Labels, len(l)+len(kv)/2)
	for k, v := range l {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// Landed observes the engine's reaction time: from the engine's landed signal on the applier to
// seenAt, when Stagecoach recorded the landing. Appliers without a signal time are skipped.
func (o *Observer) Landed(ctx context.Context, p *stagecoachv1.Promotion, seenAt time.Time) error {
	stage, err := o.stage(ctx, p.Namespace, p.Spec.Stage)
	if err != nil || stage == nil || stage.Status.Applier == nil {
		return err
	}
	ref := stage.Status.Applier
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(ref.APIVersion)
	obj.SetKind(ref.Kind)
	ns := ref.Namespace
	if ns == "" {
		ns = stage.Namespace
	}
	if err := o.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	if at, ok := EngineSignalAt(obj); ok {
		o.Vectors.observe(stage, func(l prometheus.Labels) {
			o.Vectors.EngineReaction.With(l).Observe(max(seenAt.Sub(at), 0).Seconds())
		})
	}
	return nil
}

// Finished observes a Promotion that reached a final phase: its result, the time in each phase
// and, for the changes it makes, the DORA keys (with the rules of internal/dora).
func (o *Observer) Finished(ctx context.Context, p *stagecoachv1.Promotion) error {
	stage, err := o.stage(ctx, p.Namespace, p.Spec.Stage)
	if err != nil || stage == nil {
		return err // a Promotion of a deleted Stage: its series are gone with it
	}
	action := p.Spec.Action
	if action == "" {
		action = stagecoachv1.ActionPromote
	}
	if !observable(action, p.Status.Phase) {
		return nil // not a final phase, or an action the CRD does not know: no series of its own
	}
	o.Vectors.observe(stage, func(l prometheus.Labels) {
		o.Vectors.Promotions.With(with(l, labelAction, string(action), labelResult, string(p.Status.Phase))).Inc()
	})
	stages, promotions, err := o.pipeline(ctx, stage)
	if err != nil {
		return err
	}
	// The cache may still hold this Promotion as it was before this write.
	for i := range promotions {
		if promotions[i].UID == p.UID {
			promotions[i] = *p
		}
	}
	durations := PhaseDurations(stage, promotions, p)
	leadTime, hasLeadTime := time.Duration(0), false
	if dora.IsDeployment(p) {
		leadTime, hasLeadTime = dora.LeadTime(dora.Chain(stages, stage), promotions, p)
	}
	restoreStart, restored := dora.RestoreStart(promotions, p)
	o.Vectors.observe(stage, func(l prometheus.Labels) {
		for phase, d := range durations {
			o.Vectors.PhaseDuration.With(with(l, labelPhase, phase)).Observe(d.Seconds())
		}
		if dora.IsChange(p) {
			o.Vectors.Changes.With(l).Inc()
			if dora.IsFailure(p) {
				o.Vectors.ChangeFailures.With(l).Inc()
			}
		}
		if dora.IsDeployment(p) {
			o.Vectors.Deployments.With(l).Inc()
			if hasLeadTime {
				o.Vectors.LeadTime.With(l).Observe(leadTime.Seconds())
			}
		}
		if restored {
			o.Vectors.TimeToRestore.With(l).Observe(p.Status.VerifiedAt.Sub(restoreStart).Seconds())
		}
	})
	return nil
}

// Forget removes a deleted Stage's series.
func (o *Observer) Forget(namespace, stage string) { o.Vectors.Forget(namespace, stage) }

// Follow keeps the Stage's series at its current service and environment (Vectors.Follow).
func (o *Observer) Follow(stage *stagecoachv1.Stage) { o.Vectors.Follow(stage) }

func (o *Observer) stage(ctx context.Context, namespace, name string) (*stagecoachv1.Stage, error) {
	stage := &stagecoachv1.Stage{}
	if err := o.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, stage); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil, nil
		}
		return nil, fmt.Errorf("failed to read Stage %s/%s for its metrics: %w", namespace, name, err)
	}
	return stage, nil
}

// pipeline reads the Stages the Stage follows and the Promotions of their namespaces.
func (o *Observer) pipeline(ctx context.Context, stage *stagecoachv1.Stage) ([]stagecoachv1.Stage, []stagecoachv1.Promotion, error) {
	stages := []stagecoachv1.Stage{*stage}
	namespaces := map[string]bool{stage.Namespace: true}
	for s := stage; s.Spec.Source.Upstream != nil && len(stages) < 64; {
		ns := s.Spec.Source.Upstream.Namespace
		if ns == "" {
			ns = s.Namespace
		}
		up, err := o.stage(ctx, ns, s.Spec.Source.Upstream.Stage)
		if err != nil || up == nil {
			break // lead time then starts in the Stages that exist
		}
		stages = append(stages, *up)
		namespaces[ns] = true
		s = up
	}
	var promotions []stagecoachv1.Promotion
	for ns := range namespaces {
		var list stagecoachv1.PromotionList
		if err := o.Reader.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil, nil, fmt.Errorf("failed to list the Promotions of namespace %s for Stage %s's metrics: %w", ns, stage.Name, err)
		}
		promotions = append(promotions, list.Items...)
	}
	return stages, promotions, nil
}

// PhaseDurations is the time a finished Promotion spent in each phase it went through. Only
// status times are used, so the numbers are the same after a restart: queued ends when the
// Stage's previous Promotion finished, and grace when the Stage's grace period ran out (when
// verification checks follow it).
func PhaseDurations(stage *stagecoachv1.Stage, promotions []stagecoachv1.Promotion, p *stagecoachv1.Promotion) map[string]time.Duration {
	st, out := p.Status, map[string]time.Duration{}
	if st.StartedAt == nil {
		return out
	}
	created, started := p.CreationTimestamp.Time, st.StartedAt.Time
	turn := created // when its turn came: the previous Promotion's end, if it ended later
	for i := range promotions {
		q := &promotions[i]
		if q.UID == p.UID || q.Spec.Stage != p.Spec.Stage || q.Namespace != p.Namespace || q.Status.FinishedAt == nil {
			continue
		}
		if f := q.Status.FinishedAt.Time; f.After(turn) && !f.After(started) {
			turn = f
		}
	}
	out[PhaseQueued] = turn.Sub(created)
	out[PhaseGates] = max(started.Sub(turn), 0)
	if st.AppliedAt == nil {
		return out
	}
	out[PhaseApplying] = max(st.AppliedAt.Sub(started), 0)
	if st.LandedAt == nil {
		return out
	}
	out[PhaseLanding] = max(st.LandedAt.Sub(st.AppliedAt.Time), 0)
	if st.VerifiedAt == nil {
		return out
	}
	// A phase the Stage does not have gets no series (each is a histogram per Stage): without
	// verification checks, all of landed → verified is the grace; without a grace, the checks.
	held := max(st.VerifiedAt.Sub(st.LandedAt.Time), 0)
	if v := stage.Spec.Verification; v == nil || len(v.Checks) == 0 {
		out[PhaseGrace] = held
		return out
	}
	grace := min(held, stage.GetGrace())
	if grace > 0 {
		out[PhaseGrace] = grace
	}
	out[PhaseVerification] = held - grace
	return out
}

// EngineSignalAt is when the engine said the applier's version landed: Argo CD's reconciledAt
// (the refresh that found the sync healthy), else the Ready condition's last transition (Flux and
// kstatus kinds). ok is false when the object says neither.
func EngineSignalAt(obj *unstructured.Unstructured) (time.Time, bool) {
	if s, _, _ := unstructured.NestedString(obj.Object, "status", "reconciledAt"); s != "" {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			return t, true
		}
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" || m["status"] != "True" {
			continue
		}
		if s, ok := m["lastTransitionTime"].(string); ok {
			if t, err := time.Parse(time.RFC3339, s); err == nil {
				return t, true
			}
		}
	}
	return time.Time{}, false
}
