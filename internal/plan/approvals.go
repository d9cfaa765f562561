package plan

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// ApprovalBlock counts the Approvals of digest for the Stage: distinct approvers, each a member
// (by the groups their Approval names, which admission checked) of one of the policy's groups,
// none of them a person who promoted the version (here or upstream: promoters holds their
// names). It returns nil when enough have approved.
func ApprovalBlock(stage *stagecoachv1.Stage, digest string, approvals []stagecoachv1.Approval, promoters []string) *stagecoachv1.GateBlock {
	policy := stage.Spec.Promotion
	if policy == nil || policy.Approvals == nil || policy.Approvals.Required == 0 {
		return nil
	}
	required, groups := int(policy.Approvals.Required), policy.Approvals.Groups
	approvers := map[string]bool{}
	var excluded, outside []string
	for _, a := range approvals {
		if a.DeletionTimestamp != nil || a.Namespace != stage.Namespace || a.Spec.Stage != stage.Name || a.Spec.Digest != digest {
			continue
		}
		switch {
		case slices.Contains(promoters, a.Spec.Approver):
			excluded = appendOnce(excluded, a.Spec.Approver)
		case len(groups) > 0 && !slices.ContainsFunc(a.Spec.Groups, func(g string) bool { return slices.Contains(groups, g) }):
			outside = appendOnce(outside, a.Spec.Approver)
		default:
			approvers[a.Spec.Approver] = true
		}
	}
	if len(approvers) >= required {
		return nil
	}
	msg := fmt.Sprintf("%d of %d approvals for %s", len(approvers), required, digest)
	if len(groups) > 0 {
		msg += " from members of " + strings.Join(groups, ", ")
	}
	if len(excluded) > 0 {
		sort.Strings(excluded)
		msg += fmt.Sprintf("; %s promoted this version and cannot approve it", strings.Join(excluded, ", "))
	}
	if len(outside) > 0 {
		sort.Strings(outside)
		msg += fmt.Sprintf("; %s approved without naming one of those groups", strings.Join(outside, ", "))
	}
	return &stagecoachv1.GateBlock{Gate: stagecoachv1.GateApprovals, Reason: stagecoachv1.ReasonAwaitingApproval, Message: msg}
}

func appendOnce(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// Promoters returns who asked for promotions of digest, leaving out the controller (automation
// asks for no one). Who asked is spec.requestedBy, which admission makes the creator; never a
// label, which anyone who can create a Promotion could set.
func Promoters(digest string, promotions []stagecoachv1.Promotion, controller string) []string {
	var names []string
	for _, p := range promotions {
		if p.Spec.Action == stagecoachv1.ActionPromote && p.Spec.Version != nil && p.Spec.Version.Digest == digest &&
			p.Spec.RequestedBy != controller && p.Spec.RequestedBy != "" {
			names = appendOnce(names, p.Spec.RequestedBy)
		}
	}
	return names
}
