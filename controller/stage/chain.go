package stage

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/applier"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
)

// The Stages a Stage follows, read for its own reconcile: the chain of upstreams to the registry
// its versions come from, and the Stages it depends on.

// repositoryOf is the OCI repository the Stage's generic applier renders ({{ .Repository }},
// {{ .Image }}): one the Stage's own spec names, its registry source's or
// spec.source.upstream.repository, never the head of its upstream chain's, which whoever may edit
// that Stage chose. problem says why it cannot be used: the head offers versions of another
// repository. "" when the Stage names none.
func (r *Reconciler) repositoryOf(ctx context.Context, stage *stagecoachv1.Stage) (repo, problem string) {
	src := stage.Spec.Source
	switch {
	case src.Registry != nil:
		return src.Registry.Repository, ""
	case src.Upstream == nil || src.Upstream.Repository == "":
		return "", ""
	}
	own := src.Upstream.Repository
	if head := r.charts().Head(ctx, stage); head != nil && !applier.SameRepository(head.Spec.Source.Registry.Repository, own) {
		return own, fmt.Sprintf("Stage '%s' renders %s (spec.source.upstream.repository), but the head of its upstream chain, Stage '%s/%s', offers versions of %s: "+
			"those digests are not in the repository this Stage accepts. Point spec.source.upstream.repository at %s if you accept it, or the upstream Stage's source back at %s",
			stage.Name, own, head.Namespace, head.Name, head.Spec.Source.Registry.Repository, head.Spec.Source.Registry.Repository, own)
	}
	return own, ""
}

// versionKindOf is the kind of version the Stage's source offers: its own source's, or that of
// the head of its upstream chain (up to 16 hops); known is false when the chain cannot be read.
func (r *Reconciler) versionKindOf(ctx context.Context, stage *stagecoachv1.Stage) (kind applier.VersionKind, known bool) {
	cur := stage
	for range 16 {
		switch src := cur.Spec.Source; {
		case src.Git != nil, src.UpstreamRecords != nil && src.UpstreamRecords.GitRepository != nil:
			return applier.GitCommits, true
		case src.Registry != nil, src.UpstreamRecords != nil:
			return applier.OCIDigests, true
		}
		up, ok := cur.UpstreamKey()
		if !ok {
			return "", false
		}
		next := &stagecoachv1.Stage{}
		if err := r.Get(ctx, up, next); err != nil {
			return "", false
		}
		cur = next
	}
	return "", false
}

// checkDependencyCycle refuses a Stage whose spec.dependsOn leads back to itself: it could never
// promote, and a person must change a spec.
func (r *Reconciler) checkDependencyCycle(ctx context.Context, stage *stagecoachv1.Stage, v *applierVerdict) error {
	var stages stagecoachv1.StageList
	if err := r.List(ctx, &stages); err != nil {
		return fmt.Errorf("failed to list Stages to check the dependencies of Stage %q: %w", stage.Name, err)
	}
	all := make(map[types.NamespacedName]*stagecoachv1.Stage, len(stages.Items))
	for i := range stages.Items {
		s := &stages.Items[i]
		all[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = s
	}
	all[types.NamespacedName{Namespace: stage.Namespace, Name: stage.Name}] = stage
	if cycle := plan.DependencyCycle(stage, all); cycle != "" {
		v.ready, v.reason, v.stalled = false, stagecoachv1.ReasonDependencyCycle, true
		v.message = fmt.Sprintf("Stage %s depends on itself through spec.dependsOn (%s), so it could never promote: remove one of these dependencies", stage.Name, cycle)
	}
	return nil
}
