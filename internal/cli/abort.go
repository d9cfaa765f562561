package cli

import (
	"context"
	"io"

	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// AbortStage creates an Abort Promotion in the user's name: the controller cancels the Stage's
// running Promotion (phase Aborted, with this reason) and a fleet rollout stops where it is.
func AbortStage(ctx context.Context, c client.Client, namespace, name, reason string, out io.Writer) (*stagecoachv1.Promotion, error) {
	return createPromotion(ctx, c, promotionRequest{namespace: namespace, stage: name, action: stagecoachv1.ActionAbort, reason: reason,
		target: func(stage *stagecoachv1.Stage) (*stagecoachv1.VersionReference, string, error) {
			return nil, "aborts the running Promotion of Stage " + stage.Name, nil
		}}, out)
}
