package plan

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestSoonest(t *testing.T) {
	for _, tc := range []struct {
		name    string
		a, b    time.Duration
		soonest time.Duration
	}{
		{name: "neither ends", soonest: 0},
		{name: "only the first ends", a: time.Minute, soonest: time.Minute},
		{name: "only the second ends", b: time.Second, soonest: time.Second},
		{name: "the second is sooner", a: time.Minute, b: time.Second, soonest: time.Second},
		{name: "the first is sooner", a: time.Second, b: time.Minute, soonest: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(Soonest(tc.a, tc.b)).To(Equal(tc.soonest))
		})
	}
}
