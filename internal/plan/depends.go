package plan

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// VersionMatcher reports whether a version meets a semver constraint.
type VersionMatcher func(constraint, version string) (bool, error)

// Dependency is a Stage spec.dependsOn names, as read live (never from a cache that may lag), with
// what is moving on it.
type Dependency struct {
	Stage *stagecoachv1.Stage
	// Moving names a Promotion of the dependency that has not finished (Pending, Waiting or
	// Running), "" when none: a base that is still changing does not count as a base.
	Moving string
}

// DependsOnBlocks lists every dependency not met, each with reason DependencyNotReady and a
// message saying which and why. A dependency counts only when it is Verified at a version meeting
// the constraint and settled: its status is up to date with its spec, no Promotion of it is
// unfinished and it is not promoting anything newer.
func dependsOnBlocks(stage *stagecoachv1.Stage, deps map[types.NamespacedName]Dependency, matches VersionMatcher) []stagecoachv1.GateBlock {
	var blocks []stagecoachv1.GateBlock
	for _, d := range stage.Spec.DependsOn {
		key := stage.DependencyKey(d)
		block := func(format string, args ...any) {
			blocks = append(blocks, stagecoachv1.GateBlock{Gate: stagecoachv1.GateDependsOn, Reason: stagecoachv1.ReasonDependencyNotReady,
				Message: fmt.Sprintf("depends on Stage %s: ", key) + fmt.Sprintf(format, args...)})
		}
		dep, ok := deps[key]
		other := dep.Stage
		if !ok || other == nil {
			block("missing: it does not exist; create it or fix spec.dependsOn")
			continue
		}
		if other.Status.ObservedGeneration != other.Generation {
			block("not settled: its status does not yet reflect generation %d of its spec", other.Generation)
			continue
		}
		if dep.Moving != "" {
			block("still promoting: %s has not finished", dep.Moving)
			continue
		}
		if c := meta.FindStatusCondition(other.Status.Conditions, stagecoachv1.ConditionPromoting); c != nil && c.Status != metav1.ConditionFalse {
			block("still promoting: %s", c.Message)
			continue
		}
		verified := meta.FindStatusCondition(other.Status.Conditions, stagecoachv1.ConditionVerified)
		cur := other.Status.Current
		if verified == nil || verified.Status != metav1.ConditionTrue || cur == nil || cur.VerifiedAt == nil {
			block("not verified: it has no Verified version yet")
			continue
		}
		if d.Version == "" {
			continue
		}
		ok, err := matches(d.Version, cur.Version)
		switch {
		case err != nil:
			block("version unreadable: cannot compare its version %q with %q: %v", cur.Version, d.Version, err)
		case !ok:
			block("too old: it runs %s, which does not meet %q", cur.Version, d.Version)
		}
	}
	return blocks
}

// DependencyCycle returns the cycle of spec.dependsOn that leads from the Stage back to itself
// (as "a -> b -> a"), "" when there is none. stages holds every Stage by key; a dependency that is
// missing ends its path.
func DependencyCycle(stage *stagecoachv1.Stage, stages map[types.NamespacedName]*stagecoachv1.Stage) string {
	start := types.NamespacedName{Namespace: stage.Namespace, Name: stage.Name}
	visited := map[types.NamespacedName]bool{}
	var path []types.NamespacedName
	var walk func(s *stagecoachv1.Stage) bool
	walk = func(s *stagecoachv1.Stage) bool {
		next := make([]types.NamespacedName, 0, len(s.Spec.DependsOn))
		for _, d := range s.Spec.DependsOn {
			next = append(next, s.DependencyKey(d))
		}
		sort.Slice(next, func(i, j int) bool { return next[i].String() < next[j].String() })
		for _, key := range next {
			if key == start {
				path = append(path, key)
				return true
			}
			if visited[key] {
				continue
			}
			visited[key] = true
			other := stages[key]
			if other == nil {
				continue
			}
			path = append(path, key)
			if walk(other) {
				return true
			}
			path = path[:len(path)-1]
		}
		return false
	}
	path = append(path, start)
	if !walk(stage) {
		return ""
	}
	names := make([]string, len(path))
	for i, k := range path {
		names[i] = k.String()
	}
	return strings.Join(names, " -> ")
}
