// Package source defines what a Stage's source offers. Each kind of source (registry, upstream,
// records) lives in its own package beside this one and answers the same question: which
// versions are candidates now, newest first, with the evidence.
package source

import (
	"context"
	"time"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
)

// Offer is what a source offers a Stage now.
type Offer struct {
	// Candidates are the versions offered, newest first; automation takes the first.
	Candidates []plan.Candidate
	// Block says why the source offers nothing a person must know about (unreadable, nothing
	// eligible); nil when it simply has nothing newer.
	Block *stagecoachv1.GateBlock
	// Recheck is when to look at the source again without any event (0: on events only).
	Recheck time.Duration
}

// Newest is the candidate automation takes, or nil.
func (o Offer) Newest() *plan.Candidate {
	if len(o.Candidates) == 0 {
		return nil
	}
	return &o.Candidates[0]
}

// Source offers versions to the Stages that name it.
type Source interface {
	Offer(ctx context.Context, stage *stagecoachv1.Stage, now time.Time) (Offer, error)
}

// blockedRetryFirst is how soon a source looks again after its first blocked look.
const blockedRetryFirst = 5 * time.Second

// NextLook is how long after a look a source looks again by itself: its interval, or sooner
// while its looks are blocked (blocked counts them in a row): 5s after the first, doubling with
// each, never later than the interval. What blocks a source is usually fixed outside the Stage
// (a server back up, a Secret corrected, a branch pushed), and nothing reports that as an event:
// an hourly interval must not make a one-off failure last an hour.
func NextLook(interval time.Duration, blocked int) time.Duration {
	if blocked <= 0 {
		return interval
	}
	wait := blockedRetryFirst << min(blocked-1, 20)
	return min(wait, interval)
}
