package plan

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// VersionMatcher reports whether a version meets a semver constraint.
type VersionMatcher func(constraint, version string) (bool, error)

// DependsOnBlocks lists every dependency not met: the other Stage (read into others; missing
// when absent) must be Verified at a version meeting the dependency's constraint.
func DependsOnBlocks(stage *stagecoachv1.Stage, others map[types.NamespacedName]*stagecoachv1.Stage, matches VersionMatcher) []stagecoachv1.GateBlock {
	var blocks []stagecoachv1.GateBlock
	for _, d := range stage.Spec.DependsOn {
		key := stage.DependencyKey(d)
		other := others[key]
		block := func(reason, format string, args ...any) {
			blocks = append(blocks, stagecoachv1.GateBlock{Gate: stagecoachv1.GateDependsOn, Reason: reason,
				Message: fmt.Sprintf("depends on Stage %s: ", key) + fmt.Sprintf(format, args...)})
		}
		if other == nil {
			block(stagecoachv1.ReasonDependencyMissing, "it does not exist; create it or fix spec.dependsOn")
			continue
		}
		verified := meta.FindStatusCondition(other.Status.Conditions, stagecoachv1.ConditionVerified)
		cur := other.Status.Current
		if verified == nil || verified.Status != metav1.ConditionTrue || cur == nil || cur.VerifiedAt == nil {
			block(stagecoachv1.ReasonDependencyNotVerified, "it has no Verified version yet")
			continue
		}
		if d.Version == "" {
			continue
		}
		ok, err := matches(d.Version, cur.Version)
		switch {
		case err != nil:
			block(stagecoachv1.ReasonDependencyVersionUnreadable, "cannot compare its version %q with %q: %v", cur.Version, d.Version, err)
		case !ok:
			block(stagecoachv1.ReasonDependencyVersionTooOld, "it runs %s, which does not meet %q", cur.Version, d.Version)
		}
	}
	return blocks
}
