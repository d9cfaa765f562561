package plan

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// stageMissingPrefix starts the message of a Promotion whose Stage does not exist (yet).
const stageMissingPrefix = "waiting: Stage "

// Orphaned decides what becomes of an unfinished Promotion whose Stage does not exist: one that
// never started with it waits for it, saying so (it proceeds once the Stage appears); one the
// Stage had started or queued is Aborted, since the Stage was deleted under it. It returns the
// phase and the message, and false when the Promotion already says so.
func Orphaned(p *stagecoachv1.Promotion, stage types.NamespacedName) (stagecoachv1.Phase, string, bool) {
	if IsFinished(p) {
		return "", "", false
	}
	missing := fmt.Sprintf("%s%s does not exist: create it, or delete this Promotion and create one naming an existing Stage in spec.stage", stageMissingPrefix, stage)
	known := p.Status.Phase == "" || strings.HasPrefix(p.Status.Message, stageMissingPrefix) && strings.Contains(p.Status.Message, " does not exist")
	if known {
		if p.Status.Phase == stagecoachv1.PhasePending && p.Status.Message == missing {
			return "", "", false
		}
		return stagecoachv1.PhasePending, missing, true
	}
	return stagecoachv1.PhaseAborted, fmt.Sprintf("aborted: Stage %s was deleted while this Promotion was %s", stage, strings.ToLower(string(p.Status.Phase))), true
}
