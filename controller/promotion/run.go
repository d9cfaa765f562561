package promotion

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
)

// A Promotion's path through one reconcile goes through these files, in this order:
//
//	run.go         this loop: gather the Stage's Promotions and Freezes, adopt the applier
//	queue.go       which Promotion runs: controls (Abort, Freeze, Unfreeze), superseded, waiting
//	automation.go  only when nothing runs or waits: the source's candidate, as a Promotion
//	start.go       admission, the gate chain (gates.go gathers its inputs; the checks before apply are its last gate)
//	progress.go    the rollout moves it one step: apply, observe the engine, landed,
//	               verification checks (a fleet's rollout: waves.go, same steps)
//	finish.go      verified, failed, rollback, history
//
// (orphans.go answers for Promotions whose Stage does not exist.)
//
// Decisions are made in internal/plan; these files gather inputs and act. Promotion status is
// written by status.go only, the Stage's by controller/stage (through commit).
//
// The writes of one promote (Argo CD applier, no checks, no grace), in order, and why each is its
// own write (about 8 plus one per engine step; issue 21 asked for the fewest crash safety allows):
//
//  1. Promotion status Running, with the gates that passed (markRunning): before the applier is
//     touched, so that a restart finds it started and never runs the gates again over a version
//     it already applied.
//  2. The applier: the digest, and the phase annotation in the same patch.
//  3. Stage status lastAppliedDigest (and a takeover not saved yet, saveAdoption, before 2): right
//     after the write, so that a crash never takes Stagecoach's own value for someone else's.
//  4. Promotion status appliedAt: the progress deadline counts from it.
//  5. Promotion status message, once per engine step that changes what it says (truthful status;
//     these writes keep the phase, so they do not wake the Stage again: promotionNeedsLook).
//  6. Stage status current, history and Verified (commit): before the Promotion finishes, so that
//     a crash in between never loses the history entry (keyed by Promotion, added once).
//  7. Promotion status Succeeded, so that a retry after a crash redoes 6 harmlessly.
//  8. The applier's phase annotation Succeeded, for the engine's UI and notifications: queued
//     after the result and written in the background (annotations.go), before the
//     applier's next write; after a crash, the next reconcile queues it again.
//
// Events (Promoted, Landed, Verified) go through the asynchronous recorder and hold nothing up.

// Run carries what one reconcile knows while it moves a Stage's Promotions forward.
type Run struct {
	r     *Runner
	stage *stagecoachv1.Stage
	obj   *unstructured.Unstructured
	// rollout takes a Promotion's version to what runs; nil when the applier cannot be used.
	rollout Rollout
	now     time.Time
	// commit writes the Stage's status now; used before a Promotion finishes, so that a crash
	// between the two writes never loses a history entry (the entry is keyed by Promotion).
	commit func(context.Context) error
	// status writes Promotions' status.
	status promotionStatus
	// promotions are the Stage's Promotions as listed at the start of this reconcile.
	promotions []stagecoachv1.Promotion
	// freezes are the Freezes holding the Stage now.
	freezes []stagecoachv1.Freeze
	// attestAgain is how soon a promotion attestation that could not be attached is tried
	// again (0: none is owed).
	attestAgain time.Duration
}

// NewRun starts one reconcile's run over the Stage's Promotions: obj is the applier as read (nil
// when it cannot be read), ro how versions reach what runs (nil when the applier cannot be used),
// and commit writes the Stage's status now.
func (r *Runner) NewRun(stage *stagecoachv1.Stage, obj *unstructured.Unstructured, ro Rollout, commit func(context.Context) error) *Run {
	now := r.clock().Now()
	return &Run{r: r, stage: stage, obj: obj, rollout: ro, now: now, commit: commit,
		status: promotionStatus{c: r.Client, now: now, observer: r.Observer}}
}

// Reconcile moves the Stage's Promotions one step: queue, automation when nothing
// runs or waits, start, progress, finish. It returns when to look again.
func (run *Run) Reconcile(ctx context.Context) (time.Duration, error) {
	next, err := run.reconcile(ctx)
	return plan.Soonest(next, run.attestAgain), err
}

func (run *Run) reconcile(ctx context.Context) (time.Duration, error) {
	if err := run.listPromotions(ctx); err != nil {
		return 0, err
	}
	if err := run.loadFreezes(ctx); err != nil {
		return 0, err
	}
	if err := run.adopt(ctx); err != nil {
		return 0, err
	}
	if err := run.catchUpAnnotations(ctx); err != nil {
		return 0, err
	}
	run.attestAgain = run.catchUpAttestation(ctx)
	running, next, err := run.queue(ctx)
	if err != nil {
		return 0, err
	}
	if running != nil && plan.Supersedable(run.stage, running) {
		// A newer version does not wait behind one that has not landed (spec.promotion.supersede).
		newer, err := run.newerToStart(ctx, next)
		if err != nil {
			return 0, err
		}
		if newer != nil {
			if err := run.supersede(ctx, running, newer); err != nil {
				return 0, err
			}
			running, next = nil, newer
		}
	}
	if running == nil && next == nil {
		run.setPromotingIdle()
		created, recheck, err := run.automate(ctx)
		if err != nil || created == nil {
			// A gate that opens by itself (soak, a Freeze's end) needs no event to be looked at
			// again, and neither does a registry.
			var blocks []stagecoachv1.GateBlock
			if c := run.stage.Status.Candidate; c != nil {
				blocks = c.BlockedBy
			}
			return plan.Soonest(plan.BlocksEnd(blocks, run.now), recheck), err
		}
		next = created // nothing else waits: start it now rather than on the next event
	}
	if running == nil {
		started, opensIn, err := run.start(ctx, next)
		if err != nil || !started {
			// A Freeze or a gate may hold it: look again when the first opens.
			return plan.Soonest(plan.BlocksEnd(plan.FreezeBlocks(run.freezes), run.now), opensIn), err
		}
		running = next
	}
	return run.progressRunning(ctx, running)
}

// loadFreezes finds the Freezes that hold the Stage now.
func (run *Run) loadFreezes(ctx context.Context) error {
	var list stagecoachv1.FreezeList
	if err := run.r.List(ctx, &list); err != nil {
		return fmt.Errorf("failed to list Freezes for Stage %q: %w", run.stage.Name, err)
	}
	var nsLabels map[string]string
	for _, f := range list.Items {
		if f.Spec.NamespaceSelector != nil && f.Namespace == run.r.ClusterFreezeNamespace {
			ns := &corev1.Namespace{}
			if err := run.r.APIReader.Get(ctx, client.ObjectKey{Name: run.stage.Namespace}, ns); err != nil {
				return fmt.Errorf("failed to read namespace %q for cluster-wide Freezes: %w", run.stage.Namespace, err)
			}
			nsLabels = ns.Labels
			break
		}
	}
	run.freezes = plan.ActiveFreezes(run.stage, nsLabels, list.Items, run.r.ClusterFreezeNamespace, run.now)
	if c := plan.FrozenByFreezes(run.stage, run.freezes); c != nil {
		run.setStageCondition(c.Type, c.Status, c.Reason, c.Message)
	}
	return nil
}

// adopt takes what the applier holds when this Stage takes it over as the Stage's baseline: it
// was there before Stagecoach, so it is nobody else's write, and the first promote may replace
// it. The takeover is recorded once (status.adopted, even when the applier holds nothing), on the
// first reconcile with a usable applier; what someone else writes after that is a foreign write
// and freezes the Stage. status.adopted is the record: no Event (one per Stage at an install of
// 5,000 Stages was noise on the API server, issue 21).
func (run *Run) adopt(ctx context.Context) error {
	stage := run.stage
	if !plan.NeedsAdoption(stage, run.promotions) {
		return nil
	}
	current := run.rollout.revision(run)
	stage.Status.Adopted = &stagecoachv1.AdoptedRevision{Revision: current, At: metav1.NewTime(run.now)}
	stage.Status.LastAppliedDigest = current
	// Saved by the status write at the end of the reconcile (one write per Stage at a first
	// start, not two), or by apply before it writes over the baseline (saveAdoption).
	return nil
}
