package plan

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// Explain says, for people, what a Stage runs, what it is doing, and why nothing else moves:
// the same facts the reconciler decided from, as lines of text.
func Explain(stage *stagecoachv1.Stage, promotions []stagecoachv1.Promotion, now time.Time) []string {
	lines := []string{fmt.Sprintf("%s/%s (%s, %s)", stage.Namespace, stage.Name, stage.Spec.Service, stage.Spec.Environment)}
	add := func(format string, args ...any) { lines = append(lines, "  "+fmt.Sprintf(format, args...)) }

	if ready := meta.FindStatusCondition(stage.Status.Conditions, stagecoachv1.ConditionReady); ready == nil {
		add("not reconciled yet")
	} else if ready.Status != metav1.ConditionTrue {
		add("not ready: %s: %s", ready.Reason, ready.Message)
	}
	if cur := stage.Status.Current; cur != nil {
		verified := ""
		if cur.VerifiedAt != nil {
			verified = fmt.Sprintf(", verified %s ago", now.Sub(cur.VerifiedAt.Time).Round(time.Second))
		}
		add("runs:      %s%s", describeVersion(cur.Version, cur.Digest), verified)
	} else {
		add("runs:      nothing verified yet")
	}
	q := Queue(promotions)
	if p := q.Running; p != nil && p.Status.Version != nil {
		add("promoting: Promotion %s applies %s: %s", p.Name, describeVersion(p.Status.Version.Tag, p.Status.Version.Digest), p.Status.Message)
	}
	if p := q.Next; p != nil {
		add("waiting:   Promotion %s (%s): %s", p.Name, p.Spec.Action, orDash(p.Status.Message))
	}
	if frozen := meta.FindStatusCondition(stage.Status.Conditions, stagecoachv1.ConditionFrozen); frozen != nil && frozen.Status == metav1.ConditionTrue {
		add("frozen:    %s", frozen.Message)
	}
	if h := stage.Status.Hold; h != nil {
		add("held:      %s", h.Message)
	}
	if c := stage.Status.Candidate; c != nil {
		if c.Digest != "" {
			add("candidate: %s", describeVersion(c.Version, c.Digest))
		}
		blocks := append([]stagecoachv1.GateBlock(nil), c.BlockedBy...)
		sort.SliceStable(blocks, func(i, j int) bool { return blocks[i].Gate < blocks[j].Gate })
		for _, b := range blocks {
			until := ""
			if b.Until != nil {
				until = fmt.Sprintf(" (opens in %s)", b.Until.Sub(now).Round(time.Second))
			}
			add("  blocked by %s: %s%s", b.Gate, b.Message, until)
		}
	} else if q.Running == nil && q.Next == nil {
		add("nothing to do: the source offers nothing newer")
	}
	return lines
}

func describeVersion(tag, digest string) string {
	short := strings.TrimPrefix(digest, "sha256:")
	if len(short) > 12 {
		short = short[:12]
	}
	if tag == "" {
		return "sha256:" + short
	}
	return tag + " (sha256:" + short + ")"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
