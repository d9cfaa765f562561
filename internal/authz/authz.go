// Package authz asks the API server whether a Stage's author may do something the controller
// would do for the Stage (patch its applier, create a check's run object): the controller's own
// rights on a kind the operator granted it must not become every Stage author's.
package authz

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// ReviewTTL is how long a yes is kept: a revoked right stops the controller within it, and a
// Stage's reconciles ask the API server once per TTL. A no is not kept, so a right granted counts
// at the next look.
const ReviewTTL = 30 * time.Second

// Reviews asks SubjectAccessReviews for Stage authors (spec.author, which the
// stage-author-guard policy makes the user who wrote what the controller acts on) and keeps the
// yes answers for ReviewTTL. The zero value is ready to use.
type Reviews struct {
	mu sync.Mutex
	// allowed holds when each question was last answered yes.
	allowed map[question]time.Time
}

type question struct {
	user, groups                           string
	verb, group, resource, namespace, name string
}

// May reports whether author may verb the resource (name "" for any, as for create) in namespace.
func (a *Reviews) May(ctx context.Context, c client.Client, now time.Time, author *stagecoachv1.StageAuthor,
	verb string, resource schema.GroupVersionResource, namespace, name string) (bool, error) {
	groups := slices.Clone(author.Groups)
	slices.Sort(groups)
	q := question{user: author.User, groups: strings.Join(groups, ","), verb: verb, group: resource.Group, resource: resource.Resource,
		namespace: namespace, name: name}
	a.mu.Lock()
	at, ok := a.allowed[q]
	a.mu.Unlock()
	if ok && now.Sub(at) < ReviewTTL {
		return true, nil
	}
	// Impersonating the author would add system:authenticated; so does the review.
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: author.User, Groups: append(groups, "system:authenticated"),
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb, Group: resource.Group,
			Version: resource.Version, Resource: resource.Resource, Name: name}}}
	if err := c.Create(ctx, review); err != nil {
		return false, fmt.Errorf("failed to ask the API server whether %s may %s %s in namespace %s: %w", author.User, verb, resource.GroupResource(), namespace, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.allowed == nil {
		a.allowed = map[question]time.Time{}
	}
	for old, when := range a.allowed {
		if now.Sub(when) >= ReviewTTL {
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

// Describe names the author for people: the user, with the groups when there are any.
func Describe(author *stagecoachv1.StageAuthor) string {
	if len(author.Groups) == 0 {
		return author.User
	}
	return author.User + " (groups " + strings.Join(author.Groups, ", ") + ")"
}

// Impersonator builds clients that act as a person. What the controller creates for a Stage's
// author (a check's run) is the author's act: created through such a client, RBAC and every
// admission rule that speaks of who made an object (a Promotion's requester, a CSR's user, a
// RoleBinding's escalation check) see the author, not the controller.
type Impersonator struct {
	// Config is the controller's own; the impersonation headers are added to a copy.
	Config *rest.Config
	// Options carry the scheme and the REST mapper the controller's client uses.
	Options client.Options
}

// AsAuthor is a client acting as the Stage's author, in the groups spec.author lists and
// system:authenticated, as the SubjectAccessReviews of May ask.
func (i *Impersonator) AsAuthor(author *stagecoachv1.StageAuthor) (client.Client, error) {
	if i == nil || i.Config == nil {
		return nil, fmt.Errorf("this controller cannot act as %s: it was started without its REST config", author.User)
	}
	cfg := rest.CopyConfig(i.Config)
	groups := slices.Clone(author.Groups)
	if !slices.Contains(groups, "system:authenticated") {
		groups = append(groups, "system:authenticated")
	}
	cfg.Impersonate = rest.ImpersonationConfig{UserName: author.User, Groups: groups}
	c, err := client.New(cfg, i.Options)
	if err != nil {
		return nil, fmt.Errorf("failed to build a client acting as %s: %w", author.User, err)
	}
	return c, nil
}
