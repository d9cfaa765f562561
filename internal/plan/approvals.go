package plan

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// ApprovalBlock counts the Approvals of digest for the Stage: distinct approvers, each a member
// (by the groups their Approval names, which admission checked) of one of the policy's groups,
// none of them a person who promoted the version by hand (here or anywhere up the Stage's
// upstream chain: promoters says who and where). It returns nil when enough have approved.
func approvalBlock(stage *stagecoachv1.Stage, digest string, approvals []stagecoachv1.Approval, promoters []Promoter) *stagecoachv1.GateBlock {
	policy := stage.Spec.Promotion
	if policy == nil || policy.Approvals == nil || policy.Approvals.Required == 0 {
		return nil
	}
	required, groups := int(policy.Approvals.Required), policy.Approvals.Groups
	promotedIn := map[string][]string{} // promoter → the Stages where she promoted digest by hand
	for _, p := range promoters {
		promotedIn[p.Name] = appendOnce(promotedIn[p.Name], p.Stage.String())
	}
	approvers := map[string]bool{}
	var excluded, outside []string
	for _, a := range approvals {
		if a.DeletionTimestamp != nil || a.Namespace != stage.Namespace || a.Spec.Stage != stage.Name || a.Spec.Digest != digest {
			continue
		}
		switch {
		case len(promotedIn[a.Spec.Approver]) > 0:
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
	sort.Strings(excluded)
	for _, name := range excluded {
		where := promotedIn[name]
		sort.Strings(where)
		msg += fmt.Sprintf("; %s promoted this version by hand in %s and cannot approve it", name, strings.Join(where, ", "))
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

// Promoter is a person who asked for a version by hand, and the Stage where she did.
type Promoter struct {
	Name  string
	Stage types.NamespacedName
}

// Promoters returns who asked for promotions of digest, and in which Stage, leaving out the
// controller (automation asks for no one). Who asked is spec.requestedBy, which admission makes
// the creator; never a label, which anyone who can create a Promotion could set.
func Promoters(digest string, promotions []stagecoachv1.Promotion, controller string) []Promoter {
	var out []Promoter
	for _, p := range promotions {
		if p.Spec.Action == stagecoachv1.ActionPromote && p.Spec.Version != nil && p.Spec.Version.Digest == digest &&
			p.Spec.RequestedBy != controller && p.Spec.RequestedBy != "" {
			who := Promoter{Name: p.Spec.RequestedBy, Stage: types.NamespacedName{Namespace: p.Namespace, Name: p.Spec.Stage}}
			if !slices.Contains(out, who) {
				out = append(out, who)
			}
		}
	}
	return out
}

// UpstreamChainLimit bounds how many Stages up the chain the approvals gate looks for the hand
// promoters of a version: pipelines are a handful of Stages long, and a longer (or looping) chain
// must not make every approval a walk through the cluster.
const upstreamChainLimit = 16

// UpstreamChain returns the keys of the Stages the Stage follows in this cluster: its
// source.upstream, that Stage's source.upstream, and so on, nearest first. It stops at a Stage
// that does not follow one in this cluster (registry or upstreamRecords), a missing Stage (its key
// is still listed: its Promotions may outlive it), a Stage already seen (a cycle, the Stage itself
// included), or after UpstreamChainLimit Stages. get reads a Stage; nil, nil means it is missing.
func UpstreamChain(stage *stagecoachv1.Stage, get func(types.NamespacedName) (*stagecoachv1.Stage, error)) ([]types.NamespacedName, error) {
	seen := map[types.NamespacedName]bool{{Namespace: stage.Namespace, Name: stage.Name}: true}
	var chain []types.NamespacedName
	for s := stage; s != nil && len(chain) < upstreamChainLimit; {
		up, ok := s.UpstreamKey()
		if !ok || seen[up] {
			break
		}
		seen[up] = true
		chain = append(chain, up)
		var err error
		if s, err = get(up); err != nil {
			return nil, err
		}
	}
	return chain, nil
}
