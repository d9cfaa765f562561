package controller

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
	"github.com/stagecoach-dev/stagecoach/internal/semver"
)

// promoteGates evaluates the gates a version must pass before it is applied, for automation and
// for a person's Promotion alike: its signature (for a registry source with verify), time
// windows (a break-glass Promotion passes them, as it passes a Freeze), approvals and
// dependencies. It returns the blocks and every gate's verdict.
func (run *promotionRun) promoteGates(ctx context.Context, digest string, breakGlass bool) ([]stagecoachv1.GateBlock, []stagecoachv1.GateResult, error) {
	stage := run.stage
	var blocks []stagecoachv1.GateBlock
	var results []stagecoachv1.GateResult
	verdict := func(gate string, block []stagecoachv1.GateBlock, passed string) {
		blocks = append(blocks, block...)
		if len(block) == 0 {
			results = append(results, stagecoachv1.GateResult{Gate: gate, Passed: true, Message: passed})
			return
		}
		msgs := make([]string, 0, len(block))
		for _, b := range block {
			msgs = append(msgs, b.Message)
		}
		results = append(results, stagecoachv1.GateResult{Gate: gate, Message: strings.Join(msgs, "; ")})
	}
	if src := stage.Spec.Source.Registry; src != nil && src.Verify != nil {
		block, passed, err := run.r.signatureBlock(ctx, stage, digest, run.now)
		if err != nil {
			return nil, nil, err
		}
		verdict(GateSignature, asList(block), passed)
	}
	if policy := stage.Spec.Promotion; policy != nil && len(policy.Windows) > 0 {
		if breakGlass {
			results = append(results, stagecoachv1.GateResult{Gate: plan.GateWindow, Passed: true, Message: "passed with break-glass"})
		} else {
			verdict(plan.GateWindow, asList(plan.WindowBlock(policy.Windows, run.now)), "inside the promotion windows")
		}
	}
	if policy := stage.Spec.Promotion; policy != nil && policy.Approvals != nil && policy.Approvals.Required > 0 {
		block, err := run.approvalBlock(ctx, digest)
		if err != nil {
			return nil, nil, err
		}
		verdict(plan.GateApprovals, asList(block), fmt.Sprintf("approved by %d", policy.Approvals.Required))
	}
	if len(stage.Spec.DependsOn) > 0 {
		others := map[types.NamespacedName]*stagecoachv1.Stage{}
		for _, d := range stage.Spec.DependsOn {
			key := plan.DependencyKey(stage, d)
			other := &stagecoachv1.Stage{}
			if err := run.r.Get(ctx, key, other); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return nil, nil, fmt.Errorf("failed to read Stage %s that Stage %q depends on: %w", key, stage.Name, err)
			}
			others[key] = other
		}
		verdict(plan.GateDependsOn, plan.DependsOnBlocks(stage, others, matchVersion), "every dependency is Verified at a matching version")
	}
	return blocks, results, nil
}

// approvalBlock counts the Approvals of digest, leaving out whoever promoted it by hand here or
// in the upstream Stage.
func (run *promotionRun) approvalBlock(ctx context.Context, digest string) (*stagecoachv1.GateBlock, error) {
	stage := run.stage
	var approvals stagecoachv1.ApprovalList
	if err := run.r.List(ctx, &approvals, client.InNamespace(stage.Namespace),
		client.MatchingFields{approvalStageIndexKey: stage.Name}); err != nil {
		return nil, fmt.Errorf("failed to list the Approvals of Stage %q: %w", stage.Name, err)
	}
	promoters := plan.Promoters(digest, run.promotions)
	if up := stage.Spec.Source.Upstream; up != nil {
		ns := up.Namespace
		if ns == "" {
			ns = stage.Namespace
		}
		var upstream stagecoachv1.PromotionList
		if err := run.r.List(ctx, &upstream, client.InNamespace(ns), client.MatchingFields{promotionStageIndexKey: up.Stage}); err != nil {
			return nil, fmt.Errorf("failed to list the Promotions of upstream Stage %s/%s: %w", ns, up.Stage, err)
		}
		promoters = append(promoters, plan.Promoters(digest, upstream.Items)...)
	}
	return plan.ApprovalBlock(stage, digest, approvals.Items, promoters), nil
}

func asList(b *stagecoachv1.GateBlock) []stagecoachv1.GateBlock {
	if b == nil {
		return nil
	}
	return []stagecoachv1.GateBlock{*b}
}

// matchVersion reports whether a version (a tag such as v1.2.3) meets a semver constraint.
func matchVersion(constraint, version string) (bool, error) {
	c, err := semver.ParseConstraint(constraint)
	if err != nil {
		return false, err
	}
	v, err := semver.Parse(version)
	if err != nil {
		return false, fmt.Errorf("version %q is not semver: %w", version, err)
	}
	return c.Check(v), nil
}
