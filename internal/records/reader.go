package records

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/stagecoach-dev/stagecoach/internal/records/trust"
)

// Errors of a follower's read. Each means the history cannot be checked right now; the Stage is
// not Ready (UpstreamUnreadable) and a promote planned meanwhile is refused (NotPublished).
var (
	// ErrRemoved: the stream ends before the record the follower last read, or that record's tag
	// is gone: records were removed, and one of them could be a failure.
	errRemoved = errors.New("upstream records were removed")
	// ErrRewritten: another record holds the seq of the record the follower last read.
	errRewritten = errors.New("upstream records were rewritten")
	// ErrGap: a trusted record names a record before it that is not the newest trusted record
	// before it, and what lies between is missing or not signed by a trusted key: a trusted
	// record was removed or replaced.
	errGap = errors.New("upstream stream has a gap")
	// ErrFork: a trusted record does not chain to the trusted record before it.
	errFork = errors.New("upstream stream is forked")
	// ErrUntrusted: no trust config, or no key in it is bound to the stream.
	ErrUntrusted = errors.New("upstream stream is not trusted")
)

// Seen is the newest upstream record a follower has read (status.upstreamSeen).
type Seen struct {
	Seq    int64
	Digest string
}

// Offer is a version the upstream verified, with the record that shows it.
type Offer struct {
	Version Version
	// Seq and Digest are the Verify record's: what a verdict cites as upstreamSeq and upstreamHead.
	Seq        int64
	Digest     string
	VerifiedAt time.Time
}

// Exclusion is a version the upstream's records rule out, for good.
type Exclusion struct {
	Version Version
	Seq     int64
	// Why, such as "failed to verify upstream (DeadlineExceeded)".
	Why string
}

// View is what a follower has rebuilt from a stream so far. Reads extend it; a failed read leaves
// it as it was, so nothing read before is lost.
type View struct {
	Stream string
	// Head is the newest trusted record folded in (zero before the first).
	Head Seen
	// HeadRecorded is when the Head record says it was made (zero before the first): how fresh
	// the stream is, as far as this follower can see.
	HeadRecorded time.Time
	// Skipped counts the records of the stream no trusted key signed (forgeries, junk, or a key
	// the trust config does not list), before Head or after it; they are ignored and said in the
	// Ready message.
	Skipped int

	// skippedBefore counts those before Head; holes are the seqs before Head that held no
	// trusted record when read (skipped or absent), so that their removal later is no cut.
	skippedBefore int
	holes         []seqRange

	headManifest string
	promoted     map[string]bool
	offered      map[string]Offer
	excluded     map[string]Exclusion
}

// NewView is the empty view of stream.
func NewView(stream string) *View {
	return &View{Stream: stream, promoted: map[string]bool{}, offered: map[string]Offer{}, excluded: map[string]Exclusion{}}
}

// seqRange is the seqs from lo to hi, both included.
type seqRange struct{ lo, hi int64 }

// hole reports whether seq held no trusted record when the view read past it.
func (v *View) hole(seq int64) bool {
	i := sort.Search(len(v.holes), func(i int) bool { return v.holes[i].hi >= seq })
	return i < len(v.holes) && v.holes[i].lo <= seq
}

func (v *View) clone() *View {
	c := *v
	c.holes = append([]seqRange(nil), v.holes...)
	c.promoted = make(map[string]bool, len(v.promoted))
	for k, x := range v.promoted {
		c.promoted[k] = x
	}
	c.offered = make(map[string]Offer, len(v.offered))
	for k, x := range v.offered {
		c.offered[k] = x
	}
	c.excluded = make(map[string]Exclusion, len(v.excluded))
	for k, x := range v.excluded {
		c.excluded[k] = x
	}
	return &c
}

// Offers are the versions the upstream verified and no record excludes, newest first.
func (v *View) Offers() []Offer {
	out := make([]Offer, 0, len(v.offered))
	for _, o := range v.offered {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq > out[j].Seq })
	return out
}

// Excluded returns why digest is excluded, if it is.
func (v *View) Excluded(digest string) (Exclusion, bool) {
	e, ok := v.excluded[digest]
	return e, ok
}

// Exclusions are the versions the records rule out, newest record first.
func (v *View) Exclusions() []Exclusion {
	out := make([]Exclusion, 0, len(v.excluded))
	for _, e := range v.excluded {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq > out[j].Seq })
	return out
}

// Offered returns the offer of digest, if the upstream verified it and nothing excludes it.
func (v *View) Offered(digest string) (Offer, bool) {
	o, ok := v.offered[digest]
	return o, ok
}

// fold applies one trusted record.
func (v *View) fold(r *Record, digest, manifest string) {
	exclude := func(why string) {
		if r.Version == nil {
			return
		}
		d := r.Version.Digest
		delete(v.offered, d)
		if _, done := v.excluded[d]; !done {
			v.excluded[d] = Exclusion{Version: *r.Version, Seq: r.Seq, Why: why}
		}
	}
	switch r.Action {
	case ActionPromote:
		switch r.Verdict {
		case VerdictSucceeded:
			v.promoted[r.Version.Digest] = true
		case VerdictFailed:
			exclude(fmt.Sprintf("its promote failed upstream (record %d)", r.Seq))
		}
	case ActionVerify:
		switch r.Verdict {
		case VerdictVerified:
			d := r.Version.Digest
			if _, bad := v.excluded[d]; !bad && v.promoted[d] {
				at := r.Times.Recorded.Time
				if r.Times.Finished != nil {
					at = r.Times.Finished.Time
				}
				v.offered[d] = Offer{Version: *r.Version, Seq: r.Seq, Digest: digest, VerifiedAt: at}
			}
		default:
			exclude(fmt.Sprintf("it failed verification upstream: %s (record %d)", r.Verdict, r.Seq))
		}
	case actionRollback:
		exclude(fmt.Sprintf("it was rolled back upstream (record %d)", r.Seq))
	case ActionFreeze:
		exclude(fmt.Sprintf("a freeze upstream names it as failed (record %d)", r.Seq))
	}
	if r.Seq > v.Head.Seq+1 {
		v.holes = append(v.holes, seqRange{v.Head.Seq + 1, r.Seq - 1})
	}
	v.Head = Seen{Seq: r.Seq, Digest: digest}
	v.HeadRecorded = r.Times.Recorded.Time
	v.headManifest = manifest
}

// Follower reads streams from a store and checks them against a trust config.
type Follower struct {
	Store *Store
	Trust *trust.Config
}

// Read extends view (nil: from the start of stream) with the records written since, verifying
// each signature against the trust config (keys bound to the stream in this store's repository)
// and the hash chain, and checks that the record seen (status.upstreamSeen; nil if none yet) is
// still there, unchanged. It returns the new view; on error the given view is untouched.
//
// A record no trusted key signed is skipped and counted in View.Skipped, wherever it is: anyone
// with push access can put one at any tag, and the recorder writes past them. What keeps the
// history whole is the chain of trusted records: each names the trusted record before it, so a
// trusted record removed or replaced (by junk, a forgery, or nothing) breaks it at the next
// trusted record — a gap, or a removal when it lies at or before the record seen. Only the
// newest records can be withheld unnoticed, which status.upstreamSeen (against a cut after a
// read) and spec.source.upstreamRecords.maxAge (against a stale mirror) bound.
//
// Each record is fetched and verified once: later reads start after the view's head and check
// the head by its manifest digest alone. Only the tags present are read, so a tag pushed at a
// far seq costs one fetch, not a walk to it.
func (f *Follower) Read(ctx context.Context, stream string, view *View, seen *Seen) (*View, error) {
	if err := validateStream(stream); err != nil {
		return nil, err
	}
	repository := f.Store.Repository()
	if err := f.Trust.Binds(repository, stream); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUntrusted, err)
	}
	if view == nil {
		view = NewView(stream)
	}
	if view.Stream != stream {
		return nil, fmt.Errorf("view of stream %q cannot be extended with stream %q", view.Stream, stream)
	}
	seqs, err := f.Store.seqs(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("cannot list records of stream %q in %s: %w", stream, repository, err)
	}
	order := sortedSeqs(seqs)
	top := int64(0)
	if len(order) > 0 {
		top = order[len(order)-1]
	}
	// Marks the follower relies on: what its status says it read, and what this view holds.
	marks := []Seen{}
	if seen != nil && seen.Seq > 0 {
		marks = append(marks, *seen)
	}
	if view.Head.Seq > 0 && (seen == nil || *seen != view.Head) {
		marks = append(marks, view.Head)
	}
	for _, m := range marks {
		if top < m.Seq {
			return nil, fmt.Errorf("%w: stream %q ends at record %d, before record %d this Stage already read (status.upstreamSeen); "+
				"if an auditor confirms the cut, clear status.upstreamSeen", errRemoved, stream, top, m.Seq)
		}
		if _, ok := seqs[m.Seq]; !ok {
			return nil, fmt.Errorf("%w: record %d of stream %q, which this Stage already read, is gone; "+
				"if an auditor confirms the cut, clear status.upstreamSeen", errRemoved, m.Seq, stream)
		}
	}
	// The trusted records this view folded are not read again: each must still be there. (A
	// fresh view reads them, and the chain shows one that is gone.)
	for s := int64(1); s < view.Head.Seq; s++ {
		if _, ok := seqs[s]; ok || view.hole(s) {
			continue
		}
		return nil, fmt.Errorf("%w: record %d of stream %q is gone, at or before record %d this Stage already read; "+
			"if an auditor confirms the cut, clear status.upstreamSeen", errRemoved, s, stream, view.Head.Seq)
	}
	if seen != nil && seen.Seq > 0 && seen.Seq == view.Head.Seq && seen.Digest != view.Head.Digest {
		return nil, rewritten(stream, *seen, view.Head.Digest, "")
	}
	next := view.clone()
	// The view's head, already verified: unchanged if its manifest is.
	if view.Head.Seq > 0 {
		m, err := f.Store.head(ctx, seqs[view.Head.Seq])
		if err != nil && !errors.Is(err, errAbsent) {
			return nil, fmt.Errorf("cannot read record %d of stream %q: %w", view.Head.Seq, stream, err)
		}
		if m != view.headManifest {
			if err := f.checkAt(ctx, stream, seqs, view.Head); err != nil {
				return nil, err
			}
			// Same record, signature re-pushed: nothing to refetch.
			next.headManifest = m
		}
	}
	// A mark before the view's head (a status older than the view, or a view rebuilt from the
	// start after a restart that has not reached it yet is handled while folding below).
	if seen != nil && seen.Seq > 0 && seen.Seq < view.Head.Seq {
		if err := f.checkAt(ctx, stream, seqs, *seen); err != nil {
			return nil, err
		}
	}
	after := order[sort.Search(len(order), func(i int) bool { return order[i] > view.Head.Seq }):]
	tags := make([]string, len(after))
	for i, s := range after {
		tags[i] = seqs[s]
	}
	arts, err := f.Store.fetchAll(ctx, tags)
	if err != nil {
		return nil, fmt.Errorf("cannot read records of stream %q: %w", stream, err)
	}
	skipped := 0 // since next.Head
	for i, a := range arts {
		seq := after[i]
		var rec *Record
		digest, why := "", "it is gone"
		if a != nil {
			rec, digest, _, why = f.verify(repository, stream, seq, a)
		}
		if seen != nil && seen.Seq == seq && (rec == nil || digest != seen.Digest) {
			if a == nil {
				return nil, fmt.Errorf("%w: record %d of stream %q, which this Stage already read, is gone; "+
					"if an auditor confirms the cut, clear status.upstreamSeen", errRemoved, seq, stream)
			}
			return nil, rewritten(stream, *seen, digest, why)
		}
		if rec == nil {
			if a != nil {
				skipped++
			}
			continue
		}
		if rec.Prev != next.Head.Digest {
			return nil, chainBroken(stream, rec, next.Head, seen)
		}
		next.skippedBefore += skipped
		skipped = 0
		next.fold(rec, digest, a.Manifest)
	}
	next.Skipped = next.skippedBefore + skipped
	return next, nil
}

// chainBroken says why rec, a trusted record, does not follow head, the newest trusted record
// before it.
func chainBroken(stream string, rec *Record, head Seen, seen *Seen) error {
	before := "the start of the stream"
	if head.Seq > 0 {
		before = fmt.Sprintf("record %d (%s)", head.Seq, head.Digest)
	}
	names := "no record before it"
	if rec.Prev != "" {
		names = rec.Prev + " as the record before it"
	}
	if rec.Seq == head.Seq+1 {
		return fmt.Errorf("%w: record %d of stream %q names %s, but the record before it is %s",
			errFork, rec.Seq, stream, names, before)
	}
	// Something between the two held a trusted record that is gone or no longer verifies.
	first := head.Seq + 1
	if seen != nil && first <= seen.Seq {
		return fmt.Errorf("%w: record %d of stream %q is missing or not signed by a trusted key, and record %d after it names %s, not %s: "+
			"a trusted record at or before record %d, which this Stage already read, was removed or replaced; "+
			"if an auditor confirms the cut, clear status.upstreamSeen", errRemoved, first, stream, rec.Seq, names, before, seen.Seq)
	}
	return fmt.Errorf("%w: record %d of stream %q is missing or not signed by a trusted key, and record %d after it names %s, not %s: "+
		"a trusted record was removed, or replaced by something no trusted key signed", errGap, first, stream, rec.Seq, names, before)
}

// checkAt checks that the trusted record at mark is still the one the follower read.
func (f *Follower) checkAt(ctx context.Context, stream string, seqs map[int64]string, mark Seen) error {
	a, err := f.Store.fetch(ctx, seqs[mark.Seq])
	if errors.Is(err, errAbsent) {
		return fmt.Errorf("%w: record %d of stream %q, which this Stage already read, is gone; "+
			"if an auditor confirms the cut, clear status.upstreamSeen", errRemoved, mark.Seq, stream)
	}
	if err != nil {
		return fmt.Errorf("cannot read record %d of stream %q: %w", mark.Seq, stream, err)
	}
	rec, digest, _, why := f.verify(f.Store.Repository(), stream, mark.Seq, a)
	if rec == nil || digest != mark.Digest {
		return rewritten(stream, mark, digest, why)
	}
	return nil
}

func rewritten(stream string, mark Seen, digest, why string) error {
	found := digest
	if why != "" {
		found = "a record that does not verify (" + why + ")"
	}
	return fmt.Errorf("%w: record %d of stream %q was %s when this Stage read it and is now %s; "+
		"if an auditor confirms the change, clear status.upstreamSeen", errRewritten, mark.Seq, stream, mark.Digest, found)
}

// verify decodes and checks one artifact against the trust config. A nil record means it does
// not count (why says why); key is the trusted key's name.
func (f *Follower) verify(repository, stream string, seq int64, a *artifact) (rec *Record, digest, key, why string) {
	return verifyArtifact(f.Trust, repository, stream, seq, a)
}

func verifyArtifact(tc *trust.Config, repository, stream string, seq int64, a *artifact) (rec *Record, digest, key, why string) {
	if a.Bytes != nil {
		digest = Digest(a.Bytes)
	}
	if a.Problem != "" {
		return nil, digest, "", a.Problem
	}
	key, ok := "", false
	if a.Sig != nil {
		key, ok = tc.Verify(repository, stream, a.Bytes, a.Sig)
	}
	if !ok && a.Bundle != nil {
		// Signed keyless: a trust entry of CI identities must vouch for the bundle.
		name, _, err := tc.VerifyBundle(repository, stream, a.Bytes, a.Bundle)
		if err != nil {
			return nil, digest, "", "no trusted key or keyless identity bound to the stream verifies its signature (keyless bundle: " + err.Error() + ")"
		}
		key, ok = name, true
	}
	if !ok {
		hint := ""
		if a.KeyHint != "" {
			hint = " (it names key " + a.KeyHint + ")"
		}
		return nil, digest, "", "no trusted key bound to the stream verifies its signature" + hint
	}
	r, err := Decode(a.Bytes)
	if err != nil {
		return nil, digest, key, "signed but not a valid record: " + err.Error()
	}
	if r.Stream != stream || r.Seq != seq {
		return nil, digest, key, fmt.Sprintf("it is record %d of stream %q, not record %d of stream %q", r.Seq, r.Stream, seq, stream)
	}
	return r, digest, key, ""
}
