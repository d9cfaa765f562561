package records

import (
	"context"
	"fmt"

	"github.com/stagecoach-dev/stagecoach/internal/records/trust"
)

// Break kinds an audit reports.
const (
	breakMissing   = "Missing"   // a seq has no record
	breakSignature = "Signature" // no trusted key verifies the record
	breakMalformed = "Malformed" // not a record artifact, or not a valid record
	breakChain     = "Chain"     // prev does not name the record before it
	breakEmpty     = "Empty"     // the stream has no records at all
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
// error. A record that decodes is shown even when no trusted key signed it.
//
// A trusted record must name the newest trusted record before it (what the recorder does when it
// writes past tags it did not sign, and what a follower checks), or the record right before it
// (a record chained to one that no longer verifies, so that one forgery shows as one break, not
// as every record after it). Missing seqs are reported as one break per run of them, which also
// stands for any chain break right after them.
func AuditStream(ctx context.Context, store *Store, tc *trust.Config, stream string) (*Audit, error) {
	if err := validateStream(stream); err != nil {
		return nil, err
	}
	out := &Audit{Repository: store.Repository(), Stream: stream, Entries: []Entry{}, Breaks: []Break{}}
	seqs, err := store.seqs(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("cannot list records of stream %q in %s: %w", stream, store.Repository(), err)
	}
	if len(seqs) == 0 {
		out.Breaks = append(out.Breaks, Break{Kind: breakEmpty,
			Message: fmt.Sprintf("%s holds no record of stream %q; check the repository and the stream id (the upstream Stage's status.stream.id)", store.Repository(), stream)})
		return out, nil
	}
	// Only the tags present are read: a tag pushed at a far seq is one entry, not a walk to it.
	order := sortedSeqs(seqs)
	present := make([]string, len(order))
	for i, s := range order {
		present[i] = seqs[s]
	}
	arts, err := store.fetchAll(ctx, present)
	if err != nil {
		return nil, fmt.Errorf("cannot read records of stream %q: %w", stream, err)
	}
	repository := store.Repository()
	trustedDigest := "" // the newest trusted record so far
	trustedSeq := int64(0)
	prevDigest := ""  // the record right before, trusted or not
	prevKnown := true // whether prevDigest is the record right before (false after a missing one)
	last := int64(0)
	for i, a := range arts {
		s := order[i]
		if a == nil {
			continue // gone while read: reported as missing below, with the seqs around it
		}
		if s > last+1 {
			what := fmt.Sprintf("record %d is missing", last+1)
			if s > last+2 {
				what = fmt.Sprintf("records %d to %d are missing", last+1, s-1)
			}
			out.Breaks = append(out.Breaks, Break{Seq: last + 1, Kind: breakMissing, Message: what})
			prevKnown = false
		}
		last = s
		e := Entry{Seq: s, Ref: store.Ref(present[i])}
		rec, digest, key, why := verifyArtifact(tc, repository, stream, s, a)
		e.Digest, e.Key, e.Record, e.OK = digest, key, rec, rec != nil
		if rec == nil {
			kind := breakSignature
			if a.Problem != "" || key != "" {
				kind = breakMalformed
			}
			out.Breaks = append(out.Breaks, Break{Seq: s, Kind: kind, Message: fmt.Sprintf("record %d: %s", s, why)})
			// Show what decodes, trusted or not.
			if a.Bytes != nil {
				if r, err := Decode(a.Bytes); err == nil && r.Stream == stream && r.Seq == s {
					e.Record = r
				}
			}
		}
		if rec != nil {
			// Right after missing records, what they were is unknown: their break says it.
			if prevKnown && rec.Prev != trustedDigest && rec.Prev != prevDigest {
				before := "no trusted record is before it"
				if trustedSeq > 0 {
					before = fmt.Sprintf("the newest trusted record before it is record %d (%q)", trustedSeq, trustedDigest)
				}
				out.Breaks = append(out.Breaks, Break{Seq: s, Kind: breakChain,
					Message: fmt.Sprintf("record %d names %q as the record before it, but %s", s, rec.Prev, before)})
				e.OK = false
			}
			trustedDigest, trustedSeq = digest, s
		}
		prevDigest, prevKnown = digest, a.Bytes != nil
		out.Entries = append(out.Entries, e)
	}
	return out, nil
}
