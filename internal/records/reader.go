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
	ErrRemoved = errors.New("upstream records were removed")
	// ErrRewritten: another record holds the seq of the record the follower last read.
	ErrRewritten = errors.New("upstream records were rewritten")
	// ErrGap: a seq is missing, or a record no trusted key verifies sits before a trusted one.
	ErrGap = errors.New("upstream stream has a gap")
	// ErrFork: a trusted record does not chain to the trusted record before it.
	ErrFork = errors.New("upstream stream is forked")
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
	// Skipped counts records after Head that no trusted key signed (forgeries, or a key the trust
	// config does not list); they are ignored and said in the Ready message.
	Skipped int

	headManifest string
	promoted     map[string]bool
	offered      map[string]Offer
	excluded     map[string]Exclusion
}

// NewView is the empty view of stream.
func NewView(stream string) *View {
	return &View{Stream: stream, promoted: map[string]bool{}, offered: map[string]Offer{}, excluded: map[string]Exclusion{}}
}

func (v *View) clone() *View {
	c := *v
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
	case ActionRollback:
		exclude(fmt.Sprintf("it was rolled back upstream (record %d)", r.Seq))
	case ActionFreeze:
		exclude(fmt.Sprintf("a freeze upstream names it as failed (record %d)", r.Seq))
	}
	v.Head = Seen{Seq: r.Seq, Digest: digest}
	v.headManifest = manifest
}

// Follower reads streams from a store and checks them against a trust config.
type Follower struct {
	Store *Store
	Trust *trust.Config
}

// Read extends view (nil: from the start of stream) with the records written since, verifying
// each signature against the trust config and the hash chain, and checks that the record seen
// (status.upstreamSeen; nil if none yet) is still there, unchanged. It returns the new view; on
// error the given view is untouched.
//
// A record no trusted key signed is skipped and counted in View.Skipped — unless a trusted record
// follows it, which is a gap. Each record is fetched and verified once: later reads start after
// the view's head and check the head by its manifest digest alone.
func (f *Follower) Read(ctx context.Context, stream string, view *View, seen *Seen) (*View, error) {
	if err := ValidateStream(stream); err != nil {
		return nil, err
	}
	if len(f.Trust.KeysFor(stream)) == 0 {
		return nil, fmt.Errorf("%w: no key in the upstream trust config is bound to stream %q; add the upstream recorder's public key with a streams pattern matching it",
			ErrUntrusted, stream)
	}
	if view == nil {
		view = NewView(stream)
	}
	if view.Stream != stream {
		return nil, fmt.Errorf("view of stream %q cannot be extended with stream %q", view.Stream, stream)
	}
	seqs, err := f.Store.seqs(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("cannot list records of stream %q in %s: %w", stream, f.Store.Repository(), err)
	}
	top := int64(0)
	if len(seqs) > 0 {
		top = sortedSeqs(seqs)[len(seqs)-1]
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
				"if an auditor confirms the cut, clear status.upstreamSeen", ErrRemoved, stream, top, m.Seq)
		}
	}
	for s := int64(1); s <= top; s++ {
		if _, ok := seqs[s]; ok {
			continue
		}
		for _, m := range marks {
			if s <= m.Seq {
				return nil, fmt.Errorf("%w: record %d of stream %q is gone, at or before record %d this Stage already read; "+
					"if an auditor confirms the cut, clear status.upstreamSeen", ErrRemoved, s, stream, m.Seq)
			}
		}
		return nil, fmt.Errorf("%w: record %d of stream %q is missing while record %d exists", ErrGap, s, stream, top)
	}
	if seen != nil && seen.Seq > 0 && seen.Seq == view.Head.Seq && seen.Digest != view.Head.Digest {
		return nil, rewritten(stream, *seen, view.Head.Digest, "")
	}
	next := view.clone()
	next.Skipped = 0
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
	tags := make([]string, 0, top-view.Head.Seq)
	for s := view.Head.Seq + 1; s <= top; s++ {
		tags = append(tags, seqs[s])
	}
	arts, err := f.Store.fetchAll(ctx, tags)
	if err != nil {
		return nil, fmt.Errorf("cannot read records of stream %q: %w", stream, err)
	}
	firstSkipped := int64(0)
	for i, a := range arts {
		seq := view.Head.Seq + 1 + int64(i)
		if a == nil {
			return nil, fmt.Errorf("%w: record %d of stream %q disappeared while it was read; retry", ErrGap, seq, stream)
		}
		rec, digest, _, why := f.verify(stream, seq, a)
		if seen != nil && seen.Seq == seq && (rec == nil || digest != seen.Digest) {
			return nil, rewritten(stream, *seen, digest, why)
		}
		if rec == nil {
			next.Skipped++
			if firstSkipped == 0 {
				firstSkipped = seq
			}
			continue
		}
		if firstSkipped != 0 {
			return nil, fmt.Errorf("%w: record %d of stream %q is not signed by a trusted key but record %d after it is; "+
				"a trusted record stopped verifying, or something else was pushed in its place", ErrGap, firstSkipped, stream, seq)
		}
		if rec.Prev != next.Head.Digest {
			return nil, fmt.Errorf("%w: record %d of stream %q names %q as the record before it, but record %d is %q",
				ErrFork, seq, stream, rec.Prev, next.Head.Seq, next.Head.Digest)
		}
		next.fold(rec, digest, a.Manifest)
	}
	return next, nil
}

// checkAt checks that the trusted record at mark is still the one the follower read.
func (f *Follower) checkAt(ctx context.Context, stream string, seqs map[int64]string, mark Seen) error {
	a, err := f.Store.fetch(ctx, seqs[mark.Seq])
	if errors.Is(err, errAbsent) {
		return fmt.Errorf("%w: record %d of stream %q, which this Stage already read, is gone; "+
			"if an auditor confirms the cut, clear status.upstreamSeen", ErrRemoved, mark.Seq, stream)
	}
	if err != nil {
		return fmt.Errorf("cannot read record %d of stream %q: %w", mark.Seq, stream, err)
	}
	rec, digest, _, why := f.verify(stream, mark.Seq, a)
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
		"if an auditor confirms the change, clear status.upstreamSeen", ErrRewritten, mark.Seq, stream, mark.Digest, found)
}

// verify decodes and checks one artifact against the trust config. A nil record means it does
// not count (why says why); key is the trusted key's name.
func (f *Follower) verify(stream string, seq int64, a *artifact) (rec *Record, digest, key, why string) {
	return verifyArtifact(f.Trust, stream, seq, a)
}

func verifyArtifact(tc *trust.Config, stream string, seq int64, a *artifact) (rec *Record, digest, key, why string) {
	if a.Bytes != nil {
		digest = Digest(a.Bytes)
	}
	if a.Problem != "" {
		return nil, digest, "", a.Problem
	}
	key, ok := tc.Verify(stream, a.Bytes, a.Sig)
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
