package plan

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// The metrics' candidate_blocked series and this list are one: every gate that judges a candidate
// is in it once, and a gate asked only when a promote starts is not (its block never reaches
// status.candidate), but for the published gate a follower's source asks first.
func TestCandidateGates(t *testing.T) {
	names := CandidateGates()
	cases := []struct {
		gate string
		want bool
	}{
		{stagecoachv1.GateSource, true},
		{stagecoachv1.GatePublished, true},
		{stagecoachv1.GateChecks, false},
	}
	for _, g := range append(AutomationGates, PromoteGates...) {
		cases = append(cases, struct {
			gate string
			want bool
		}{g.Name, true})
	}
	for _, tc := range cases {
		t.Run(tc.gate, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(slices.Contains(names, tc.gate)).To(Equal(tc.want))
		})
	}
	t.Run("each once", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(slices.Compact(slices.Sorted(slices.Values(names)))).To(HaveLen(len(names)))
	})
}

// Asks answers for every gate of the chain, those that hold only automation included, and says
// no for a name the chain does not have.
func TestAsksCoversTheWholeChain(t *testing.T) {
	stage := &stagecoachv1.Stage{}
	for _, gate := range Chain {
		t.Run(gate.Name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(Asks(stage, gate.Name)).To(Equal(gate.Asks(stage)))
		})
	}
	for _, gate := range AutomationGates {
		if gate.Name == stagecoachv1.GateMediated {
			continue // asked only while something besides the digest decides what runs
		}
		t.Run(gate.Name+" is asked of every Stage", func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(Asks(stage, gate.Name)).To(BeTrue())
		})
	}
	t.Run("a name not in the chain", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(Asks(stage, "no-such-gate")).To(BeFalse())
	})
}
