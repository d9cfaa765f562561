package authz

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// SecretsResource is what a Stage's author must be allowed to get for the controller to use a
// Secret the Stage names.
var SecretsResource = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// Secrets reads the Secrets a Stage names (registry and Git credentials, keys, tokens) for the
// controller to use on the Stage's behalf, each only as far as the Stage's author may get it
// themselves: the controller's own right to read Secrets must not become every Stage author's. It
// is the one way a Stage's Secret is read.
type Secrets struct {
	// Reader reads Secrets live (the manager's cache does not hold them).
	Reader client.Reader
	// Client asks the SubjectAccessReviews.
	Client client.Client
	// Reviews keeps the answers (shared with the controller's other questions about authors).
	Reviews *Reviews
	// Now tells the time of a question (time.Now when nil).
	Now func() time.Time
}

// Refusal is a Secret the controller does not use for a Stage: no author, an author who may not
// get it, or a Secret that is not there. Its message names the Stage, the Secret, the field and
// what a person must do; nothing is retried until something changes.
type Refusal struct {
	// Reason is AuthorMissing, AuthorForbidden or CredentialsUnreadable (the Secret is not there,
	// or the controller itself may not read it).
	Reason, Message string
}

func (r *Refusal) Error() string { return r.Message }

// AsRefusal returns the refusal err holds, if any.
func AsRefusal(err error) (*Refusal, bool) {
	var r *Refusal
	ok := errors.As(err, &r)
	return r, ok
}

// MayRead says why the Stage's author may not have the controller use Secret name (field is the
// Stage field naming it); nil when they may.
func (s *Secrets) MayRead(ctx context.Context, stage *stagecoachv1.Stage, name, field string) (*Refusal, error) {
	author := stage.Spec.Author
	if author == nil {
		return &Refusal{Reason: stagecoachv1.ReasonAuthorMissing, Message: fmt.Sprintf(
			"Stage '%s' names no spec.author, and the controller uses Secret '%s' (%s) only as whoever set the Stage, "+
				"when they may read it themselves: set spec.author.user to your user name (kubectl auth whoami; admission checks it is you)",
			stage.Name, name, field)}, nil
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	allowed, err := s.Reviews.May(ctx, s.Client, now(), author, "get", SecretsResource, stage.Namespace, name)
	if err != nil {
		return nil, err
	}
	if !allowed {
		return &Refusal{Reason: stagecoachv1.ReasonAuthorForbidden, Message: fmt.Sprintf(
			"the Stage's author %s may not get Secret '%s/%s' (%s), so the controller does not use it: grant %s get on that Secret, "+
				"or have someone who may re-apply the Stage with spec.author naming them", Describe(author), stage.Namespace, name, field, author.User)}, nil
	}
	return nil, nil
}

// Get reads Secret name of the Stage's namespace, named by the Stage's field, when the Stage's
// author may get it. A *Refusal when the author may not or the Secret is not there; other errors
// are the API server's, to retry.
func (s *Secrets) Get(ctx context.Context, stage *stagecoachv1.Stage, name, field string) (*corev1.Secret, error) {
	if refusal, err := s.MayRead(ctx, stage, name, field); err != nil || refusal != nil {
		if refusal != nil {
			return nil, refusal
		}
		return nil, err
	}
	secret := &corev1.Secret{}
	if err := s.Reader.Get(ctx, client.ObjectKey{Namespace: stage.Namespace, Name: name}, secret); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return nil, &Refusal{Reason: stagecoachv1.ReasonCredentialsUnreadable, Message: fmt.Sprintf("Secret '%s/%s' (%s) cannot be read (%v): create it or fix %s",
				stage.Namespace, name, field, err, field)}
		}
		return nil, fmt.Errorf("failed to read Secret %s/%s (%s) for Stage %q: %w", stage.Namespace, name, field, stage.Name, err)
	}
	return secret, nil
}
