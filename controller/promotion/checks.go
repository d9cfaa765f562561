package promotion

import (
	"context"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/check"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
	plugincheck "github.com/stagecoach-dev/stagecoach/plugin/check"
)

// CheckRuns runs a Promotion's checks in the background: a check may take minutes (timeouts,
// retries), and a reconcile must not hold the worker that long. The first reconcile that needs
// them starts them; the Stage is woken when they are done, and the next reconcile takes the
// results. Results are kept in memory only: after a restart the checks simply run again.
type CheckRuns struct {
	runner *check.Runner
	// baseCtx outlives single reconciles (the manager's context): a run stops with the manager.
	baseCtx context.Context
	wake    func([]reconcile.Request)

	mu   sync.Mutex
	runs map[string]*checkRun
}

// NewCheckRuns runs checks with runner until baseCtx ends, and calls wake with a Stage's key when
// its checks are done.
func NewCheckRuns(runner *check.Runner, baseCtx context.Context, wake func([]reconcile.Request)) *CheckRuns {
	return &CheckRuns{runner: runner, baseCtx: baseCtx, wake: wake}
}

type checkRun struct {
	stage   types.NamespacedName
	uid     types.UID
	cancel  context.CancelFunc
	done    bool
	results []check.Result
	// taken is when a reconcile wrote the results and let them go (forget).
	taken time.Time
}

// takenResultsServed is how long results already taken are still served to a poll of the same
// Promotion's phase: a reconcile working on a cached Promotion that does not show the write the
// results led to yet would otherwise start the checks again (a run check creates its object
// again). Its status write then fails on the stale resourceVersion, and nothing runs twice.
const takenResultsServed = 30 * time.Second

// poll starts the checks of a Promotion's phase if they are not running, and returns their
// results once all are done.
func (c *CheckRuns) poll(p *stagecoachv1.Promotion, stage types.NamespacedName, checks []stagecoachv1.Check, in check.Input, now time.Time) ([]check.Result, bool) {
	key := string(p.UID) + "/" + string(in.Phase)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs == nil {
		c.runs = map[string]*checkRun{}
	}
	if run, ok := c.runs[key]; ok {
		switch {
		case !run.done:
			return nil, false
		case run.taken.IsZero() || now.Sub(run.taken) < takenResultsServed:
			return run.results, true
		}
		delete(c.runs, key)
	}
	if c.baseCtx.Err() != nil {
		return nil, false // stopping: the next controller runs them
	}
	ctx := ctrl.LoggerInto(c.baseCtx, ctrl.Log.WithName("checks").WithValues("stage", stage.String(), "promotion", p.Name, "phase", in.Phase))
	ctx, cancel := context.WithCancel(ctx)
	run := &checkRun{stage: stage, uid: p.UID, cancel: cancel}
	c.runs[key] = run
	go func() {
		defer cancel()
		results := make([]check.Result, 0, len(checks))
		for _, spec := range checks {
			results = append(results, c.runner.Run(ctx, spec, in))
		}
		c.mu.Lock()
		dropped := c.runs[key] != run
		// Checks cut short because the controller is stopping decide nothing: their
		// "gave up" is no verdict on the version, and a reconcile still finishing must not
		// fail the Promotion with it. The next controller runs them again.
		stopping := c.baseCtx.Err() != nil
		if stopping && !dropped {
			delete(c.runs, key)
		}
		run.done, run.results = true, results
		c.mu.Unlock()
		if !dropped && !stopping {
			c.wake([]reconcile.Request{{NamespacedName: stage}})
		}
	}()
	return nil, false
}

// forget lets a phase's results go once the Promotion has moved on: a poll after
// takenResultsServed runs the checks afresh, and Retain drops them when the Promotion ends.
func (c *CheckRuns) forget(p *stagecoachv1.Promotion, phase plugincheck.Phase, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := string(p.UID) + "/" + string(phase)
	if run, ok := c.runs[key]; ok && run.taken.IsZero() {
		run.taken = now
	}
}

// Retain stops and drops the check runs of the Stage's Promotions that are not in unfinished:
// deleted, or ended some other way (aborted, superseded, past their deadline) while their checks
// ran; every reconcile that lists the Stage's Promotions calls it, and a deleted Stage's reconcile
// calls it with none. Without it their results would stay in memory as long as the controller runs.
func (c *CheckRuns) Retain(stage types.NamespacedName, unfinished map[types.UID]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, run := range c.runs {
		if run.stage == stage && !unfinished[run.uid] {
			run.cancel()
			delete(c.runs, key)
		}
	}
}

// size is how many runs are kept (for tests).
func (c *CheckRuns) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.runs)
}

// runChecks returns the verdict of a phase's checks for the Promotion: done is false while they
// run; failed names the checks that failed.
func (run *Run) runChecks(p *stagecoachv1.Promotion, checks []stagecoachv1.Check, phase plugincheck.Phase) (results []stagecoachv1.GateResult, failed string, done bool) {
	stage := run.stage
	version := p.Status.Version
	if version == nil {
		version = p.Spec.Version
	}
	in := check.Input{Stage: stage.Name, Namespace: stage.Namespace, Environment: stage.Spec.Environment, Service: stage.Spec.Service, Phase: phase,
		Promotion: p.Name, PromotionUID: string(p.UID), Author: stage.Spec.Author}
	if version != nil {
		in.Version, in.Digest = version.Tag, version.Digest
	}
	out, done := run.r.Checks.poll(p, types.NamespacedName{Namespace: stage.Namespace, Name: stage.Name}, checks, in, run.now)
	if !done {
		return nil, "", false
	}
	var failures []string
	for _, res := range out {
		results = append(results, stagecoachv1.GateResult{Gate: stagecoachv1.GateCheckPrefix + res.Name, Passed: res.Passed, Message: res.Message})
		if !res.Passed {
			failures = append(failures, res.Message)
		}
	}
	return results, strings.Join(failures, "; "), true
}

// preApplyChecks polls the checks before apply of a starting promote. Once they are done their
// run is let go: the verdict decides this start, and a later start runs them afresh.
func (run *Run) preApplyChecks(p *stagecoachv1.Promotion) *plan.ChecksVerdict {
	results, _, done := run.runChecks(p, run.stage.GetPreApplyChecks(), plugincheck.PhasePreApply)
	if !done {
		return &plan.ChecksVerdict{}
	}
	run.r.Checks.forget(p, plugincheck.PhasePreApply, run.now)
	return &plan.ChecksVerdict{Done: true, Results: results}
}

func checkNames(checks []stagecoachv1.Check) string {
	names := make([]string, 0, len(checks))
	for _, c := range checks {
		names = append(names, c.Name)
	}
	return strings.Join(names, ", ")
}
