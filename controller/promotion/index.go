package promotion

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// StageIndexKey indexes Promotions by the Stage they act on.
const StageIndexKey = ".spec.stage"

// ApprovalStageIndexKey indexes Approvals by the Stage they approve for.
const ApprovalStageIndexKey = ".spec.stage"

// Index registers the indexes this package lists by: Promotions and Approvals by Stage.
func Index(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &stagecoachv1.Promotion{}, StageIndexKey,
		func(o client.Object) []string { return []string{o.(*stagecoachv1.Promotion).Spec.Stage} }); err != nil {
		return fmt.Errorf("failed to index Promotions by Stage: %w", err)
	}
	if err := indexer.IndexField(ctx, &stagecoachv1.Approval{}, ApprovalStageIndexKey,
		func(o client.Object) []string { return []string{o.(*stagecoachv1.Approval).Spec.Stage} }); err != nil {
		return fmt.Errorf("failed to index Approvals by Stage: %w", err)
	}
	return nil
}

// List lists the Promotions of one Stage from the cache, by index.
func List(ctx context.Context, c client.Reader, stage client.ObjectKey) ([]stagecoachv1.Promotion, error) {
	var list stagecoachv1.PromotionList
	if err := c.List(ctx, &list, client.InNamespace(stage.Namespace), client.MatchingFields{StageIndexKey: stage.Name}); err != nil {
		return nil, fmt.Errorf("failed to list the Promotions of Stage %s: %w", stage, err)
	}
	return list.Items, nil
}
