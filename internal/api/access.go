package api

import (
	"context"
	"fmt"
	"slices"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// readable is what a viewer may read in one namespace: its Stages, and its Promotions (who
// asked for what, and why).
type readable struct {
	stages, promotions bool
}

// readableIn asks the API server what the viewer may list in each namespace, as the API would
// act for them: pipelines are read with the controller's rights, so they show only what the
// viewer could have listed themselves. A service name is a free string, so a tenant's own
// Stage can join another team's service; it must not open that team's Stages to her.
func (s *Server) readableIn(ctx context.Context, who Viewer, namespaces []string) (map[string]readable, error) {
	// One review of the whole cluster first: most viewers who may read anything may read it all.
	everywhere, err := s.readableNamespace(ctx, who, metav1.NamespaceAll)
	if err != nil {
		return nil, err
	}
	out := map[string]readable{}
	for _, ns := range namespaces {
		if _, done := out[ns]; done {
			continue
		}
		r := everywhere
		if !r.stages || !r.promotions {
			if r, err = s.readableNamespace(ctx, who, ns); err != nil {
				return nil, err
			}
		}
		out[ns] = r
	}
	return out, nil
}

func (s *Server) readableNamespace(ctx context.Context, who Viewer, namespace string) (readable, error) {
	stages, err := s.allowed(ctx, who, "list", "stages", namespace)
	if err != nil || !stages {
		return readable{}, err
	}
	promotions, err := s.allowed(ctx, who, "list", "promotions", namespace)
	return readable{stages: true, promotions: promotions}, err
}

// allowed is one SubjectAccessReview for the identity the API acts as: the user with the groups
// it impersonates and system:authenticated (which impersonation adds), or system:anonymous.
func (s *Server) allowed(ctx context.Context, who Viewer, verb, resource, namespace string) (bool, error) {
	user, groups := who.User, append(slices.Clone(who.Groups), "system:authenticated")
	if who.ReadOnly {
		user, groups = "system:anonymous", []string{"system:unauthenticated"}
	}
	review, err := s.reviews.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: groups, ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: verb, Group: stagecoachv1.GroupVersion.Group, Resource: resource}}}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("failed to ask the API server whether %s may %s %s in namespace %q: %w", user, verb, resource, namespace, err)
	}
	return review.Status.Allowed, nil
}
