package pipeline

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
)

// EventKind is what happened in the pipeline.
type EventKind string

// Kinds of events, in the order a version usually meets them.
const (
	// Waiting: the Stage's candidate is held back by a gate (Message says which and why).
	Waiting EventKind = "waiting"
	// Requested: a Promotion was created (by automation or a person).
	Requested EventKind = "requested"
	// Applied: Stagecoach wrote the digest to the engine's object.
	Applied EventKind = "applied"
	// Landed: the engine proved the digest runs (Message is the evidence).
	Landed EventKind = "landed"
	// Verified: landed held for the grace period and every check passed.
	Verified EventKind = "verified"
	// Failed, RolledBack, Aborted: how a Promotion ended otherwise.
	Failed     EventKind = "failed"
	RolledBack EventKind = "rolled back"
	Aborted    EventKind = "aborted"
	// Held: automation of the Stage holds until a person promotes.
	Held EventKind = "held"
)

// Event is one step of the pipeline, as seen by polling the Stages and Promotions.
type Event struct {
	At          time.Time
	Environment string
	Kind        EventKind
	// Version is the tag, Digest the digest (either may be empty).
	Version, Digest string
	// Promotion is the Promotion the event belongs to, if any.
	Promotion string
	Message   string
}

func (e Event) String() string {
	version := e.Version
	if version == "" {
		version = short(e.Digest)
	}
	s := fmt.Sprintf("%s %-11s %-11s %s", e.At.Format("15:04:05.000"), e.Environment, e.Kind, version)
	if e.Promotion != "" {
		s += " (" + e.Promotion + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

func short(digest string) string {
	if len(digest) > 19 {
		return digest[:19]
	}
	return digest
}

// Watch polls the pipeline every interval and calls report once per new event, until ctx ends.
// Events of one poll come in pipeline order (dev first), and of one Promotion in the order of
// its steps.
func (p *Pipeline) Watch(ctx context.Context, interval time.Duration, report func(Event)) {
	w := watcher{p: p, report: report, promotions: map[string]promotionSeen{}, waiting: map[string]string{}, held: map[string]string{}}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		w.poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

type promotionSeen struct {
	phase                     stagecoachv1.Phase
	applied, landed, verified bool
}

type watcher struct {
	p          *Pipeline
	report     func(Event)
	promotions map[string]promotionSeen
	waiting    map[string]string // environment -> last blockedBy summary
	held       map[string]string // environment -> the Promotion that set the hold
}

func (w *watcher) poll(ctx context.Context) {
	all, err := w.p.Promotions(ctx, "")
	if err != nil {
		return // the next poll tries again; a demo should not stop on one failed read
	}
	sort.Slice(all, func(i, j int) bool {
		return all[i].CreationTimestamp.Before(&all[j].CreationTimestamp) ||
			(all[i].CreationTimestamp.Equal(&all[j].CreationTimestamp) && all[i].Name < all[j].Name)
	})
	for _, env := range w.p.Lanes() {
		st, err := w.p.Stage(ctx, env)
		if err != nil {
			continue
		}
		w.stage(env, st)
		for i := range all {
			if all[i].Spec.Stage == st.Name {
				w.promotion(env, &all[i])
			}
		}
	}
}

func (w *watcher) stage(env string, st *stagecoachv1.Stage) {
	now := time.Now()
	summary, version, digest := "", "", ""
	if c := st.Status.Candidate; c != nil && len(c.BlockedBy) > 0 {
		var gates []string
		for _, b := range c.BlockedBy {
			gates = append(gates, fmt.Sprintf("%s (%s: %s)", b.Gate, b.Reason, b.Message))
		}
		summary, version, digest = strings.Join(gates, "; "), c.Version, c.Digest
	}
	if summary != w.waiting[env] {
		w.waiting[env] = summary
		if summary != "" {
			w.report(Event{At: now, Environment: env, Kind: Waiting, Version: version, Digest: digest, Message: summary})
		}
	}
	hold := ""
	if h := st.Status.Hold; h != nil {
		hold = h.Promotion
		if hold != w.held[env] {
			w.report(Event{At: now, Environment: env, Kind: Held, Promotion: h.Promotion, Message: h.Message})
		}
	}
	w.held[env] = hold
}

func (w *watcher) promotion(env string, pr *stagecoachv1.Promotion) {
	now := time.Now()
	seen, known := w.promotions[pr.Name]
	version, digest := "", ""
	if v := pr.Status.Version; v != nil {
		version, digest = v.Tag, v.Digest
	} else if v := pr.Spec.Version; v != nil {
		version, digest = v.Tag, v.Digest
	}
	ev := func(kind EventKind, msg string) {
		w.report(Event{At: now, Environment: env, Kind: kind, Version: version, Digest: digest, Promotion: pr.Name, Message: msg})
	}
	if !known {
		who := "by " + pr.Spec.RequestedBy
		if plan.IsAutomatic(pr) {
			who = "automatically (" + pr.Spec.RequestedBy + ")"
		} else if pr.Spec.RequestedBy == "" {
			who = "by Stagecoach"
		}
		ev(Requested, fmt.Sprintf("%s %s: %s", pr.Spec.Action, who, pr.Spec.Reason))
	}
	if pr.Status.AppliedAt != nil && !seen.applied {
		seen.applied = true
		ev(Applied, "written to "+w.p.Appliers[env])
	}
	if pr.Status.LandedAt != nil && !seen.landed {
		seen.landed = true
		ev(Landed, pr.Status.Message)
	}
	if pr.Status.VerifiedAt != nil && !seen.verified {
		seen.verified = true
		ev(Verified, strings.TrimPrefix(pr.Status.Message, "verified: "))
	}
	if pr.Status.Phase != seen.phase {
		switch pr.Status.Phase {
		case stagecoachv1.PhaseFailed:
			ev(Failed, pr.Status.Message)
		case stagecoachv1.PhaseRolledBack:
			ev(RolledBack, pr.Status.Message)
		case stagecoachv1.PhaseAborted:
			ev(Aborted, pr.Status.Message)
		}
		seen.phase = pr.Status.Phase
	}
	w.promotions[pr.Name] = seen
}
