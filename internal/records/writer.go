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
	// Seq is where the record is: the seq asked for, or a later one when tags there held
	// nothing this recorder signed (Passed).
	Seq int64
	// Digest is the record digest: the next record's Prev, a follower's upstreamSeen.
	Digest string
	// Manifest is the digest of the artifact manifest.
	Manifest string
	// Existed is true when the record was already there with the same bytes (a retry after a
	// crash between push and status write) and nothing new was pushed.
	Existed bool
	// Passed counts the tags written past: junk, unsigned or foreign-signed records, or replayed
	// copies of other records, which someone with push access put at the seqs asked for.
	Passed int
}

// Write puts r at <stream>-<seq> exactly once. If the tag is absent it pushes the signed record.
// If the tag holds the same record bytes it is done (Existed), re-pushing only the manifest when
// the signature there is not this signer's valid one — the record digest does not change, so no
// follower sees a rewrite. If the tag holds another record of that stream and seq that this
// signer signed, it returns ErrConflict and leaves it.
//
// Anything else at the tag (not a record, no valid signature of this signer, or a signed record
// of another seq or stream replayed there) is not part of the stream: anyone with push access to
// the repository can put it there, and stopping at it would let them block the stream. Write
// then moves to the next seq, keeping r's Prev (the last record this signer wrote), and says so
// in Written.Seq and Passed. Followers skip those tags the same way (no trusted key signed them)
// and follow the chain of signed records across them; the rewritten record has the same bytes
// on every retry, so a crash after the push is healed the same way.
//
// The caller decides seq and prev (from the Stage's status.stream); a crash between Write and the
// status update is healed by calling Write again with the same record.
func (w *Writer) Write(ctx context.Context, r *Record) (*Written, error) {
	rec := *r
	passed := 0
	for {
		out, next, err := w.writeAt(ctx, &rec)
		if err != nil || !next {
			if out != nil {
				out.Passed = passed
			}
			return out, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		passed++
		rec.Seq++
	}
}

// writeAt writes rec at its own seq; next is true when the tag holds something this signer did
// not sign as that record of that stream, and the caller should try the next seq.
func (w *Writer) writeAt(ctx context.Context, r *Record) (out *Written, next bool, err error) {
	b, err := Encode(r)
	if err != nil {
		return nil, false, fmt.Errorf("cannot record seq %d of stream %q: %w", r.Seq, r.Stream, err)
	}
	tag := Tag(r.Stream, r.Seq)
	out = &Written{Ref: w.store.Ref(tag), Tag: tag, Seq: r.Seq, Digest: Digest(b)}
	existing, err := w.store.fetch(ctx, tag)
	switch {
	case errors.Is(err, errAbsent):
	case err != nil:
		return nil, false, fmt.Errorf("cannot check whether record %s exists: %w", out.Ref, err)
	case existing.Bytes != nil && equalBytes(existing.Bytes, b):
		out.Existed = true
		if existing.Problem == "" && w.signer.verifyOwn(b, existing.Sig) {
			out.Manifest = existing.Manifest
			return out, false, nil
		}
	case !w.signedHere(existing, r.Stream, r.Seq):
		return nil, true, nil
	default:
		return nil, false, fmt.Errorf("%w: %s already holds another record (digest %s) than seq %d of stream %q being written (digest %s); "+
			"the stream and this Stage's status.stream disagree: check that only one recorder writes this stream",
			ErrConflict, out.Ref, digestOrProblem(existing), r.Seq, r.Stream, out.Digest)
	}
	sig, err := w.signer.Sign(b)
	if err != nil {
		return nil, false, err
	}
	out.Manifest, err = w.store.push(ctx, tag, b, r.Stream, r.Seq, sig, w.signer.KeyID())
	if err != nil {
		return nil, false, fmt.Errorf("cannot push record %s: %w", out.Ref, err)
	}
	return out, false, nil
}

// signedHere reports whether a is a valid record of stream at seq signed by this signer: the
// only thing at a tag the writer will not move past.
func (w *Writer) signedHere(a *artifact, stream string, seq int64) bool {
	if a.Problem != "" || !w.signer.verifyOwn(a.Bytes, a.Sig) {
		return false
	}
	rec, err := Decode(a.Bytes)
	return err == nil && rec.Stream == stream && rec.Seq == seq
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
