package cli

import (
	"context"
	"fmt"
	"sort"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
)

// StagePlan is one Stage as `stagecoach plan` and the HTTP API show it: the Stage, the
// Explanation the reconciler's decision code gives of it, and its Promotions, newest first.
type StagePlan struct {
	Stage       *stagecoachv1.Stage
	Explanation plan.Explanation
	Promotions  []stagecoachv1.Promotion
}

// ExplainStages explains each Stage, in the order given, with the Promotions of each.
func ExplainStages(ctx context.Context, c client.Reader, stages []stagecoachv1.Stage, now time.Time) ([]StagePlan, error) {
	byStage := map[string][]stagecoachv1.Promotion{}
	var list stagecoachv1.PromotionList
	if err := c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("failed to list Promotions: %w", err)
	}
	for _, p := range list.Items {
		key := p.Namespace + "/" + p.Spec.Stage
		byStage[key] = append(byStage[key], p)
	}
	plans := make([]StagePlan, 0, len(stages))
	for i := range stages {
		s := &stages[i]
		promotions := byStage[s.Namespace+"/"+s.Name]
		e := plan.Explain(s, promotions, now)
		newest := append([]stagecoachv1.Promotion(nil), promotions...)
		sort.SliceStable(newest, func(i, j int) bool {
			a, b := newest[i].CreationTimestamp, newest[j].CreationTimestamp
			if !a.Equal(&b) {
				return b.Before(&a)
			}
			return newest[i].Name > newest[j].Name
		})
		plans = append(plans, StagePlan{Stage: s, Explanation: e, Promotions: newest})
	}
	return plans, nil
}

// Pipeline explains every Stage of a service, across namespaces, in promotion order: a Stage
// comes after the upstream Stage it takes its versions from (Stages of equal depth by
// namespace/name). It returns no Stages, and no error, when the service has none.
func Pipeline(ctx context.Context, c client.Reader, service string, now time.Time) ([]StagePlan, error) {
	var list stagecoachv1.StageList
	if err := c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("failed to list Stages: %w", err)
	}
	var stages []stagecoachv1.Stage
	for _, s := range list.Items {
		if s.Spec.Service == service {
			stages = append(stages, s)
		}
	}
	return ExplainStages(ctx, c, PromotionOrder(stages), now)
}

// PromotionOrder sorts Stages upstream first: by how many upstream Stages of the list lie
// before each one, then by namespace/name. A cycle (which the Stages' own conditions report)
// does not loop: a Stage met again counts no further.
func PromotionOrder(stages []stagecoachv1.Stage) []stagecoachv1.Stage {
	index := map[string]int{}
	for i, s := range stages {
		index[s.Namespace+"/"+s.Name] = i
	}
	depth := make([]int, len(stages))
	for i := range stages {
		seen := map[int]bool{i: true}
		for cur := i; ; {
			up, ok := stages[cur].UpstreamKey()
			if !ok {
				break
			}
			next, ok := index[up.String()]
			if !ok || seen[next] {
				break
			}
			seen[next] = true
			depth[i]++
			cur = next
		}
	}
	order := make([]int, len(stages))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		i, j := order[a], order[b]
		if depth[i] != depth[j] {
			return depth[i] < depth[j]
		}
		return stages[i].Namespace+"/"+stages[i].Name < stages[j].Namespace+"/"+stages[j].Name
	})
	out := make([]stagecoachv1.Stage, len(stages))
	for k, i := range order {
		out[k] = stages[i]
	}
	return out
}
