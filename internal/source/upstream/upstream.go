// Package upstream offers a Stage the version its upstream Stage (in this cluster) verified.
package upstream

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
	"github.com/stagecoach-dev/stagecoach/internal/source"
)

// Source reads upstream Stages.
type Source struct {
	Reader client.Reader
}

var _ source.Source = Source{}

// Offer reads the upstream Stage and offers its verified version.
func (s Source) Offer(ctx context.Context, stage *stagecoachv1.Stage, _ time.Time) (source.Offer, error) {
	key, ok := stage.UpstreamKey()
	if !ok {
		return source.Offer{}, fmt.Errorf("Stage %s/%s has no upstream source", stage.Namespace, stage.Name)
	}
	up := &stagecoachv1.Stage{}
	if err := s.Reader.Get(ctx, key, up); err != nil {
		if apierrors.IsNotFound(err) {
			return source.Offer{Block: &stagecoachv1.GateBlock{Gate: stagecoachv1.GateSource, Reason: stagecoachv1.ReasonUpstreamUnreadable,
				Message: fmt.Sprintf("upstream Stage '%s' does not exist: create it or fix spec.source.upstream", key)}}, nil
		}
		return source.Offer{}, fmt.Errorf("failed to get upstream Stage %s of Stage %q: %w", key, stage.Name, err)
	}
	c := Candidate(up)
	if c == nil {
		return source.Offer{}, nil
	}
	return source.Offer{Candidates: []plan.Candidate{*c}}, nil
}

// Candidate is what an upstream Stage offers: its current version once Verified, with when it
// was verified (soak counts from then); nil while it has none.
func Candidate(up *stagecoachv1.Stage) *plan.Candidate {
	verified := meta.FindStatusCondition(up.Status.Conditions, stagecoachv1.ConditionVerified)
	cur := up.Status.Current
	if verified == nil || verified.Status != metav1.ConditionTrue || cur == nil || cur.Digest == "" || cur.VerifiedAt == nil {
		return nil
	}
	return &plan.Candidate{Digest: cur.Digest, Tag: cur.Version, VerifiedAt: cur.VerifiedAt}
}
