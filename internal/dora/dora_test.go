package dora

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

var t0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func at(min int) *metav1.Time {
	t := metav1.NewTime(t0.Add(time.Duration(min) * time.Minute))
	return &t
}

func stage(name, env, upstream string) stagecoachv1.Stage {
	s := stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"},
		Spec: stagecoachv1.StageSpec{Service: "payments", Environment: env}}
	if upstream != "" {
		s.Spec.Source.Upstream = &stagecoachv1.UpstreamSource{Stage: upstream}
	}
	return s
}

// finished is a Promotion created at minute created that ended in phase at minute end
// (verified then too, when it succeeded).
func finished(name, stage string, action stagecoachv1.PromotionAction, digest string, phase stagecoachv1.Phase, created, end int) stagecoachv1.Promotion {
	p := stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", UID: types.UID(name), CreationTimestamp: *at(created)},
		Spec:   stagecoachv1.PromotionSpec{Stage: stage, Action: action, Version: &stagecoachv1.VersionReference{Digest: digest}},
		Status: stagecoachv1.PromotionStatus{Phase: phase, FinishedAt: at(end)}}
	if phase == stagecoachv1.PhaseSucceeded {
		p.Status.VerifiedAt = at(end)
	}
	return p
}

const (
	promote  = stagecoachv1.ActionPromote
	rollback = stagecoachv1.ActionRollback
	ok       = stagecoachv1.PhaseSucceeded
	failed   = stagecoachv1.PhaseFailed
	rolled   = stagecoachv1.PhaseRolledBack
	aborted  = stagecoachv1.PhaseAborted
)

func TestCompute(t *testing.T) {
	pipeline := []stagecoachv1.Stage{stage("dev", "dev", ""), stage("prod", "prod", "dev")}
	day := 24 * 60
	tests := []struct {
		name         string
		promotions   []stagecoachv1.Promotion
		since, until int  // minutes
		want         Keys // of prod
	}{
		{
			name: "lead time runs from the version's first sighting in the pipeline's first Stage",
			promotions: []stagecoachv1.Promotion{
				finished("dev-1", "dev", promote, "sha256:1", ok, 0, 5),
				finished("dev-1-again", "dev", promote, "sha256:1", ok, 3, 8), // later sighting: ignored
				finished("prod-1", "prod", promote, "sha256:1", ok, 50, 60),
				finished("prod-2", "prod", promote, "sha256:2", ok, 100, 130), // never seen in dev: its own creation
			},
			until: day,
			want: Keys{Deployments: 2, DeploymentsPerDay: 2, Changes: 2,
				LeadTime: durations(60*time.Minute, 30*time.Minute)},
		},
		{
			name: "lead time starts when the first Stage's registry first offered the version, when automation kept it",
			promotions: []stagecoachv1.Promotion{
				seen(finished("dev-1", "dev", promote, "sha256:1", ok, 30, 35), 5),
				finished("prod-1", "prod", promote, "sha256:1", ok, 50, 60),
			},
			until: day,
			want:  Keys{Deployments: 1, DeploymentsPerDay: 1, Changes: 1, LeadTime: durations(55 * time.Minute)},
		},
		{
			name: "change failure rate counts failed and rolled-back promotes over promotes; rollbacks and aborted ones are not changes",
			promotions: []stagecoachv1.Promotion{
				finished("p1", "prod", promote, "sha256:1", ok, 0, 10),
				finished("p2", "prod", promote, "sha256:2", rolled, 20, 30),
				finished("p2-rb", "prod", rollback, "sha256:1", ok, 30, 35),
				finished("p3", "prod", promote, "sha256:3", failed, 40, 50),
				finished("p4", "prod", promote, "sha256:4", ok, 60, 70),
				finished("p5", "prod", promote, "sha256:5", aborted, 80, 81),
			},
			until: day,
			want: Keys{Deployments: 2, DeploymentsPerDay: 2, Changes: 4, Failures: 2, ChangeFailureRate: 0.5,
				LeadTime:      durations(10*time.Minute, 10*time.Minute),
				TimeToRestore: durations(5*time.Minute, 20*time.Minute)},
		},
		{
			name: "time to restore runs from the first of several failures to the next verified version, per incident",
			promotions: []stagecoachv1.Promotion{
				finished("good", "prod", promote, "sha256:1", ok, 0, 5),
				finished("bad-1", "prod", promote, "sha256:2", failed, 6, 10),
				finished("bad-2", "prod", promote, "sha256:3", failed, 11, 15),
				finished("fix", "prod", promote, "sha256:4", ok, 16, 20), // 10 min after bad-1
				finished("bad-3", "prod", promote, "sha256:5", rolled, 30, 40),
				finished("bad-3-rb", "prod", rollback, "sha256:4", ok, 40, 45), // 5 min
			},
			until: day,
			want: Keys{Deployments: 2, DeploymentsPerDay: 2, Changes: 5, Failures: 3, ChangeFailureRate: 0.6,
				LeadTime:      durations(5*time.Minute, 4*time.Minute),
				TimeToRestore: durations(10*time.Minute, 5*time.Minute)},
		},
		{
			name: "a window counts what ended in it; a restore counts whole, even when its failure began before",
			promotions: []stagecoachv1.Promotion{
				finished("old", "prod", promote, "sha256:1", ok, 0, 10),
				finished("bad", "prod", promote, "sha256:2", failed, 20, 30),
				finished("fix", "prod", promote, "sha256:3", ok, 40, 70),
				finished("late", "prod", promote, "sha256:4", ok, 2*day, 2*day+1),
			},
			since: 60, until: 60 + day,
			want: Keys{Deployments: 1, DeploymentsPerDay: 1, Changes: 1,
				LeadTime: durations(30 * time.Minute), TimeToRestore: durations(40 * time.Minute)},
		},
		{
			name: "a failure in the same second as the verify before it still starts an incident (Promotions run in order)",
			promotions: []stagecoachv1.Promotion{
				finished("good", "prod", promote, "sha256:1", ok, 0, 10),
				finished("bad", "prod", promote, "sha256:2", failed, 10, 10),
				finished("fix", "prod", promote, "sha256:3", ok, 11, 12),
			},
			until: day,
			want: Keys{Deployments: 2, DeploymentsPerDay: 2, Changes: 3, Failures: 1, ChangeFailureRate: 1.0 / 3,
				LeadTime: durations(10*time.Minute, time.Minute), TimeToRestore: durations(2 * time.Minute)},
		},
		{name: "nothing happened", until: day, want: Keys{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			keys := Compute(pipeline, tt.promotions, at(tt.since).Time, at(tt.until).Time)
			g.Expect(keys).To(HaveLen(2))
			g.Expect(keys[0].Stage).To(Equal("dev"), "ordered by environment")
			got := keys[1]
			want := tt.want
			want.Namespace, want.Stage, want.Service, want.Environment = "shop", "prod", "payments", "prod"
			g.Expect(got).To(Equal(want))
		})
	}
}

func durations(ds ...time.Duration) Durations { return summarise(ds) }

// seen stamps when the source first offered p's version, as automation does.
func seen(p stagecoachv1.Promotion, min int) stagecoachv1.Promotion {
	p.Annotations = map[string]string{stagecoachv1.FirstSeenAnnotation: at(min).UTC().Format(time.RFC3339)}
	return p
}

func TestFirstSeen(t *testing.T) {
	stages := []stagecoachv1.Stage{stage("dev", "dev", ""), stage("staging", "staging", "dev"), stage("prod", "prod", "staging"),
		stage("other", "dev", "")}
	chain := Chain(stages, &stages[2])
	tests := []struct {
		name       string
		promotions []stagecoachv1.Promotion
		want       int // minute; -1: not seen
	}{
		{name: "the first Stage's firstSeen, kept on its automatic Promotion",
			promotions: []stagecoachv1.Promotion{seen(finished("dev-1", "dev", promote, "sha256:1", ok, 30, 35), 10),
				finished("staging-1", "staging", promote, "sha256:1", ok, 40, 45)},
			want: 10},
		{name: "without firstSeen, the earliest Promotion of the digest in the chain",
			promotions: []stagecoachv1.Promotion{finished("staging-1", "staging", promote, "sha256:1", ok, 40, 45),
				finished("dev-1", "dev", promote, "sha256:1", ok, 30, 35)},
			want: 30},
		{name: "a person promoted the version before the registry offered it: the earlier of the two",
			promotions: []stagecoachv1.Promotion{finished("dev-hand", "dev", promote, "sha256:1", failed, 5, 8),
				seen(finished("dev-1", "dev", promote, "sha256:1", ok, 30, 35), 20)},
			want: 5},
		{name: "another digest's firstSeen does not count",
			promotions: []stagecoachv1.Promotion{seen(finished("dev-0", "dev", promote, "sha256:0", ok, 3, 4), 1),
				finished("dev-1", "dev", promote, "sha256:1", ok, 30, 35)},
			want: 30},
		{name: "a Stage outside the chain does not count",
			promotions: []stagecoachv1.Promotion{seen(finished("other-1", "other", promote, "sha256:1", ok, 3, 4), 1),
				finished("dev-1", "dev", promote, "sha256:1", ok, 30, 35)},
			want: 30},
		{name: "an unreadable firstSeen falls back to the Promotion's creation",
			promotions: func() []stagecoachv1.Promotion {
				p := finished("dev-1", "dev", promote, "sha256:1", ok, 30, 35)
				p.Annotations = map[string]string{stagecoachv1.FirstSeenAnnotation: "yesterday"}
				return []stagecoachv1.Promotion{p}
			}(),
			want: 30},
		{name: "never seen", promotions: []stagecoachv1.Promotion{finished("dev-0", "dev", promote, "sha256:0", ok, 3, 4)}, want: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, ok := FirstSeen(chain, tt.promotions, "sha256:1")
			if tt.want < 0 {
				g.Expect(ok).To(BeFalse())
				return
			}
			g.Expect(ok).To(BeTrue())
			g.Expect(got).To(BeTemporally("==", at(tt.want).Time))
		})
	}
}

func TestSummarise(t *testing.T) {
	tests := []struct {
		name string
		in   []time.Duration
		want Durations
	}{
		{name: "none", want: Durations{}},
		{name: "odd count: the middle one", in: []time.Duration{3 * time.Second, time.Second, 2 * time.Second},
			want: Durations{Count: 3, Sum: 6 * time.Second, Mean: 2 * time.Second, Median: 2 * time.Second, SumSeconds: 6, MeanSeconds: 2, MedianSeconds: 2}},
		{name: "even count: between the middle two", in: []time.Duration{4 * time.Second, time.Second, 2 * time.Second, 9 * time.Second},
			want: Durations{Count: 4, Sum: 16 * time.Second, Mean: 4 * time.Second, Median: 3 * time.Second, SumSeconds: 16, MeanSeconds: 4, MedianSeconds: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(summarise(tt.in)).To(Equal(tt.want))
		})
	}
}

func TestChain(t *testing.T) {
	cyclic := []stagecoachv1.Stage{stage("a", "a", "b"), stage("b", "b", "a")}
	broken := []stagecoachv1.Stage{stage("prod", "prod", "missing")}
	tests := []struct {
		name   string
		stages []stagecoachv1.Stage
		from   int
		want   []string
	}{
		{name: "follows upstreams to the first Stage", stages: []stagecoachv1.Stage{stage("dev", "dev", ""), stage("stg", "stg", "dev"), stage("prod", "prod", "stg")},
			from: 2, want: []string{"prod", "stg", "dev"}},
		{name: "a cycle ends", stages: cyclic, want: []string{"a", "b"}},
		{name: "a missing upstream ends", stages: broken, want: []string{"prod"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var names []string
			for _, s := range Chain(tt.stages, &tt.stages[tt.from]) {
				names = append(names, s.Name)
			}
			NewWithT(t).Expect(names).To(Equal(tt.want))
		})
	}
}
