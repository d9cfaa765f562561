package metrics

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// StateCollector reports the state of every Stage from the cache at scrape time: nothing is kept
// between scrapes, so a restart loses nothing and a deleted Stage has no series.
type StateCollector struct {
	// Reader lists Stages and Promotions (the manager's cache).
	Reader client.Reader
	// Context bounds the reads of a scrape (Collect has none of its own); Timeout caps each.
	Context context.Context
	Timeout time.Duration
}

var (
	readyDesc   = prometheus.NewDesc(StageReady, "1 when the Stage's Ready condition is True, else 0.", stageLabels, nil)
	stalledDesc = prometheus.NewDesc(StageStalled, "1 when the Stage's Stalled condition is True, else 0.", stageLabels, nil)
	frozenDesc  = prometheus.NewDesc(StageFrozen, "1 when the Stage's Frozen condition is True, else 0.", stageLabels, nil)
	blockedDesc = prometheus.NewDesc(StageCandidateBlocked,
		"1 for each gate that holds the Stage's candidate back (status.candidate.blockedBy).", withLabels(labelGate), nil)
	unfinishedDesc = prometheus.NewDesc(PromotionsUnfinished,
		"Promotions of the Stage not yet finished, by phase (Pending, Running).", withLabels(labelPhase), nil)
	scrapeErrorDesc = prometheus.NewDesc("stagecoach_metrics_scrape_errors",
		"1 when the last scrape could not read Stages or Promotions from the cache.", nil, nil)
)

// Describe sends the descriptors of the state series.
func (c *StateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{readyDesc, stalledDesc, frozenDesc, blockedDesc, unfinishedDesc, scrapeErrorDesc} {
		ch <- d
	}
}

// Collect reads Stages and Promotions and sends one sample per Stage and state.
func (c *StateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx := c.Context
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	// The cache's objects are only read here, never changed: no copies.
	var stages stagecoachv1.StageList
	var promotions stagecoachv1.PromotionList
	failed := 0.0
	if err := c.Reader.List(ctx, &stages, client.UnsafeDisableDeepCopy); err != nil {
		failed = 1
	}
	if err := c.Reader.List(ctx, &promotions, client.UnsafeDisableDeepCopy); err != nil {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrorDesc, prometheus.GaugeValue, failed)

	type key struct{ ns, name string }
	type counts struct{ pending, running int }
	unfinished := make(map[key]*counts, len(stages.Items))
	for i := range stages.Items {
		s := &stages.Items[i]
		unfinished[key{s.Namespace, s.Name}] = &counts{}
	}
	for i := range promotions.Items {
		p := &promotions.Items[i]
		n := unfinished[key{p.Namespace, p.Spec.Stage}]
		if n == nil {
			continue // its Stage is missing: no series to put it in
		}
		switch p.Status.Phase {
		case stagecoachv1.PhasePending, "":
			n.pending++
		case stagecoachv1.PhaseRunning:
			n.running++
		}
	}
	// Made per scrape: no two scrapes share a label pair.
	phasePending, phaseRunning := pair(labelPhase, string(stagecoachv1.PhasePending)), pair(labelPhase, string(stagecoachv1.PhaseRunning))
	for i := range stages.Items {
		s := &stages.Items[i]
		l := newStageLabels(s)
		ch <- &stageSample{readyDesc, l, isTrue(s, stagecoachv1.ConditionReady)}
		ch <- &stageSample{stalledDesc, l, isTrue(s, stagecoachv1.ConditionStalled)}
		ch <- &stageSample{frozenDesc, l, isTrue(s, stagecoachv1.ConditionFrozen)}
		if cand := s.Status.Candidate; cand != nil {
			seen := map[string]bool{}
			for _, b := range cand.BlockedBy {
				if seen[b.Gate] {
					continue // a gate may block for several reasons; one series each
				}
				seen[b.Gate] = true
				ch <- &stageSample{blockedDesc, l.with(pair(labelGate, b.Gate)), 1}
			}
		}
		n := unfinished[key{s.Namespace, s.Name}]
		ch <- &stageSample{unfinishedDesc, l.with(phasePending), float64(n.pending)}
		ch <- &stageSample{unfinishedDesc, l.with(phaseRunning), float64(n.running)}
	}
}

// stageSample is one gauge sample of a Stage's state. A Stage's label pairs are made once per
// scrape and shared by its series: prometheus.MustNewConstMetric makes them anew for each series
// (two allocations a label), which at 5,000 Stages was most of a scrape's 47 MB of garbage, and
// the heap had to keep room for it.
type stageSample struct {
	desc   *prometheus.Desc
	labels []*dto.LabelPair // sorted by name, as the registry expects
	value  float64
}

func (m *stageSample) Desc() *prometheus.Desc { return m.desc }

func (m *stageSample) Write(out *dto.Metric) error {
	out.Label = m.labels
	out.Gauge = &dto.Gauge{Value: &m.value}
	return nil
}

// labelPairs are one Stage's label pairs, in name order.
type labelPairs []*dto.LabelPair

func newStageLabels(s *stagecoachv1.Stage) labelPairs {
	return labelPairs{pair(labelEnvironment, s.Spec.Environment), pair(labelNamespace, s.Namespace),
		pair(labelService, s.Spec.Service), pair(labelStage, s.Name)}
}

// with adds one label to the Stage's, in name order.
func (l labelPairs) with(extra *dto.LabelPair) []*dto.LabelPair {
	out := make([]*dto.LabelPair, 0, len(l)+1)
	for _, p := range l {
		if extra != nil && extra.GetName() < p.GetName() {
			out = append(out, extra)
			extra = nil
		}
		out = append(out, p)
	}
	if extra != nil {
		out = append(out, extra)
	}
	return out
}

func pair(name, value string) *dto.LabelPair { return &dto.LabelPair{Name: &name, Value: &value} }

func isTrue(s *stagecoachv1.Stage, condType string) float64 {
	if meta.IsStatusConditionTrue(s.Status.Conditions, condType) {
		return 1
	}
	return 0
}

// Start registers the collector on reg until ctx ends. As a manager runnable it runs on the
// leader only, so that a sum over replicas counts each Stage once.
func (c *StateCollector) Start(ctx context.Context, reg prometheus.Registerer) error {
	c.Context = ctx
	if err := reg.Register(c); err != nil {
		if !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
			return fmt.Errorf("failed to register the Stage metrics: %w", err)
		}
		// Another manager of this process reports the Stages already (tests run several, one
		// after another): this one must not fail for it.
		<-ctx.Done()
		return nil
	}
	<-ctx.Done()
	reg.Unregister(c)
	return nil
}
