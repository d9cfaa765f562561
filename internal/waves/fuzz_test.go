package waves

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// bytesOf hands out the fuzzer's bytes one at a time, then zeros.
type bytesOf []byte

func (b *bytesOf) next(n int) int {
	if len(*b) == 0 || n <= 0 {
		return 0
	}
	v := int((*b)[0]) % n
	*b = (*b)[1:]
	return v
}

// limit is an absent, integer or percentage maxTargets/maxParallel/maxFailures.
func (b *bytesOf) limit() *intstr.IntOrString {
	switch b.next(3) {
	case 1:
		return num(b.next(12))
	case 2:
		return pct(fmt.Sprintf("%d%%", b.next(101)))
	}
	return nil
}

// FuzzSchedule plays whole rollouts from any layout: every rollout must end (complete, halt or
// be refused) within a bound set by the number of targets and waves, never have more than
// maxParallel targets syncing in the current wave, and start nothing outside it.
func FuzzSchedule(f *testing.F) {
	f.Add([]byte{12, 4, 3, 1, 1, 1, 1, 2, 3, 0, 1, 2, 50, 2, 25, 0})
	f.Add([]byte{4, 1, 2, 1, 0, 1, 1, 1, 1, 0, 0, 2, 100, 2, 25, 1, 255})
	f.Add([]byte{30, 3, 5, 2, 2, 2, 0, 2, 1, 1, 2, 2, 2, 3, 1, 7, 9, 1, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{0, 0, 0})
	// Layouts that run to the end over several waves (three complete, two halt); most
	// random layouts are refused for leaving targets out.
	f.Add([]byte{0xa6, 0x1e, 0xec, 0x66, 0x39, 0x8c, 0xa2, 0x6b, 0x46, 0x40, 0x39, 0x5d, 0x3b, 0x3, 0x7d, 0x78, 0xa8, 0xa4, 0x95, 0x6b, 0xe0, 0x2d, 0xa7, 0xda, 0xb8, 0x62, 0x76, 0x9c, 0xd9, 0xd5, 0xcb, 0x65, 0x6f, 0x2b, 0x75, 0xd3, 0x33, 0x32, 0x64, 0x40, 0x1d, 0x76, 0x73, 0x85, 0x3f, 0xd2, 0xd, 0x88, 0xff, 0x98, 0xcc, 0x3a, 0x61, 0x59, 0xaa, 0x3a, 0x6, 0xe1, 0xae, 0xe0})
	f.Add([]byte{0x45, 0x1a, 0xd0, 0x23, 0x2f, 0xa2, 0x27, 0xbc, 0x97, 0xf0, 0xc5, 0xfb, 0xce, 0x95, 0x71, 0xa0, 0xa6, 0x98, 0xe5, 0xc0, 0x4, 0x35, 0xff, 0x92, 0xe5, 0xe4, 0x2c, 0x97, 0xc3, 0x91, 0xfd, 0xac, 0xb8, 0xde, 0xbb, 0x3a, 0xca, 0xda, 0x4e, 0x2a, 0xbc, 0x1e, 0x12, 0xe5, 0x76, 0x93, 0xc0, 0xce, 0x95, 0x35, 0x48, 0x71, 0xb7, 0x63, 0x9a, 0xc0, 0x6b, 0x57, 0x7e, 0x94})
	f.Add([]byte{0x57, 0x1d, 0x3a, 0x85, 0xda, 0xd4, 0x4b, 0xc7, 0x57, 0xd9, 0x26, 0x64, 0x9f, 0xa0, 0xa6, 0xb8, 0xc5, 0x81, 0x80, 0x29, 0xf8, 0x12, 0xcf, 0x2, 0x8b, 0xa4, 0x75, 0xc8, 0x3e, 0xdb, 0xd7, 0xab, 0x6d, 0xf0, 0xed, 0x1e, 0x97, 0x3a, 0xbb, 0xbd, 0xa0, 0x5a, 0xb1, 0x8a, 0x1b, 0xca, 0xe0, 0xd8, 0xff, 0x6d, 0x27, 0x4e, 0xea, 0xb8, 0x4c, 0x32, 0x96, 0xb0, 0x8f, 0x3b})
	f.Add([]byte{0x14, 0x1e, 0x1, 0x1b, 0xd, 0x5f, 0x55, 0x67, 0xd4, 0x6d, 0x6b, 0xd5, 0xf2, 0x16, 0xdb, 0x5e, 0x9c, 0xed, 0x3b, 0xcf, 0xd2, 0x8d, 0xb4, 0xdb, 0x5, 0x9d, 0x1b, 0x28, 0x87, 0xbd, 0x3e, 0xaf, 0x35, 0xd6, 0x8c, 0x36, 0xa7, 0x44, 0x67, 0xe8, 0x52, 0xa0, 0x89, 0x52, 0xa2, 0x3c, 0xad, 0xb1, 0x37, 0x40, 0xbb, 0xb8, 0xad, 0x8, 0xd, 0xa1, 0xec, 0xd4, 0x26, 0x4b})
	f.Fuzz(func(t *testing.T, data []byte) {
		in, fail := decode(data)
		n := len(in.Targets)
		waves := in.Waves
		// Every batch takes two steps (start, land) and starts at least one target; soaks add
		// at most 3 steps per wave; then one more to see the end.
		bound := 2*n + 4*len(waves) + 2
		ds := run(in, fail, bound+1)
		end := last(ds)
		if !end.Complete && !end.Halted && !end.Refused {
			t.Fatalf("rollout of %d targets in %d waves did not end within %d steps: %s", n, len(waves), bound, end.Message)
		}
		for step, d := range ds {
			if (d.Halted || d.Refused || d.Complete) && len(d.Start) > 0 {
				t.Fatalf("step %d: starts %v although the rollout ended: %s", step, d.Start, d.Message)
			}
			if len(d.Start) == 0 {
				continue
			}
			cur := d.Plan[d.Current]
			if got := len(d.Waves[d.Current].Syncing); got > cur.MaxParallel {
				t.Fatalf("step %d: wave %s has %d syncing, more than maxParallel %d", step, cur.Name, got, cur.MaxParallel)
			}
			inWave := map[string]bool{}
			for _, name := range cur.Targets {
				inWave[name] = true
			}
			for _, name := range d.Start {
				if !inWave[name] {
					t.Fatalf("step %d: starts %s outside the current wave %s", step, name, cur.Name)
				}
			}
		}
	})
}

// decode turns the fuzzer's bytes into a layout of targets and waves, and which targets fail.
func decode(data []byte) (Input, func(string) bool) {
	b := bytesOf(data)
	regions := []string{"eu-west-1", "eu-central-1", "us-east-1", "ap-south-1"}[:1+b.next(4)]
	n := b.next(31)
	targets := make([]Target, n)
	for i := range targets {
		r := regions[b.next(len(regions))]
		c := fmt.Sprintf("c%d", i)
		targets[i] = Target{Name: "app-" + c, Cluster: c, Labels: map[string]string{"region": r, "name": c}}
	}
	waves := make([]v1alpha1.Wave, b.next(6))
	for i := range waves {
		w := v1alpha1.Wave{Name: fmt.Sprintf("w%d", i)}
		switch b.next(4) {
		case 1:
			w.Selector = match("region", regions[b.next(len(regions))])
		case 2:
			w.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "region", Operator: metav1.LabelSelectorOpNotIn, Values: []string{regions[b.next(len(regions))]}}}}
		case 3:
			w.Selector = &metav1.LabelSelector{}
		}
		w.MaxTargets, w.MaxParallel, w.MaxFailures = b.limit(), b.limit(), b.limit()
		if b.next(2) == 1 {
			w.ShuffleKey = "region"
		}
		if s := b.next(4); s > 0 {
			w.Soak = dur(time.Duration(s) * time.Minute)
		}
		if dl := b.next(30); dl > 0 {
			w.ProgressDeadline = dur(time.Duration(dl) * time.Minute)
		}
		waves[i] = w
	}
	allowPartial := b.next(2) == 1
	failing := map[string]bool{}
	for _, t := range targets {
		failing[t.Name] = b.next(8) == 0
	}
	in := Input{Stage: "stage", Digest: d1, Targets: targets, Waves: waves, AllowPartial: allowPartial, Now: t0}
	return in, func(name string) bool { return failing[name] }
}
