package plan

import (
	"fmt"
	"slices"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// MaxSkipped bounds status.candidate.skipped: the newest ones are what a person looks for.
const maxSkipped = 5

// SignatureOf verifies one digest for FirstEligible.
type SignatureOf func(digest string) (*SignatureVerdict, error)

// FirstEligible picks, from what a listing source offers (newest first), the newest version
// automation may take: one that did not fail in this Stage before and, when the Stage verifies
// signatures, that a trusted key signed. The newer ones it passes over are returned too, newest
// first, at most MaxSkipped. A signature that cannot be checked at all (keys or registry
// unreadable) says nothing about the version: that one stays the candidate, held by the gate,
// rather than automation falling back to an older version on a passing outage.
func FirstEligible(stage *stagecoachv1.Stage, offered []Candidate, signature SignatureOf) (*Candidate, []stagecoachv1.SkippedVersion, error) {
	var skipped []stagecoachv1.SkippedVersion
	skip := func(c *Candidate, gate, reason, msg string) {
		if len(skipped) < maxSkipped {
			skipped = append(skipped, stagecoachv1.SkippedVersion{Version: c.Tag, Digest: c.Digest, Gate: gate, Reason: reason, Message: msg})
		}
	}
	for i := range offered {
		c := &offered[i]
		if slices.Contains(stage.Status.FailedDigests, c.Digest) {
			skip(c, stagecoachv1.GateHistory, stagecoachv1.ReasonPromotionFailed,
				fmt.Sprintf("%s failed in this Stage before; automation never offers it again (a person may still promote it)", c.Digest))
			continue
		}
		if signature != nil && Asks(stage, stagecoachv1.GateSignature) {
			v, err := signature(c.Digest)
			if err != nil {
				return nil, nil, err
			}
			if b := UnsignedBlock(v); b != nil {
				skip(c, stagecoachv1.GateSignature, b.Reason, b.Message)
				continue
			}
		}
		return c, skipped, nil
	}
	return nil, skipped, nil
}

// UnsignedBlock is the verdict's block when it is about the version itself (no signature, or
// none from a trusted key for this digest), nil otherwise.
func UnsignedBlock(v *SignatureVerdict) *stagecoachv1.GateBlock {
	if v == nil || v.Block == nil {
		return nil
	}
	switch v.Block.Reason {
	case stagecoachv1.ReasonSignatureMissing, stagecoachv1.ReasonSignatureInvalid:
		return v.Block
	}
	return nil
}
