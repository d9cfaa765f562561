package plan

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

func TestExplain(t *testing.T) {
	verified := metav1.NewTime(t0.Add(-2 * time.Minute))
	until := metav1.NewTime(t0.Add(90 * time.Second))
	base := func() *stagecoachv1.Stage {
		return &stagecoachv1.Stage{
			ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "payments"},
			Spec:       stagecoachv1.StageSpec{Service: "payments", Environment: "prod"},
			Status:     stagecoachv1.StageStatus{Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "ApplierReady"}}},
		}
	}
	running := promo("v2", 1, stagecoachv1.PhaseRunning, stagecoachv1.ActionPromote, false)
	running.Status.Version = &stagecoachv1.VersionReference{Digest: d2, Tag: "v2.0.0"}
	running.Status.Message = "waiting for Argo CD to sync"
	cases := []struct {
		name       string
		stage      func(*stagecoachv1.Stage)
		promotions []stagecoachv1.Promotion
		want       []string
	}{
		{name: "a Stage of Git commits says so", stage: func(s *stagecoachv1.Stage) {
			s.Spec.Source.Git = &stagecoachv1.GitSource{URL: "https://git.example/org/config.git", Branch: "main", Paths: []string{"overlays/prod"},
				Verify: &stagecoachv1.GitVerification{SecretRef: stagecoachv1.LocalObjectReference{Name: "signers"}}}
		}, want: []string{"  takes:     Git commits of https://git.example/org/config.git (branch main) that change overlays/prod, signed (HEAD) by a key of Secret 'prod/signers'"}},
		{name: "a follower of another cluster's Stage of commits says so", stage: func(s *stagecoachv1.Stage) {
			s.Spec.Source.UpstreamRecords = &stagecoachv1.UpstreamRecordsSource{Repository: "registry.example/streams", Stream: "a1b2c3d4e5f6/config/staging",
				GitRepository: &stagecoachv1.GitRepositoryReference{URL: "https://git.example/org/config.git"}}
		}, want: []string{"  takes:     Git commits that stream a1b2c3d4e5f6/config/staging verified, each on a branch of https://git.example/org/config.git"}},
		{name: "a Stage that promotes by pull request says where", stage: func(s *stagecoachv1.Stage) {
			s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Git: &stagecoachv1.GitPromotion{URL: "https://git.example/org/config.git", Branch: "env/prod",
				Set:           []stagecoachv1.GitFileEdit{{Path: "prod/values.yaml", Key: "image.digest"}},
				SigningKeyRef: &stagecoachv1.LocalObjectReference{Name: "signing"},
				PullRequest:   &stagecoachv1.GitPullRequest{Provider: "GitHub", Merge: stagecoachv1.PullRequestMergeManual}}}
		}, want: []string{"  writes:    signed commits to prod/values.yaml on branch env/prod of https://git.example/org/config.git, as GitHub pull requests (a person merges them)"}},
		{name: "a Stage that merges commits says where", stage: func(s *stagecoachv1.Stage) {
			s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Git: &stagecoachv1.GitPromotion{URL: "https://git.example/org/config.git", Branch: "env/prod", Merge: true}}
		}, want: []string{"  writes:    commits merging the promoted commit on branch env/prod of https://git.example/org/config.git"}},
		{name: "a Stage that requires attestations and attests says so", stage: func(s *stagecoachv1.Stage) {
			s.Spec.Source.Upstream = &stagecoachv1.UpstreamSource{Stage: "staging", Verify: &stagecoachv1.UpstreamVerification{
				Attestations: []stagecoachv1.AttestationRequirement{{PredicateType: "https://stagecoach.dev/attestation/promotion/v1",
					Condition: `predicate.stage == "staging"`}, {PredicateType: "slsaprovenance1"}}}}
			s.Spec.Attest = &stagecoachv1.AttestPolicy{}
		}, want: []string{`  requires:  https://stagecoach.dev/attestation/promotion/v1 where predicate.stage == "staging"; slsaprovenance1`,
			"  attests:   a signed promotion attestation on each digest it verifies (https://stagecoach.dev/attestation/promotion/v1)"}},
		{name: "new Stage", stage: func(s *stagecoachv1.Stage) { s.Status.Conditions = nil },
			want: []string{"prod/payments (payments, prod)", "  not reconciled yet", "  runs:      nothing verified yet", "  nothing to do"}},
		{name: "running a promotion", promotions: []stagecoachv1.Promotion{running},
			stage: func(s *stagecoachv1.Stage) {
				s.Status.Current = &stagecoachv1.CurrentVersion{Version: "v1.0.0", Digest: d1, VerifiedAt: &verified}
			},
			want: []string{"  runs:      v1.0.0 (sha256:111111111111), verified 2m0s ago",
				"  promoting: Promotion v2 applies v2.0.0 (sha256:222222222222): waiting for Argo CD to sync"}},
		{name: "blocked, held, frozen, unready", stage: func(s *stagecoachv1.Stage) {
			s.Status.Conditions = []metav1.Condition{
				{Type: "Ready", Status: metav1.ConditionFalse, Reason: "ApplierUnlabelled", Message: "Application 'prod/payments' lacks the label"},
				{Type: "Frozen", Status: metav1.ConditionTrue, Reason: "ForeignWrite", Message: "someone wrote v9"},
			}
			s.Status.Hold = &stagecoachv1.AutomationHold{Message: "automatic promotion is held"}
			s.Status.Candidate = &stagecoachv1.CandidateVersion{Version: "v3.0.0", Digest: d2, BlockedBy: []stagecoachv1.GateBlock{
				{Gate: "soak", Message: "verified upstream 28m ago, needs 30m", Until: &until},
				{Gate: "hold", Message: "automatic promotion is held"},
			}}
		}, want: []string{
			"  not ready: ApplierUnlabelled: Application 'prod/payments' lacks the label",
			"  frozen:    someone wrote v9",
			"  held:      automatic promotion is held",
			"  candidate: v3.0.0 (sha256:222222222222)",
			"    blocked by hold: automatic promotion is held",
			"    blocked by soak: verified upstream 28m ago, needs 30m (opens in 1m30s)",
		}},
		{name: "newer versions skipped for an older signed one", stage: func(s *stagecoachv1.Stage) {
			s.Status.Candidate = &stagecoachv1.CandidateVersion{Version: "v1.1.0", Digest: d1, Skipped: []stagecoachv1.SkippedVersion{
				{Version: "v1.2.0", Digest: d2, Gate: "signature", Reason: "SignatureMissing", Message: "no signature"},
			}}
		}, want: []string{
			"  candidate: v1.1.0 (sha256:111111111111)",
			"    skipped v1.2.0 (sha256:222222222222) (signature SignatureMissing): no signature",
		}},
		{name: "unguarded and not mediated", stage: func(s *stagecoachv1.Stage) {
			s.Status.Conditions = append(s.Status.Conditions,
				metav1.Condition{Type: "Guarded", Status: metav1.ConditionFalse, Reason: "PoliciesMissing", Message: "admission policy application-guard.stagecoach.dev is not installed"},
				metav1.Condition{Type: "Mediated", Status: metav1.ConditionFalse, Reason: "NotMediated", Message: "Application 'prod/payments' sets spec.sourceHydrator"})
		}, want: []string{
			"  unguarded: admission policy application-guard.stagecoach.dev is not installed",
			"  unmediated: Application 'prod/payments' sets spec.sourceHydrator",
		}},
		{name: "every newer version skipped", stage: func(s *stagecoachv1.Stage) {
			s.Status.Candidate = &stagecoachv1.CandidateVersion{Skipped: []stagecoachv1.SkippedVersion{
				{Version: "v1.2.0", Digest: d2, Gate: "history", Reason: "PromotionFailed", Message: "failed before"},
			}}
		}, want: []string{
			"  candidate: none: every newer version is skipped",
			"    skipped v1.2.0 (sha256:222222222222) (history PromotionFailed): failed before",
		}},
		{name: "records: own stream, the newest record and one pending", promotions: func() []stagecoachv1.Promotion {
			verified := promo("v1", 1, stagecoachv1.PhaseSucceeded, stagecoachv1.ActionPromote, false)
			verified.Status.Record = &stagecoachv1.RecordReference{Ref: "reg.example/streams:c-prod-payments-2", Seq: 2, Action: "Verify", Digest: d1}
			older := promo("v0", 1, stagecoachv1.PhaseSucceeded, stagecoachv1.ActionPromote, false)
			older.Status.Record = &stagecoachv1.RecordReference{Ref: "reg.example/streams:c-prod-payments-1", Seq: 1, Action: "Promote"}
			pending := running.DeepCopy()
			pending.Status.Recording = &stagecoachv1.PendingRecord{Seq: 3, Action: "Promote", Message: "registry down, retrying"}
			return []stagecoachv1.Promotion{older, verified, *pending}
		}(), stage: func(s *stagecoachv1.Stage) {
			s.Status.Stream = &stagecoachv1.StreamStatus{ID: "c/prod/payments", Seq: 2, Digest: d1, Message: "records delayed"}
		}, want: []string{
			"  stream:    c/prod/payments, record 2 (" + d1 + ")\n    records delayed",
			"  recorded:  Promotion v1: Verify, record 2 reg.example/streams:c-prod-payments-2",
			"    pending record 3 (Promote) of Promotion v2: registry down, retrying",
		}},
		{name: "records: a follower and what it would take", stage: func(s *stagecoachv1.Stage) {
			s.Spec.Source.UpstreamRecords = &stagecoachv1.UpstreamRecordsSource{Repository: "reg.example/streams", Stream: "c/staging/payments"}
			s.Status.UpstreamSeen = &stagecoachv1.UpstreamSeen{Seq: 4, Digest: d2}
		}, want: []string{
			"  follows:   stream c/staging/payments in reg.example/streams, read up to record 4 (" + d2 + ")",
		}},
		{name: "records off say nothing", stage: func(s *stagecoachv1.Stage) {
			s.Status.Stream = &stagecoachv1.StreamStatus{Message: "records are off: ..."}
		}, want: []string{"prod/payments (payments, prod)\n  runs:      nothing verified yet\n  nothing to do"}},
		{name: "fleet waves: what each target waits on", promotions: []stagecoachv1.Promotion{running},
			stage: func(s *stagecoachv1.Stage) {
				s.Status.Waves = []stagecoachv1.WaveStatus{
					{Name: "canary", Digest: d2, Phase: stagecoachv1.PhaseSucceeded, Message: "1 of 1 targets done", Targets: []string{"eu1"}, Completed: []string{"eu1"}},
					{Name: "regions", Digest: d2, Phase: stagecoachv1.PhaseRunning, Message: "0 of 3 targets done, 1 syncing",
						Targets: []string{"us1", "ap1", "sa1"}, Syncing: []string{"us1"}},
					{Name: "rest", Digest: d2, Phase: stagecoachv1.PhasePending, Message: `waits for wave "regions"`, Targets: []string{"us2"}},
				}
			},
			want: []string{
				`  wave 1/3 "canary": Succeeded: 1 of 1 targets done`,
				"    Succeeded: eu1\n",
				`  wave 2/3 "regions": Running: 0 of 3 targets done, 1 syncing`,
				"    Running: us1 (waits on Argo CD to sync it, healthy, at the version)",
				"    Pending: ap1, sa1 (waits on a free slot (maxParallel) in its wave)",
				`    Pending: us2 (waits for wave "regions")`,
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			if tc.stage != nil {
				tc.stage(s)
			}
			out := strings.Join(Explain(s, tc.promotions, t0).Lines(), "\n")
			for _, line := range tc.want {
				NewWithT(t).Expect(out + "\n").To(ContainSubstring(strings.ReplaceAll(line, "\\n", "\n")))
			}
			if s.Status.Stream == nil && s.Spec.Source.UpstreamRecords == nil && len(tc.promotions) < 3 {
				NewWithT(t).Expect(out).NotTo(MatchRegexp(`stream:|recorded:|follows:`), "no records lines without records")
			}
			if len(s.Status.Waves) == 0 {
				NewWithT(t).Expect(out).NotTo(ContainSubstring("wave "), "no wave lines for a Stage without waves")
			}
		})
	}
}

func TestFollowerPreviewLines(t *testing.T) {
	cases := []struct {
		name    string
		preview FollowerPreview
		want    []string
	}{
		{name: "takes a version, refuses one, skips one",
			preview: FollowerPreview{UpstreamSeq: 6, UpstreamHead: d1, Takes: &PreviewVersion{Tag: "v2", Digest: d2, Seq: 4},
				Refused: []PreviewVersion{{Tag: "v3", Digest: d1, Seq: 6, Why: "it failed verification upstream: Failed (record 6)"}}, Skipped: 1},
			want: []string{"  would take v2 (sha256:222222222222): verified upstream in record 4 (upstreamSeq=6 upstreamHead=" + d1 + ")",
				"    refused v3 (sha256:111111111111): it failed verification upstream: Failed (record 6)",
				"    skipped 1 record(s): no trusted key signed them"}},
		{name: "nothing verified", preview: FollowerPreview{UpstreamSeq: 1, UpstreamHead: d1},
			want: []string{"  would take nothing: the upstream verified nothing that is not excluded (upstreamSeq=1 upstreamHead=" + d1 + ")"}},
		{name: "unreadable", preview: FollowerPreview{Error: "upstream records were removed"},
			want: []string{"  would take nothing: upstream records were removed"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(previewLines(&tc.preview)).To(Equal(tc.want))
		})
	}
}

// Versions read as people know them: an OCI digest's and a Git commit's first 12 hex digits, with
// the algorithm, after the tag when there is one.
func TestDescribeVersion(t *testing.T) {
	for _, tc := range []struct{ tag, digest, want string }{
		{tag: "v1.2.0", digest: "sha256:" + strings.Repeat("a", 64), want: "v1.2.0 (sha256:aaaaaaaaaaaa)"},
		{digest: "sha256:" + strings.Repeat("b", 64), want: "sha256:bbbbbbbbbbbb"},
		{tag: "0123456", digest: "sha1:0123456789abcdef0123456789abcdef01234567", want: "0123456 (sha1:0123456789ab)"},
		{tag: "v2.0.0", digest: "sha1:" + strings.Repeat("c", 40), want: "v2.0.0 (sha1:cccccccccccc)"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			NewWithT(t).Expect(describeVersion(tc.tag, tc.digest)).To(Equal(tc.want))
		})
	}
}
