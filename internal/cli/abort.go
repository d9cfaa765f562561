package cli

import (
	"context"
	"fmt"
	"io"

	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// AbortStage creates an Abort Promotion in the user's name: the controller cancels the Stage's
// running Promotion (phase Aborted, with this reason) and a fleet rollout stops where it is.
func AbortStage(ctx context.Context, c client.Client, namespace, name, reason string, out io.Writer) (*stagecoachv1.Promotion, error) {
	stage, err := getStage(ctx, c, namespace, name)
	if err != nil {
		return nil, err
	}
	user, err := WhoAmI(ctx, c)
	if err != nil {
		return nil, err
	}
	p := newAbort(stage, user.Username, reason)
	if err := create(ctx, c, p, out, fmt.Sprintf("aborts the running Promotion of Stage %s", stage.Name)); err != nil {
		return nil, err
	}
	return p, nil
}

// newAbort is the Abort Promotion of a Stage; like every Promotion it names its requester.
func newAbort(stage *stagecoachv1.Stage, user, reason string) *stagecoachv1.Promotion {
	return newPromotion(stage, stagecoachv1.ActionAbort, user, reason)
}
