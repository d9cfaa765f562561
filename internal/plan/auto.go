package plan

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// Candidate is a version a Stage's source offers.
type Candidate struct {
	Digest string
	Tag    string
	// VerifiedAt is when the upstream verified it (for soak).
	VerifiedAt *metav1.Time
	// FirstSeen is when a registry source first offered it at this digest (for soak, when there
	// is no upstream verification).
	FirstSeen *metav1.Time
	// Title is a commit's subject line (git sources), for people.
	Title string
}

// Version is the candidate as a version reference.
func (c *Candidate) Version() *stagecoachv1.VersionReference {
	return &stagecoachv1.VersionReference{Digest: c.Digest, Tag: c.Tag}
}

func decideHistory(in GateInputs) ([]stagecoachv1.GateBlock, string) {
	if !slices.Contains(in.Stage.Status.FailedDigests, in.Digest) {
		return nil, "never failed here"
	}
	return []stagecoachv1.GateBlock{{Gate: stagecoachv1.GateHistory, Reason: stagecoachv1.ReasonPromotionFailed,
		Message: fmt.Sprintf("%s failed in this Stage before; automation never offers it again (a person may still promote it)", in.Digest)}}, ""
}

func decideSuspend(in GateInputs) ([]stagecoachv1.GateBlock, string) {
	if !in.Stage.Spec.Suspend {
		return nil, "not suspended"
	}
	return []stagecoachv1.GateBlock{{Gate: stagecoachv1.GateSuspend, Reason: stagecoachv1.ReasonSuspended,
		Message: "the Stage is suspended: set spec.suspend to false"}}, ""
}

func decideHold(in GateInputs) ([]stagecoachv1.GateBlock, string) {
	h := in.Stage.Status.Hold
	if h == nil {
		return nil, "no hold"
	}
	return []stagecoachv1.GateBlock{{Gate: stagecoachv1.GateHold, Reason: h.Reason, Message: h.Message}}, ""
}

// decideMediated: automation would vouch for a version while something else decides what runs,
// so it waits; a promote passes, noting it.
func decideMediated(in GateInputs) ([]stagecoachv1.GateBlock, string) {
	m := meta.FindStatusCondition(in.Stage.Status.Conditions, stagecoachv1.ConditionMediated)
	if in.Automated {
		return []stagecoachv1.GateBlock{{Gate: stagecoachv1.GateMediated, Reason: m.Reason, Message: fmt.Sprintf(
			"%s; automation does not promote until only the digest decides what runs (a person may still promote)", m.Message)}}, ""
	}
	return nil, m.Message + "; this Promotion runs, but the digest alone does not decide what runs (automation waits until it does)"
}

func decideSoak(in GateInputs) ([]stagecoachv1.GateBlock, string) {
	policy, c := in.Stage.Spec.Promotion, in.Candidate
	if c == nil || policy == nil || policy.Soak == nil {
		return nil, "no soak asked"
	}
	since, what := c.VerifiedAt, "verified upstream"
	if since == nil {
		since, what = c.FirstSeen, "first seen in the registry"
	}
	if since == nil {
		return nil, "no soak asked"
	}
	opens := since.Add(policy.Soak.Duration)
	if !in.Now.Before(opens) {
		return nil, fmt.Sprintf("%s %s ago", what, in.Now.Sub(since.Time).Round(time.Second))
	}
	until := metav1.NewTime(opens)
	return []stagecoachv1.GateBlock{{Gate: stagecoachv1.GateSoak, Reason: stagecoachv1.ReasonSoaking, Until: &until,
		Message: fmt.Sprintf("%s %s ago; the Stage asks for %s", what, in.Now.Sub(since.Time).Round(time.Second), policy.Soak.Duration)}}, ""
}

func decideAuto(in GateInputs) ([]stagecoachv1.GateBlock, string) {
	if p := in.Stage.Spec.Promotion; p != nil && p.Auto {
		return nil, "automatic promotion is on"
	}
	return []stagecoachv1.GateBlock{{Gate: stagecoachv1.GateAuto, Reason: stagecoachv1.ReasonManual,
		Message: "automatic promotion is off for this Stage: create a Promotion to promote it"}}, ""
}

// AutoPromote decides whether automation promotes the candidate now, and otherwise lists every
// automation gate that holds it back. It returns false with no blocks when there is nothing to do
// (no candidate, already running it, or already tried).
func autoPromote(stage *stagecoachv1.Stage, c *Candidate, promotions []stagecoachv1.Promotion, now time.Time) (bool, []stagecoachv1.GateBlock) {
	if !IsNew(stage, c, promotions) {
		return false, nil
	}
	blocks := AutomationBlocks(stage, c, now)
	return len(blocks) == 0, blocks
}

// AutomationBlocks runs the automation gates on a candidate: what holds it back from automatic
// promotion (a person's Promotion passes these).
func AutomationBlocks(stage *stagecoachv1.Stage, c *Candidate, now time.Time) []stagecoachv1.GateBlock {
	in := GateInputs{Stage: stage, Now: now, Candidate: c, Automated: true}
	if c != nil {
		in.Digest = c.Digest
	}
	blocks, _ := RunGates(AutomationGates, in)
	return blocks
}

// IsNew reports whether the candidate is something automation has not done with: not what runs,
// and never promoted here automatically or by hand, unless it failed (then the history gate says
// so). A Promotion stopped before it wrote anything (Aborted without appliedAt: a freeze of the
// Stage, such as a foreign write, stopped it, not the version) and followed by an Unfreeze did not
// try the version: after the Unfreeze automation offers it again, as the docs promise.
func IsNew(stage *stagecoachv1.Stage, c *Candidate, promotions []stagecoachv1.Promotion) bool {
	if c == nil || (stage.Status.Current != nil && stage.Status.Current.Digest == c.Digest) {
		return false
	}
	if slices.Contains(stage.Status.FailedDigests, c.Digest) {
		return true
	}
	unfrozen := lastUnfreeze(promotions)
	for i := range promotions {
		p := &promotions[i]
		if p.Spec.Action != stagecoachv1.ActionPromote || p.Spec.Version == nil || p.Spec.Version.Digest != c.Digest {
			continue
		}
		if p.Status.Phase == stagecoachv1.PhaseAborted && p.Status.AppliedAt == nil && p.Status.FinishedAt != nil &&
			unfrozen != nil && !unfrozen.Before(p.Status.FinishedAt) {
			continue // stopped by a freeze a person has since lifted
		}
		return false // tried (or trying) already: never twice automatically
	}
	return true
}

// lastUnfreeze is when the newest Unfreeze of the Stage succeeded (nil: none).
func lastUnfreeze(promotions []stagecoachv1.Promotion) *metav1.Time {
	var last *metav1.Time
	for i := range promotions {
		p := &promotions[i]
		if p.Spec.Action == stagecoachv1.ActionUnfreeze && p.Status.Phase == stagecoachv1.PhaseSucceeded && p.Status.FinishedAt != nil &&
			(last == nil || last.Before(p.Status.FinishedAt)) {
			last = p.Status.FinishedAt
		}
	}
	return last
}

// CandidateBlocks is everything that holds a new candidate back: the automation gates, the
// promote gates (see PromoteGates) and the Freezes holding the Stage. Automation promotes it
// when there is none.
func CandidateBlocks(automation, promote []stagecoachv1.GateBlock, freezes []stagecoachv1.Freeze) []stagecoachv1.GateBlock {
	return slices.Concat(automation, promote, FreezeBlocks(freezes))
}

// BlocksEnd is how long until the first gate with a known end opens (0 when none will by itself).
func BlocksEnd(blocks []stagecoachv1.GateBlock, now time.Time) time.Duration {
	var soonest time.Duration
	for _, b := range blocks {
		if b.Until != nil {
			if d := b.Until.Sub(now); d > 0 && (soonest == 0 || d < soonest) {
				soonest = d
			}
		}
	}
	return soonest
}

// Soonest is the smaller of two requeue delays, where 0 means none.
func Soonest(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// SourceUnreadable is the block of a candidate whose source cannot be used at all (the registry
// or Git server does not answer, refuses the credentials, or has no such repository or branch;
// the branch was rewritten; the author may not use the credentials; the upstream Stage is
// missing; the source kind is not built; the verification keys cannot be read): the Stage then
// cannot do its job and says so in Ready, not only in status.candidate. Nil otherwise.
func SourceUnreadable(c *stagecoachv1.CandidateVersion) *stagecoachv1.GateBlock {
	if c == nil {
		return nil
	}
	for i, b := range c.BlockedBy {
		switch {
		case (b.Gate == stagecoachv1.GateSignature || b.Gate == stagecoachv1.GateAttestations) &&
			(b.Reason == stagecoachv1.ReasonKeysUnreadable || b.Reason == stagecoachv1.ReasonConditionInvalid):
			// No version can pass without the verification keys, or with a condition that cannot run.
			return &c.BlockedBy[i]
		case c.Digest != "" || b.Gate != stagecoachv1.GateSource:
		case b.Reason == stagecoachv1.ReasonRegistryUnreachable, b.Reason == stagecoachv1.ReasonRegistryUnauthorized,
			b.Reason == stagecoachv1.ReasonRepositoryNotFound, b.Reason == stagecoachv1.ReasonCredentialsUnreadable,
			b.Reason == stagecoachv1.ReasonSourceNotSupported, b.Reason == stagecoachv1.ReasonSourceInvalid,
			b.Reason == stagecoachv1.ReasonUpstreamUnreadable,
			// A Git source that cannot be fetched, or whose credentials its author may not use.
			b.Reason == stagecoachv1.ReasonGitUnreachable, b.Reason == stagecoachv1.ReasonGitUnauthorized,
			b.Reason == stagecoachv1.ReasonGitRefNotFound, b.Reason == stagecoachv1.ReasonSourceRewound,
			b.Reason == stagecoachv1.ReasonAuthorForbidden, b.Reason == stagecoachv1.ReasonAuthorMissing:
			return &c.BlockedBy[i]
		}
	}
	return nil
}
