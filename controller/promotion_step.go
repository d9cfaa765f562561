package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/applier"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
	plugincheck "github.com/stagecoach-dev/stagecoach/plugin/check"
)

// historyLimit bounds status.history; older entries live in the records.
const historyLimit = 20

// failedDigestsLimit bounds status.failedDigests.
const failedDigestsLimit = 32

// Event reasons of promotion transitions (also sent to Flux and Argo CD notifications later).
const (
	EventPromoted        = "Promoted"
	EventLanded          = "Landed"
	EventVerified        = "Verified"
	EventPromotionFailed = "PromotionFailed"
	EventRolledBack      = "RolledBack"
	EventFrozen          = "Frozen"
	EventAdopted         = "Adopted"
	EventSuperseded      = "Superseded"
)

// promotionRun carries what one reconcile knows while it moves a Stage's Promotions forward.
type promotionRun struct {
	r       *StageReconciler
	stage   *stagecoachv1.Stage
	obj     *unstructured.Unstructured
	applier applier.Applier
	now     time.Time
	// commit writes the Stage's status now; used before a Promotion finishes, so that a crash
	// between the two writes never loses a history entry (the entry is keyed by Promotion).
	commit func(context.Context) error
	// promotions are the Stage's Promotions as listed at the start of this reconcile.
	promotions []stagecoachv1.Promotion
	// freezes are the Freezes holding the Stage now.
	freezes []stagecoachv1.Freeze
	// gateEnds is when a gate holding the next Promotion opens by itself (0 when none will).
	gateEnds time.Duration
	// sourceRecheck is when the source (a registry) should be looked at again (0: on events only).
	sourceRecheck time.Duration
}

// reconcilePromotions moves the Stage's Promotions one step: supersede, start, apply, observe,
// finish; then lets automation queue the next candidate. It returns when to look again.
func (run *promotionRun) reconcilePromotions(ctx context.Context) (time.Duration, error) {
	if err := run.listPromotions(ctx); err != nil {
		return 0, err
	}
	if err := run.loadFreezes(ctx); err != nil {
		return 0, err
	}
	if err := run.adopt(ctx); err != nil {
		return 0, err
	}
	q := plan.Queue(run.promotions)
	for _, p := range q.Controls {
		if err := run.control(ctx, p); err != nil {
			return 0, err
		}
	}
	running, next := q.Running, q.Next
	for _, p := range q.Superseded {
		if err := run.finish(ctx, p, stagecoachv1.PhaseAborted, fmt.Sprintf("superseded by a newer automatic Promotion of Stage %s", run.stage.Name)); err != nil {
			return 0, err
		}
		run.event(p, corev1.EventTypeNormal, EventSuperseded, "Promotion %s was superseded by a newer automatic one", p.Name)
	}
	if running == nil && next != nil {
		started, err := run.start(ctx, next)
		if err != nil || !started {
			return run.holdEnds(), err // a Freeze or a gate may hold it: look again when it opens
		}
		running = next
	}
	if running != nil {
		return run.progressRunning(ctx, running)
	}
	meta.SetStatusCondition(&run.stage.Status.Conditions, metav1.Condition{Type: stagecoachv1.ConditionPromoting,
		Status: metav1.ConditionFalse, Reason: stagecoachv1.ReasonIdle, Message: "no Promotion is running", ObservedGeneration: run.stage.Generation})
	created, err := run.automate(ctx, run.promotions)
	if err != nil || created == nil {
		// A gate that opens by itself (soak, a Freeze's end) needs no event to be looked at again,
		// and neither does a registry.
		var blocks []stagecoachv1.GateBlock
		if c := run.stage.Status.Candidate; c != nil {
			blocks = c.BlockedBy
		}
		return soonest(plan.BlocksEnd(blocks, run.now), run.sourceRecheck), err
	}
	// Nothing else waits: start the new Promotion now rather than on the next event.
	if started, err := run.start(ctx, created); err != nil || !started {
		return 0, err
	}
	return run.progressRunning(ctx, created)
}

// loadFreezes finds the Freezes that hold the Stage now.
func (run *promotionRun) loadFreezes(ctx context.Context) error {
	var list stagecoachv1.FreezeList
	if err := run.r.List(ctx, &list); err != nil {
		return fmt.Errorf("failed to list Freezes for Stage %q: %w", run.stage.Name, err)
	}
	var nsLabels map[string]string
	for _, f := range list.Items {
		if f.Spec.NamespaceSelector != nil {
			ns := &corev1.Namespace{}
			if err := run.r.APIReader.Get(ctx, client.ObjectKey{Name: run.stage.Namespace}, ns); err != nil {
				return fmt.Errorf("failed to read namespace %q for cluster-wide Freezes: %w", run.stage.Namespace, err)
			}
			nsLabels = ns.Labels
			break
		}
	}
	run.freezes = plan.ActiveFreezes(run.stage, nsLabels, list.Items, run.now)
	return nil
}

// holdEnds is how long until the first active Freeze or gate with an end opens (0 when none will
// by itself).
func (run *promotionRun) holdEnds() time.Duration {
	return soonest(plan.BlocksEnd(plan.FreezeBlocks(run.freezes), run.now), run.gateEnds)
}

// listPromotions reads the Stage's Promotions (from the cache, by index).
func (run *promotionRun) listPromotions(ctx context.Context) error {
	var list stagecoachv1.PromotionList
	if err := run.r.List(ctx, &list, client.InNamespace(run.stage.Namespace),
		client.MatchingFields{promotionStageIndexKey: run.stage.Name}); err != nil {
		return fmt.Errorf("failed to list the Promotions of Stage %q: %w", run.stage.Name, err)
	}
	run.promotions = list.Items
	// Check runs of Promotions that are gone or ended some other way are of no use any more.
	unfinished := map[types.UID]bool{}
	for i := range run.promotions {
		if !plan.IsFinished(&run.promotions[i]) {
			unfinished[run.promotions[i].UID] = true
		}
	}
	run.r.checks.retain(client.ObjectKeyFromObject(run.stage), unfinished)
	return nil
}

// progressRunning says on the Stage which Promotion runs, and moves it one step.
func (run *promotionRun) progressRunning(ctx context.Context, running *stagecoachv1.Promotion) (time.Duration, error) {
	meta.SetStatusCondition(&run.stage.Status.Conditions, metav1.Condition{Type: stagecoachv1.ConditionPromoting,
		Status: metav1.ConditionTrue, Reason: stagecoachv1.ReasonPromoting, ObservedGeneration: run.stage.Generation,
		Message: fmt.Sprintf("Promotion %s is applying %s", running.Name, versionString(running.Status.Version))})
	return run.progress(ctx, running)
}

// control carries out a Freeze or Unfreeze Promotion at once.
func (run *promotionRun) control(ctx context.Context, p *stagecoachv1.Promotion) error {
	stage := run.stage
	if p.Spec.Action == stagecoachv1.ActionFreeze {
		run.setFrozen(stagecoachv1.ReasonFrozenByPromotion, fmt.Sprintf("frozen by Promotion %s: %s", p.Name, p.Spec.Reason))
		run.event(stage, corev1.EventTypeNormal, EventFrozen, "Stage %s frozen by Promotion %s", stage.Name, p.Name)
		return run.finish(ctx, p, stagecoachv1.PhaseSucceeded, "the Stage is frozen")
	}
	meta.SetStatusCondition(&stage.Status.Conditions, metav1.Condition{Type: stagecoachv1.ConditionFrozen, Status: metav1.ConditionFalse,
		Reason: "Unfrozen", Message: fmt.Sprintf("unfrozen by Promotion %s", p.Name), ObservedGeneration: stage.Generation})
	message := "the Stage is unfrozen"
	// A person looked at what someone else wrote to the applier and accepts it: the next
	// promote may write over it.
	if current := run.applier.Revision(run.obj); current != stage.Status.LastAppliedDigest {
		stage.Status.LastAppliedDigest = current
		message += fmt.Sprintf("; %q on %s '%s' is accepted as written", current, run.obj.GetKind(), run.obj.GetName())
	}
	return run.finish(ctx, p, stagecoachv1.PhaseSucceeded, message)
}

// expireRunning fails the running Promotion once its progress deadline has passed while the
// applier cannot be used (why is the applier's problem), and otherwise says when it will.
func (run *promotionRun) expireRunning(ctx context.Context, why string) (time.Duration, error) {
	if err := run.listPromotions(ctx); err != nil {
		return 0, err
	}
	p := plan.Queue(run.promotions).Running
	if p == nil || p.Status.StartedAt == nil {
		return 0, nil
	}
	since := p.Status.StartedAt.Time
	if p.Status.AppliedAt != nil {
		since = p.Status.AppliedAt.Time
	}
	deadline := run.stage.GetProgressDeadline()
	if left := since.Add(deadline).Sub(run.now); left > 0 {
		return left, nil
	}
	return 0, run.failed(ctx, p, stagecoachv1.ReasonDeadlineExceeded, fmt.Sprintf(
		"the version did not land within the progress deadline of %s, and the applier cannot be used: %s", deadline, why))
}

// start admits the next waiting Promotion, or says in its status why it waits.
func (run *promotionRun) start(ctx context.Context, p *stagecoachv1.Promotion) (bool, error) {
	stage := run.stage
	if frozen := meta.FindStatusCondition(stage.Status.Conditions, stagecoachv1.ConditionFrozen); frozen != nil &&
		frozen.Status == metav1.ConditionTrue && !p.Spec.BreakGlass {
		return false, run.wait(ctx, p, "waiting: Stage "+stage.Name+" is frozen ("+frozen.Message+"); an Unfreeze Promotion or break-glass lets it start")
	}
	if stage.Spec.Suspend {
		return false, run.wait(ctx, p, "waiting: Stage "+stage.Name+" is suspended")
	}
	breakGlass := ""
	if len(run.freezes) > 0 {
		held := plan.DescribeFreeze(run.freezes[0])
		if !p.Spec.BreakGlass {
			return false, run.wait(ctx, p, "waiting: "+held+"; a break-glass Promotion may start")
		}
		breakGlass = "started with break-glass although " + held
	}

	// A rollback returns to what ran before and passes the gates; a promote passes them first.
	var gates []stagecoachv1.GateResult
	if p.Spec.Action == stagecoachv1.ActionPromote {
		blocks, results, err := run.promoteGates(ctx, p.Spec.Version.Digest, p.Spec.BreakGlass)
		if err != nil {
			return false, err
		}
		if len(blocks) > 0 {
			run.gateEnds = plan.BlocksEnd(blocks, run.now)
			msgs := make([]string, 0, len(blocks))
			for _, b := range blocks {
				msgs = append(msgs, b.Gate+": "+b.Message)
			}
			return false, run.wait(ctx, p, "waiting: "+strings.Join(msgs, "; "))
		}
		gates = results
		if checks := preApplyChecks(stage); len(checks) > 0 {
			results, failed, done := run.runChecks(p, checks, plugincheck.PhasePreApply)
			if !done {
				return false, run.wait(ctx, p, "waiting: running the checks before apply ("+checkNames(checks)+")")
			}
			run.r.checks.forget(p, plugincheck.PhasePreApply)
			if failed != "" {
				run.event(p, corev1.EventTypeWarning, ReasonCheckFailed, "Promotion %s not applied: %s", p.Name, failed)
				before := p.DeepCopy()
				p.Status.Gates = append(gates, results...)
				return false, run.finishFrom(ctx, before, p, stagecoachv1.PhaseFailed, "not applied: "+failed)
			}
			gates = append(gates, results...)
		}
	}

	version := p.Spec.Version
	if p.Spec.Action == stagecoachv1.ActionRollback && (version == nil || version.Digest == "") {
		if stage.Status.Current == nil || stage.Status.Current.Digest == "" {
			return false, run.finish(ctx, p, stagecoachv1.PhaseFailed, "nothing to roll back to: Stage "+stage.Name+" has no verified version")
		}
		version = &stagecoachv1.VersionReference{Digest: stage.Status.Current.Digest, Tag: stage.Status.Current.Version}
	}
	if !plan.IsAutomatic(p) && p.Spec.Action == stagecoachv1.ActionPromote {
		// A person acted: automation may resume, and rollbacks count afresh.
		stage.Status.Hold = nil
		stage.Status.AutomaticRollbacks = 0
	}
	before := p.DeepCopy()
	now := metav1.NewTime(run.now)
	p.Status.Phase = stagecoachv1.PhaseRunning
	p.Status.Version = version.DeepCopy()
	p.Status.StartedAt = &now
	p.Status.Gates = gates
	p.Status.ObservedGeneration = p.Generation
	p.Status.Message = "started"
	if breakGlass != "" {
		p.Status.Message = breakGlass
		// Said once, when it starts (not while other gates still hold it).
		run.event(stage, corev1.EventTypeWarning, "BreakGlass", "Promotion %s %s", p.Name, breakGlass)
	}
	return true, run.patchPromotion(ctx, before, p)
}

// progress moves a running Promotion one step, from what the applier reports.
func (run *promotionRun) progress(ctx context.Context, p *stagecoachv1.Promotion) (time.Duration, error) {
	stage, version := run.stage, p.Status.Version
	if version == nil || version.Digest == "" {
		return 0, run.finish(ctx, p, stagecoachv1.PhaseFailed, "the Promotion has no version to apply")
	}
	obs := run.applier.Observe(run.obj, version.Digest)
	d := plan.Progress(p, obs, run.now, stage.GetGrace(), stage.GetProgressDeadline())
	before := p.DeepCopy()
	now := metav1.NewTime(run.now)
	switch d.Step {
	case plan.StepApply:
		if applied, err := run.apply(ctx, p); err != nil || !applied {
			return 0, err
		}
		p.Status.AppliedAt = &now
		p.Status.Message = "applied " + versionString(version) + "; waiting for the engine"
		run.event(p, corev1.EventTypeNormal, EventPromoted, "Promoted %s to %s", stage.Name, versionString(version))
		run.engineEvent(p, corev1.EventTypeNormal, EventPromoted, fmt.Sprintf("Stagecoach promoted %s to %s", stage.Name, versionString(version)))
		// Look again by the deadline even if the engine never writes.
		d.RequeueAfter = stage.GetProgressDeadline()
	case plan.StepLanded:
		p.Status.LandedAt = &now
		p.Status.Message = d.Message
		run.event(p, corev1.EventTypeNormal, EventLanded, "%s landed in %s: %s", versionString(version), stage.Name, d.Message)
		run.engineEvent(p, corev1.EventTypeNormal, EventLanded, fmt.Sprintf("%s landed in %s: %s", versionString(version), stage.Name, d.Message))
	case plan.StepUnlanded:
		p.Status.LandedAt = nil
		p.Status.Message = d.Message
	case plan.StepWait:
		p.Status.Message = d.Message
	case plan.StepVerify:
		if p.Status.LandedAt == nil {
			// Without a grace period, landing and verifying are one step.
			p.Status.LandedAt = &now
			run.event(p, corev1.EventTypeNormal, EventLanded, "%s landed in %s: %s", versionString(version), stage.Name, d.Message)
			run.engineEvent(p, corev1.EventTypeNormal, EventLanded, fmt.Sprintf("%s landed in %s: %s", versionString(version), stage.Name, d.Message))
		}
		if checks := verificationChecks(stage); len(checks) > 0 {
			results, failed, done := run.runChecks(p, checks, plugincheck.PhasePostApply)
			if !done {
				p.Status.Message = d.Message + "; running the verification checks (" + checkNames(checks) + ")"
				return 0, run.patchPromotion(ctx, before, p)
			}
			// Record the verdicts first: verifying or failing patches from a copy taken later.
			p.Status.Gates = append(p.Status.Gates, results...)
			if err := run.patchPromotion(ctx, before, p); err != nil {
				return 0, err
			}
			before = p.DeepCopy()
			run.r.checks.forget(p, plugincheck.PhasePostApply)
			if failed != "" {
				return 0, run.failed(ctx, p, ReasonCheckFailed, "landed, but "+failed)
			}
		}
		return 0, run.verified(ctx, before, p, d.Message)
	case plan.StepFail:
		return 0, run.failed(ctx, p, d.Reason, d.Message)
	}
	return d.RequeueAfter, run.patchPromotion(ctx, before, p)
}

// adopt takes what the applier holds when this Stage takes it over as the Stage's baseline: it
// was there before Stagecoach, so it is nobody else's write, and the first promote may replace
// it. The takeover is recorded once (status.adopted, even when the applier holds nothing), on the
// first reconcile with a usable applier, and saved before the event says so; what someone else
// writes after that is a foreign write and freezes the Stage.
func (run *promotionRun) adopt(ctx context.Context) error {
	stage := run.stage
	if stage.Status.Adopted != nil || stage.Status.LastAppliedDigest != "" || stage.Status.Current != nil || len(stage.Status.History) > 0 {
		return nil
	}
	for _, p := range run.promotions {
		if p.Status.AppliedAt != nil {
			return nil // a Stage that applied before status.adopted existed: it took over long ago
		}
	}
	current := run.applier.Revision(run.obj)
	stage.Status.Adopted = &stagecoachv1.AdoptedRevision{Revision: current, At: metav1.NewTime(run.now)}
	stage.Status.LastAppliedDigest = current
	if err := run.commit(ctx); err != nil {
		return err
	}
	if current != "" {
		run.event(stage, corev1.EventTypeNormal, EventAdopted, "Stage %s took over %s '%s', which runs %q: the next promote replaces it",
			stage.Name, run.obj.GetKind(), run.obj.GetName(), current)
	}
	return nil
}

// apply writes the version to the applier once. A value there that Stagecoach did not write
// freezes the Stage instead of being overwritten.
func (run *promotionRun) apply(ctx context.Context, p *stagecoachv1.Promotion) (bool, error) {
	stage, digest := run.stage, p.Status.Version.Digest
	current := run.applier.Revision(run.obj)
	known := []string{"", digest, stage.Status.LastAppliedDigest}
	if stage.Status.Current != nil {
		known = append(known, stage.Status.Current.Digest)
	}
	// What any of this Stage's Promotions applied was written by Stagecoach, even if the Stage's
	// status lost the write to a conflict.
	for _, other := range run.promotions {
		if other.Status.AppliedAt != nil && other.Status.Version != nil {
			known = append(known, other.Status.Version.Digest)
		}
	}
	if !slices.Contains(known, current) {
		msg := fmt.Sprintf("%s '%s' runs %q, which Stagecoach did not write: someone else changed it. Check who did, then create an Unfreeze Promotion (stagecoach unfreeze -n %s --stage %s) and promote again",
			run.obj.GetKind(), run.obj.GetName(), current, stage.Namespace, stage.Name)
		run.setFrozen(stagecoachv1.ReasonForeignWrite, msg)
		run.event(stage, corev1.EventTypeWarning, EventFrozen, "%s", msg)
		run.engineEvent(p, corev1.EventTypeWarning, EventFrozen, msg)
		return false, run.finish(ctx, p, stagecoachv1.PhaseAborted, "not applied: "+msg)
	}
	if current == digest {
		// Written before a restart: writing again would only wake the engine for nothing.
		stage.Status.LastAppliedDigest = digest
		return true, run.annotate(ctx, p, stagecoachv1.PhaseRunning)
	}
	orig := run.obj.DeepCopy()
	if err := run.applier.SetRevision(run.obj, applier.Version{Digest: digest, Tag: p.Status.Version.Tag}, run.now); err != nil {
		return false, err
	}
	setPromotionAnnotations(run.obj, p, stagecoachv1.PhaseRunning)
	if err := run.r.Patch(ctx, run.obj, client.MergeFrom(orig)); err != nil {
		// Not recorded: the applier still holds the value known before, not someone else's.
		return false, fmt.Errorf("failed to apply %s to %s %q: %w", digest, run.obj.GetKind(), run.obj.GetName(), err)
	}
	// Record the write on the Stage before anything else, so it is never taken for someone else's.
	stage.Status.LastAppliedDigest = digest
	return true, run.commit(ctx)
}

// annotate keeps the applier's stagecoach.dev annotations current, for notification templates.
func (run *promotionRun) annotate(ctx context.Context, p *stagecoachv1.Promotion, phase stagecoachv1.PromotionPhase) error {
	if run.obj == nil {
		return nil // the applier is gone or unreadable
	}
	orig := run.obj.DeepCopy()
	setPromotionAnnotations(run.obj, p, phase)
	if equalAnnotations(orig, run.obj) {
		return nil
	}
	if err := run.r.Patch(ctx, run.obj, client.MergeFrom(orig)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to annotate %s %q: %w", run.obj.GetKind(), run.obj.GetName(), err)
	}
	return nil
}

// verified finishes a Promotion whose version held: the Stage runs it now. before is the
// Promotion as last written, so that every change since is patched.
func (run *promotionRun) verified(ctx context.Context, before, p *stagecoachv1.Promotion, evidence string) error {
	stage, v := run.stage, p.Status.Version
	now := metav1.NewTime(run.now)
	stage.Status.Current = &stagecoachv1.CurrentVersion{Version: v.Tag, Digest: v.Digest, PromotedAt: p.Status.AppliedAt,
		VerifiedAt: &now, Promotion: p.Name}
	run.addHistory(p, stagecoachv1.PhaseSucceeded)
	meta.SetStatusCondition(&stage.Status.Conditions, metav1.Condition{Type: stagecoachv1.ConditionVerified, Status: metav1.ConditionTrue,
		Reason: stagecoachv1.ReasonVerified, Message: fmt.Sprintf("%s verified: %s", versionString(v), evidence), ObservedGeneration: stage.Generation})
	meta.SetStatusCondition(&stage.Status.Conditions, metav1.Condition{Type: stagecoachv1.ConditionPromoting, Status: metav1.ConditionFalse,
		Reason: stagecoachv1.ReasonIdle, Message: "no Promotion is running", ObservedGeneration: stage.Generation})
	if err := run.commit(ctx); err != nil {
		return err
	}
	if err := run.annotate(ctx, p, stagecoachv1.PhaseSucceeded); err != nil {
		return err
	}
	if original := p.Annotations[stagecoachv1.RollbackOfAnnotation]; original != "" {
		if err := run.markRolledBack(ctx, original, p.Name); err != nil {
			return err
		}
	}
	p.Status.VerifiedAt = &now
	run.event(p, corev1.EventTypeNormal, EventVerified, "%s verified in %s", versionString(v), stage.Name)
	run.engineEvent(p, corev1.EventTypeNormal, EventVerified, fmt.Sprintf("%s verified in %s", versionString(v), stage.Name))
	return run.finishFrom(ctx, before, p, stagecoachv1.PhaseSucceeded, "verified: "+evidence)
}

// failed finishes a failed Promotion: the version is never offered automatically again,
// automation holds, and a failed promote rolls back to the last verified version.
func (run *promotionRun) failed(ctx context.Context, p *stagecoachv1.Promotion, reason, message string) error {
	stage, v := run.stage, p.Status.Version
	if p.Spec.Action == stagecoachv1.ActionPromote && !slices.Contains(stage.Status.FailedDigests, v.Digest) {
		stage.Status.FailedDigests = append(stage.Status.FailedDigests, v.Digest)
		if n := len(stage.Status.FailedDigests); n > failedDigestsLimit {
			stage.Status.FailedDigests = stage.Status.FailedDigests[n-failedDigestsLimit:]
		}
	}
	run.addHistory(p, stagecoachv1.PhaseFailed)
	holdReason := stagecoachv1.ReasonPromotionFailed
	if p.Spec.Action == stagecoachv1.ActionRollback {
		holdReason = stagecoachv1.ReasonRollbackFailed
	}
	stage.Status.Hold = &stagecoachv1.AutomationHold{Reason: holdReason, Promotion: p.Name, Since: metav1.NewTime(run.now),
		Message: fmt.Sprintf("automatic promotion is held since %s failed (%s): promote a version by hand to resume", p.Name, reason)}
	meta.SetStatusCondition(&stage.Status.Conditions, metav1.Condition{Type: stagecoachv1.ConditionVerified, Status: metav1.ConditionFalse,
		Reason: reason, Message: fmt.Sprintf("%s failed: %s", versionString(v), message), ObservedGeneration: stage.Generation})

	var rollback *stagecoachv1.Promotion
	if p.Spec.Action == stagecoachv1.ActionPromote && stage.GetAutomaticRollback() &&
		stage.Status.AutomaticRollbacks < stage.GetRollbackLimit() &&
		stage.Status.Current != nil && stage.Status.Current.Digest != "" && stage.Status.Current.Digest != v.Digest {
		// Created before the count is committed: a retry after a failed create or a crash decides
		// from the same count, and finds the Rollback by its name if it exists.
		rollback = run.rollbackFor(p)
		if err := run.r.Create(ctx, rollback); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("failed to create Rollback Promotion %q for Stage %q: %w", rollback.Name, stage.Name, err)
		}
		stage.Status.AutomaticRollbacks++
		message += fmt.Sprintf("; rolling back to %s with Promotion %s", versionString(rollback.Spec.Version), rollback.Name)
	}
	if err := run.commit(ctx); err != nil {
		return err
	}
	if err := run.annotate(ctx, p, stagecoachv1.PhaseFailed); err != nil {
		return err
	}
	run.event(p, corev1.EventTypeWarning, EventPromotionFailed, "%s failed in %s: %s", versionString(v), stage.Name, message)
	run.engineEvent(p, corev1.EventTypeWarning, EventPromotionFailed, fmt.Sprintf("%s failed in %s: %s", versionString(v), stage.Name, message))
	return run.finish(ctx, p, stagecoachv1.PhaseFailed, message)
}

// rollbackFor builds the Rollback Promotion of a failed one, named after it so that a retry after
// a crash finds it instead of creating a second.
func (run *promotionRun) rollbackFor(p *stagecoachv1.Promotion) *stagecoachv1.Promotion {
	cur := run.stage.Status.Current
	rb := &stagecoachv1.Promotion{
		ObjectMeta: metav1.ObjectMeta{
			Name: truncateName(p.Name, "-rollback"), Namespace: p.Namespace,
			Labels:      map[string]string{stagecoachv1.PromotionStageLabel: run.stage.Name},
			Annotations: map[string]string{stagecoachv1.RollbackOfAnnotation: p.Name},
		},
		// The controller names itself, as for automatic promotions: the promotion-requester-guard
		// admission policy refuses a Promotion whose requestedBy is not its creator.
		Spec: stagecoachv1.PromotionSpec{Stage: run.stage.Name, Action: stagecoachv1.ActionRollback, RequestedBy: run.r.Identity,
			Version: &stagecoachv1.VersionReference{Digest: cur.Digest, Tag: cur.Version},
			Reason:  fmt.Sprintf("automatic rollback after %s failed", p.Name)},
	}
	_ = controllerutil.SetOwnerReference(run.stage, rb, run.r.Scheme())
	return rb
}

// markRolledBack records on the failed Promotion that its rollback succeeded.
func (run *promotionRun) markRolledBack(ctx context.Context, name, by string) error {
	p := &stagecoachv1.Promotion{}
	if err := run.r.Get(ctx, client.ObjectKey{Namespace: run.stage.Namespace, Name: name}, p); err != nil {
		return client.IgnoreNotFound(err)
	}
	if p.Status.Phase == stagecoachv1.PhaseRolledBack {
		return nil
	}
	before := p.DeepCopy()
	p.Status.Phase = stagecoachv1.PhaseRolledBack
	p.Status.Message = fmt.Sprintf("rolled back by %s: %s", by, p.Status.Message)
	run.event(p, corev1.EventTypeNormal, EventRolledBack, "Stage %s rolled back by %s", run.stage.Name, by)
	run.engineEvent(p, corev1.EventTypeNormal, EventRolledBack, fmt.Sprintf("Stage %s rolled back from %s by %s", run.stage.Name, versionString(p.Status.Version), by))
	return run.patchPromotion(ctx, before, p)
}

// addHistory records a finished Promotion on the Stage once, newest first, bounded.
func (run *promotionRun) addHistory(p *stagecoachv1.Promotion, phase stagecoachv1.PromotionPhase) {
	st := &run.stage.Status
	for _, h := range st.History {
		if h.Promotion == p.Name {
			return
		}
	}
	now := metav1.NewTime(run.now)
	entry := stagecoachv1.HistoryEntry{Version: p.Status.Version.Tag, Digest: p.Status.Version.Digest, Action: p.Spec.Action,
		Phase: phase, Promotion: p.Name, PromotedAt: p.Status.AppliedAt, FinishedAt: &now}
	st.History = append([]stagecoachv1.HistoryEntry{entry}, st.History...)
	if len(st.History) > historyLimit {
		st.History = st.History[:historyLimit]
	}
}

// automate offers the source's candidate: it creates an automatic Promotion when every gate is
// open (and returns it), and otherwise says in status.candidate what blocks it.
func (run *promotionRun) automate(ctx context.Context, promotions []stagecoachv1.Promotion) (*stagecoachv1.Promotion, error) {
	stage := run.stage
	candidate, block, err := run.candidate(ctx)
	if err != nil {
		return nil, err
	}
	if candidate == nil {
		stage.Status.Candidate = nil
		if block != nil {
			stage.Status.Candidate = &stagecoachv1.CandidateVersion{BlockedBy: []stagecoachv1.GateBlock{*block}}
		}
		return nil, nil
	}
	promote, blocks := plan.AutoPromote(stage, candidate, promotions, run.now)
	if promote || len(blocks) > 0 {
		gateBlocks, _, err := run.promoteGates(ctx, candidate.Digest, false)
		if err != nil {
			return nil, err
		}
		blocks = append(blocks, gateBlocks...)
		blocks = append(blocks, plan.FreezeBlocks(run.freezes)...)
		promote = len(blocks) == 0
	}
	if !promote {
		stage.Status.Candidate = nil
		if len(blocks) > 0 {
			stage.Status.Candidate = &stagecoachv1.CandidateVersion{Version: candidate.Tag, Digest: candidate.Digest, BlockedBy: blocks}
		}
		return nil, nil
	}
	stage.Status.Candidate = &stagecoachv1.CandidateVersion{Version: candidate.Tag, Digest: candidate.Digest}
	p := &stagecoachv1.Promotion{
		ObjectMeta: metav1.ObjectMeta{
			// Named by the whole digest: after a restart, creating it again finds the first one,
			// and two versions never share a name.
			Name: truncateName(stage.Name, "-"+strings.TrimPrefix(candidate.Digest, "sha256:")), Namespace: stage.Namespace,
			Labels:      map[string]string{stagecoachv1.PromotionStageLabel: stage.Name, stagecoachv1.AutomaticLabel: "true"},
			Annotations: map[string]string{stagecoachv1.CreatedAtAnnotation: run.now.UTC().Format(time.RFC3339Nano)},
		},
		Spec: stagecoachv1.PromotionSpec{Stage: stage.Name, Action: stagecoachv1.ActionPromote, RequestedBy: run.r.Identity,
			Version: &stagecoachv1.VersionReference{Digest: candidate.Digest, Tag: candidate.Tag},
			Reason:  "automatic: the source offers " + versionString(&stagecoachv1.VersionReference{Digest: candidate.Digest, Tag: candidate.Tag})},
	}
	_ = controllerutil.SetOwnerReference(stage, p, run.r.Scheme())
	if err := run.r.Create(ctx, p); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, nil // created before a restart; its own event brings it here
		}
		return nil, fmt.Errorf("failed to create a Promotion for Stage %q: %w", stage.Name, err)
	}
	return p, nil
}

// wait records why a Promotion has not started, once.
func (run *promotionRun) wait(ctx context.Context, p *stagecoachv1.Promotion, message string) error {
	if p.Status.Phase == stagecoachv1.PhasePending && p.Status.Message == message {
		return nil
	}
	before := p.DeepCopy()
	p.Status.Phase = stagecoachv1.PhasePending
	p.Status.Message = message
	p.Status.ObservedGeneration = p.Generation
	return run.patchPromotion(ctx, before, p)
}

func (run *promotionRun) finish(ctx context.Context, p *stagecoachv1.Promotion, phase stagecoachv1.PromotionPhase, message string) error {
	return run.finishFrom(ctx, p.DeepCopy(), p, phase, message)
}

func (run *promotionRun) finishFrom(ctx context.Context, before, p *stagecoachv1.Promotion, phase stagecoachv1.PromotionPhase, message string) error {
	now := metav1.NewTime(run.now)
	p.Status.Phase = phase
	p.Status.FinishedAt = &now
	p.Status.Message = message
	p.Status.ObservedGeneration = p.Generation
	return run.patchPromotion(ctx, before, p)
}

func (run *promotionRun) patchPromotion(ctx context.Context, before, p *stagecoachv1.Promotion) error {
	if err := run.r.Status().Patch(ctx, p, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("failed to update the status of Promotion %q: %w", p.Name, err)
	}
	return nil
}

func (run *promotionRun) setFrozen(reason, message string) {
	meta.SetStatusCondition(&run.stage.Status.Conditions, metav1.Condition{Type: stagecoachv1.ConditionFrozen, Status: metav1.ConditionTrue,
		Reason: reason, Message: message, ObservedGeneration: run.stage.Generation})
}

// engineEvent tells the engine's own notification path about a transition: for a Flux applier, a
// Flux event about the Flux object (so an Alert on it routes the event), with the revision, Stage,
// environment and Promotion as metadata.
func (run *promotionRun) engineEvent(p *stagecoachv1.Promotion, eventType, reason, message string) {
	if run.r.FluxEvents == nil || run.obj == nil || !strings.HasSuffix(run.obj.GroupVersionKind().Group, ".fluxcd.io") {
		return
	}
	group := run.obj.GroupVersionKind().Group
	metadata := map[string]string{
		group + "/revision":    versionString(p.Status.Version),
		group + "/stage":       run.stage.Namespace + "/" + run.stage.Name,
		group + "/environment": run.stage.Spec.Environment,
		group + "/promotion":   p.Name,
	}
	run.r.FluxEvents.AnnotatedEventf(run.obj, nil, metadata, eventType, reason, "Promote", "%s", message)
}

func (run *promotionRun) event(obj client.Object, eventType, reason, note string, args ...any) {
	run.r.Events.Eventf(obj, nil, eventType, reason, "Promote", note, args...)
}

// candidate reads what the Stage's source offers now. Only the same-cluster upstream source is
// built so far; the others say so in status.candidate.
func (run *promotionRun) candidate(ctx context.Context) (*plan.Candidate, *stagecoachv1.GateBlock, error) {
	r, stage := run.r, run.stage
	if stage.Spec.Source.Registry != nil {
		c, block, recheck, err := r.registryCandidate(ctx, stage, run.now)
		run.sourceRecheck = recheck
		return c, block, err
	}
	up := stage.Spec.Source.Upstream
	if up == nil {
		return nil, &stagecoachv1.GateBlock{Gate: plan.GateSource, Reason: "SourceNotSupported",
			Message: "this controller does not read record sources (upstreamRecords) yet"}, nil
	}
	ns := up.Namespace
	if ns == "" {
		ns = stage.Namespace
	}
	upstream := &stagecoachv1.Stage{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: up.Stage}, upstream); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &stagecoachv1.GateBlock{Gate: plan.GateSource, Reason: stagecoachv1.ReasonUpstreamUnreadable,
				Message: fmt.Sprintf("upstream Stage '%s/%s' does not exist: create it or fix spec.source.upstream", ns, up.Stage)}, nil
		}
		return nil, nil, fmt.Errorf("failed to get upstream Stage %s/%s of Stage %q: %w", ns, up.Stage, stage.Name, err)
	}
	verified := meta.FindStatusCondition(upstream.Status.Conditions, stagecoachv1.ConditionVerified)
	cur := upstream.Status.Current
	if verified == nil || verified.Status != metav1.ConditionTrue || cur == nil || cur.Digest == "" || cur.VerifiedAt == nil {
		return nil, nil, nil
	}
	return &plan.Candidate{Digest: cur.Digest, Tag: cur.Version, VerifiedAt: cur.VerifiedAt}, nil, nil
}

func setPromotionAnnotations(obj *unstructured.Unstructured, p *stagecoachv1.Promotion, phase stagecoachv1.PromotionPhase) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[stagecoachv1.VersionAnnotation] = versionString(p.Status.Version)
	a[stagecoachv1.PromotionAnnotation] = p.Name
	a[stagecoachv1.PhaseAnnotation] = string(phase)
	obj.SetAnnotations(a)
}

func equalAnnotations(a, b *unstructured.Unstructured) bool {
	x, y := a.GetAnnotations(), b.GetAnnotations()
	if len(x) != len(y) {
		return false
	}
	for k, v := range x {
		if y[k] != v {
			return false
		}
	}
	return true
}

func versionString(v *stagecoachv1.VersionReference) string {
	switch {
	case v == nil:
		return "<none>"
	case v.Tag != "":
		return v.Tag + "@" + v.Digest
	}
	return v.Digest
}

// truncateName keeps generated names within the 253 characters of a Kubernetes name.
func truncateName(base, suffix string) string {
	if max := 253 - len(suffix); len(base) > max {
		base = base[:max]
	}
	return base + suffix
}

// soonest is the smaller of two requeue delays, where 0 means none.
func soonest(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

func preApplyChecks(stage *stagecoachv1.Stage) []stagecoachv1.Check {
	if stage.Spec.Promotion == nil {
		return nil
	}
	return stage.Spec.Promotion.Checks
}

func verificationChecks(stage *stagecoachv1.Stage) []stagecoachv1.Check {
	if stage.Spec.Verification == nil {
		return nil
	}
	return stage.Spec.Verification.Checks
}
