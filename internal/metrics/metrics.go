// Package metrics serves Stagecoach's Prometheus series (stagecoach_*), on controller-runtime's
// registry beside the controller's own.
//
// Two kinds, kept apart on purpose:
//   - state (StateCollector): Ready, Stalled and Frozen per Stage, blocked candidates by gate and
//     unfinished Promotions by phase, read from the manager's cache at scrape time. They are right
//     after a restart and a deleted Stage's series are gone by construction.
//   - events (Observer): promotions by action and result, phase durations, engine reaction and
//     the DORA keys, observed once when a Promotion lands or finishes (the Promotion status
//     writer calls the Observer) and deleted with the Stage (Forget).
//
// Labels are namespace, stage, service and environment, plus action, result, phase or gate where
// named; never digests or user names, whose values are unbounded.
//
// A Stage's series carry its current service and environment: when its spec changes them, the
// event series with the old values are deleted (Vectors.Follow), and the state series follow by
// construction. So one Stage has a bounded number of series at any time, whatever its edits:
// at most MaxEventSeriesPerStage event series and MaxStateSeriesPerStage state series.
package metrics

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
)

// Label names.
const (
	labelNamespace   = "namespace"
	labelStage       = "stage"
	labelService     = "service"
	labelEnvironment = "environment"
	labelAction      = "action"
	labelResult      = "result"
	labelPhase       = "phase"
	labelGate        = "gate"
)

// Series names, for rules, dashboards and tests.
const (
	PromotionsTotal        = "stagecoach_promotions_total"
	PromotionPhaseDuration = "stagecoach_promotion_phase_duration_seconds"
	EngineReaction         = "stagecoach_engine_reaction_seconds"
	LeadTime               = "stagecoach_lead_time_seconds"
	DeploymentsTotal       = "stagecoach_deployments_total"
	ChangesTotal           = "stagecoach_changes_total"
	ChangeFailuresTotal    = "stagecoach_change_failures_total"
	TimeToRestore          = "stagecoach_time_to_restore_seconds"

	StageReady            = "stagecoach_stage_ready"
	StageStalled          = "stagecoach_stage_stalled"
	StageFrozen           = "stagecoach_stage_frozen"
	StageCandidateBlocked = "stagecoach_stage_candidate_blocked"
	PromotionsUnfinished  = "stagecoach_promotions_unfinished"
)

// Phases of a Promotion whose durations are observed.
const (
	PhaseQueued       = "queued"       // created → the Stage's previous Promotion finished
	PhaseGates        = "gates"        // then → started (gates and checks before apply)
	PhaseApplying     = "applying"     // started → applied
	PhaseLanding      = "landing"      // applied → the engine proved it landed
	PhaseGrace        = "grace"        // landed → held for the grace period
	PhaseVerification = "verification" // grace over → verified (verification checks)
)

var stageLabels = []string{labelNamespace, labelStage, labelService, labelEnvironment}

// The label values of the event series, each from a fixed set, so that a Stage's series are
// bounded: an action or result outside them is not observed (the CRD allows none).
var (
	observedActions = []stagecoachv1.PromotionAction{stagecoachv1.ActionPromote, stagecoachv1.ActionRollback,
		stagecoachv1.ActionFreeze, stagecoachv1.ActionUnfreeze, stagecoachv1.ActionAbort}
	observedResults = []stagecoachv1.Phase{stagecoachv1.PhaseSucceeded, stagecoachv1.PhaseFailed,
		stagecoachv1.PhaseRolledBack, stagecoachv1.PhaseAborted}
	observedPhases = []string{PhaseQueued, PhaseGates, PhaseApplying, PhaseLanding, PhaseGrace, PhaseVerification}
)

// Bucket bounds of the histograms (see NewVectors for why these).
var (
	phaseBuckets    = []float64{10, 60, 600, 3600, 6 * 3600, 24 * 3600}
	longBuckets     = []float64{600, 3600, 6 * 3600, 24 * 3600, 7 * 24 * 3600, 30 * 24 * 3600}
	reactionBuckets = []float64{0.5, 1, 5, 15, 60, 180}
)

// histogramSeries is what one histogram costs on /metrics: a line per bucket, +Inf, _sum, _count.
func histogramSeries(buckets []float64) int { return len(buckets) + 3 }

// MaxEventSeriesPerStage bounds the event series (lines on /metrics) of one Stage, at one set of
// label values (the Stage's current service and environment; Follow deletes the old ones):
//
//	promotions_total            5 actions x 4 results          20
//	promotion_phase_duration    6 phases x (6 buckets + 3)     54
//	engine_reaction             6 buckets + 3                   9
//	lead_time, time_to_restore  2 x (6 buckets + 3)            18
//	deployments, changes, change_failures                       3
//	                                                          ---
//	                                                          104
var MaxEventSeriesPerStage = len(observedActions)*len(observedResults) + len(observedPhases)*histogramSeries(phaseBuckets) +
	histogramSeries(reactionBuckets) + 2*histogramSeries(longBuckets) + 3

// MaxStateSeriesPerStage bounds the state series of one Stage: ready, stalled, frozen, unfinished
// Promotions Pending and Running, and one candidate_blocked series per gate name that can hold a
// candidate (the fixed set of api/v1alpha1 and the published gate of record followers).
var MaxStateSeriesPerStage = 5 + len(candidateGates)

// candidateGates are the gate names status.candidate.blockedBy may hold (plan.CandidateGates: a
// gate added to the chain is counted here too).
var candidateGates = plan.CandidateGates()

func withLabels(extra ...string) []string {
	return append(append([]string{}, stageLabels...), extra...)
}

// Vectors are the event series. One set per process: Prometheus names are global.
type Vectors struct {
	Promotions     *prometheus.CounterVec
	PhaseDuration  *prometheus.HistogramVec
	EngineReaction *prometheus.HistogramVec
	LeadTime       *prometheus.HistogramVec
	Deployments    *prometheus.CounterVec
	Changes        *prometheus.CounterVec
	ChangeFailures *prometheus.CounterVec
	TimeToRestore  *prometheus.HistogramVec

	// mu guards labels. Observations hold it shared and a relabel exclusively, so that nothing
	// observed with a Stage's old label values lands after they were deleted.
	mu sync.RWMutex
	// labels are the service and environment each Stage's series carry now, for the Stages that
	// have event series.
	labels map[types.NamespacedName]stageLabelValues
}

// stageLabelValues are the label values a Stage's series carry, and which Stage object (uid) at
// which spec (generation) gave them: a Stage read from a cache that lags behind never brings back
// the values a newer read replaced.
type stageLabelValues struct {
	uid                  types.UID
	generation           int64
	service, environment string
}

func labelValuesOf(s *stagecoachv1.Stage) stageLabelValues {
	return stageLabelValues{uid: s.UID, generation: s.Generation, service: s.Spec.Service, environment: s.Spec.Environment}
}

// replaces reports whether the values read from a Stage take the place of those recorded: the
// same Stage at a spec no older, or a Stage created anew under the name.
func (v stageLabelValues) replaces(recorded stageLabelValues) bool {
	return v.uid != recorded.uid || v.generation >= recorded.generation
}

func (v stageLabelValues) sameLabels(o stageLabelValues) bool {
	return v.service == o.service && v.environment == o.environment
}

// NewVectors makes a set of event series, not registered.
func NewVectors() *Vectors {
	// Few buckets, at the bounds people ask about: each histogram costs buckets+3 series per Stage
	// (the phase histogram six times over), and 5,000 Stages made a 98 MB scrape with 10-11 each.
	// Phases: seconds for applying and landing, 10 min the default progressDeadline, hours for
	// gates and queues (soak, approvals, windows), a day for the rest.
	phases := phaseBuckets
	// Lead time and restores: the DORA performance bands' bounds (an hour, a day, a week, a month),
	// so that "share of changes within a day" is one bucket, plus 10 min and 6 h between them.
	long := longBuckets
	// Engine reaction: a notification hook or a refresh answers in seconds; 180 s is Argo CD's
	// default reconciliation period, the wait without either.
	reaction := reactionBuckets
	return &Vectors{
		labels: map[types.NamespacedName]stageLabelValues{},
		Promotions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: PromotionsTotal,
			Help: "Promotions finished, by action (Promote, Rollback, Freeze, Unfreeze, Abort) and result (Succeeded, Failed, RolledBack, Aborted)."},
			withLabels(labelAction, labelResult)),
		PhaseDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: PromotionPhaseDuration,
			Help: "Time finished Promotions spent in each phase: queued, gates, applying, landing, grace, verification (only Stages with verification checks).", Buckets: phases},
			withLabels(labelPhase)),
		EngineReaction: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: EngineReaction,
			Help: "Time from the engine's landed signal (Argo CD reconciledAt, Flux Ready transition) to Stagecoach seeing it.", Buckets: reaction},
			withLabels()),
		LeadTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: LeadTime,
			Help: "DORA lead time: from the version's first sighting in the pipeline to Verified in this Stage.", Buckets: long},
			withLabels()),
		Deployments: prometheus.NewCounterVec(prometheus.CounterOpts{Name: DeploymentsTotal,
			Help: "DORA deployment frequency: promotes verified in this Stage."}, withLabels()),
		Changes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ChangesTotal,
			Help: "DORA change failure rate, denominator: promotes that finished verified or failed."}, withLabels()),
		ChangeFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ChangeFailuresTotal,
			Help: "DORA change failure rate, numerator: promotes that failed (and were rolled back, when automatic)."}, withLabels()),
		TimeToRestore: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: TimeToRestore,
			Help: "DORA time to restore: from the first failure in this Stage to the next verified version.", Buckets: long},
			withLabels()),
	}
}

func (v *Vectors) collectors() []prometheus.Collector {
	return []prometheus.Collector{v.Promotions, v.PhaseDuration, v.EngineReaction, v.LeadTime, v.Deployments, v.Changes,
		v.ChangeFailures, v.TimeToRestore}
}

// Register adds the series to a registry.
func (v *Vectors) Register(reg prometheus.Registerer) error {
	for _, c := range v.collectors() {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Forget removes every series of a Stage (it was deleted).
func (v *Vectors) Forget(namespace, stage string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.labels, types.NamespacedName{Namespace: namespace, Name: stage})
	v.deleteSeries(namespace, stage)
}

// Follow makes the Stage's series carry its current service and environment: when its spec
// changed them, every series of the Stage (all carry the old values) is deleted, and the next
// observations start new ones. Counters thus restart from zero under the new labels, which
// rate() and increase() read as new series. The Stage reconciler calls it on every reconcile,
// so that an edit is followed without waiting for the next Promotion.
func (v *Vectors) Follow(stage *stagecoachv1.Stage) {
	key := types.NamespacedName{Namespace: stage.Namespace, Name: stage.Name}
	now := labelValuesOf(stage)
	v.mu.RLock()
	recorded, ok := v.labels[key]
	v.mu.RUnlock()
	if !ok || recorded == now || !now.replaces(recorded) {
		return // no series yet (nothing to delete), no change, or an older read
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.follow(key, now)
}

// follow records the Stage's label values and deletes its series when they changed; v.mu is held.
func (v *Vectors) follow(key types.NamespacedName, now stageLabelValues) {
	if v.labels == nil {
		v.labels = map[types.NamespacedName]stageLabelValues{}
	}
	recorded, ok := v.labels[key]
	if ok && !now.replaces(recorded) {
		return
	}
	if ok && !recorded.sameLabels(now) {
		v.deleteSeries(key.Namespace, key.Name)
	}
	v.labels[key] = now
}

// observe calls record with the labels the Stage's series carry now (after following its spec),
// while no relabel can delete them.
func (v *Vectors) observe(stage *stagecoachv1.Stage, record func(prometheus.Labels)) {
	key := types.NamespacedName{Namespace: stage.Namespace, Name: stage.Name}
	now := labelValuesOf(stage)
	v.mu.RLock()
	recorded, ok := v.labels[key]
	if !ok || (recorded != now && now.replaces(recorded)) {
		v.mu.RUnlock()
		v.mu.Lock()
		v.follow(key, now)
		v.mu.Unlock()
		v.mu.RLock()
		recorded = v.labels[key]
	}
	defer v.mu.RUnlock()
	// An older read of the Stage than the last one observes under the newer read's labels.
	record(prometheus.Labels{labelNamespace: stage.Namespace, labelStage: stage.Name,
		labelService: recorded.service, labelEnvironment: recorded.environment})
}

// observable reports whether a finished Promotion's action and result are of the fixed sets the
// series bound assumes.
func observable(action stagecoachv1.PromotionAction, result stagecoachv1.Phase) bool {
	return slices.Contains(observedActions, action) && slices.Contains(observedResults, result)
}

// deleteSeries deletes every event series of the Stage.
func (v *Vectors) deleteSeries(namespace, stage string) {
	match := prometheus.Labels{labelNamespace: namespace, labelStage: stage}
	v.Promotions.DeletePartialMatch(match)
	v.PhaseDuration.DeletePartialMatch(match)
	v.EngineReaction.DeletePartialMatch(match)
	v.LeadTime.DeletePartialMatch(match)
	v.Deployments.DeletePartialMatch(match)
	v.Changes.DeletePartialMatch(match)
	v.ChangeFailures.DeletePartialMatch(match)
	v.TimeToRestore.DeletePartialMatch(match)
}

var (
	defaultOnce    sync.Once
	defaultVectors *Vectors
)

// Shared is the process's event series, registered on controller-runtime's registry on first
// use: a manager built again in the same process (tests, a restart after losing the lease)
// keeps counting into the same series.
func Shared() *Vectors {
	defaultOnce.Do(func() {
		defaultVectors = NewVectors()
		if err := defaultVectors.Register(ctrlmetrics.Registry); err != nil {
			panic(err) // two definitions of one series name: a programming error
		}
	})
	return defaultVectors
}
