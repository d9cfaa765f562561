package cron

import (
	"fmt"
	"testing"
	"time"
)

// zones are the ones the fuzz test and the DST sweep read schedules in: one-hour DST on both
// hemispheres' calendars, a half-hour DST, a half-hour offset without DST, and UTC.
var zones = []string{"Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "UTC"}

// checkTicks asserts the properties every search must keep: it ends within its step budget, Next
// is after t and Prev at or before it, both within the limit, both are ticks, and neither skipped
// a tick on the way (each confirms the other).
func checkTicks(s Schedule, now time.Time, limit time.Duration) error {
	budget := stepBudget(limit)
	next, ok, steps := s.next(now, limit)
	if steps > budget {
		return fmt.Errorf("Next(%s, %s) took %d steps, more than its budget of %d", now, limit, steps, budget)
	}
	if ok {
		switch {
		case !next.After(now):
			return fmt.Errorf("Next(%s) = %s is not after it", now, next)
		case next.After(now.Add(limit)):
			return fmt.Errorf("Next(%s, %s) = %s is beyond the limit", now, limit, next)
		case !s.Matches(next):
			return fmt.Errorf("Next(%s) = %s is not a tick", now, next)
		}
		// No tick strictly between now and next.
		before := next.Add(-time.Nanosecond)
		if gap := before.Sub(now) - time.Nanosecond; gap >= 0 {
			if p, found := s.Prev(before, gap); found {
				return fmt.Errorf("Next(%s) = %s skipped the tick %s", now, next, p)
			}
		}
	}
	prev, ok, steps := s.prev(now, limit)
	if steps > budget {
		return fmt.Errorf("Prev(%s, %s) took %d steps, more than its budget of %d", now, limit, steps, budget)
	}
	if ok {
		switch {
		case prev.After(now):
			return fmt.Errorf("Prev(%s) = %s is after it", now, prev)
		case prev.Before(now.Add(-limit)):
			return fmt.Errorf("Prev(%s, %s) = %s is beyond the limit", now, limit, prev)
		case !s.Matches(prev):
			return fmt.Errorf("Prev(%s) = %s is not a tick", now, prev)
		}
		if n, found := s.Next(prev, now.Sub(prev)); found {
			return fmt.Errorf("Prev(%s) = %s skipped the tick %s", now, prev, n)
		}
	}
	return nil
}

// transitions lists the instants in year at which loc's offset changes.
func transitions(loc *time.Location, year int) []time.Time {
	var out []time.Time
	t := time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC)
	end := t.AddDate(1, 0, 0)
	for t.Before(end) {
		_, next := t.In(loc).ZoneBounds()
		if next.IsZero() || !next.Before(end) {
			break
		}
		out = append(out, next)
		t = next
	}
	return out
}

var windowSchedules = []string{
	"0 9 * * *", "0 9 * * 1-5", "30 2 * * *", "0 2 * * *", "59 1 * * *", "15,45 * * * *",
	"0 0 * * *", "*/7 * * * *", "0 3 * * 0", "0 0 29 2 *", "45 23 * * 6", "0 2 * * 7",
}

// Every DST change of 2026 in every zone, for window-like schedules, at instants from three hours
// before to three hours after: the searches end, and their answers are ticks with none skipped.
func TestEveryDaylightSavingChangeOfTheYear(t *testing.T) {
	for _, zone := range zones {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		changes := transitions(loc, 2026)
		if zone != "UTC" && zone != "Asia/Kolkata" && len(changes) != 2 {
			t.Fatalf("%s: found %d DST changes in 2026, want 2: %v", zone, len(changes), changes)
		}
		// Zones without DST still get a sweep around the dates Berlin changes.
		if len(changes) == 0 {
			changes = []time.Time{time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC), time.Date(2026, 10, 25, 1, 0, 0, 0, time.UTC)}
		}
		for _, change := range changes {
			for _, expr := range windowSchedules {
				t.Run(fmt.Sprintf("%s %s %q", zone, change.Format(time.RFC3339), expr), func(t *testing.T) {
					s, err := Parse(expr)
					if err != nil {
						t.Fatal(err)
					}
					for d := -3 * time.Hour; d <= 3*time.Hour; d += 10 * time.Minute {
						now := change.Add(d).In(loc)
						for _, limit := range []time.Duration{time.Hour, 8 * time.Hour, 48 * time.Hour} {
							within(t, 2*time.Second, func() {
								if err := checkTicks(s, now, limit); err != nil {
									t.Error(err)
								}
							})
						}
					}
				})
			}
		}
	}
}

// FuzzNextPrev searches random schedules in the zones above, from random instants between 1900
// and 2100 (so also old local mean times with odd offsets), with limits up to 400 days.
func FuzzNextPrev(f *testing.F) {
	for i, zone := range zones {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			f.Fatal(err)
		}
		for _, change := range transitions(loc, 2026) {
			for _, expr := range windowSchedules {
				f.Add(expr, uint8(i), change.Add(-30*time.Minute).Unix(), uint32(8*60))
				f.Add(expr, uint8(i), change.Add(30*time.Minute).Unix(), uint32(8*60))
			}
		}
	}
	f.Add("0 9 * * *", uint8(0), time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC).Unix(), uint32(8*60))
	f.Add("0 0 30 2 *", uint8(4), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), uint32(400*24*60))
	f.Fuzz(func(t *testing.T, expr string, zone uint8, unix int64, limitMinutes uint32) {
		s, err := Parse(expr)
		if err != nil {
			return
		}
		loc, err := time.LoadLocation(zones[int(zone)%len(zones)])
		if err != nil {
			t.Fatal(err)
		}
		const from, span = -2208988800, 200 * 365 * 24 * 3600 // 1900 to about 2100
		sec := unix % span
		if sec < 0 {
			sec += span
		}
		now := time.Unix(from+sec, 0).In(loc)
		limit := time.Duration(limitMinutes%(400*24*60)) * time.Minute
		if err := checkTicks(s, now, limit); err != nil {
			t.Fatalf("%q in %s: %v", expr, loc, err)
		}
	})
}
