package source

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// A source whose looks are blocked looks again soon, backing off to its interval; one that is
// not blocked waits its interval.
func TestNextLook(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
		blocked  int
		want     time.Duration
	}{
		{name: "not blocked", interval: time.Hour, want: time.Hour},
		{name: "first blocked look", interval: time.Hour, blocked: 1, want: 5 * time.Second},
		{name: "third blocked look", interval: time.Hour, blocked: 3, want: 20 * time.Second},
		{name: "many blocked looks end at the interval", interval: time.Hour, blocked: 60, want: time.Hour},
		{name: "an interval shorter than the backoff", interval: 3 * time.Second, blocked: 1, want: 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(NextLook(tc.interval, tc.blocked)).To(Equal(tc.want))
		})
	}
}
