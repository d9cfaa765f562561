package plan

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/cron"
)

// windowLookahead bounds the search for a window's next opening: a schedule that does not tick
// within a year (such as 30 February) never opens.
const windowLookahead = 366 * 24 * time.Hour

// WindowBlock says whether the time windows hold a promotion now: inside any Deny window, or
// outside every Allow window (when there is one). Deny wins. Until is when the gate opens by
// itself, when that can be known. A window that does not parse holds the promotion: a typo must
// not open a release outside its hours.
func windowBlock(windows []stagecoachv1.TimeWindow, now time.Time) *stagecoachv1.GateBlock {
	var (
		denyUntil  time.Time
		denyWhy    string
		allows     int
		allowOpen  bool
		allowNext  time.Time
		allowWhich string
	)
	for i, w := range windows {
		sched, loc, err := parseWindow(w)
		if err != nil {
			return &stagecoachv1.GateBlock{Gate: stagecoachv1.GateWindow, Reason: stagecoachv1.ReasonInvalidWindow,
				Message: fmt.Sprintf("spec.promotion.windows[%d] cannot be read, so it holds every promotion: %v", i, err)}
		}
		local := now.In(loc)
		d := w.Duration.Duration
		start, inside := sched.Prev(local, d)
		inside = inside && local.Before(start.Add(d))
		if w.Kind == stagecoachv1.WindowDeny {
			if inside {
				if end := start.Add(d); end.After(denyUntil) {
					denyUntil, denyWhy = end, describeWindow(w, start)
				}
			}
			continue
		}
		allows++
		if inside {
			allowOpen = true
			continue
		}
		if next, ok := sched.Next(local, windowLookahead); ok && (allowNext.IsZero() || next.Before(allowNext)) {
			allowNext, allowWhich = next, describeWindow(w, next)
		}
	}
	switch {
	case !denyUntil.IsZero():
		until := metav1.NewTime(denyUntil.UTC())
		return &stagecoachv1.GateBlock{Gate: stagecoachv1.GateWindow, Reason: stagecoachv1.ReasonDenyWindow, Until: &until,
			Message: "inside the deny window " + denyWhy}
	case allows > 0 && !allowOpen:
		b := &stagecoachv1.GateBlock{Gate: stagecoachv1.GateWindow, Reason: stagecoachv1.ReasonOutsideAllowWindow,
			Message: "outside every allow window; none opens within a year"}
		if !allowNext.IsZero() {
			until := metav1.NewTime(allowNext.UTC())
			b.Until = &until
			b.Message = "outside every allow window; the next opens " + allowWhich
		}
		return b
	}
	return nil
}

func parseWindow(w stagecoachv1.TimeWindow) (cron.Schedule, *time.Location, error) {
	sched, err := cron.Parse(w.Schedule)
	if err != nil {
		return cron.Schedule{}, nil, err
	}
	loc := time.UTC
	if w.TimeZone != "" {
		if loc, err = time.LoadLocation(w.TimeZone); err != nil {
			return cron.Schedule{}, nil, fmt.Errorf("time zone %q: %w", w.TimeZone, err)
		}
	}
	return sched, loc, nil
}

func describeWindow(w stagecoachv1.TimeWindow, start time.Time) string {
	return fmt.Sprintf("%q for %s from %s", w.Schedule, w.Duration.Duration, start.Format("2006-01-02 15:04 MST"))
}
