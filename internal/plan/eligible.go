package plan

import (
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
//
// attestations, when the Stage requires some, judges them the same way after the signature.
func FirstEligible(stage *stagecoachv1.Stage, offered []Candidate, signature, attestations SignatureOf) (*Candidate, []stagecoachv1.SkippedVersion, error) {
	var skipped []stagecoachv1.SkippedVersion
	skip := func(c *Candidate, gate, reason, msg string) {
		if len(skipped) < maxSkipped {
			skipped = append(skipped, stagecoachv1.SkippedVersion{Version: c.Tag, Digest: c.Digest, Gate: gate, Reason: reason, Message: msg})
		}
	}
	for i := range offered {
		c := &offered[i]
		// The history gate of Chain, whose block is about the version itself.
		if held, _ := decideHistory(GateInputs{Stage: stage, Digest: c.Digest}); len(held) > 0 {
			skip(c, held[0].Gate, held[0].Reason, held[0].Message)
			continue
		}
		skips := false
		for _, gate := range []struct {
			name      string
			verdictOf SignatureOf
		}{{stagecoachv1.GateSignature, signature}, {stagecoachv1.GateAttestations, attestations}} {
			var err error
			if skips, err = skipsOn(stage, c, gate.name, gate.verdictOf, skip); err != nil {
				return nil, nil, err
			}
			if skips {
				break
			}
		}
		if skips {
			continue
		}
		return c, skipped, nil
	}
	return nil, skipped, nil
}

// skipsOn asks a verifier's gate about the candidate: true when the verdict is about the
// version itself (then it is skipped with that reason).
func skipsOn(stage *stagecoachv1.Stage, c *Candidate, gate string, verdictOf SignatureOf, skip func(*Candidate, string, string, string)) (bool, error) {
	if verdictOf == nil || !Asks(stage, gate) {
		return false, nil
	}
	v, err := verdictOf(c.Digest)
	if err != nil {
		return false, err
	}
	if b := UnsignedBlock(v); b != nil {
		skip(c, gate, b.Reason, b.Message)
		return true, nil
	}
	return false, nil
}

// UnsignedBlock is the verdict's block when it is about the version itself (no signature, or
// none from a trusted key for this digest), nil otherwise.
func UnsignedBlock(v *SignatureVerdict) *stagecoachv1.GateBlock {
	if v == nil || v.Block == nil {
		return nil
	}
	switch v.Block.Reason {
	case stagecoachv1.ReasonSignatureMissing, stagecoachv1.ReasonSignatureInvalid,
		stagecoachv1.ReasonAttestationMissing, stagecoachv1.ReasonAttestationRefused:
		return v.Block
	}
	return nil
}
