package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// WaitOptions say how long to follow a Promotion and how often to look.
type WaitOptions struct {
	// Timeout ends the wait with an error; 10 minutes when zero.
	Timeout time.Duration
	// Interval between reads; one second when zero.
	Interval time.Duration
}

func (o WaitOptions) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return 10 * time.Minute
}

func (o WaitOptions) interval() time.Duration {
	if o.Interval > 0 {
		return o.Interval
	}
	return time.Second
}

// ErrNotVerified is wrapped by every error of a wait that ended without Verified.
var errNotVerified = errors.New("not verified")

// WaitForPromotion follows a Promotion until it ends, writing each step to progress as it
// happens (queued, gates, applied, landed with the engine's evidence, verified, or why it
// failed). It returns the Promotion as it ended, and an error unless it was verified (or, for
// Freeze and Unfreeze, succeeded).
func WaitForPromotion(ctx context.Context, c client.Reader, namespace, name string, opts WaitOptions, progress io.Writer) (*stagecoachv1.Promotion, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.timeout())
	defer cancel()
	var last *stagecoachv1.Promotion
	for {
		p := &stagecoachv1.Promotion{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, p); err != nil {
			if ctx.Err() != nil {
				return last, timedOut(opts, namespace, name, last)
			}
			return last, fmt.Errorf("failed to read Promotion %s/%s: %w", namespace, name, err)
		}
		for _, step := range Steps(last, p) {
			if _, err := fmt.Fprintln(progress, step); err != nil {
				return p, err
			}
		}
		last = p
		if done, err := Outcome(p); done {
			return p, err
		}
		select {
		case <-ctx.Done():
			return last, timedOut(opts, namespace, name, last)
		case <-time.After(opts.interval()):
		}
	}
}

func timedOut(opts WaitOptions, namespace, name string, last *stagecoachv1.Promotion) error {
	state := "it was never read"
	if last != nil {
		state = fmt.Sprintf("it is %s: %s", phaseOf(last), last.Status.Message)
	}
	return fmt.Errorf("%w: Promotion %s/%s did not finish within %s (%s); raise --timeout or look with stagecoach plan",
		errNotVerified, namespace, name, opts.timeout(), state)
}

func phaseOf(p *stagecoachv1.Promotion) stagecoachv1.Phase {
	if p.Status.Phase == "" {
		return stagecoachv1.PhasePending
	}
	return p.Status.Phase
}

// Outcome says whether a Promotion has ended and, if so, the error it ended with (nil when it
// did what was asked: a verified version, or a Freeze or Unfreeze done).
func Outcome(p *stagecoachv1.Promotion) (bool, error) {
	switch p.Status.Phase {
	case stagecoachv1.PhaseSucceeded:
		if p.Status.VerifiedAt != nil || p.Spec.Action == stagecoachv1.ActionFreeze || p.Spec.Action == stagecoachv1.ActionUnfreeze {
			return true, nil
		}
		return true, fmt.Errorf("%w: Promotion %s/%s succeeded without verifying a version: %s", errNotVerified, p.Namespace, p.Name, p.Status.Message)
	case stagecoachv1.PhaseFailed, stagecoachv1.PhaseRolledBack, stagecoachv1.PhaseAborted:
		return true, fmt.Errorf("%w: Promotion %s/%s %s: %s", errNotVerified, p.Namespace, p.Name, ended(p.Status.Phase), p.Status.Message)
	}
	return false, nil
}

// ended says how a Promotion ended, in words.
func ended(phase stagecoachv1.Phase) string {
	switch phase {
	case stagecoachv1.PhaseRolledBack:
		return "failed and was rolled back"
	case stagecoachv1.PhaseAborted:
		return "was aborted"
	}
	return strings.ToLower(string(phase))
}

// Steps are the lines that say what changed from before (nil: first read) to now.
func Steps(before, now *stagecoachv1.Promotion) []string {
	if before == nil {
		before = &stagecoachv1.Promotion{}
	}
	b, n := before.Status, now.Status
	var steps []string
	if n.StartedAt == nil && phaseOf(now) == stagecoachv1.PhasePending && (before.Name == "" || b.Message != n.Message) {
		msg := n.Message
		if msg == "" {
			msg = "waiting for the controller"
		}
		steps = append(steps, "queued: "+msg)
	}
	if b.StartedAt == nil && n.StartedAt != nil {
		steps = append(steps, "gates: "+gateSummary(n.Gates))
	}
	if b.AppliedAt == nil && n.AppliedAt != nil {
		steps = append(steps, fmt.Sprintf("applied: %s at %s", versionOf(now), n.AppliedAt.UTC().Format(time.RFC3339)))
	}
	if b.LandedAt == nil && n.LandedAt != nil {
		switch {
		case n.FinishedAt == nil:
			steps = append(steps, "landed: "+n.Message)
		case n.Phase == stagecoachv1.PhaseSucceeded:
			// Landed and verified in one step (no grace period): the evidence is the verdict's.
			steps = append(steps, "landed: "+strings.TrimPrefix(n.Message, "verified: "))
		default:
			steps = append(steps, "landed")
		}
	} else if n.LandedAt != nil && b.LandedAt != nil && b.Message != n.Message && n.FinishedAt == nil {
		steps = append(steps, "landed: "+n.Message)
	}
	if b.FinishedAt == nil && n.FinishedAt != nil || b.Phase != n.Phase && n.FinishedAt != nil {
		if n.VerifiedAt != nil && n.Phase == stagecoachv1.PhaseSucceeded {
			steps = append(steps, "verified: "+strings.TrimPrefix(n.Message, "verified: "))
		} else {
			steps = append(steps, ended(n.Phase)+": "+n.Message)
		}
	}
	return steps
}

func gateSummary(gates []stagecoachv1.GateResult) string {
	if len(gates) == 0 {
		return "none to pass"
	}
	parts := make([]string, 0, len(gates))
	for _, g := range gates {
		verdict := "passed"
		if !g.Passed {
			verdict = "did not pass"
		}
		part := g.Gate + " " + verdict
		if g.Message != "" {
			part += " (" + g.Message + ")"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

func versionOf(p *stagecoachv1.Promotion) string {
	v := p.Status.Version
	if v == nil {
		v = p.Spec.Version
	}
	if v == nil {
		return "the last verified version"
	}
	return describe(v)
}

// WaitForVersion follows the Promotion that carries a digest to a Stage, created after since
// (by automation once an approval lets it, or by a person), then waits for it as WaitForPromotion.
func WaitForVersion(ctx context.Context, c client.Reader, namespace, stage, digest string, since time.Time, opts WaitOptions, progress io.Writer) (*stagecoachv1.Promotion, error) {
	deadline := time.Now().Add(opts.timeout())
	said := ""
	for {
		var list stagecoachv1.PromotionList
		if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
			return nil, fmt.Errorf("failed to list the Promotions of Stage %s/%s: %w", namespace, stage, err)
		}
		var found []stagecoachv1.Promotion
		for _, p := range list.Items {
			v := p.Spec.Version
			if p.Spec.Stage == stage && v != nil && v.Digest == digest && !p.CreationTimestamp.Time.Before(since.Truncate(time.Second)) {
				found = append(found, p)
			}
		}
		if len(found) > 0 {
			sort.Slice(found, func(i, j int) bool { return found[i].CreationTimestamp.Before(&found[j].CreationTimestamp) })
			p := found[len(found)-1]
			if _, err := fmt.Fprintf(progress, "promotion: %s carries %s to Stage %s\n", p.Name, digest, stage); err != nil {
				return nil, err
			}
			opts.Timeout = time.Until(deadline)
			return WaitForPromotion(ctx, c, namespace, p.Name, opts, progress)
		}
		s := &stagecoachv1.Stage{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: stage}, s); err == nil {
			if msg := blockedMessage(s, digest); msg != said {
				if _, err := fmt.Fprintln(progress, "waiting for a Promotion: "+msg); err != nil {
					return nil, err
				}
				said = msg
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: no Promotion of %s to Stage %s/%s was created within %s (%s)", errNotVerified, digest, namespace, stage, opts.timeout(), said)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(opts.interval()):
		}
	}
}

func blockedMessage(s *stagecoachv1.Stage, digest string) string {
	c := s.Status.Candidate
	if c == nil || c.Digest != digest {
		return "the version is not the Stage's candidate"
	}
	if len(c.BlockedBy) == 0 {
		return "the candidate is not blocked"
	}
	parts := make([]string, 0, len(c.BlockedBy))
	for _, b := range c.BlockedBy {
		parts = append(parts, b.Gate+": "+b.Message)
	}
	return "blocked by " + strings.Join(parts, "; ")
}
