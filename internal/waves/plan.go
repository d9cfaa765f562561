package waves

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// plannedWave is a WavePlan with its targets themselves.
type plannedWave struct {
	WavePlan
	members []Target
}

// orderTargets drops repeated names (the first wins) and sorts the targets in the Stage's own
// order: by a hash of the Stage name and the target name, so that different services get
// different canaries and the same service always starts on the same clusters.
func orderTargets(stage string, in []Target) []Target {
	type keyed struct {
		key uint64
		t   Target
	}
	seen := make(map[string]struct{}, len(in))
	ks := make([]keyed, 0, len(in))
	for _, t := range in {
		if _, dup := seen[t.Name]; dup {
			continue
		}
		seen[t.Name] = struct{}{}
		ks = append(ks, keyed{key: orderKey(stage, t.Name), t: t})
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		if c := cmp.Compare(a.key, b.key); c != 0 {
			return c
		}
		return strings.Compare(a.t.Name, b.t.Name)
	})
	out := make([]Target, len(ks))
	for i, k := range ks {
		out[i] = k.t
	}
	return out
}

// orderKey hashes with FNV-1a, then mixes (splitmix64's finalizer) so that names differing only
// in their last characters still spread over the whole order.
func orderKey(stage, name string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(stage))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(name))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// alternate reorders targets round-robin across the values of a cluster label, keeping the
// order within each value; values come in the order of their first target. Targets without the
// label form a group of their own.
func alternate(ts []Target, key string) []Target {
	var values []string
	groups := map[string][]Target{}
	for _, t := range ts {
		v, ok := t.Labels[key]
		if !ok {
			v = "\x00" // cannot be a label value, so it never merges with a real one
		}
		if _, seen := groups[v]; !seen {
			values = append(values, v)
		}
		groups[v] = append(groups[v], t)
	}
	out := make([]Target, 0, len(ts))
	for round := 0; len(out) < len(ts); round++ {
		for _, v := range values {
			if g := groups[v]; round < len(g) {
				out = append(out, g[round])
			}
		}
	}
	return out
}

// planWaves gives each wave its targets: among those its selector matches and no earlier wave
// took, the first maxTargets in order. It returns the targets no wave took.
func planWaves(ordered []Target, waves []v1alpha1.Wave) ([]plannedWave, []Target, error) {
	taken := make([]bool, len(ordered))
	plan := make([]plannedWave, 0, len(waves))
	var matching []Target
	var matchingIdx []int
	for i, w := range waves {
		sel, err := selector(w.Selector)
		if err != nil {
			return plan, nil, fmt.Errorf("wave %q has an invalid selector: %v; fix spec.waves[%d].selector", w.Name, err, i)
		}
		matching, matchingIdx = matching[:0], matchingIdx[:0]
		for j, t := range ordered {
			if !taken[j] && sel.Matches(labels.Set(t.Labels)) {
				matching = append(matching, t)
				matchingIdx = append(matchingIdx, j)
			}
		}
		n, err := scale(w.MaxTargets, "100%", len(matching), true)
		if err != nil {
			return plan, nil, fmt.Errorf("wave %q: maxTargets: %v; fix spec.waves[%d].maxTargets", w.Name, err, i)
		}
		var members []Target
		if w.ShuffleKey != "" {
			members = alternate(matching, w.ShuffleKey)[:n]
			// Mark what the alternation picked, whichever positions those were.
			picked := make(map[string]struct{}, n)
			for _, t := range members {
				picked[t.Name] = struct{}{}
			}
			for k, t := range matching {
				if _, ok := picked[t.Name]; ok {
					taken[matchingIdx[k]] = true
				}
			}
		} else {
			members = slices.Clone(matching[:n])
			for _, j := range matchingIdx[:n] {
				taken[j] = true
			}
		}
		parallel, err := scale(w.MaxParallel, "1", n, true)
		if err != nil {
			return plan, nil, fmt.Errorf("wave %q: maxParallel: %v; fix spec.waves[%d].maxParallel", w.Name, err, i)
		}
		if n > 0 && parallel == 0 {
			return plan, nil, fmt.Errorf("wave %q has %d targets but maxParallel 0, so it would never finish; set spec.waves[%d].maxParallel to 1 or more", w.Name, n, i)
		}
		failures, err := scale(w.MaxFailures, "0", n, false)
		if err != nil {
			return plan, nil, fmt.Errorf("wave %q: maxFailures: %v; fix spec.waves[%d].maxFailures", w.Name, err, i)
		}
		names := make([]string, len(members))
		for k, t := range members {
			names[k] = t.Name
		}
		plan = append(plan, plannedWave{
			WavePlan: WavePlan{Name: w.Name, Targets: names, MaxParallel: parallel, MaxFailures: failures},
			members:  members,
		})
	}
	var left []Target
	for j, t := range ordered {
		if !taken[j] {
			left = append(left, t)
		}
	}
	return plan, left, nil
}

// selector reads a wave's selector; absent or empty selects every cluster.
func selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		// LabelSelectorAsSelector(nil) selects nothing; an absent selector means all clusters.
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// scale resolves an integer or percentage against total, clamped to [0, total]. Percentages
// round up for maxTargets and maxParallel (so above 0% means at least one) and down for
// maxFailures (a budget must not grow beyond what was written).
func scale(v *intstr.IntOrString, def string, total int, roundUp bool) (int, error) {
	value := intstr.Parse(def)
	if v != nil {
		value = *v
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&value, total, roundUp)
	if err != nil {
		return 0, err
	}
	return max(0, min(n, total)), nil
}

// refuse is the decision for a plan that cannot run: nothing starts, the waves wait.
func refuse(d Decision, in Input, msg string) Decision {
	d.Refused = true
	d.Message = msg
	d.Current = -1
	previous := map[string]v1alpha1.WaveStatus{}
	for _, s := range in.Previous {
		if s.Digest == in.Digest {
			previous[s.Name] = s
		}
	}
	for i, w := range in.Waves {
		st := v1alpha1.WaveStatus{Name: w.Name, Digest: in.Digest, Phase: v1alpha1.PhasePending,
			Message: "waits: the wave plan is refused (see the Stage's message)"}
		if i < len(d.Plan) {
			st.Targets = d.Plan[i].Targets
		}
		if prev, ok := previous[w.Name]; ok {
			st.StartedAt, st.FinishedAt = prev.StartedAt.DeepCopy(), prev.FinishedAt.DeepCopy()
		}
		d.Waves = append(d.Waves, st)
	}
	return d
}

// listSome names up to ten items, then how many more, to keep messages readable.
func listSome(items []string) string {
	const most = 10
	if len(items) <= most {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:most], ", "), len(items)-most)
}
