// Package cron parses five-field cron schedules (minute hour day-of-month month day-of-week) and
// finds their ticks in a time zone. It exists for time windows: "is now inside a window that
// opened at a tick and lasts a duration, and when does the next one open".
package cron

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Schedule is a parsed cron expression. Each field is a bit set of the values it allows.
type Schedule struct {
	minute, hour, dom, month, dow uint64
	// domStar and dowStar record an unrestricted field: cron matches a day when both day fields
	// match, or, when both are restricted, when either does.
	domStar, dowStar bool
}

type field struct {
	name     string
	min, max int
	names    map[string]int
}

var (
	minuteField = field{name: "minute", min: 0, max: 59}
	hourField   = field{name: "hour", min: 0, max: 23}
	domField    = field{name: "day-of-month", min: 1, max: 31}
	monthField  = field{name: "month", min: 1, max: 12, names: map[string]int{
		"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}}
	// Day of week 7 is Sunday too, as in most crons.
	dowField = field{name: "day-of-week", min: 0, max: 7, names: map[string]int{
		"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}}
)

// Parse reads a five-field cron expression such as "0 9 * * 1-5" or "*/15 22-23 * * MON,FRI".
func Parse(expr string) (Schedule, error) {
	fields := strings.Fields(expr)
	if len(fields) != 5 {
		return Schedule{}, fmt.Errorf("cron schedule %q has %d fields; it needs five: minute hour day-of-month month day-of-week", expr, len(fields))
	}
	var s Schedule
	var err error
	specs := []struct {
		f    field
		bits *uint64
		star *bool
	}{{minuteField, &s.minute, nil}, {hourField, &s.hour, nil}, {domField, &s.dom, &s.domStar}, {monthField, &s.month, nil}, {dowField, &s.dow, &s.dowStar}}
	for i, spec := range specs {
		if *spec.bits, err = parseField(fields[i], spec.f); err != nil {
			return Schedule{}, fmt.Errorf("cron schedule %q: %w", expr, err)
		}
		if spec.star != nil {
			*spec.star = fields[i] == "*" || fields[i] == "?"
		}
	}
	if s.dow&(1<<7) != 0 {
		s.dow |= 1 // 7 is Sunday
	}
	return s, nil
}

func parseField(text string, f field) (uint64, error) {
	var set uint64
	for _, part := range strings.Split(text, ",") {
		rng, stepText, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepText)
			if err != nil || n <= 0 {
				return 0, fmt.Errorf("%s field %q: step %q must be a positive number", f.name, text, stepText)
			}
			step = n
		}
		lo, hi := f.min, f.max
		switch {
		case rng == "*" || rng == "?":
		case strings.Contains(rng, "-"):
			a, b, _ := strings.Cut(rng, "-")
			var err error
			if lo, err = value(a, f); err != nil {
				return 0, err
			}
			if hi, err = value(b, f); err != nil {
				return 0, err
			}
			if lo > hi {
				return 0, fmt.Errorf("%s field %q: range %s goes backwards", f.name, text, rng)
			}
		default:
			v, err := value(rng, f)
			if err != nil {
				return 0, err
			}
			lo, hi = v, v
			if hasStep {
				hi = f.max // "5/15" means from 5 every 15
			}
		}
		for v := lo; v <= hi; v += step {
			set |= 1 << uint(v)
		}
	}
	return set, nil
}

func value(text string, f field) (int, error) {
	if v, ok := f.names[strings.ToLower(text)]; ok {
		return v, nil
	}
	v, err := strconv.Atoi(text)
	if err != nil || v < f.min || v > f.max {
		return 0, fmt.Errorf("%s field: %q is not a value from %d to %d", f.name, text, f.min, f.max)
	}
	return v, nil
}

func has(set uint64, v int) bool { return set&(1<<uint(v)) != 0 }

func (s Schedule) dayMatches(t time.Time) bool {
	if !has(s.month, int(t.Month())) {
		return false
	}
	dom, dow := has(s.dom, t.Day()), has(s.dow, int(t.Weekday()))
	if s.domStar || s.dowStar {
		return dom && dow
	}
	return dom || dow
}

// Matches reports whether t (read in its own location) is a tick of the schedule.
func (s Schedule) Matches(t time.Time) bool {
	return s.dayMatches(t) && has(s.hour, t.Hour()) && has(s.minute, t.Minute())
}

// Prev returns the latest tick at or before t, looking back no further than limit; ok is false
// when there is none. Ticks are read in t's location (wall clock, so DST shifts the instants).
func (s Schedule) Prev(t time.Time, limit time.Duration) (time.Time, bool) {
	end := t.Add(-limit)
	c := t.Truncate(time.Minute)
	for !c.Before(end) {
		switch {
		case !s.dayMatches(c):
			c = time.Date(c.Year(), c.Month(), c.Day(), 0, 0, 0, 0, c.Location()).Add(-time.Minute)
		case !has(s.hour, c.Hour()):
			c = time.Date(c.Year(), c.Month(), c.Day(), c.Hour(), 0, 0, 0, c.Location()).Add(-time.Minute)
		case !has(s.minute, c.Minute()):
			c = c.Add(-time.Minute)
		default:
			return c, true
		}
	}
	return time.Time{}, false
}

// Next returns the first tick strictly after t, looking ahead no further than limit.
func (s Schedule) Next(t time.Time, limit time.Duration) (time.Time, bool) {
	end := t.Add(limit)
	c := t.Truncate(time.Minute).Add(time.Minute)
	for !c.After(end) {
		switch {
		case !s.dayMatches(c):
			c = time.Date(c.Year(), c.Month(), c.Day()+1, 0, 0, 0, 0, c.Location())
		case !has(s.hour, c.Hour()):
			c = time.Date(c.Year(), c.Month(), c.Day(), c.Hour()+1, 0, 0, 0, c.Location())
		case !has(s.minute, c.Minute()):
			c = c.Add(time.Minute)
		default:
			return c, true
		}
	}
	return time.Time{}, false
}
