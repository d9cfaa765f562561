package cli

import (
	"context"

	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
	"github.com/stagecoach-dev/stagecoach/internal/records"
	"github.com/stagecoach-dev/stagecoach/internal/records/trust"
)

// previewFollower reads a follower's upstream stream afresh, as its controller would (every
// signature against tc, the chain, the Stage's upstreamSeen), and says what it would take.
// Whether the digest exists in the Stage's apply repository is not checked here.
func previewFollower(ctx context.Context, f *plan.FollowsExplanation, tc *trust.Config, registry ociclient.Options) *plan.FollowerPreview {
	pv := &plan.FollowerPreview{}
	store, err := records.NewStore(f.Repository, registry)
	if err != nil {
		pv.Error = err.Error()
		return pv
	}
	var seen *records.Seen
	if f.Seen != nil && f.Seen.Seq > 0 {
		seen = &records.Seen{Seq: f.Seen.Seq, Digest: f.Seen.Digest}
	}
	view, err := (&records.Follower{Store: store, Trust: tc}).Read(ctx, f.Stream, nil, seen)
	if err != nil {
		pv.Error = err.Error()
		return pv
	}
	pv.UpstreamSeq, pv.UpstreamHead, pv.Skipped = view.Head.Seq, view.Head.Digest, view.Skipped
	if offers := view.Offers(); len(offers) > 0 {
		o := offers[0]
		pv.Takes = &plan.PreviewVersion{Tag: o.Version.Tag, Digest: o.Version.Digest, Seq: o.Seq}
	}
	for _, e := range view.Exclusions() {
		pv.Refused = append(pv.Refused, plan.PreviewVersion{Tag: e.Version.Tag, Digest: e.Version.Digest, Seq: e.Seq, Why: e.Why})
	}
	return pv
}
