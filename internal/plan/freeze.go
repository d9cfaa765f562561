package plan

// Every rule about what freezes a Stage is here: Freeze objects (which hold it, until when, and
// the condition that says so), a Stage frozen by a foreign write or a Freeze Promotion (the freeze
// gate of Chain), and how both hold a Promotion about to start (Admit).

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// ActiveFreezes returns the Freezes holding the Stage now: in the Stage's namespace (or, with a
// namespaceSelector, in every namespace it selects, but only from clusterNamespace: anyone who
// may create Freezes in their own namespace must not freeze everyone else's), selecting the
// Stage's labels (all Stages when the selector is empty), and not past their until. A selector
// that does not parse holds the Stage too: a broken Freeze must not let a release through.
func ActiveFreezes(stage *stagecoachv1.Stage, namespaceLabels map[string]string, freezes []stagecoachv1.Freeze, clusterNamespace string, now time.Time) []stagecoachv1.Freeze {
	var active []stagecoachv1.Freeze
	for _, f := range freezes {
		if f.DeletionTimestamp != nil || (f.Spec.Until != nil && !now.Before(f.Spec.Until.Time)) {
			continue
		}
		if f.Spec.NamespaceSelector == nil {
			if f.Namespace != stage.Namespace {
				continue
			}
		} else if f.Namespace != clusterNamespace || !selects(f.Spec.NamespaceSelector, namespaceLabels) {
			continue
		}
		if selects(f.Spec.Selector, stage.Labels) {
			active = append(active, f)
		}
	}
	return active
}

func selects(selector *metav1.LabelSelector, set map[string]string) bool {
	if selector == nil {
		return true
	}
	s, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return true
	}
	return s.Matches(labels.Set(set))
}

// DescribeFreeze names a Freeze for people: which one, why, until when.
func describeFreeze(f stagecoachv1.Freeze) string {
	until := "until it is deleted"
	if f.Spec.Until != nil {
		until = "until " + f.Spec.Until.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("Freeze %s/%s (%s) holds it %s", f.Namespace, f.Name, f.Spec.Reason, until)
}

// FreezeBlocks turns active Freezes into blockedBy entries.
func FreezeBlocks(freezes []stagecoachv1.Freeze) []stagecoachv1.GateBlock {
	var blocks []stagecoachv1.GateBlock
	for _, f := range freezes {
		blocks = append(blocks, stagecoachv1.GateBlock{Gate: stagecoachv1.GateFreeze, Reason: stagecoachv1.ReasonFrozen, Message: describeFreeze(f), Until: f.Spec.Until})
	}
	return blocks
}

// StageFrozen is the Stage's Frozen condition when a foreign write or a Freeze Promotion froze it
// (only an Unfreeze ends that); nil when it is not frozen, or only Freeze objects hold it (those
// are asked through ActiveFreezes, and end by themselves).
func stageFrozen(stage *stagecoachv1.Stage) *metav1.Condition {
	c := meta.FindStatusCondition(stage.Status.Conditions, stagecoachv1.ConditionFrozen)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason == stagecoachv1.ReasonFrozen {
		return nil
	}
	return c
}

// FrozenByFreezes is the Stage's Frozen condition while Freeze objects hold it: True naming them
// and when each ends, or False once none does; nil when it should stay as it is (a foreign
// write's or a Freeze Promotion's freeze comes first, and a Stage no Freeze ever held has none).
func FrozenByFreezes(stage *stagecoachv1.Stage, freezes []stagecoachv1.Freeze) *metav1.Condition {
	current := meta.FindStatusCondition(stage.Status.Conditions, stagecoachv1.ConditionFrozen)
	if stageFrozen(stage) != nil {
		return nil
	}
	if len(freezes) == 0 {
		if current == nil || current.Reason != stagecoachv1.ReasonFrozen {
			return nil
		}
		return &metav1.Condition{Type: stagecoachv1.ConditionFrozen, Status: metav1.ConditionFalse, Reason: stagecoachv1.ReasonUnfrozen,
			Message: "no Freeze holds the Stage any more"}
	}
	held := make([]string, 0, len(freezes))
	for _, f := range freezes {
		held = append(held, describeFreeze(f))
	}
	return &metav1.Condition{Type: stagecoachv1.ConditionFrozen, Status: metav1.ConditionTrue, Reason: stagecoachv1.ReasonFrozen,
		Message: strings.Join(held, "; ")}
}

// decideStageFrozen: the Stage's own Frozen condition (a foreign write, a Freeze Promotion); the
// Freeze objects holding it are listed by CandidateBlocks (FreezeBlocks) and Admit (waitForFreezes).
func decideStageFrozen(in GateInputs) ([]stagecoachv1.GateBlock, string) {
	frozen := stageFrozen(in.Stage)
	if frozen == nil {
		return nil, "not frozen"
	}
	return []stagecoachv1.GateBlock{{Gate: stagecoachv1.GateFreeze, Reason: frozen.Reason, Message: frozen.Message}}, ""
}

// waitForFrozenStage is why a Promotion waits on a Stage a foreign write or a Freeze Promotion
// froze ("" when it may go: not frozen so, or break-glass).
func waitForFrozenStage(stage *stagecoachv1.Stage, p *stagecoachv1.Promotion) string {
	if frozen := stageFrozen(stage); frozen != nil && !p.Spec.BreakGlass {
		return "waiting: Stage " + stage.Name + " is frozen (" + frozen.Message + "); an Unfreeze Promotion or break-glass lets it start"
	}
	return ""
}

// waitForFreezes is why a Promotion waits on the Freezes holding its Stage ("" when it may go),
// and what break-glass let it pass. A rollback returns to what was verified: a Freeze that holds
// changes does not hold it.
func waitForFreezes(p *stagecoachv1.Promotion, freezes []stagecoachv1.Freeze) (wait, breakGlass string) {
	if len(freezes) == 0 || p.Spec.Action == stagecoachv1.ActionRollback {
		return "", ""
	}
	held := describeFreeze(freezes[0])
	if !p.Spec.BreakGlass {
		return "waiting: " + held + "; a break-glass Promotion may start", ""
	}
	return "", "started with break-glass although " + held
}
