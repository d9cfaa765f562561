package records

import (
	"context"
	"fmt"

	"github.com/stagecoach-dev/stagecoach/internal/records/trust"
)

// Break kinds an audit reports.
const (
	BreakMissing   = "Missing"   // a seq has no record
	BreakSignature = "Signature" // no trusted key verifies the record
	BreakMalformed = "Malformed" // not a record artifact, or not a valid record
	BreakChain     = "Chain"     // prev does not name the record before it
	BreakEmpty     = "Empty"     // the stream has no records at all
)

// Break is one place where a stream cannot be trusted.
type Break struct {
	Seq     int64  `json:"seq"`
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// Entry is one record of an audited stream.
type Entry struct {
	Seq    int64   `json:"seq"`
	Ref    string  `json:"ref"`
	Digest string  `json:"digest,omitempty"`
	Key    string  `json:"key,omitempty"`
	Record *Record `json:"record,omitempty"`
	OK     bool    `json:"ok"`
}

// Audit is a whole stream, checked record by record.
type Audit struct {
	Repository string  `json:"repository"`
	Stream     string  `json:"stream"`
	Entries    []Entry `json:"records"`
	Breaks     []Break `json:"breaks"`
}

// AuditStream reads every record of stream and reports each one and every break in signatures
// or chain; unlike a follower's read it does not stop at the first. Only registry trouble is an
// error. A record that decodes is shown even when no trusted key signed it, and the chain is
// checked across it, so one forgery shows as one break, not as every record after it.
func AuditStream(ctx context.Context, store *Store, tc *trust.Config, stream string) (*Audit, error) {
	if err := ValidateStream(stream); err != nil {
		return nil, err
	}
	out := &Audit{Repository: store.Repository(), Stream: stream, Entries: []Entry{}, Breaks: []Break{}}
	seqs, err := store.seqs(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("cannot list records of stream %q in %s: %w", stream, store.Repository(), err)
	}
	if len(seqs) == 0 {
		out.Breaks = append(out.Breaks, Break{Kind: BreakEmpty,
			Message: fmt.Sprintf("%s holds no record of stream %q; check the repository and the stream id (the upstream Stage's status.stream.id)", store.Repository(), stream)})
		return out, nil
	}
	order := sortedSeqs(seqs)
	top := order[len(order)-1]
	tags := make([]string, 0, top)
	for s := int64(1); s <= top; s++ {
		tags = append(tags, seqs[s])
	}
	present := make([]string, 0, len(order))
	for _, t := range tags {
		if t != "" {
			present = append(present, t)
		}
	}
	arts, err := store.fetchAll(ctx, present)
	if err != nil {
		return nil, fmt.Errorf("cannot read records of stream %q: %w", stream, err)
	}
	byTag := make(map[string]*artifact, len(arts))
	for i, a := range arts {
		byTag[present[i]] = a
	}
	prevDigest := ""
	prevKnown := true // whether prevDigest is the real record before (false after a missing one)
	for s := int64(1); s <= top; s++ {
		tag := seqs[s]
		a := byTag[tag]
		if tag == "" || a == nil {
			out.Breaks = append(out.Breaks, Break{Seq: s, Kind: BreakMissing, Message: fmt.Sprintf("record %d is missing", s)})
			prevKnown = false
			continue
		}
		e := Entry{Seq: s, Ref: store.Ref(tag)}
		rec, digest, key, why := verifyArtifact(tc, stream, s, a)
		e.Digest, e.Key, e.Record, e.OK = digest, key, rec, rec != nil
		if rec == nil {
			kind := BreakSignature
			if a.Problem != "" || key != "" {
				kind = BreakMalformed
			}
			out.Breaks = append(out.Breaks, Break{Seq: s, Kind: kind, Message: fmt.Sprintf("record %d: %s", s, why)})
			// Show and chain what decodes, trusted or not.
			if a.Bytes != nil {
				if r, err := Decode(a.Bytes); err == nil && r.Stream == stream && r.Seq == s {
					e.Record = r
				}
			}
		}
		if e.Record != nil && prevKnown && e.Record.Prev != prevDigest {
			out.Breaks = append(out.Breaks, Break{Seq: s, Kind: BreakChain,
				Message: fmt.Sprintf("record %d names %q as the record before it, but record %d is %q", s, e.Record.Prev, s-1, prevDigest)})
			e.OK = false
		}
		prevDigest, prevKnown = digest, a.Bytes != nil
		out.Entries = append(out.Entries, e)
	}
	return out, nil
}
