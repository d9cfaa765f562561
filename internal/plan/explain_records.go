package plan

import (
	"fmt"
	"strings"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// RecordsExplanation is a Stage's side of the signed records: its own stream, the records its
// Promotions wrote (or wait to write), and, for a follower, the upstream stream it reads.
type RecordsExplanation struct {
	// Stream is status.stream: the stream id and its newest record, or why records are off.
	Stream *stagecoachv1.StreamStatus `json:"stream,omitempty"`
	// Recorded is the newest record a Promotion of this Stage wrote.
	Recorded *RecordedStep `json:"recorded,omitempty"`
	// Pending are records reserved by Promotions and not in the registry yet.
	Pending []PendingStep `json:"pending,omitempty"`
	// Follows is the upstream stream of source.upstreamRecords.
	Follows *FollowsExplanation `json:"follows,omitempty"`
}

// RecordedStep is one Promotion's record.
type RecordedStep struct {
	Promotion string                       `json:"promotion"`
	Record    stagecoachv1.RecordReference `json:"record"`
}

// PendingStep is one Promotion's record not written yet.
type PendingStep struct {
	Promotion string `json:"promotion"`
	Seq       int64  `json:"seq"`
	Action    string `json:"action"`
	Message   string `json:"message,omitempty"`
}

// FollowsExplanation is what a follower reads and has read.
type FollowsExplanation struct {
	Repository string `json:"repository"`
	Stream     string `json:"stream"`
	// Seen is status.upstreamSeen: the newest upstream record read.
	Seen *stagecoachv1.UpstreamSeen `json:"upstreamSeen,omitempty"`
	// Preview is what a follower would take now, read from the registry with a trust config
	// (stagecoach plan --trust); nil without one.
	Preview *FollowerPreview `json:"preview,omitempty"`
}

// FollowerPreview is a fresh read of the upstream stream, as the follower would do it.
type FollowerPreview struct {
	// Error says why the stream cannot be followed now (nothing is taken meanwhile).
	Error string `json:"error,omitempty"`
	// UpstreamSeq and UpstreamHead are the newest trusted record read: what a verdict cites.
	UpstreamSeq  int64  `json:"upstreamSeq,omitempty"`
	UpstreamHead string `json:"upstreamHead,omitempty"`
	// Takes is the version the follower would offer: the newest the upstream verified that
	// nothing excludes. Its digest must also exist in the Stage's apply repository.
	Takes *PreviewVersion `json:"takes,omitempty"`
	// Refused are versions the records rule out for good.
	Refused []PreviewVersion `json:"refused,omitempty"`
	// Skipped counts records no trusted key signed.
	Skipped int `json:"skipped,omitempty"`
}

// PreviewVersion is a version and the record that decides it.
type PreviewVersion struct {
	Tag    string `json:"tag,omitempty"`
	Digest string `json:"digest"`
	Seq    int64  `json:"seq"`
	Why    string `json:"why,omitempty"`
}

// explainRecords gathers the records side of a Stage; nil when there is nothing to say.
func explainRecords(stage *stagecoachv1.Stage, promotions []stagecoachv1.Promotion) *RecordsExplanation {
	r := &RecordsExplanation{}
	// "records are off" is on every Stage of a cluster without a recorder: not worth a line.
	if s := stage.Status.Stream; s != nil && s.ID != "" {
		r.Stream = s.DeepCopy()
	}
	for i := range promotions {
		p := &promotions[i]
		if rec := p.Status.Record; rec != nil && (r.Recorded == nil || rec.Seq > r.Recorded.Record.Seq) {
			r.Recorded = &RecordedStep{Promotion: p.Name, Record: *rec}
		}
		if pr := p.Status.Recording; pr != nil {
			r.Pending = append(r.Pending, PendingStep{Promotion: p.Name, Seq: pr.Seq, Action: pr.Action, Message: pr.Message})
		}
	}
	if src := stage.Spec.Source.UpstreamRecords; src != nil {
		r.Follows = &FollowsExplanation{Repository: src.Repository, Stream: src.Stream, Seen: stage.Status.UpstreamSeen.DeepCopy()}
	}
	if r.Stream == nil && r.Recorded == nil && len(r.Pending) == 0 && r.Follows == nil {
		return nil
	}
	return r
}

// recordsLines says the records side for people.
func recordsLines(r *RecordsExplanation) []string {
	if r == nil {
		return nil
	}
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	if s := r.Stream; s != nil {
		head := "no record yet"
		if s.Seq > 0 {
			head = fmt.Sprintf("record %d (%s)", s.Seq, s.Digest)
		}
		add("stream:    %s, %s", s.ID, head)
		if s.Message != "" {
			add("  %s", s.Message)
		}
	}
	if rec := r.Recorded; rec != nil {
		add("recorded:  Promotion %s: %s, record %d %s", rec.Promotion, orDash(rec.Record.Action), rec.Record.Seq, rec.Record.Ref)
	}
	for _, p := range r.Pending {
		add("  pending record %d (%s) of Promotion %s: %s", p.Seq, p.Action, p.Promotion, orDash(p.Message))
	}
	if f := r.Follows; f != nil {
		seen := "nothing read yet"
		if f.Seen != nil {
			seen = fmt.Sprintf("read up to record %d (%s)", f.Seen.Seq, f.Seen.Digest)
		}
		add("follows:   stream %s in %s, %s", f.Stream, f.Repository, seen)
		if pv := f.Preview; pv != nil {
			lines = append(lines, previewLines(pv)...)
		}
	}
	return lines
}

func previewLines(pv *FollowerPreview) []string {
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, "  "+fmt.Sprintf(format, args...)) }
	if pv.Error != "" {
		add("would take nothing: %s", pv.Error)
		return lines
	}
	cite := fmt.Sprintf("upstreamSeq=%d upstreamHead=%s", pv.UpstreamSeq, orDash(pv.UpstreamHead))
	if t := pv.Takes; t != nil {
		add("would take %s: verified upstream in record %d (%s)", describeVersion(t.Tag, t.Digest), t.Seq, cite)
	} else {
		add("would take nothing: the upstream verified nothing that is not excluded (%s)", cite)
	}
	for _, v := range pv.Refused {
		add("  refused %s: %s", describeVersion(v.Tag, v.Digest), strings.TrimSpace(v.Why))
	}
	if pv.Skipped > 0 {
		add("  skipped %d record(s): no trusted key signed them", pv.Skipped)
	}
	return lines
}
