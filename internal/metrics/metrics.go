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
package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Label names.
const (
	LabelNamespace   = "namespace"
	LabelStage       = "stage"
	LabelService     = "service"
	LabelEnvironment = "environment"
	LabelAction      = "action"
	LabelResult      = "result"
	LabelPhase       = "phase"
	LabelGate        = "gate"
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

var stageLabels = []string{LabelNamespace, LabelStage, LabelService, LabelEnvironment}

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
}

// NewVectors makes a set of event series, not registered.
func NewVectors() *Vectors {
	// Few buckets, at the bounds people ask about: each histogram costs buckets+3 series per Stage
	// (the phase histogram six times over), and 5,000 Stages made a 98 MB scrape with 10-11 each.
	// Phases: seconds for applying and landing, 10 min the default progressDeadline, hours for
	// gates and queues (soak, approvals, windows), a day for the rest.
	phases := []float64{10, 60, 600, 3600, 6 * 3600, 24 * 3600}
	// Lead time and restores: the DORA performance bands' bounds (an hour, a day, a week, a month),
	// so that "share of changes within a day" is one bucket, plus 10 min and 6 h between them.
	long := []float64{600, 3600, 6 * 3600, 24 * 3600, 7 * 24 * 3600, 30 * 24 * 3600}
	// Engine reaction: a notification hook or a refresh answers in seconds; 180 s is Argo CD's
	// default reconciliation period, the wait without either.
	reaction := []float64{0.5, 1, 5, 15, 60, 180}
	return &Vectors{
		Promotions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: PromotionsTotal,
			Help: "Promotions finished, by action (Promote, Rollback, Freeze, Unfreeze) and result (Succeeded, Failed, Aborted)."},
			withLabels(LabelAction, LabelResult)),
		PhaseDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: PromotionPhaseDuration,
			Help: "Time finished Promotions spent in each phase: queued, gates, applying, landing, grace, verification (only Stages with verification checks).", Buckets: phases},
			withLabels(LabelPhase)),
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
	match := prometheus.Labels{LabelNamespace: namespace, LabelStage: stage}
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
