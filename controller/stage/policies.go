package stage

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
)

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=list

// policyCheck tells which admission policies the API server enforces, read live at most once per
// interval for all Stages: a cached informer would block on a Forbidden list, and the answer
// changes only when someone installs or removes the policies.
type policyCheck struct {
	reader   client.Reader
	interval time.Duration

	mu       sync.Mutex
	readAt   time.Time
	enforced map[string]bool
	err      error
}

// read returns the names of the policies that exist and are bound with Deny.
func (p *policyCheck) read(ctx context.Context, now time.Time) (map[string]bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.readAt.IsZero() && now.Sub(p.readAt) < p.interval {
		return p.enforced, p.err
	}
	p.enforced, p.err = p.list(ctx)
	p.readAt = now
	return p.enforced, p.err
}

func (p *policyCheck) list(ctx context.Context) (map[string]bool, error) {
	var policies admissionregistrationv1.ValidatingAdmissionPolicyList
	if err := p.reader.List(ctx, &policies); err != nil {
		return nil, err
	}
	var bindings admissionregistrationv1.ValidatingAdmissionPolicyBindingList
	if err := p.reader.List(ctx, &bindings); err != nil {
		return nil, err
	}
	exists := map[string]bool{}
	for _, vap := range policies.Items {
		exists[vap.Name] = true
	}
	enforced := map[string]bool{}
	for _, b := range bindings.Items {
		if exists[b.Spec.PolicyName] && slices.Contains(b.Spec.ValidationActions, admissionregistrationv1.Deny) {
			enforced[b.Spec.PolicyName] = true
		}
	}
	return enforced, nil
}

// applyGuarded sets the Stage's Guarded condition: whether the policies it relies on are enforced.
func (r *Reconciler) applyGuarded(ctx context.Context, stage *stagecoachv1.Stage) {
	if r.policies == nil || len(plan.GuardPolicies(stage)) == 0 {
		meta.RemoveStatusCondition(&stage.Status.Conditions, stagecoachv1.ConditionGuarded)
		return
	}
	enforced, err := r.policies.read(ctx, r.clock().Now())
	switch {
	case apierrors.IsForbidden(err):
		setCondition(stage, stagecoachv1.ConditionGuarded, metav1.ConditionUnknown, stagecoachv1.ReasonPoliciesUnreadable,
			"the controller may not list ValidatingAdmissionPolicies and their bindings, so it cannot tell whether its admission policies are installed: "+
				"grant its service account list on validatingadmissionpolicies and validatingadmissionpolicybindings")
		return
	case err != nil:
		setCondition(stage, stagecoachv1.ConditionGuarded, metav1.ConditionUnknown, stagecoachv1.ReasonPoliciesUnreadable,
			fmt.Sprintf("failed to list the admission policies: %v", err))
		return
	}
	c := plan.Guarded(stage, enforced)
	setCondition(stage, c.Type, c.Status, c.Reason, c.Message)
}
