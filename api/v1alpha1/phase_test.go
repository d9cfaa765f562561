package v1alpha1

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
)

// Wave statuses written by earlier versions say Progressing and Completed. Every reader decodes
// them (a typed client through JSON, an unstructured one through the converter) and must see the
// words of the one vocabulary, or it would take a finished wave for one under way.
func TestPhaseReadsEarlierWords(t *testing.T) {
	cases := []struct {
		stored string
		want   Phase
	}{
		{stored: "Progressing", want: PhaseRunning},
		{stored: "Completed", want: PhaseSucceeded},
		{stored: "Soaking", want: PhaseSoaking},
		{stored: "Failed", want: PhaseFailed},
		{stored: "Pending", want: PhasePending},
		{stored: "Aborted", want: PhaseAborted},
		{stored: "SomethingNew", want: Phase("SomethingNew")},
	}
	for _, tc := range cases {
		t.Run(tc.stored, func(t *testing.T) {
			g := NewWithT(t)
			raw := map[string]any{"status": map[string]any{"waves": []any{map[string]any{"name": "canary", "phase": tc.stored}}}}
			data, err := json.Marshal(raw)
			g.Expect(err).NotTo(HaveOccurred())

			var typed Stage
			g.Expect(json.Unmarshal(data, &typed)).To(Succeed())
			g.Expect(typed.Status.Waves[0].Phase).To(Equal(tc.want), "typed client")

			var converted Stage
			g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &converted)).To(Succeed())
			g.Expect(converted.Status.Waves[0].Phase).To(Equal(tc.want), "unstructured client")

			out, err := json.Marshal(typed.Status.Waves[0])
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(out)).To(ContainSubstring(`"phase":"`+string(tc.want)+`"`), "written back in the current word")
		})
	}
}

func TestPhaseEnded(t *testing.T) {
	for _, p := range Phases {
		t.Run(string(p), func(t *testing.T) {
			want := p == PhaseSucceeded || p == PhaseFailed || p == PhaseRolledBack || p == PhaseAborted
			NewWithT(t).Expect(p.Ended()).To(Equal(want))
		})
	}
}
