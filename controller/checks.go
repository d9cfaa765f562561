package controller

import (
	"context"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/check"
	plugincheck "github.com/stagecoach-dev/stagecoach/plugin/check"
)

// ReasonCheckFailed: a check before apply or after landing failed.
const ReasonCheckFailed = "CheckFailed"

// checkRuns runs a Promotion's checks in the background: a check may take minutes (timeouts,
// retries), and a reconcile must not hold the worker that long. The first reconcile that needs
// them starts them; the Stage is woken when they are done, and the next reconcile takes the
// results. Results are kept in memory only: after a restart the checks simply run again.
type checkRuns struct {
	runner *check.Runner
	// baseCtx outlives single reconciles (the manager's context): a run stops with the manager.
	baseCtx context.Context
	wake    func([]reconcile.Request)

	mu   sync.Mutex
	runs map[string]*checkRun
}

type checkRun struct {
	done    bool
	results []check.Result
}

// poll starts the checks of a Promotion's phase if they are not running, and returns their
// results once all are done.
func (c *checkRuns) poll(p *stagecoachv1.Promotion, stage types.NamespacedName, checks []stagecoachv1.Check, in check.Input) ([]check.Result, bool) {
	key := string(p.UID) + "/" + string(in.Phase)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs == nil {
		c.runs = map[string]*checkRun{}
	}
	if run, ok := c.runs[key]; ok {
		if run.done {
			return run.results, true
		}
		return nil, false
	}
	run := &checkRun{}
	c.runs[key] = run
	ctx := ctrl.LoggerInto(c.baseCtx, ctrl.Log.WithName("checks").WithValues("stage", stage.String(), "promotion", p.Name, "phase", in.Phase))
	go func() {
		results := make([]check.Result, 0, len(checks))
		for _, spec := range checks {
			results = append(results, c.runner.Run(ctx, spec, in))
		}
		c.mu.Lock()
		run.done, run.results = true, results
		c.mu.Unlock()
		c.wake([]reconcile.Request{{NamespacedName: stage}})
	}()
	return nil, false
}

// forget drops a phase's results once the Promotion has moved on.
func (c *checkRuns) forget(p *stagecoachv1.Promotion, phase plugincheck.Phase) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.runs, string(p.UID)+"/"+string(phase))
}

// runChecks returns the verdict of a phase's checks for the Promotion: done is false while they
// run; failed names the checks that failed.
func (run *promotionRun) runChecks(p *stagecoachv1.Promotion, checks []stagecoachv1.Check, phase plugincheck.Phase) (results []stagecoachv1.GateResult, failed string, done bool) {
	stage := run.stage
	version := p.Status.Version
	if version == nil {
		version = p.Spec.Version
	}
	in := check.Input{Stage: stage.Name, Namespace: stage.Namespace, Environment: stage.Spec.Environment, Service: stage.Spec.Service, Phase: phase}
	if version != nil {
		in.Version, in.Digest = version.Tag, version.Digest
	}
	out, done := run.r.checks.poll(p, types.NamespacedName{Namespace: stage.Namespace, Name: stage.Name}, checks, in)
	if !done {
		return nil, "", false
	}
	var failures []string
	for _, res := range out {
		results = append(results, stagecoachv1.GateResult{Gate: "check/" + res.Name, Passed: res.Passed, Message: res.Message})
		if !res.Passed {
			failures = append(failures, res.Message)
		}
	}
	return results, strings.Join(failures, "; "), true
}

func checkNames(checks []stagecoachv1.Check) string {
	names := make([]string, 0, len(checks))
	for _, c := range checks {
		names = append(names, c.Name)
	}
	return strings.Join(names, ", ")
}
