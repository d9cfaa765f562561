// Package cron parses five-field cron schedules (minute hour day-of-month month day-of-week) and
// finds their ticks in a time zone. It exists for time windows: "is now inside a window that
// opened at a tick and lasts a duration, and when does the next one open".
//
// Parsing is robfig/cron's (the grammar Argo CD's sync windows accept). The searches are our own:
// they step through instants, never through wall-clock fields rebuilt with time.Date, because a
// wall-clock hour that does not exist or exists twice (daylight saving) can send such a loop back
// to where it started. Every jump is checked against the wall clock it should land on, and every
// search has a hard step budget, so no schedule, zone or instant can make them run unbounded.
package cron

import (
	"fmt"
	"math/bits"
	"strings"
	"time"

	robfig "github.com/robfig/cron/v3"
)

// Schedule is a parsed cron expression.
type Schedule struct {
	spec *robfig.SpecSchedule
}

// starBit is robfig's mark of a field written "*" or "?": when either day field carries it, a
// day must match both fields, otherwise either.
const starBit = 1 << 63

// Descriptors (@daily, @every 1h) and a TZ= prefix are not accepted: a window has its own
// timeZone field, and "@every" has no wall-clock ticks to open a window at.
var parser = robfig.NewParser(robfig.Minute | robfig.Hour | robfig.Dom | robfig.Month | robfig.Dow)

var fieldNames = [5]string{"minute", "hour", "day-of-month", "month", "day-of-week"}

// Parse reads a five-field cron expression such as "0 9 * * 1-5" or "*/15 22-23 * * MON,FRI".
// Day of week 7 is Sunday too, as in most crons.
func Parse(expr string) (Schedule, error) {
	fields := strings.Fields(expr)
	if len(fields) != 5 {
		return Schedule{}, fmt.Errorf("cron schedule %q has %d fields; it needs five: minute hour day-of-month month day-of-week", expr, len(fields))
	}
	fields[4] = sundayIsSeven(fields[4])
	// Parse each field alone first, so that an error names the field it is about.
	for i, f := range fields {
		probe := []string{"*", "*", "*", "*", "*"}
		probe[i] = f
		if _, err := parser.Parse(strings.Join(probe, " ")); err != nil {
			return Schedule{}, fmt.Errorf("cron schedule %q: %s field %q: %w", expr, fieldNames[i], f, err)
		}
	}
	sched, err := parser.Parse(strings.Join(fields, " "))
	if err != nil {
		return Schedule{}, fmt.Errorf("cron schedule %q: %w", expr, err)
	}
	spec, ok := sched.(*robfig.SpecSchedule)
	if !ok {
		return Schedule{}, fmt.Errorf("cron schedule %q is not a five-field schedule", expr)
	}
	return Schedule{spec: spec}, nil
}

// sundayIsSeven rewrites a day-of-week 7 (robfig accepts 0-6) to 0: "7" and "a-7" ranges
// without a step; anything else is left for the parser to judge.
func sundayIsSeven(field string) string {
	parts := strings.Split(field, ",")
	for i, p := range parts {
		switch {
		case p == "7":
			parts[i] = "0"
		case strings.HasSuffix(p, "-7") && !strings.Contains(p, "/"):
			if lo := strings.TrimSuffix(p, "-7"); lo == "7" {
				parts[i] = "0"
			} else {
				parts[i] = lo + "-6,0"
			}
		}
	}
	return strings.Join(parts, ",")
}

func has(set uint64, v int) bool { return set&(1<<uint(v)) != 0 }

func (s Schedule) dayMatches(t time.Time) bool {
	if !has(s.spec.Month, int(t.Month())) {
		return false
	}
	dom, dow := has(s.spec.Dom, t.Day()), has(s.spec.Dow, int(t.Weekday()))
	if s.spec.Dom&starBit != 0 || s.spec.Dow&starBit != 0 {
		return dom && dow
	}
	return dom || dow
}

// Matches reports whether t (read in its own location) is a tick of the schedule.
func (s Schedule) Matches(t time.Time) bool {
	return s.spec != nil && s.dayMatches(t) && has(s.spec.Hour, t.Hour()) && has(s.spec.Minute, t.Minute())
}

// Prev returns the latest tick at or before t, looking back no further than limit; ok is false
// when there is none. Ticks are read in t's location (wall clock, so DST shifts the instants; a
// wall-clock time that happens twice at fall-back is a tick both times).
func (s Schedule) Prev(t time.Time, limit time.Duration) (time.Time, bool) {
	tick, ok, _ := s.prev(t, limit)
	return tick, ok
}

// Next returns the first tick strictly after t, looking ahead no further than limit.
func (s Schedule) Next(t time.Time, limit time.Duration) (time.Time, bool) {
	tick, ok, _ := s.next(t, limit)
	return tick, ok
}

// stepBudget bounds a search over limit. A step either finds a tick or moves at least a minute;
// with the checked jumps below a day costs a few dozen steps at most (a day skip, or per hour a
// minute jump and an hour skip), plus up to an hour of single minutes where a DST change makes a
// jump land on the wrong wall clock. The budget is several times that, so it is never what ends a
// correct search, only a guarantee that nothing can run unbounded.
func stepBudget(limit time.Duration) int {
	days := int(limit/(24*time.Hour)) + 2
	return days*24*8 + 1024
}

// floorMinute is the start of t's wall-clock minute, as an instant.
func floorMinute(t time.Time) time.Time {
	return t.Add(-time.Duration(t.Second())*time.Second - time.Duration(t.Nanosecond()))
}

func sameDate(a, b time.Time) bool {
	ay, am, ad := a.Date()
	by, bm, bd := b.Date()
	return ay == by && am == bm && ad == bd
}

// prev also returns how many steps it took, for the fuzz test's bound.
func (s Schedule) prev(t time.Time, limit time.Duration) (time.Time, bool, int) {
	if s.spec == nil || limit < 0 {
		return time.Time{}, false, 0
	}
	end := t.Add(-limit)
	budget := stepBudget(limit)
	c := floorMinute(t)
	steps := 0
	for !c.Before(end) {
		steps++
		if steps > budget {
			return time.Time{}, false, steps
		}
		switch {
		case !s.dayMatches(c):
			c = s.backBeforeDay(c)
		case !has(s.spec.Hour, c.Hour()):
			c = backBeforeHour(c)
		case !has(s.spec.Minute, c.Minute()):
			c = s.backToMinute(c)
		default:
			return c, true, steps
		}
	}
	return time.Time{}, false, steps
}

// A jump moves by the wall-clock distance it expects, then checks the wall clock it landed on.
// When a DST change lies in between, the distance in instants differs from the wall-clock one, the
// check fails, and the search takes a single minute instead: slower across that hour, never wrong.

// backBeforeDay moves to the last minute of the previous day; c's day does not match.
func (s Schedule) backBeforeDay(c time.Time) time.Time {
	start := c.Add(-time.Duration(c.Hour()*60+c.Minute()) * time.Minute)
	if start.Hour() == 0 && start.Minute() == 0 && sameDate(start, c) {
		return start.Add(-time.Minute)
	}
	return backBeforeHour(c)
}

// backBeforeHour moves to the last minute before c's wall-clock hour.
func backBeforeHour(c time.Time) time.Time {
	start := c.Add(-time.Duration(c.Minute()) * time.Minute)
	if start.Minute() == 0 && start.Hour() == c.Hour() && sameDate(start, c) {
		return start.Add(-time.Minute)
	}
	return c.Add(-time.Minute)
}

// backToMinute moves to the latest earlier minute of the hour that the schedule allows.
func (s Schedule) backToMinute(c time.Time) time.Time {
	below := s.spec.Minute & (1<<uint(c.Minute()) - 1)
	if below == 0 {
		return backBeforeHour(c)
	}
	m := 63 - bits.LeadingZeros64(below)
	to := c.Add(-time.Duration(c.Minute()-m) * time.Minute)
	if to.Minute() == m && to.Hour() == c.Hour() && sameDate(to, c) {
		return to
	}
	return c.Add(-time.Minute)
}

// next also returns how many steps it took.
func (s Schedule) next(t time.Time, limit time.Duration) (time.Time, bool, int) {
	if s.spec == nil || limit < 0 {
		return time.Time{}, false, 0
	}
	end := t.Add(limit)
	budget := stepBudget(limit)
	c := floorMinute(t).Add(time.Minute)
	steps := 0
	for !c.After(end) {
		steps++
		if steps > budget {
			return time.Time{}, false, steps
		}
		switch {
		case !s.dayMatches(c):
			c = s.onToNextDay(c)
		case !has(s.spec.Hour, c.Hour()):
			c = onToNextHour(c)
		case !has(s.spec.Minute, c.Minute()):
			c = s.onToMinute(c)
		default:
			return c, true, steps
		}
	}
	return time.Time{}, false, steps
}

// onToNextDay moves to the first minute of the next day; c's day does not match.
func (s Schedule) onToNextDay(c time.Time) time.Time {
	to := c.Add(time.Duration(24*60-c.Hour()*60-c.Minute()) * time.Minute)
	last := to.Add(-time.Minute)
	if last.Hour() == 23 && last.Minute() == 59 && sameDate(last, c) {
		return to
	}
	return onToNextHour(c)
}

// onToNextHour moves to the first minute after c's wall-clock hour.
func onToNextHour(c time.Time) time.Time {
	to := c.Add(time.Duration(60-c.Minute()) * time.Minute)
	last := to.Add(-time.Minute)
	if last.Minute() == 59 && last.Hour() == c.Hour() && sameDate(last, c) {
		return to
	}
	return c.Add(time.Minute)
}

// onToMinute moves to the earliest later minute of the hour that the schedule allows.
func (s Schedule) onToMinute(c time.Time) time.Time {
	above := s.spec.Minute &^ (1<<uint(c.Minute()+1) - 1) &^ starBit
	if above == 0 {
		return onToNextHour(c)
	}
	m := bits.TrailingZeros64(above)
	to := c.Add(time.Duration(m-c.Minute()) * time.Minute)
	if to.Minute() == m && to.Hour() == c.Hour() && sameDate(to, c) {
		return to
	}
	return c.Add(time.Minute)
}
