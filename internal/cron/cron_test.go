package cron

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func at(t *testing.T, loc, s string) time.Time {
	t.Helper()
	l, err := time.LoadLocation(loc)
	if err != nil {
		t.Fatal(err)
	}
	v, err := time.ParseInLocation("2006-01-02 15:04", s, l)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{"0 9 * *", "needs five"},
		{"60 9 * * *", "minute field"},
		{"0 24 * * *", "hour field"},
		{"0 9 0 * *", "day-of-month field"},
		{"0 9 * 13 *", "month field"},
		{"0 9 * * 8", "day-of-week field"},
		{"0 9 * * 5-1", "day-of-week field"},
		{"0 9 * * 5-1", "beyond end of range"},
		{"*/0 9 * * *", "positive number"},
		{"@daily", "needs five"},
		{"TZ=UTC 0 9 * * *", "needs five"},
		{"0 9 * * 5-8", "day-of-week field"},
		{"0 9 * * funday", "day-of-week field"},
	} {
		t.Run(tc.expr+" "+tc.want, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Parse(tc.expr)
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			g.Expect(err.Error()).To(ContainSubstring(tc.expr))
		})
	}
}

func TestMatches(t *testing.T) {
	for _, tc := range []struct {
		expr, at string
		want     bool
	}{
		{"0 9 * * 1-5", "2026-11-30 09:00", true},  // Monday
		{"0 9 * * 1-5", "2026-11-29 09:00", false}, // Sunday
		{"0 9 * * 1-5", "2026-11-30 09:01", false},
		{"*/15 * * * *", "2026-11-30 10:45", true},
		{"*/15 * * * *", "2026-11-30 10:46", false},
		{"5/20 * * * *", "2026-11-30 10:25", true},
		{"0 0 * * 7", "2026-11-29 00:00", true}, // 7 is Sunday
		{"0 0 * * sun", "2026-11-29 00:00", true},
		{"0 0 1 jan-mar *", "2026-02-01 00:00", true},
		{"0 0 1 jan-mar *", "2026-04-01 00:00", false},
		// Both day fields restricted: either matches.
		{"0 0 13 * 5", "2026-11-13 00:00", true}, // Friday the 13th
		{"0 0 13 * 5", "2026-11-06 00:00", true}, // a Friday
		{"0 0 13 * 5", "2026-11-12 00:00", false},
		{"0 0 1,15 * *", "2026-11-15 00:00", true},
		{"0 0 * * 5-7", "2026-11-29 00:00", true}, // a range up to 7 takes in Sunday
		{"0 0 * * 5-7", "2026-11-28 00:00", true},
		{"0 0 * * 5-7", "2026-11-30 00:00", false},
		{"0 0 * * 7-7", "2026-11-29 00:00", true},
		{"0 0 ? * MON", "2026-11-30 00:00", true},
	} {
		t.Run(tc.expr+" at "+tc.at, func(t *testing.T) {
			g := NewWithT(t)
			s, err := Parse(tc.expr)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.Matches(at(t, "UTC", tc.at))).To(Equal(tc.want))
		})
	}
}

func TestPrevAndNext(t *testing.T) {
	for _, tc := range []struct {
		name, expr, loc, at string
		limit               time.Duration
		prev, next          string // "" when there is none within the limit
	}{
		{name: "weekday morning", expr: "0 9 * * 1-5", loc: "UTC", at: "2026-11-30 12:00", limit: 24 * time.Hour,
			prev: "2026-11-30 09:00", next: "2026-12-01 09:00"},
		{name: "weekend skips to monday", expr: "0 9 * * 1-5", loc: "UTC", at: "2026-11-28 12:00", limit: 72 * time.Hour,
			prev: "2026-11-27 09:00", next: "2026-11-30 09:00"},
		{name: "nothing within the limit", expr: "0 9 * * 1-5", loc: "UTC", at: "2026-11-28 12:00", limit: time.Hour},
		{name: "exact tick is its own prev", expr: "30 22 * * *", loc: "UTC", at: "2026-11-30 22:30", limit: 24 * time.Hour,
			prev: "2026-11-30 22:30", next: "2026-12-01 22:30"},
		{name: "february 30 never", expr: "0 0 30 2 *", loc: "UTC", at: "2026-01-01 00:00", limit: 400 * 24 * time.Hour},
		{name: "berlin wall clock", expr: "0 9 * * *", loc: "Europe/Berlin", at: "2026-11-30 08:30", limit: 48 * time.Hour,
			prev: "2026-11-29 09:00", next: "2026-11-30 09:00"},
		// Spring forward in Berlin: 02:30 does not exist on 2026-03-29.
		{name: "dst gap", expr: "30 2 * * *", loc: "Europe/Berlin", at: "2026-03-29 12:00", limit: 48 * time.Hour,
			prev: "2026-03-28 02:30", next: "2026-03-30 02:30"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s, err := Parse(tc.expr)
			g.Expect(err).NotTo(HaveOccurred())
			now := at(t, tc.loc, tc.at)
			prev, ok := s.Prev(now, tc.limit)
			if tc.prev == "" {
				g.Expect(ok).To(BeFalse(), "prev %s", prev)
			} else {
				g.Expect(ok).To(BeTrue())
				g.Expect(prev.Equal(at(t, tc.loc, tc.prev))).To(BeTrue(), "prev %s", prev)
			}
			next, ok := s.Next(now, tc.limit)
			if tc.next == "" {
				g.Expect(ok).To(BeFalse(), "next %s", next)
			} else {
				g.Expect(ok).To(BeTrue())
				g.Expect(next.Equal(at(t, tc.loc, tc.next))).To(BeTrue(), "next %s", next)
			}
		})
	}
}

// within runs f and fails the test if it does not return in time, so that a search that loops
// forever shows up as a failure instead of a hung test binary.
func within(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("did not return within %s", d)
	}
}

func TestDaylightSavingChangesDoNotHang(t *testing.T) {
	for _, tc := range []struct {
		name, expr, loc, utc string
	}{
		// The report: a window "0 9 * * *" for 8h in Berlin, at fall-back.
		{name: "berlin fall back", expr: "0 9 * * *", loc: "Europe/Berlin", utc: "2026-10-25T01:30:00Z"},
		{name: "berlin fall back first pass", expr: "0 9 * * *", loc: "Europe/Berlin", utc: "2026-10-25T00:30:00Z"},
		{name: "berlin spring forward", expr: "0 9 * * *", loc: "Europe/Berlin", utc: "2026-03-29T01:30:00Z"},
		{name: "new york fall back", expr: "0 9 * * 1-5", loc: "America/New_York", utc: "2026-11-01T06:30:00Z"},
		{name: "lord howe half hour fall back", expr: "0 9 * * *", loc: "Australia/Lord_Howe", utc: "2026-04-04T15:15:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s, err := Parse(tc.expr)
			g.Expect(err).NotTo(HaveOccurred())
			loc, err := time.LoadLocation(tc.loc)
			g.Expect(err).NotTo(HaveOccurred())
			now, err := time.Parse(time.RFC3339, tc.utc)
			g.Expect(err).NotTo(HaveOccurred())
			now = now.In(loc)
			var prevOK, nextOK bool
			var prev, next time.Time
			within(t, 2*time.Second, func() {
				prev, prevOK = s.Prev(now, 8*time.Hour)
				next, nextOK = s.Next(now, 48*time.Hour)
			})
			if prevOK {
				g.Expect(prev.After(now)).To(BeFalse(), "prev %s", prev)
				g.Expect(s.Matches(prev)).To(BeTrue(), "prev %s", prev)
			}
			g.Expect(nextOK).To(BeTrue())
			g.Expect(next.After(now)).To(BeTrue(), "next %s", next)
			g.Expect(s.Matches(next)).To(BeTrue(), "next %s", next)
		})
	}
}
