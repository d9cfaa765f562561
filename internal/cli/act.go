package cli

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// digestPattern: an OCI digest, or a Git commit (sha1:<40 hex>) for a Stage with a git source.
var digestPattern = regexp.MustCompile(`^(sha256:[a-f0-9]{64}|sha1:[a-f0-9]{40})$`)

// WhoAmI asks the API server who the kubeconfig's user is: Promotions and Approvals name their
// creator, and the admission policies check that they do.
func WhoAmI(ctx context.Context, c client.Client) (authenticationv1.UserInfo, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return authenticationv1.UserInfo{}, fmt.Errorf("failed to ask the API server who you are (SelfSubjectReview): %w", err)
	}
	return review.Status.UserInfo, nil
}

// getStage reads a Stage, saying how to find it when it is not there.
func getStage(ctx context.Context, c client.Reader, namespace, name string) (*stagecoachv1.Stage, error) {
	s := &stagecoachv1.Stage{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("stage %q not found in namespace %q (use -n NAMESPACE)", name, namespace)
		}
		return nil, fmt.Errorf("failed to get Stage %s/%s: %w", namespace, name, err)
	}
	return s, nil
}

// PromoteOptions say which version to promote where.
type PromoteOptions struct {
	Namespace, Stage string
	// Version is a tag the Stage knows (its candidate, its history or its upstream's); Digest
	// names the version exactly. One of them.
	Version, Digest string
	Reason          string
	BreakGlass      bool
}

// Promote creates a Promotion of a version for a Stage, in the user's name.
func Promote(ctx context.Context, c client.Client, opts PromoteOptions, out io.Writer) (*stagecoachv1.Promotion, error) {
	if (opts.Version == "") == (opts.Digest == "") {
		return nil, fmt.Errorf("name the version to promote with exactly one of --version TAG or --digest sha256:...")
	}
	return createPromotion(ctx, c, promotionRequest{namespace: opts.Namespace, stage: opts.Stage, action: stagecoachv1.ActionPromote,
		reason: opts.Reason, breakGlass: opts.BreakGlass,
		target: func(stage *stagecoachv1.Stage) (*stagecoachv1.VersionReference, string, error) {
			version, err := resolveVersion(ctx, c, stage, opts.Version, opts.Digest)
			if err != nil {
				return nil, "", err
			}
			return version, fmt.Sprintf("promotes Stage %s to %s", stage.Name, describe(version)), nil
		}}, out)
}

// RollbackOptions say which Stage to roll back, and to what (its last verified version when
// neither is set).
type RollbackOptions struct {
	Namespace, Stage string
	Version, Digest  string
	Reason           string
}

// Rollback creates a Rollback Promotion for a Stage, in the user's name.
func Rollback(ctx context.Context, c client.Client, opts RollbackOptions, out io.Writer) (*stagecoachv1.Promotion, error) {
	return createPromotion(ctx, c, promotionRequest{namespace: opts.Namespace, stage: opts.Stage, action: stagecoachv1.ActionRollback,
		reason: opts.Reason,
		target: func(stage *stagecoachv1.Stage) (*stagecoachv1.VersionReference, string, error) {
			if opts.Version == "" && opts.Digest == "" {
				// The controller picks the last verified version.
				return nil, fmt.Sprintf("rolls Stage %s back to its last verified version", stage.Name), nil
			}
			version, err := resolveVersion(ctx, c, stage, opts.Version, opts.Digest)
			if err != nil {
				return nil, "", err
			}
			return version, fmt.Sprintf("rolls Stage %s back to %s", stage.Name, describe(version)), nil
		}}, out)
}

// UnfreezeStage creates an Unfreeze Promotion: the user has looked at what froze the Stage (a
// write to its applier that Stagecoach did not make, or a Freeze Promotion) and accepts it.
func UnfreezeStage(ctx context.Context, c client.Client, namespace, name, reason string, out io.Writer) (*stagecoachv1.Promotion, error) {
	return createPromotion(ctx, c, promotionRequest{namespace: namespace, stage: name, action: stagecoachv1.ActionUnfreeze, reason: reason,
		target: func(stage *stagecoachv1.Stage) (*stagecoachv1.VersionReference, string, error) {
			return nil, "unfreezes Stage " + stage.Name, nil
		}}, out)
}

// promotionRequest is what a verb asks of createPromotion.
type promotionRequest struct {
	namespace, stage string
	action           stagecoachv1.PromotionAction
	// reason defaults to one naming the action and the user.
	reason     string
	breakGlass bool
	// target reads the Stage and returns the version the Promotion carries (nil: the action
	// needs none, or the controller picks it) and what the Promotion does, for the line that
	// says so. It runs before the user is asked who they are, so a version that does not
	// resolve is refused first.
	target func(stage *stagecoachv1.Stage) (*stagecoachv1.VersionReference, string, error)
}

// createPromotion creates a Promotion in the user's name: every verb that moves or holds a
// Stage reads the Stage, asks who the user is and creates the Promotion the same way.
func createPromotion(ctx context.Context, c client.Client, r promotionRequest, out io.Writer) (*stagecoachv1.Promotion, error) {
	stage, err := getStage(ctx, c, r.namespace, r.stage)
	if err != nil {
		return nil, err
	}
	version, does, err := r.target(stage)
	if err != nil {
		return nil, err
	}
	user, err := WhoAmI(ctx, c)
	if err != nil {
		return nil, err
	}
	p := newPromotion(stage, r.action, user.Username, r.reason)
	p.Spec.Version, p.Spec.BreakGlass = version, r.breakGlass
	if err := create(ctx, c, p, out, does); err != nil {
		return nil, err
	}
	return p, nil
}

// newPromotion is a Promotion of a Stage; like every Promotion it names its requester.
func newPromotion(stage *stagecoachv1.Stage, action stagecoachv1.PromotionAction, user, reason string) *stagecoachv1.Promotion {
	if reason == "" {
		reason = fmt.Sprintf("%s by %s with the stagecoach CLI", strings.ToLower(string(action)), user)
	}
	return &stagecoachv1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: stage.Namespace, GenerateName: stage.Name + "-",
			Labels: map[string]string{stagecoachv1.PromotionStageLabel: stage.Name}},
		Spec: stagecoachv1.PromotionSpec{Stage: stage.Name, Action: action, RequestedBy: user, Reason: reason},
	}
}

// resolveVersion turns a tag into the digest the Stage knows it by: its candidate, its history,
// its upstream's current version or history.
func resolveVersion(ctx context.Context, c client.Reader, stage *stagecoachv1.Stage, tag, digest string) (*stagecoachv1.VersionReference, error) {
	if digest != "" {
		if !digestPattern.MatchString(digest) {
			return nil, fmt.Errorf("digest %q is neither sha256: followed by 64 lowercase hex characters nor sha1: followed by 40 (a Git commit)", digest)
		}
		v := &stagecoachv1.VersionReference{Digest: digest}
		v.Tag = tagOf(stage, digest)
		return v, nil
	}
	known := knownVersions(stage)
	if up, ok := stage.UpstreamKey(); ok {
		upstream := &stagecoachv1.Stage{}
		if err := c.Get(ctx, up, upstream); err == nil {
			known = append(known, knownVersions(upstream)...)
		} else if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("failed to read upstream Stage %s: %w", up, err)
		}
	}
	for _, v := range known {
		if v.Tag == tag && v.Digest != "" {
			return &stagecoachv1.VersionReference{Digest: v.Digest, Tag: tag}, nil
		}
	}
	return nil, fmt.Errorf("version %q is not known to Stage %s/%s (not its candidate, nor in its or its upstream's history): pass --digest sha256:... instead",
		tag, stage.Namespace, stage.Name)
}

func knownVersions(s *stagecoachv1.Stage) []stagecoachv1.VersionReference {
	var known []stagecoachv1.VersionReference
	if c := s.Status.Candidate; c != nil {
		known = append(known, stagecoachv1.VersionReference{Digest: c.Digest, Tag: c.Version})
	}
	if cur := s.Status.Current; cur != nil {
		known = append(known, stagecoachv1.VersionReference{Digest: cur.Digest, Tag: cur.Version})
	}
	for _, h := range s.Status.History {
		known = append(known, stagecoachv1.VersionReference{Digest: h.Digest, Tag: h.Version})
	}
	return known
}

func tagOf(s *stagecoachv1.Stage, digest string) string {
	for _, v := range knownVersions(s) {
		if v.Digest == digest && v.Tag != "" {
			return v.Tag
		}
	}
	return ""
}

// ApproveOptions say which version of which Stage the user approves.
type ApproveOptions struct {
	Namespace, Stage string
	// Digest of the approved version; the Stage's candidate when empty.
	Digest  string
	Comment string
	// Groups the user approves as; when empty, those of the user's groups the Stage's approval
	// policy names.
	Groups []string
}

// Approve creates an Approval in the user's name.
func Approve(ctx context.Context, c client.Client, opts ApproveOptions, out io.Writer) (*stagecoachv1.Approval, error) {
	stage, err := getStage(ctx, c, opts.Namespace, opts.Stage)
	if err != nil {
		return nil, err
	}
	digest := opts.Digest
	if digest == "" {
		if stage.Status.Candidate == nil || stage.Status.Candidate.Digest == "" {
			return nil, fmt.Errorf("stage %s/%s has no candidate to approve: pass --digest sha256:...", stage.Namespace, stage.Name)
		}
		digest = stage.Status.Candidate.Digest
	}
	if !digestPattern.MatchString(digest) {
		return nil, fmt.Errorf("digest %q is neither sha256: followed by 64 lowercase hex characters nor sha1: followed by 40 (a Git commit)", digest)
	}
	user, err := WhoAmI(ctx, c)
	if err != nil {
		return nil, err
	}
	groups := opts.Groups
	if policy := stage.Spec.Promotion; len(groups) == 0 && policy != nil && policy.Approvals != nil && len(policy.Approvals.Groups) > 0 {
		for _, g := range policy.Approvals.Groups {
			if slices.Contains(user.Groups, g) {
				groups = append(groups, g)
			}
		}
		if len(groups) == 0 {
			return nil, fmt.Errorf("%s is in none of the groups that may approve Stage %s/%s (%s)",
				user.Username, stage.Namespace, stage.Name, strings.Join(policy.Approvals.Groups, ", "))
		}
	}
	a := &stagecoachv1.Approval{
		ObjectMeta: metav1.ObjectMeta{Namespace: stage.Namespace, GenerateName: stage.Name + "-",
			Labels: map[string]string{stagecoachv1.PromotionStageLabel: stage.Name}},
		Spec: stagecoachv1.ApprovalSpec{Stage: stage.Name, Digest: digest, Approver: user.Username, Groups: groups, Comment: opts.Comment},
	}
	v := &stagecoachv1.VersionReference{Digest: digest, Tag: tagOf(stage, digest)}
	if err := create(ctx, c, a, out, fmt.Sprintf("approves %s for Stage %s as %s", describe(v), stage.Name, user.Username)); err != nil {
		return nil, err
	}
	return a, nil
}

// FreezeOptions select the Stages to freeze.
type FreezeOptions struct {
	Namespace string
	// Selector is a label selector of Stages (kubectl syntax); every Stage of the namespace when
	// empty.
	Selector string
	Reason   string
	// Until ends the Freeze by itself; it holds until deleted when zero.
	Until time.Time
}

// Freeze creates a Freeze.
func Freeze(ctx context.Context, c client.Client, opts FreezeOptions, out io.Writer) (*stagecoachv1.Freeze, error) {
	if strings.TrimSpace(opts.Reason) == "" {
		return nil, fmt.Errorf("a Freeze needs a reason: pass --reason")
	}
	f := &stagecoachv1.Freeze{
		ObjectMeta: metav1.ObjectMeta{Namespace: opts.Namespace, GenerateName: "freeze-"},
		Spec:       stagecoachv1.FreezeSpec{Reason: opts.Reason},
	}
	if opts.Selector != "" {
		sel, err := metav1.ParseToLabelSelector(opts.Selector)
		if err != nil {
			return nil, fmt.Errorf("selector %q does not parse: %w", opts.Selector, err)
		}
		f.Spec.Selector = sel
	}
	if !opts.Until.IsZero() {
		f.Spec.Until = &metav1.Time{Time: opts.Until}
	}
	what := "every Stage in namespace " + opts.Namespace
	if opts.Selector != "" {
		what = "the Stages of namespace " + opts.Namespace + " matching " + opts.Selector
	}
	if err := create(ctx, c, f, out, "freezes "+what); err != nil {
		return nil, err
	}
	return f, nil
}

// Unfreeze deletes a Freeze.
func Unfreeze(ctx context.Context, c client.Client, namespace, name string, out io.Writer) error {
	f := &stagecoachv1.Freeze{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := c.Delete(ctx, f); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("freeze %q not found in namespace %q (kubectl get freezes -n %s lists them)", name, namespace, namespace)
		}
		return fmt.Errorf("failed to delete Freeze %s/%s: %w", namespace, name, err)
	}
	_, err := fmt.Fprintf(out, "freeze.stagecoach.dev/%s deleted\n", name)
	return err
}

// create creates obj and says what it does; an admission refusal is passed on as it is (the
// policies name the fix).
func create(ctx context.Context, c client.Client, obj client.Object, out io.Writer, does string) error {
	kind := strings.ToLower(fmt.Sprintf("%T", obj))
	kind = kind[strings.LastIndex(kind, ".")+1:]
	if err := c.Create(ctx, obj); err != nil {
		return fmt.Errorf("failed to create a %s in namespace %q: %w", kind, obj.GetNamespace(), err)
	}
	_, err := fmt.Fprintf(out, "%s.stagecoach.dev/%s created: %s\n", kind, obj.GetName(), does)
	return err
}

func describe(v *stagecoachv1.VersionReference) string {
	if v.Tag != "" {
		return v.Tag + " (" + v.Digest + ")"
	}
	return v.Digest
}
