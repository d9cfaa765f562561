package stage

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// authorReviewTTL is how long a yes to "may the author patch the applier" is kept: a revoked right
// stops writes within it, and a Stage's reconciles ask the API server once per TTL. A no is not
// kept, so a right granted counts at the next reconcile.
const authorReviewTTL = 30 * time.Second

// authorReviews asks the API server, as SubjectAccessReviews, whether a Stage's author
// (spec.author, which the stage-author-guard policy makes the user who wrote the applyRef) may
// patch its applier: the controller's own rights on a kind the operator granted it must not
// become every Stage author's.
type authorReviews struct {
	mu sync.Mutex
	// allowed holds when each question was last answered yes.
	allowed map[authorQuestion]time.Time
}

type authorQuestion struct {
	user, groups                     string
	group, resource, namespace, name string
}

// mayPatch reports whether author may patch the object; a yes is kept for authorReviewTTL.
func (a *authorReviews) mayPatch(ctx context.Context, c client.Client, now time.Time, author *stagecoachv1.StageAuthor,
	resource schema.GroupVersionResource, namespace, name string) (bool, error) {
	groups := slices.Clone(author.Groups)
	slices.Sort(groups)
	q := authorQuestion{user: author.User, groups: strings.Join(groups, ","), group: resource.Group, resource: resource.Resource,
		namespace: namespace, name: name}
	a.mu.Lock()
	at, ok := a.allowed[q]
	a.mu.Unlock()
	if ok && now.Sub(at) < authorReviewTTL {
		return true, nil
	}
	// Impersonating the author would add system:authenticated; so does the review.
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: author.User, Groups: append(groups, "system:authenticated"),
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "patch", Group: resource.Group,
			Version: resource.Version, Resource: resource.Resource, Name: name}}}
	if err := c.Create(ctx, review); err != nil {
		return false, fmt.Errorf("failed to ask the API server whether %s may patch %s %s/%s: %w", author.User, resource.GroupResource(), namespace, name, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.allowed == nil {
		a.allowed = map[authorQuestion]time.Time{}
	}
	for old, when := range a.allowed {
		if now.Sub(when) >= authorReviewTTL {
			delete(a.allowed, old)
		}
	}
	if review.Status.Allowed {
		a.allowed[q] = now
	} else {
		delete(a.allowed, q)
	}
	return review.Status.Allowed, nil
}

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
	allowed, err := r.authors.mayPatch(ctx, r.Client, r.clock().Now(), author, resource, stage.Namespace, stage.Spec.ApplyRef.Name)
	if err != nil {
		return nil, err
	}
	if allowed {
		return nil, nil
	}
	as := author.User
	if len(author.Groups) > 0 {
		as += " (groups " + strings.Join(author.Groups, ", ") + ")"
	}
	return &applierVerdict{reason: stagecoachv1.ReasonAuthorForbidden, applier: applier, retry: true,
		message: fmt.Sprintf("the Stage's author %s may not patch %s (%s): the controller writes through a Stage only what its author may write; "+
			"grant %s patch on %s in namespace %s, or have someone who may re-apply the Stage with spec.author naming them",
			as, described, resource.GroupResource(), author.User, resource.GroupResource(), stage.Namespace)}, nil
}
