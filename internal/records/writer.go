package records

import (
	"context"
	"errors"
	"fmt"
)

// ErrConflict: another record already holds the seq being written. The stream's history and the
// writer's view of it differ (two recorders for one stream, or a status restored from a backup);
// nothing is overwritten, a person must look (StreamConflict).
var ErrConflict = errors.New("record stream conflict")

// Writer appends records to streams in a Store, signed with the recorder key.
type Writer struct {
	store  *Store
	signer *Signer
}

// NewWriter returns a writer into store signing with signer.
func NewWriter(store *Store, signer *Signer) *Writer { return &Writer{store: store, signer: signer} }

// Written says where a record is.
type Written struct {
	// Ref is the full tag reference (repository:tag), for Promotion.status.record.ref.
	Ref string
	Tag string
	Seq int64
	// Digest is the record digest: the next record's Prev, a follower's upstreamSeen.
	Digest string
	// Manifest is the digest of the artifact manifest.
	Manifest string
	// Existed is true when the record was already there with the same bytes (a retry after a
	// crash between push and status write) and nothing new was pushed.
	Existed bool
}

// Write puts r at <stream>-<seq> exactly once. If the tag is absent it pushes the signed record.
// If the tag holds the same record bytes it is done (Existed), re-pushing only the manifest when
// the signature there is not this signer's valid one — the record digest does not change, so no
// follower sees a rewrite. If the tag holds different bytes it returns ErrConflict and leaves it.
//
// The caller decides seq and prev (from the Stage's status.stream); a crash between Write and the
// status update is healed by calling Write again with the same record.
func (w *Writer) Write(ctx context.Context, r *Record) (*Written, error) {
	b, err := Encode(r)
	if err != nil {
		return nil, fmt.Errorf("cannot record seq %d of stream %q: %w", r.Seq, r.Stream, err)
	}
	tag := Tag(r.Stream, r.Seq)
	out := &Written{Ref: w.store.Ref(tag), Tag: tag, Seq: r.Seq, Digest: Digest(b)}
	existing, err := w.store.fetch(ctx, tag)
	switch {
	case errors.Is(err, errAbsent):
	case err != nil:
		return nil, fmt.Errorf("cannot check whether record %s exists: %w", out.Ref, err)
	case existing.Bytes != nil && equalBytes(existing.Bytes, b):
		out.Existed = true
		if existing.Problem == "" && w.signer.verifyOwn(b, existing.Sig) {
			out.Manifest = existing.Manifest
			return out, nil
		}
	default:
		return nil, fmt.Errorf("%w: %s already holds another record (digest %s) than seq %d of stream %q being written (digest %s); "+
			"the stream and this Stage's status.stream disagree: check that only one recorder writes this stream",
			ErrConflict, out.Ref, digestOrProblem(existing), r.Seq, r.Stream, out.Digest)
	}
	sig, err := w.signer.Sign(b)
	if err != nil {
		return nil, err
	}
	out.Manifest, err = w.store.push(ctx, tag, b, r.Stream, r.Seq, sig, w.signer.KeyID())
	if err != nil {
		return nil, fmt.Errorf("cannot push record %s: %w", out.Ref, err)
	}
	return out, nil
}

func digestOrProblem(a *artifact) string {
	if a.Bytes != nil {
		return Digest(a.Bytes)
	}
	return "unreadable: " + a.Problem
}

// Head returns the newest record of stream that this writer's key signed, nil when the stream
// has none. A recorder whose Stage lost its status (re-created, restored) continues from here.
func (w *Writer) Head(ctx context.Context, stream string) (*Written, *Record, error) {
	seqs, err := w.store.seqs(ctx, stream)
	if err != nil {
		return nil, nil, err
	}
	order := sortedSeqs(seqs)
	for i := len(order) - 1; i >= 0; i-- {
		tag := seqs[order[i]]
		a, err := w.store.fetch(ctx, tag)
		if errors.Is(err, errAbsent) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if a.Problem != "" || !w.signer.verifyOwn(a.Bytes, a.Sig) {
			continue
		}
		rec, err := Decode(a.Bytes)
		if err != nil || rec.Stream != stream || rec.Seq != order[i] {
			continue
		}
		return &Written{Ref: w.store.Ref(tag), Tag: tag, Seq: rec.Seq, Digest: Digest(a.Bytes), Manifest: a.Manifest, Existed: true}, rec, nil
	}
	return nil, nil, nil
}
