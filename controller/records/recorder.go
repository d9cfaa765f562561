// Package records writes each Stage's signed record stream (the recorder) and says on a Stage what
// the follower of its upstreamRecords source knows; it writes Promotion status only through
// package promotion.
package records

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller/promotion"
	recstore "github.com/stagecoach-dev/stagecoach/internal/records"
)

// The recorder appends one signed record to the Stage's stream for every step its Promotions
// take: a promote once applied, its landing verdict, a rollback, a freeze, an unfreeze (a
// break-glass promote carries its actor and reason). It runs after the Promotions moved, from
// what their status says happened, so it never holds a promote, a verdict or a rollback back: a
// registry outage only delays the records, which are written in order once it answers.
//
// Exactly once: a record's seq is reserved, and its bytes kept, in the Promotion's
// status.recording before the push. After a restart the same bytes are pushed again (Writer.Write
// finds them there), and the Stage's status.stream says whether the push was committed.
//
// What a Promotion owes is recstore.OwedSteps' to say, from its status alone; the recorder only
// writes, the Promotions through promotion.SaveRecord.

// RecordsOffMessage is status.stream.message on a cluster without a recorder.
const RecordsOffMessage = "records are off: this controller runs without --records-repository and --records-key-secret, so no signed record of this Stage's steps is written"

// Recorder writes the Stages' record streams.
type Recorder struct {
	Store  *recstore.Store
	Writer *recstore.Writer
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
	id, err := recstore.ClusterIdentity(string(ns.UID))
	if err != nil {
		return "", err
	}
	rec.Cluster = id
	return id, nil
}

// Steps writes the records the Stage's Promotions owe, in order. It never fails the
// reconcile: what cannot be written now is said on the Stage (and on the Promotion waiting for
// it) and retried with backoff; it returns when to try again (0: nothing to retry).
func Steps(ctx context.Context, rec *Recorder, c client.Client, stage *stagecoachv1.Stage, commit func(context.Context) error) time.Duration {
	if rec == nil {
		if stage.Status.Stream == nil || stage.Status.Stream.Message != RecordsOffMessage {
			stage.Status.Stream = &stagecoachv1.StreamStatus{Message: RecordsOffMessage}
		}
		return 0
	}
	key := client.ObjectKeyFromObject(stage)
	err := rec.record(ctx, c, stage, commit)
	if err == nil {
		if stage.Status.Stream != nil {
			stage.Status.Stream.Message = ""
		}
		return rec.retryAfter(key, false)
	}
	retry := rec.retryAfter(key, true)
	ctrl.LoggerFrom(ctx).Error(err, "records delayed", "retryIn", retry.String())
	if stage.Status.Stream == nil {
		stage.Status.Stream = &stagecoachv1.StreamStatus{}
	}
	stage.Status.Stream.Message = fmt.Sprintf("records delayed (retrying in %s; promotions, verdicts and rollbacks go on meanwhile): %v", retry, err)
	if errors.Is(err, recstore.ErrConflict) {
		stage.Status.Stream.Message = "StreamConflict: " + stage.Status.Stream.Message
	}
	return retry
}

func (rec *Recorder) record(ctx context.Context, c client.Client, stage *stagecoachv1.Stage, commit func(context.Context) error) error {
	cluster, err := rec.cluster(ctx)
	if err != nil {
		return err
	}
	stream, err := recstore.StreamID(cluster, stage.Namespace, stage.Name)
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
	list, err := promotion.List(ctx, c, client.ObjectKeyFromObject(stage))
	if err != nil {
		return err
	}
	promotions := make([]*stagecoachv1.Promotion, 0, len(list))
	for i := range list {
		promotions = append(promotions, &list[i])
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
		if err := rec.finishPending(ctx, c, stage, p, commit); err != nil {
			return err
		}
	}
	for {
		owed := recstore.OwedSteps(stage, promotions, stream)
		if len(owed) == 0 {
			return nil
		}
		step := owed[0]
		if err := rec.refresh(ctx, step.Promotion); err != nil {
			return err
		}
		// The live Promotion may have been recorded already (a stale cache): decide again.
		if again := recstore.OwedSteps(stage, []*stagecoachv1.Promotion{step.Promotion}, stream); len(again) == 0 || again[0].Index != step.Index ||
			step.Promotion.Status.Recording != nil {
			if step.Promotion.Status.Recording != nil {
				if err := rec.finishPending(ctx, c, stage, step.Promotion, commit); err != nil {
					return err
				}
			}
			continue
		}
		s := stage.Status.Stream
		rcd := step.Record
		rcd.Seq, rcd.Prev = s.Seq+1, s.Digest
		b, err := recstore.Encode(&rcd)
		if err != nil {
			return fmt.Errorf("cannot record %s of Promotion %q: %w", rcd.Action, step.Promotion.Name, err)
		}
		// Reserved before the push: a crash after it pushes these same bytes again.
		if err := promotion.SaveRecord(ctx, c, step.Promotion, func(p *stagecoachv1.Promotion) {
			p.Status.Recording = &stagecoachv1.PendingRecord{Seq: rcd.Seq, Action: string(rcd.Action), Record: string(b)}
		}); err != nil {
			return err
		}
		if err := rec.finishPending(ctx, c, stage, step.Promotion, commit); err != nil {
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
func (rec *Recorder) finishPending(ctx context.Context, c client.Client, stage *stagecoachv1.Stage, p *stagecoachv1.Promotion, commit func(context.Context) error) error {
	pending := p.Status.Recording
	s := stage.Status.Stream
	b := []byte(pending.Record)
	ref := stagecoachv1.RecordReference{Ref: "", Seq: pending.Seq, Action: pending.Action, Digest: recstore.Digest(b)}
	switch {
	case pending.Seq <= s.Seq:
		// Pushed and committed before a restart; only the Promotion was not told. The writer may
		// have put it past tags it did not sign, at a later seq: then it is the head.
		if rcd, err := recstore.Decode(b); err == nil && s.Seq > pending.Seq {
			rcd.Seq = s.Seq
			if moved, err := recstore.Encode(rcd); err == nil && recstore.Digest(moved) == s.Digest {
				ref.Seq, ref.Digest = s.Seq, s.Digest
			}
		}
	case pending.Seq == s.Seq+1:
		rcd, err := recstore.Decode(b)
		if err != nil {
			return fmt.Errorf("the record reserved in Promotion %q is not valid (%v): remove status.recording to rebuild it", p.Name, err)
		}
		if rcd.Prev != s.Digest || rcd.Stream != s.ID {
			return fmt.Errorf("%w: the record reserved in Promotion %q (seq %d) does not follow the head of stream %q (%s): remove status.recording to rebuild it",
				recstore.ErrConflict, p.Name, pending.Seq, s.ID, s.Digest)
		}
		written, err := rec.Writer.Write(ctx, rcd)
		if err != nil {
			msg := fmt.Sprintf("record %d not written yet, retrying: %v", pending.Seq, err)
			if pending.Message != msg {
				_ = promotion.SaveRecord(ctx, c, p, func(p *stagecoachv1.Promotion) { p.Status.Recording.Message = msg })
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
			recstore.ErrConflict, p.Name, pending.Seq, s.ID, s.Seq)
	}
	ref.Ref = rec.Store.Ref(recstore.Tag(s.ID, ref.Seq))
	for i := range stage.Status.History {
		if stage.Status.History[i].Promotion == p.Name {
			stage.Status.History[i].Record = ref.DeepCopy()
		}
	}
	if err := commit(ctx); err != nil {
		return err
	}
	return promotion.SaveRecord(ctx, c, p, func(p *stagecoachv1.Promotion) {
		p.Status.Record = ref.DeepCopy()
		p.Status.Recording = nil
	})
}
