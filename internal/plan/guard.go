package plan

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// GuardPolicies are the policies a Stage relies on: its applier's guard, the requester guard
// (the approvals gate trusts spec.requestedBy), when it asks for approvals the Approval guard,
// and the status guards (only the controller may say a version verified or a gate passed). A
// kind no policy guards relies on the author guard instead of an applier's: the controller writes
// it as spec.author, which only that policy makes the Stage's real author.
func GuardPolicies(stage *stagecoachv1.Stage) []string {
	statusGuards := []string{stagecoachv1.PolicyStageStatus, stagecoachv1.PolicyPromotionStatus}
	if !stage.Spec.ApplyRef.Builtin() {
		return append([]string{stagecoachv1.PolicyStageAuthor}, statusGuards...)
	}
	builtin, ok := stagecoachv1.LookupBuiltinApplier(stage.Spec.ApplyRef.Kind)
	if !ok {
		return nil
	}
	out := append(append([]string{}, builtin.Guards...), stagecoachv1.PolicyPromotionRequester)
	if p := stage.Spec.Promotion; p != nil && p.Approvals != nil {
		out = append(out, stagecoachv1.PolicyApproval)
	}
	return append(out, statusGuards...)
}

// Guarded is the Stage's Guarded condition, given the policies the API server enforces (installed
// and bound with Deny); nil for a Stage no policy guards.
func Guarded(stage *stagecoachv1.Stage, enforced map[string]bool) *metav1.Condition {
	policies := GuardPolicies(stage)
	if len(policies) == 0 {
		return nil
	}
	var missing []string
	for _, p := range policies {
		if !enforced[p] {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return &metav1.Condition{Type: stagecoachv1.ConditionGuarded, Status: metav1.ConditionTrue, Reason: stagecoachv1.ReasonPoliciesInstalled,
			Message: fmt.Sprintf("admission policies %s deny what they guard", strings.Join(policies, ", "))}
	}
	what, verb := "admission policy", "is"
	if len(missing) > 1 {
		what, verb = "admission policies", "are"
	}
	risk := fmt.Sprintf("anyone who may edit %s '%s/%s' can change what it runs", stage.Spec.ApplyRef.Kind, stage.Namespace, stage.Spec.ApplyRef.Name)
	onlyStatus := !slices.ContainsFunc(missing, func(p string) bool {
		return p != stagecoachv1.PolicyStageStatus && p != stagecoachv1.PolicyPromotionStatus
	})
	switch {
	case onlyStatus:
		risk = fmt.Sprintf("anyone who may write the status of Stage '%s/%s' or its Promotions can mark a version verified or its gates passed",
			stage.Namespace, stage.Name)
	case !stage.Spec.ApplyRef.Builtin():
		risk = fmt.Sprintf("anyone who may write Stage '%s/%s' can name an author whose rights the controller writes %s '%s' with",
			stage.Namespace, stage.Name, stage.Spec.ApplyRef.Kind, stage.Spec.ApplyRef.Name)
	}
	return &metav1.Condition{Type: stagecoachv1.ConditionGuarded, Status: metav1.ConditionFalse, Reason: stagecoachv1.ReasonPoliciesMissing,
		Message: fmt.Sprintf("%s %s %s not installed and bound to deny: %s; install manifests/policies (or the Helm chart with policies.enabled)",
			what, strings.Join(missing, ", "), verb, risk)}
}
