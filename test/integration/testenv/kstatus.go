package testenv

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// StageConforms checks what kstatus and `kubectl wait` rely on in a reconciled Stage's status:
// each condition type at most once, every condition and status.observedGeneration current, and
// a Ready condition present. It returns nil when all hold, so suites can call it inside
// Eventually or after it.
func StageConforms(stage *stagecoachv1.Stage) error {
	if stage.Status.ObservedGeneration != stage.Generation {
		return fmt.Errorf("Stage %s/%s: status.observedGeneration %d, generation %d", stage.Namespace, stage.Name,
			stage.Status.ObservedGeneration, stage.Generation)
	}
	return conditionsConform(fmt.Sprintf("Stage %s/%s", stage.Namespace, stage.Name), stage.Generation, stage.Status.Conditions)
}

func conditionsConform(what string, generation int64, conditions []metav1.Condition) error {
	seen := map[string]bool{}
	for _, c := range conditions {
		if seen[c.Type] {
			return fmt.Errorf("%s: condition %s appears more than once", what, c.Type)
		}
		seen[c.Type] = true
		if c.ObservedGeneration != generation {
			return fmt.Errorf("%s: condition %s has observedGeneration %d, generation is %d", what, c.Type, c.ObservedGeneration, generation)
		}
		if c.Reason == "" {
			return fmt.Errorf("%s: condition %s has no reason", what, c.Type)
		}
	}
	if meta.FindStatusCondition(conditions, stagecoachv1.ConditionReady) == nil {
		return fmt.Errorf("%s: no Ready condition", what)
	}
	return nil
}
