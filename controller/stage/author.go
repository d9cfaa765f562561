package stage

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/authz"
)

// checkAuthor is the verdict on a Stage whose applier is of a kind without a built-in observer:
// not ready without spec.author, or when the author may not patch the applier; nil when they may.
func (r *Reconciler) checkAuthor(ctx context.Context, stage *stagecoachv1.Stage, resource schema.GroupVersionResource,
	described string, applier *stagecoachv1.ObjectReference) (*applierVerdict, error) {
	author := stage.Spec.Author
	if author == nil {
		return &applierVerdict{reason: stagecoachv1.ReasonAuthorMissing, applier: applier,
			message: fmt.Sprintf("Stage '%s' names no spec.author, and the controller writes %s only as whoever set the Stage's applyRef, "+
				"when they may patch it themselves: set spec.author.user to your user name (kubectl auth whoami; admission checks it is you)",
				stage.Name, described)}, nil
	}
	allowed, err := r.authors.May(ctx, r.Client, r.clock().Now(), author, "patch", resource, stage.Namespace, stage.Spec.ApplyRef.Name)
	if err != nil {
		return nil, err
	}
	if allowed {
		return nil, nil
	}
	as := authz.Describe(author)
	return &applierVerdict{reason: stagecoachv1.ReasonAuthorForbidden, applier: applier, retry: true,
		message: fmt.Sprintf("the Stage's author %s may not patch %s (%s): the controller writes through a Stage only what its author may write; "+
			"grant %s patch on %s in namespace %s, or have someone who may re-apply the Stage with spec.author naming them",
			as, described, resource.GroupResource(), author.User, resource.GroupResource(), stage.Namespace)}, nil
}
