package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
	"github.com/stagecoach-dev/stagecoach/internal/records"
	recordsource "github.com/stagecoach-dev/stagecoach/internal/source/records"
)

// setUpRecords builds the recorder (with --records-repository) and the follower of upstreamRecords
// sources (always: without --upstream-trust it says so on every follower Stage). It returns the
// runnable that keeps a trust ConfigMap current, nil for a file or none.
func setUpRecords(ctx context.Context, reader client.Reader, opts Options, stages *StageReconciler) (*trustWatch, error) {
	transport := ociclient.NewTransport(opts.RegistryTimeout)
	follower := &recordsource.Source{Secrets: reader, Transport: transport, Interval: opts.UpstreamRecordsInterval,
		RepositoryOf: stages.applyRepositoryOf}
	watch, err := setUpTrust(ctx, reader, opts, follower)
	if err != nil {
		return nil, err
	}
	stages.Follower = follower
	if opts.RecordsRepository == "" {
		return watch, nil
	}
	key, _ := parseSecretRef(opts.RecordsKeySecret)
	secret := &corev1.Secret{}
	if err := reader.Get(ctx, key, secret); err != nil {
		return nil, fmt.Errorf("cannot read the recorder key Secret %s (--records-key-secret): %w", key, err)
	}
	signer, err := records.LoadSigner(secret.Data["cosign.key"], secret.Data["cosign.password"])
	if err != nil {
		return nil, fmt.Errorf("Secret %s (--records-key-secret): %w", key, err)
	}
	store, err := records.NewStore(opts.RecordsRepository, ociclient.Options{Transport: transport})
	if err != nil {
		return nil, fmt.Errorf("invalid --records-repository: %w", err)
	}
	stages.Recorder = &Recorder{Store: store, Writer: records.NewWriter(store, signer), Cluster: opts.RecordsCluster, Reader: reader}
	return watch, nil
}

// applyRepositoryOf reads the OCI repository a Stage applies from off its applier: an Argo CD
// Application's OCI source, a Flux OCIRepository's url; "" when it cannot tell.
func (r *StageReconciler) applyRepositoryOf(ctx context.Context, stage *stagecoachv1.Stage) string {
	if stage.Status.Applier == nil {
		return ""
	}
	a := stage.Status.Applier
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(a.APIVersion)
	obj.SetKind(a.Kind)
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: stage.Namespace, Name: a.Name}, obj); err != nil {
		return ""
	}
	for _, path := range [][]string{{"spec", "source", "repoURL"}, {"spec", "url"}} {
		if v, ok, _ := unstructured.NestedString(obj.Object, path...); ok && v != "" {
			return strings.TrimPrefix(v, "oci://")
		}
	}
	return ""
}

// The recorder appends one signed record to the Stage's stream for every step its Promotions
// take: a promote once applied, its landing verdict, a rollback, a freeze, an unfreeze (a
// break-glass promote carries its actor and reason). It runs after the Promotions moved, from
// what their status says happened, so it never holds a promote, a verdict or a rollback back: a
// registry outage only delays the records, which are written in order once it answers.
//
// Exactly once: a record's seq is reserved, and its bytes kept, in the Promotion's
// status.recording before the push. After a restart the same bytes are pushed again (Writer.Write
// finds them there), and the Stage's status.stream says whether the push was committed.

// RecordsOffMessage is status.stream.message on a cluster without a recorder.
const RecordsOffMessage = "records are off: this controller runs without --records-repository and --records-key-secret, so no signed record of this Stage's steps is written"

// Recorder writes the Stages' record streams.
type Recorder struct {
	Store  *records.Store
	Writer *records.Writer
	// Cluster is the cluster part of stream ids; the first 12 hex digits of kube-system's UID
	// when empty (read once).
	Cluster string
	// Reader reads kube-system for the cluster identity and Promotions live before they are
	// written (the cache may not hold the last write yet).
	Reader client.Reader

	mu      sync.Mutex
	failing map[types.NamespacedName]int
}

// retryAfter is how long a Stage whose records could not be written waits: 5 s, doubling, at
// most 5 minutes.
func (rec *Recorder) retryAfter(key types.NamespacedName, failed bool) time.Duration {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.failing == nil {
		rec.failing = map[types.NamespacedName]int{}
	}
	if !failed {
		delete(rec.failing, key)
		return 0
	}
	n := rec.failing[key]
	rec.failing[key] = n + 1
	d := 5 * time.Second << min(n, 6)
	return min(d, 5*time.Minute)
}

func (rec *Recorder) cluster(ctx context.Context) (string, error) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.Cluster != "" {
		return rec.Cluster, nil
	}
	ns := &corev1.Namespace{}
	if err := rec.Reader.Get(ctx, client.ObjectKey{Name: "kube-system"}, ns); err != nil {
		return "", fmt.Errorf("cannot read namespace kube-system for the cluster identity of record streams (or set --records-cluster): %w", err)
	}
	id, err := records.ClusterIdentity(string(ns.UID))
	if err != nil {
		return "", err
	}
	rec.Cluster = id
	return id, nil
}

// recordStep is one step a Promotion owes its Stage's stream.
type recordStep struct {
	p      *stagecoachv1.Promotion
	index  int // the step's place among its Promotion's steps
	at     time.Time
	record records.Record
}

// promotionSteps are the records a Promotion's status shows it owes, in order, built from what
// its status holds (so a retry builds the same bytes). seq and prev are set by the caller.
func promotionSteps(stage *stagecoachv1.Stage, p *stagecoachv1.Promotion, byName map[string]*stagecoachv1.Promotion, stream string) []recordStep {
	st := p.Status
	base := records.Record{APIVersion: records.APIVersion, Stream: stream, Actor: p.Spec.RequestedBy,
		Stage: records.StageRef{Namespace: stage.Namespace, Name: stage.Name}, Service: stage.Spec.Service, Environment: stage.Spec.Environment}
	version := func(v *stagecoachv1.VersionReference) *records.Version {
		if v == nil || v.Digest == "" {
			return nil
		}
		return &records.Version{Digest: v.Digest, Tag: v.Tag}
	}
	tp := func(t *metav1.Time) *records.Time {
		if t == nil {
			return nil
		}
		return records.NewTimePtr(t.Time)
	}
	finished := st.Phase == stagecoachv1.PhaseSucceeded || st.Phase == stagecoachv1.PhaseFailed || st.Phase == stagecoachv1.PhaseRolledBack
	var out []recordStep
	add := func(at *metav1.Time, r records.Record) {
		r.Times.Recorded = records.NewTime(at.Time)
		out = append(out, recordStep{p: p, index: len(out), at: at.Time, record: r})
	}
	switch p.Spec.Action {
	case stagecoachv1.ActionPromote, "":
		if st.AppliedAt == nil || version(st.Version) == nil {
			return nil // never applied: nothing happened on the Stage
		}
		r := base
		r.Action, r.Verdict, r.Version = records.ActionPromote, records.VerdictSucceeded, version(st.Version)
		r.Times.Started, r.Times.Finished = tp(st.StartedAt), tp(st.AppliedAt)
		for _, g := range st.Gates {
			if g.Passed {
				r.Gates = append(r.Gates, records.Gate{Name: g.Gate, Evidence: g.Message})
			}
		}
		if p.Spec.BreakGlass {
			reason := p.Spec.Reason
			if reason == "" {
				reason = "break-glass (no reason given)"
			}
			r.BreakGlass = &records.BreakGlass{Reason: reason}
		}
		add(st.AppliedAt, r)
		if !finished || st.FinishedAt == nil {
			return out
		}
		v := base
		v.Action, v.Version = records.ActionVerify, version(st.Version)
		v.Times.Started, v.Times.Finished = tp(st.AppliedAt), tp(st.FinishedAt)
		switch {
		case st.Phase == stagecoachv1.PhaseSucceeded:
			v.Verdict = records.VerdictVerified
		case st.LandedAt == nil && st.FinishedAt.Sub(st.AppliedAt.Time) >= stage.GetProgressDeadline():
			v.Verdict = records.VerdictDeadlineExceeded
		default:
			v.Verdict = records.VerdictFailed
		}
		add(st.FinishedAt, v)
	case stagecoachv1.ActionRollback:
		if !finished || st.FinishedAt == nil || version(st.Version) == nil || (st.AppliedAt == nil && st.Phase != stagecoachv1.PhaseSucceeded) {
			return nil
		}
		r := base
		r.Action, r.Restored = records.ActionRollback, version(st.Version)
		r.Verdict = records.VerdictRolledBack
		if st.Phase != stagecoachv1.PhaseSucceeded {
			r.Verdict = records.VerdictFailed
		}
		// The version rolled back: the failed Promotion's, else what ran before the restored one.
		if failed := byName[p.Annotations[stagecoachv1.RollbackOfAnnotation]]; failed != nil {
			r.Version = version(failed.Status.Version)
		}
		for i := 0; r.Version == nil && i < len(stage.Status.History); i++ {
			if h := stage.Status.History[i]; h.Promotion != p.Name && h.Digest != "" && h.Digest != st.Version.Digest {
				r.Version = &records.Version{Digest: h.Digest, Tag: h.Version}
			}
		}
		if r.Version == nil {
			r.Version = r.Restored
		}
		r.Times.Started, r.Times.Finished = tp(st.StartedAt), tp(st.FinishedAt)
		add(st.FinishedAt, r)
	case stagecoachv1.ActionFreeze, stagecoachv1.ActionUnfreeze:
		if st.Phase != stagecoachv1.PhaseSucceeded || st.FinishedAt == nil {
			return nil
		}
		r := base
		r.Action = records.ActionFreeze
		if p.Spec.Action == stagecoachv1.ActionUnfreeze {
			r.Action = records.ActionUnfreeze
		} else {
			// A freeze that names a version (one that failed after release) excludes it downstream.
			r.Version = version(p.Spec.Version)
		}
		r.Times.Finished = tp(st.FinishedAt)
		add(st.FinishedAt, r)
	}
	return out
}

// stepsDone is how many of a Promotion's steps are in the stream: up to the one its
// status.record names.
func stepsDone(p *stagecoachv1.Promotion, steps []recordStep) int {
	if p.Status.Record == nil {
		return 0
	}
	for i, s := range steps {
		if string(s.record.Action) == p.Status.Record.Action {
			return i + 1
		}
	}
	return 0
}

// owedSteps are the steps the Promotions owe the stream, oldest first.
func owedSteps(stage *stagecoachv1.Stage, promotions []*stagecoachv1.Promotion, stream string) []recordStep {
	byName := make(map[string]*stagecoachv1.Promotion, len(promotions))
	for _, p := range promotions {
		byName[p.Name] = p
	}
	var owed []recordStep
	for _, p := range promotions {
		steps := promotionSteps(stage, p, byName, stream)
		owed = append(owed, steps[stepsDone(p, steps):]...)
	}
	sort.SliceStable(owed, func(i, j int) bool {
		a, b := owed[i], owed[j]
		switch {
		case !a.at.Equal(b.at):
			return a.at.Before(b.at)
		case !a.p.CreationTimestamp.Equal(&b.p.CreationTimestamp):
			return a.p.CreationTimestamp.Before(&b.p.CreationTimestamp)
		case a.p.Name != b.p.Name:
			return a.p.Name < b.p.Name
		}
		return a.index < b.index
	})
	return owed
}

// recordSteps writes the records the Stage's Promotions owe, in order. It never fails the
// reconcile: what cannot be written now is said on the Stage (and on the Promotion waiting for
// it) and retried with backoff; it returns when to try again (0: nothing to retry).
func (r *StageReconciler) recordSteps(ctx context.Context, stage *stagecoachv1.Stage, commit func(context.Context) error) time.Duration {
	if r.Recorder == nil {
		if stage.Status.Stream == nil || stage.Status.Stream.Message != RecordsOffMessage {
			stage.Status.Stream = &stagecoachv1.StreamStatus{Message: RecordsOffMessage}
		}
		return 0
	}
	key := client.ObjectKeyFromObject(stage)
	err := r.Recorder.record(ctx, r, stage, commit)
	if err == nil {
		if stage.Status.Stream != nil {
			stage.Status.Stream.Message = ""
		}
		return r.Recorder.retryAfter(key, false)
	}
	retry := r.Recorder.retryAfter(key, true)
	ctrl.LoggerFrom(ctx).Error(err, "records delayed", "retryIn", retry.String())
	if stage.Status.Stream == nil {
		stage.Status.Stream = &stagecoachv1.StreamStatus{}
	}
	stage.Status.Stream.Message = fmt.Sprintf("records delayed (retrying in %s; promotions, verdicts and rollbacks go on meanwhile): %v", retry, err)
	if errors.Is(err, records.ErrConflict) {
		stage.Status.Stream.Message = "StreamConflict: " + stage.Status.Stream.Message
	}
	return retry
}

func (rec *Recorder) record(ctx context.Context, r *StageReconciler, stage *stagecoachv1.Stage, commit func(context.Context) error) error {
	cluster, err := rec.cluster(ctx)
	if err != nil {
		return err
	}
	stream, err := records.StreamID(cluster, stage.Namespace, stage.Name)
	if err != nil {
		return err
	}
	if s := stage.Status.Stream; s == nil || s.ID != stream {
		// A new Stage, or one whose status was lost: continue the stream from the registry's head.
		head, _, err := rec.Writer.Head(ctx, stream)
		if err != nil {
			return fmt.Errorf("cannot read the head of record stream %q: %w", stream, err)
		}
		s = &stagecoachv1.StreamStatus{ID: stream}
		if head != nil {
			s.Seq, s.Digest = head.Seq, head.Digest
		}
		stage.Status.Stream = s
		if err := commit(ctx); err != nil {
			return err
		}
	}
	var list stagecoachv1.PromotionList
	if err := r.List(ctx, &list, client.InNamespace(stage.Namespace), client.MatchingFields{promotionStageIndexKey: stage.Name}); err != nil {
		return fmt.Errorf("failed to list the Promotions of Stage %q: %w", stage.Name, err)
	}
	promotions := make([]*stagecoachv1.Promotion, 0, len(list.Items))
	for i := range list.Items {
		promotions = append(promotions, &list.Items[i])
	}
	// A record reserved before a restart comes first: it holds the next seq.
	for _, p := range promotions {
		if p.Status.Recording == nil {
			continue
		}
		if err := rec.refresh(ctx, p); err != nil {
			return err
		}
		if p.Status.Recording == nil {
			continue
		}
		if err := rec.finishPending(ctx, r, stage, p, commit); err != nil {
			return err
		}
	}
	for {
		owed := owedSteps(stage, promotions, stream)
		if len(owed) == 0 {
			return nil
		}
		step := owed[0]
		if err := rec.refresh(ctx, step.p); err != nil {
			return err
		}
		// The live Promotion may have been recorded already (a stale cache): decide again.
		if again := owedSteps(stage, []*stagecoachv1.Promotion{step.p}, stream); len(again) == 0 || again[0].index != step.index ||
			step.p.Status.Recording != nil {
			if step.p.Status.Recording != nil {
				if err := rec.finishPending(ctx, r, stage, step.p, commit); err != nil {
					return err
				}
			}
			continue
		}
		s := stage.Status.Stream
		rcd := step.record
		rcd.Seq, rcd.Prev = s.Seq+1, s.Digest
		b, err := records.Encode(&rcd)
		if err != nil {
			return fmt.Errorf("cannot record %s of Promotion %q: %w", rcd.Action, step.p.Name, err)
		}
		// Reserved before the push: a crash after it pushes these same bytes again.
		if err := rec.patchPromotion(ctx, r, step.p, func(p *stagecoachv1.Promotion) {
			p.Status.Recording = &stagecoachv1.PendingRecord{Seq: rcd.Seq, Action: string(rcd.Action), Record: string(b)}
		}); err != nil {
			return err
		}
		if err := rec.finishPending(ctx, r, stage, step.p, commit); err != nil {
			return err
		}
	}
}

// refresh reads a Promotion live: the cache may not hold the recorder's last write yet.
func (rec *Recorder) refresh(ctx context.Context, p *stagecoachv1.Promotion) error {
	if err := rec.Reader.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
		return fmt.Errorf("failed to read Promotion %q: %w", p.Name, err)
	}
	return nil
}

// finishPending pushes the Promotion's reserved record (unless the stream already holds it),
// commits the Stage's stream head, then points the Promotion and its history entry at it.
func (rec *Recorder) finishPending(ctx context.Context, r *StageReconciler, stage *stagecoachv1.Stage, p *stagecoachv1.Promotion, commit func(context.Context) error) error {
	pending := p.Status.Recording
	s := stage.Status.Stream
	b := []byte(pending.Record)
	ref := stagecoachv1.RecordReference{Ref: "", Seq: pending.Seq, Action: pending.Action, Digest: records.Digest(b)}
	switch {
	case pending.Seq <= s.Seq:
		// Pushed and committed before a restart; only the Promotion was not told. The writer may
		// have put it past tags it did not sign, at a later seq: then it is the head.
		if rcd, err := records.Decode(b); err == nil && s.Seq > pending.Seq {
			rcd.Seq = s.Seq
			if moved, err := records.Encode(rcd); err == nil && records.Digest(moved) == s.Digest {
				ref.Seq, ref.Digest = s.Seq, s.Digest
			}
		}
	case pending.Seq == s.Seq+1:
		rcd, err := records.Decode(b)
		if err != nil {
			return fmt.Errorf("the record reserved in Promotion %q is not valid (%v): remove status.recording to rebuild it", p.Name, err)
		}
		if rcd.Prev != s.Digest || rcd.Stream != s.ID {
			return fmt.Errorf("%w: the record reserved in Promotion %q (seq %d) does not follow the head of stream %q (%s): remove status.recording to rebuild it",
				records.ErrConflict, p.Name, pending.Seq, s.ID, s.Digest)
		}
		written, err := rec.Writer.Write(ctx, rcd)
		if err != nil {
			msg := fmt.Sprintf("record %d not written yet, retrying: %v", pending.Seq, err)
			if pending.Message != msg {
				_ = rec.patchPromotion(ctx, r, p, func(p *stagecoachv1.Promotion) { p.Status.Recording.Message = msg })
			}
			return err
		}
		if written.Passed > 0 {
			// Someone with push access put something at the seqs this record was reserved for;
			// followers skip it the same way (no trusted key signed it).
			ctrl.LoggerFrom(ctx).Info("record written past tags this recorder did not sign", "stream", s.ID,
				"reserved", pending.Seq, "written", written.Seq, "passed", written.Passed)
		}
		s.Seq, s.Digest = written.Seq, written.Digest
		ref.Seq, ref.Digest = written.Seq, written.Digest
	default:
		return fmt.Errorf("%w: Promotion %q holds record %d, but stream %q is at record %d: remove status.recording to rebuild it",
			records.ErrConflict, p.Name, pending.Seq, s.ID, s.Seq)
	}
	ref.Ref = rec.Store.Ref(records.Tag(s.ID, ref.Seq))
	for i := range stage.Status.History {
		if stage.Status.History[i].Promotion == p.Name {
			stage.Status.History[i].Record = ref.DeepCopy()
		}
	}
	if err := commit(ctx); err != nil {
		return err
	}
	return rec.patchPromotion(ctx, r, p, func(p *stagecoachv1.Promotion) {
		p.Status.Record = ref.DeepCopy()
		p.Status.Recording = nil
	})
}

// patchPromotion changes a Promotion's status from a live copy, with an optimistic lock.
func (rec *Recorder) patchPromotion(ctx context.Context, r *StageReconciler, p *stagecoachv1.Promotion, change func(*stagecoachv1.Promotion)) error {
	before := p.DeepCopy()
	change(p)
	if err := r.Status().Patch(ctx, p, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("failed to update the record of Promotion %q: %w", p.Name, err)
	}
	return nil
}

// followerStatus writes what the follower of an upstreamRecords source knows on the Stage: the
// newest upstream record read (status.upstreamSeen), Ready=False while the records cannot be
// checked or are older than maxAge, and the records skipped in the Ready message.
func (r *StageReconciler) followerStatus(stage *stagecoachv1.Stage) {
	if stage.Spec.Source.UpstreamRecords == nil || r.Follower == nil {
		return
	}
	st := r.Follower.State(stage)
	// After a failed read the view still holds what was read before: a mark a person cleared is
	// not put back until a read succeeds. A stale stream was read all right: its mark moves.
	read := st.Reason == "" || st.Reason == stagecoachv1.ReasonUpstreamStale
	if st.Seen != nil && read {
		stage.Status.UpstreamSeen = &stagecoachv1.UpstreamSeen{Seq: st.Seen.Seq, Digest: st.Seen.Digest}
	}
	if c := stage.Status.Candidate; c != nil && st.Reason == "" {
		// A read succeeded since automation last looked (a Promotion may hold it back): the
		// source's old complaint no longer holds.
		kept := c.BlockedBy[:0]
		for _, b := range c.BlockedBy {
			if b.Gate != stagecoachv1.GateSource || (b.Reason != stagecoachv1.ReasonUpstreamUnreadable &&
				b.Reason != stagecoachv1.ReasonUpstreamUntrusted && b.Reason != stagecoachv1.ReasonUpstreamStale) {
				kept = append(kept, b)
			}
		}
		c.BlockedBy = kept
	}
	ready := meta.FindStatusCondition(stage.Status.Conditions, stagecoachv1.ConditionReady)
	switch {
	case ready == nil || ready.Status != metav1.ConditionTrue:
	case st.Reason != "":
		setCondition(stage, stagecoachv1.ConditionReady, metav1.ConditionFalse, st.Reason, st.Message)
	case st.Skipped > 0:
		setCondition(stage, stagecoachv1.ConditionReady, metav1.ConditionTrue, ready.Reason, fmt.Sprintf(
			"%s; %d upstream record(s) skipped: no trusted key in --upstream-trust signed them", ready.Message, st.Skipped))
	}
}

// publishedGate reads a follower's upstream records afresh before a promote starts: a version
// the records do not show verified is refused (NotPublished), one they exclude fails for good.
func (run *promotionRun) publishedGate(ctx context.Context, digest string) (*stagecoachv1.GateBlock, *stagecoachv1.GateResult, string, error) {
	if run.stage.Spec.Source.UpstreamRecords == nil || run.r.Follower == nil {
		return nil, nil, "", nil
	}
	v, err := run.r.Follower.Published(ctx, run.stage, digest, run.now)
	switch {
	case err != nil:
		return nil, nil, "", err
	case v.Excluded:
		return nil, nil, v.Block.Reason + ": " + v.Block.Message, nil
	case v.Block != nil:
		until := metav1.NewTime(run.now.Add(run.r.Follower.RecheckAfter()))
		v.Block.Until = &until
		return v.Block, nil, "", nil
	}
	return nil, &stagecoachv1.GateResult{Gate: recordsource.GatePublished, Passed: true, Message: v.Evidence}, "", nil
}
