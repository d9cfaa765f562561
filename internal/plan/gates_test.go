package plan

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

func window(kind, schedule string, d time.Duration, tz string) stagecoachv1.TimeWindow {
	return stagecoachv1.TimeWindow{Kind: kind, Schedule: schedule, Duration: metav1.Duration{Duration: d}, TimeZone: tz}
}

func TestWindowBlock(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	weekdays := window(stagecoachv1.WindowAllow, "0 9 * * 1-5", 8*time.Hour, "Europe/Berlin")
	night := window(stagecoachv1.WindowAllow, "0 22 * * *", 4*time.Hour, "UTC") // crosses midnight
	friday := window(stagecoachv1.WindowDeny, "0 15 * * 5", 9*time.Hour, "Europe/Berlin")
	for _, tc := range []struct {
		name    string
		windows []stagecoachv1.TimeWindow
		now     time.Time
		reason  string // "" when open
		until   time.Time
		message string
	}{
		{name: "no windows", now: t0},
		{name: "inside an allow window (Berlin, Monday 10:00)", windows: []stagecoachv1.TimeWindow{weekdays},
			now: time.Date(2026, 11, 30, 10, 0, 0, 0, berlin)},
		{name: "same instant read in Tokyo is inside too", windows: []stagecoachv1.TimeWindow{weekdays},
			now: time.Date(2026, 11, 30, 18, 0, 0, 0, tokyo)},
		{name: "before it opens, until the opening in Berlin", windows: []stagecoachv1.TimeWindow{weekdays},
			now: time.Date(2026, 11, 30, 8, 30, 0, 0, berlin), reason: "OutsideAllowWindow",
			until: time.Date(2026, 11, 30, 9, 0, 0, 0, berlin), message: "the next opens"},
		{name: "after it closes, opens next morning", windows: []stagecoachv1.TimeWindow{weekdays},
			now: time.Date(2026, 11, 30, 17, 0, 0, 0, berlin), reason: "OutsideAllowWindow",
			until: time.Date(2026, 12, 1, 9, 0, 0, 0, berlin)},
		{name: "saturday waits for monday", windows: []stagecoachv1.TimeWindow{weekdays},
			now: time.Date(2026, 11, 28, 10, 0, 0, 0, berlin), reason: "OutsideAllowWindow",
			until: time.Date(2026, 11, 30, 9, 0, 0, 0, berlin)},
		{name: "window crossing midnight, after midnight", windows: []stagecoachv1.TimeWindow{night},
			now: time.Date(2026, 12, 1, 1, 30, 0, 0, time.UTC)},
		{name: "window crossing midnight, at its end", windows: []stagecoachv1.TimeWindow{night},
			now: time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC), reason: "OutsideAllowWindow",
			until: time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)},
		{name: "one of two allow windows open", windows: []stagecoachv1.TimeWindow{weekdays, night},
			now: time.Date(2026, 11, 28, 23, 0, 0, 0, time.UTC)},
		{name: "two allow windows closed: the sooner opening", windows: []stagecoachv1.TimeWindow{weekdays, night},
			now: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), reason: "OutsideAllowWindow",
			until: time.Date(2026, 11, 28, 22, 0, 0, 0, time.UTC)},
		{name: "deny wins over allow", windows: []stagecoachv1.TimeWindow{weekdays, friday},
			now: time.Date(2026, 11, 27, 16, 0, 0, 0, berlin), reason: "DenyWindow",
			until: time.Date(2026, 11, 28, 0, 0, 0, 0, berlin), message: "inside the deny window"},
		{name: "deny alone, outside it", windows: []stagecoachv1.TimeWindow{friday},
			now: time.Date(2026, 11, 27, 14, 59, 0, 0, berlin)},
		{name: "deny crossing midnight, after midnight", windows: []stagecoachv1.TimeWindow{window(stagecoachv1.WindowDeny, "0 23 * * *", 2*time.Hour, "")},
			now: time.Date(2026, 12, 1, 0, 30, 0, 0, time.UTC), reason: "DenyWindow",
			until: time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)},
		{name: "unknown time zone holds", windows: []stagecoachv1.TimeWindow{window(stagecoachv1.WindowAllow, "0 9 * * *", time.Hour, "Mars/Olympus")},
			now: t0, reason: "InvalidWindow", message: "Mars/Olympus"},
		{name: "unparsable schedule holds", windows: []stagecoachv1.TimeWindow{window(stagecoachv1.WindowDeny, "0 25 * * *", time.Hour, "")},
			now: t0, reason: "InvalidWindow", message: "windows[0]"},
		{name: "allow window that never ticks", windows: []stagecoachv1.TimeWindow{window(stagecoachv1.WindowAllow, "0 0 30 2 *", time.Hour, "")},
			now: t0, reason: "OutsideAllowWindow", message: "none opens within a year"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			b := windowBlock(tc.windows, tc.now)
			if tc.reason == "" {
				g.Expect(b).To(BeNil())
				return
			}
			g.Expect(b).NotTo(BeNil())
			g.Expect(b.Gate).To(Equal(stagecoachv1.GateWindow))
			g.Expect(b.Reason).To(Equal(tc.reason))
			g.Expect(b.Message).To(ContainSubstring(tc.message))
			if tc.until.IsZero() {
				g.Expect(b.Until).To(BeNil())
			} else {
				g.Expect(b.Until).NotTo(BeNil())
				g.Expect(b.Until.Time.Equal(tc.until)).To(BeTrue(), "until %s, want %s", b.Until.Time, tc.until.UTC())
			}
		})
	}
}

func approval(approver, digest string, groups ...string) stagecoachv1.Approval {
	return stagecoachv1.Approval{
		ObjectMeta: metav1.ObjectMeta{Name: approver + "-" + digest[7:11], Namespace: "shop"},
		Spec:       stagecoachv1.ApprovalSpec{Stage: "prod", Digest: digest, Approver: approver, Groups: groups},
	}
}

func TestApprovalBlock(t *testing.T) {
	prod := func(required int32, groups ...string) *stagecoachv1.Stage {
		return &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Name: "prod", Namespace: "shop"},
			Spec: stagecoachv1.StageSpec{Promotion: &stagecoachv1.PromotionPolicy{Approvals: &stagecoachv1.ApprovalPolicy{Required: required, Groups: groups}}}}
	}
	otherStage := approval("carol", d1, "release")
	otherStage.Spec.Stage = "staging"
	otherNamespace := approval("dave", d1, "release")
	otherNamespace.Namespace = "elsewhere"
	for _, tc := range []struct {
		name      string
		stage     *stagecoachv1.Stage
		approvals []stagecoachv1.Approval
		promoters []Promoter
		blocked   bool
		message   []string
	}{
		{name: "no policy", stage: &stagecoachv1.Stage{}, blocked: false},
		{name: "none yet", stage: prod(1), blocked: true, message: []string{"0 of 1 approvals for " + d1}},
		{name: "one is enough", stage: prod(1), approvals: []stagecoachv1.Approval{approval("alice", d1)}},
		{name: "the same person twice counts once", stage: prod(2),
			approvals: []stagecoachv1.Approval{approval("alice", d1), approval("alice", d1)}, blocked: true, message: []string{"1 of 2"}},
		{name: "two people", stage: prod(2), approvals: []stagecoachv1.Approval{approval("alice", d1), approval("bob", d1)}},
		{name: "another digest does not count", stage: prod(1), approvals: []stagecoachv1.Approval{approval("alice", d2)},
			blocked: true, message: []string{"0 of 1"}},
		{name: "another Stage or namespace does not count", stage: prod(1), approvals: []stagecoachv1.Approval{otherStage, otherNamespace},
			blocked: true, message: []string{"0 of 1"}},
		{name: "group member counts", stage: prod(1, "release"), approvals: []stagecoachv1.Approval{approval("alice", d1, "dev", "release")}},
		{name: "outside the groups does not count", stage: prod(1, "release"), approvals: []stagecoachv1.Approval{approval("alice", d1, "dev")},
			blocked: true, message: []string{"0 of 1", "from members of release", "alice approved without naming one of those groups"}},
		{name: "the promoter does not count", stage: prod(1), approvals: []stagecoachv1.Approval{approval("alice", d1)},
			promoters: []Promoter{promoter("alice", "shop", "prod")}, blocked: true,
			message: []string{"0 of 1", "alice promoted this version by hand in shop/prod and cannot approve it"}},
		{name: "someone else besides the promoter", stage: prod(1), approvals: []stagecoachv1.Approval{approval("alice", d1), approval("bob", d1)},
			promoters: []Promoter{promoter("alice", "shop", "prod")}},
		{name: "a hand promoter two Stages up does not count, and the message says where she promoted",
			stage: prod(1), approvals: []stagecoachv1.Approval{approval("alice", d1)},
			promoters: []Promoter{promoter("alice", "dev", "payments-dev")}, blocked: true,
			message: []string{"0 of 1", "alice promoted this version by hand in dev/payments-dev and cannot approve it"}},
		{name: "every Stage she promoted it in is named, each promoter on her own",
			stage: prod(2), blocked: true, approvals: []stagecoachv1.Approval{approval("bob", d1), approval("alice", d1), approval("carol", d1)},
			promoters: []Promoter{promoter("bob", "shop", "staging"), promoter("alice", "shop", "staging"), promoter("alice", "dev", "payments-dev")},
			message: []string{"1 of 2",
				"; alice promoted this version by hand in dev/payments-dev, shop/staging and cannot approve it; bob promoted this version by hand in shop/staging and cannot approve it"}},
		{name: "a promoter who did not approve is not named", stage: prod(1), promoters: []Promoter{promoter("alice", "dev", "payments-dev")},
			blocked: true, message: []string{"0 of 1 approvals for " + d1 + "$"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			b := approvalBlock(tc.stage, d1, tc.approvals, tc.promoters)
			if !tc.blocked {
				g.Expect(b).To(BeNil())
				return
			}
			g.Expect(b).NotTo(BeNil())
			g.Expect(b.Gate).To(Equal(stagecoachv1.GateApprovals))
			for _, m := range tc.message {
				if strings.HasSuffix(m, "$") {
					g.Expect(b.Message).To(HaveSuffix(strings.TrimSuffix(m, "$")))
					continue
				}
				g.Expect(b.Message).To(ContainSubstring(m))
			}
		})
	}
}

func promoter(name, namespace, stage string) Promoter {
	return Promoter{Name: name, Stage: types.NamespacedName{Namespace: namespace, Name: stage}}
}

func TestPromoters(t *testing.T) {
	g := NewWithT(t)
	byHand := promo("a", 0, stagecoachv1.PhaseSucceeded, stagecoachv1.ActionPromote, false)
	byHand.Spec.RequestedBy = "alice"
	auto := promo("b", 1, stagecoachv1.PhaseSucceeded, stagecoachv1.ActionPromote, true)
	auto.Spec.RequestedBy = "system:serviceaccount:stagecoach-system:stagecoach-controller"
	otherDigest := promo("c", 2, stagecoachv1.PhaseSucceeded, stagecoachv1.ActionPromote, false)
	otherDigest.Spec.RequestedBy = "bob"
	otherDigest.Spec.Version.Digest = d2
	rollback := promo("d", 3, stagecoachv1.PhaseSucceeded, stagecoachv1.ActionRollback, false)
	rollback.Spec.RequestedBy = "carol"
	controller := "system:serviceaccount:stagecoach-system:stagecoach-controller"
	for _, p := range []*stagecoachv1.Promotion{&byHand, &auto, &otherDigest, &rollback} {
		p.Namespace, p.Spec.Stage = "shop", "staging"
	}
	g.Expect(Promoters(d1, []stagecoachv1.Promotion{byHand, auto, otherDigest, rollback, byHand}, controller)).To(Equal([]Promoter{promoter("alice", "shop", "staging")}))
	// A label does not make a person's Promotion automation's.
	labelled := promo("e", 4, stagecoachv1.PhaseSucceeded, stagecoachv1.ActionPromote, true)
	labelled.Namespace, labelled.Spec.Stage = "shop", "staging"
	labelled.Spec.RequestedBy = "mallory"
	g.Expect(Promoters(d1, []stagecoachv1.Promotion{labelled, auto}, controller)).To(Equal([]Promoter{promoter("mallory", "shop", "staging")}))
	// The same person promoting in two Stages is named for each.
	elsewhere := byHand
	elsewhere.Namespace, elsewhere.Spec.Stage = "dev", "payments-dev"
	g.Expect(Promoters(d1, []stagecoachv1.Promotion{byHand, elsewhere}, controller)).To(Equal(
		[]Promoter{promoter("alice", "shop", "staging"), promoter("alice", "dev", "payments-dev")}))
}

func TestDependsOnBlocks(t *testing.T) {
	verified := func(ns, name, version string) *stagecoachv1.Stage {
		return &stagecoachv1.Stage{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Generation: 3},
			Status: stagecoachv1.StageStatus{
				ObservedGeneration: 3,
				Conditions:         []metav1.Condition{{Type: stagecoachv1.ConditionVerified, Status: metav1.ConditionTrue}},
				Current:            &stagecoachv1.CurrentVersion{Version: version, Digest: d1, VerifiedAt: &metav1.Time{Time: t0}},
			},
		}
	}
	unverified := verified("shop", "db", "v2.0.0")
	unverified.Status.Conditions[0].Status = metav1.ConditionFalse
	stale := verified("shop", "db", "v2.0.0")
	stale.Generation = 4
	promoting := verified("shop", "db", "v2.0.0")
	promoting.Status.Conditions = append(promoting.Status.Conditions, metav1.Condition{Type: stagecoachv1.ConditionPromoting,
		Status: metav1.ConditionTrue, Message: "Promotion db-x is applying v2.1.0"})
	// A stand-in matcher for ">=" constraints only; the semver package has its own tests.
	atLeast := func(constraint, version string) (bool, error) {
		min, ok := strings.CutPrefix(constraint, ">=")
		if !ok {
			return false, fmt.Errorf("unsupported constraint %q", constraint)
		}
		return strings.TrimPrefix(version, "v") >= strings.TrimPrefix(min, "v"), nil
	}
	stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Name: "prod", Namespace: "shop"}}
	for _, tc := range []struct {
		name     string
		deps     []stagecoachv1.StageDependency
		others   []*stagecoachv1.Stage
		moving   string
		messages []string
	}{
		{name: "none"},
		{name: "met, other namespace", deps: []stagecoachv1.StageDependency{{Stage: "base", Namespace: "platform", Version: ">=2.0.0"}},
			others: []*stagecoachv1.Stage{verified("platform", "base", "v2.1.0")}},
		{name: "met, any version", deps: []stagecoachv1.StageDependency{{Stage: "db"}}, others: []*stagecoachv1.Stage{verified("shop", "db", "v0.1.0")}},
		{name: "missing", deps: []stagecoachv1.StageDependency{{Stage: "base", Namespace: "platform"}},
			messages: []string{"depends on Stage platform/base: missing: it does not exist"}},
		{name: "same name in this namespace is not the other namespace's", deps: []stagecoachv1.StageDependency{{Stage: "base", Namespace: "platform"}},
			others: []*stagecoachv1.Stage{verified("shop", "base", "v9.0.0")}, messages: []string{"platform/base: missing"}},
		{name: "not verified", deps: []stagecoachv1.StageDependency{{Stage: "db"}}, others: []*stagecoachv1.Stage{unverified},
			messages: []string{"shop/db: not verified"}},
		{name: "status behind its spec", deps: []stagecoachv1.StageDependency{{Stage: "db"}}, others: []*stagecoachv1.Stage{stale},
			messages: []string{"shop/db: not settled: its status does not yet reflect generation 4"}},
		{name: "a Promotion of it has not finished", deps: []stagecoachv1.StageDependency{{Stage: "db"}},
			others: []*stagecoachv1.Stage{verified("shop", "db", "v2.0.0")}, moving: "Promote Promotion db-1 (Pending)",
			messages: []string{"shop/db: still promoting: Promote Promotion db-1 (Pending) has not finished"}},
		{name: "it is promoting something newer", deps: []stagecoachv1.StageDependency{{Stage: "db"}}, others: []*stagecoachv1.Stage{promoting},
			messages: []string{"shop/db: still promoting: Promotion db-x is applying v2.1.0"}},
		{name: "too old", deps: []stagecoachv1.StageDependency{{Stage: "base", Namespace: "platform", Version: ">=2.0.0"}},
			others: []*stagecoachv1.Stage{verified("platform", "base", "v1.9.0")}, messages: []string{`too old: it runs v1.9.0, which does not meet ">=2.0.0"`}},
		{name: "bad constraint", deps: []stagecoachv1.StageDependency{{Stage: "db", Version: "~>1"}},
			others: []*stagecoachv1.Stage{verified("shop", "db", "v1.0.0")}, messages: []string{"version unreadable"}},
		{name: "every unmet one is listed", deps: []stagecoachv1.StageDependency{{Stage: "db"}, {Stage: "cache"}},
			others: []*stagecoachv1.Stage{unverified}, messages: []string{"shop/db: not verified", "shop/cache: missing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := stage.DeepCopy()
			s.Spec.DependsOn = tc.deps
			deps := map[types.NamespacedName]Dependency{}
			for _, o := range tc.others {
				deps[types.NamespacedName{Namespace: o.Namespace, Name: o.Name}] = Dependency{Stage: o, Moving: tc.moving}
			}
			blocks := dependsOnBlocks(s, deps, atLeast)
			g.Expect(blocks).To(HaveLen(len(tc.messages)))
			for i, b := range blocks {
				g.Expect(b.Gate).To(Equal(stagecoachv1.GateDependsOn))
				g.Expect(b.Reason).To(Equal(stagecoachv1.ReasonDependencyNotReady))
				g.Expect(b.Message).To(ContainSubstring(tc.messages[i]))
			}
		})
	}
}

func TestDependencyCycle(t *testing.T) {
	stageOf := func(ns, name string, deps ...stagecoachv1.StageDependency) *stagecoachv1.Stage {
		return &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: stagecoachv1.StageSpec{DependsOn: deps}}
	}
	on := func(name string) stagecoachv1.StageDependency { return stagecoachv1.StageDependency{Stage: name} }
	for _, tc := range []struct {
		name   string
		stages []*stagecoachv1.Stage
		want   string
	}{
		{name: "a chain is no cycle", stages: []*stagecoachv1.Stage{stageOf("p", "apps", on("mgmt")), stageOf("p", "mgmt", on("base")), stageOf("p", "base")}},
		{name: "a diamond is no cycle", stages: []*stagecoachv1.Stage{stageOf("p", "apps", on("a"), on("b")), stageOf("p", "a", on("base")),
			stageOf("p", "b", on("base")), stageOf("p", "base")}},
		{name: "itself", stages: []*stagecoachv1.Stage{stageOf("p", "apps", on("apps"))}, want: "p/apps -> p/apps"},
		{name: "three Stages", stages: []*stagecoachv1.Stage{stageOf("p", "apps", on("mgmt")), stageOf("p", "mgmt", on("base")), stageOf("p", "base", on("apps"))},
			want: "p/apps -> p/mgmt -> p/base -> p/apps"},
		{name: "across namespaces", stages: []*stagecoachv1.Stage{stageOf("p", "apps", stagecoachv1.StageDependency{Stage: "base", Namespace: "q"}),
			stageOf("q", "base", stagecoachv1.StageDependency{Stage: "apps", Namespace: "p"})}, want: "p/apps -> q/base -> p/apps"},
		{name: "a cycle elsewhere is not this Stage's", stages: []*stagecoachv1.Stage{stageOf("p", "apps", on("a")), stageOf("p", "a", on("b")), stageOf("p", "b", on("a"))}},
		{name: "a missing dependency ends the path", stages: []*stagecoachv1.Stage{stageOf("p", "apps", on("gone"))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			all := map[types.NamespacedName]*stagecoachv1.Stage{}
			for _, s := range tc.stages {
				all[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = s
			}
			g.Expect(DependencyCycle(tc.stages[0], all)).To(Equal(tc.want))
		})
	}
}

// A person's Promotion on a Stage whose applier is not mediated runs, and its gates say so.
func TestPromoteGatesTellAboutMediation(t *testing.T) {
	notMediated := metav1.Condition{Type: stagecoachv1.ConditionMediated, Status: metav1.ConditionFalse,
		Reason: stagecoachv1.ReasonNotMediated, Message: "Application 'prod/payments' sets spec.sourceHydrator"}
	mediated := metav1.Condition{Type: stagecoachv1.ConditionMediated, Status: metav1.ConditionTrue, Reason: stagecoachv1.ReasonMediated}
	for _, tc := range []struct {
		name       string
		conditions []metav1.Condition
		want       []stagecoachv1.GateResult
	}{
		{name: "not mediated: passes, and says what else decides", conditions: []metav1.Condition{notMediated},
			want: []stagecoachv1.GateResult{{Gate: stagecoachv1.GateMediated, Passed: true, Message: "Application 'prod/payments' sets spec.sourceHydrator; " +
				"this Promotion runs, but the digest alone does not decide what runs (automation waits until it does)"}}},
		{name: "mediated: no verdict", conditions: []metav1.Condition{mediated}, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			stage := &stagecoachv1.Stage{Status: stagecoachv1.StageStatus{Conditions: tc.conditions}}
			blocks, results := RunGates(PromoteGates, GateInputs{Stage: stage, Digest: d2, Now: t0})
			g.Expect(blocks).To(BeEmpty())
			g.Expect(results).To(Equal(tc.want))
		})
	}
}

// A follower's promote passes the published gate last, on what its upstream's records say when
// it starts; automation's candidates are not judged by it.
func TestPublishedGate(t *testing.T) {
	follower := &stagecoachv1.Stage{Spec: stagecoachv1.StageSpec{Source: stagecoachv1.StageSource{
		UpstreamRecords: &stagecoachv1.UpstreamRecordsSource{Repository: "reg.example/streams", Stream: "c/staging/payments"}}}}
	until := metav1.NewTime(t0.Add(30 * time.Second))
	notVerified := &stagecoachv1.GateBlock{Gate: stagecoachv1.GatePublished, Reason: stagecoachv1.ReasonNotPublished, Until: &until,
		Message: d2 + " is not verified in the upstream's records"}
	excluded := &stagecoachv1.GateBlock{Gate: stagecoachv1.GatePublished, Reason: stagecoachv1.ReasonNotPublished,
		Message: d2 + " is never taken: it failed upstream"}
	for _, tc := range []struct {
		name      string
		stage     *stagecoachv1.Stage
		published *PublishedVerdict
		blocks    []stagecoachv1.GateBlock
		results   []stagecoachv1.GateResult
		refused   string
	}{
		{name: "not a follower: not asked", stage: &stagecoachv1.Stage{}},
		{name: "verified upstream: passes with the record it relied on", stage: follower,
			published: &PublishedVerdict{Evidence: "v2 verified upstream in record 4 (upstreamSeq=4)"},
			results:   []stagecoachv1.GateResult{{Gate: stagecoachv1.GatePublished, Passed: true, Message: "v2 verified upstream in record 4 (upstreamSeq=4)"}}},
		{name: "not verified upstream: waits until the records are read again", stage: follower,
			published: &PublishedVerdict{Block: notVerified}, blocks: []stagecoachv1.GateBlock{*notVerified},
			results: []stagecoachv1.GateResult{{Gate: stagecoachv1.GatePublished, Message: notVerified.Message}}},
		{name: "excluded upstream: refused for good", stage: follower,
			published: &PublishedVerdict{Block: excluded, Excluded: true}, blocks: []stagecoachv1.GateBlock{*excluded},
			results: []stagecoachv1.GateResult{{Gate: stagecoachv1.GatePublished, Message: excluded.Message}},
			refused: "NotPublished: " + excluded.Message},
		{name: "never checked: held", stage: follower,
			blocks: []stagecoachv1.GateBlock{{Gate: stagecoachv1.GatePublished, Reason: stagecoachv1.ReasonNotPublished,
				Message: d2 + " was not checked against the upstream's records"}},
			results: []stagecoachv1.GateResult{{Gate: stagecoachv1.GatePublished, Message: d2 + " was not checked against the upstream's records"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			in := GateInputs{Stage: tc.stage, Digest: d2, Now: t0, Published: tc.published}
			g.Expect(Asks(tc.stage, stagecoachv1.GatePublished)).To(Equal(tc.stage.Spec.Source.UpstreamRecords != nil))
			blocks, results := RunGates(ApplyGates, in)
			g.Expect(blocks).To(Equal(tc.blocks))
			g.Expect(results).To(Equal(tc.results))
			g.Expect(Refusal(ApplyGates, in)).To(Equal(tc.refused))
			// Automation's chain leaves it out: the follower offers only what the records verified.
			blocks, results = RunGates(PromoteGates, in)
			g.Expect(blocks).To(BeEmpty())
			g.Expect(results).To(BeEmpty())
			g.Expect(Refusal(PromoteGates, in)).To(BeEmpty())
		})
	}
}

// The published gate and the checks before apply come last, in that order: a Promotion's
// status.gates list them after the others.
func TestApplyGatesEndWithPublishedThenChecks(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ApplyGates).To(HaveLen(len(PromoteGates) + 2))
	for i, gate := range PromoteGates {
		g.Expect(ApplyGates[i].Name).To(Equal(gate.Name))
	}
	g.Expect(ApplyGates[len(ApplyGates)-2].Name).To(Equal(stagecoachv1.GatePublished))
	g.Expect(ApplyGates[len(ApplyGates)-1].Name).To(Equal(stagecoachv1.GateChecks))
}

// The checks before apply are the last gate of a starting promote: due only once every other
// gate passes, holding while they run, a verdict per check, and a failed check refuses the
// version (the Promotion fails).
func TestChecksGate(t *testing.T) {
	checks := []stagecoachv1.Check{{Name: "smoke"}, {Name: "db"}}
	withChecks := func(policy stagecoachv1.PromotionPolicy) *stagecoachv1.Stage {
		policy.Checks = checks
		return &stagecoachv1.Stage{Spec: stagecoachv1.StageSpec{Promotion: &policy}}
	}
	plain := withChecks(stagecoachv1.PromotionPolicy{})
	approved := withChecks(stagecoachv1.PromotionPolicy{Approvals: &stagecoachv1.ApprovalPolicy{Required: 1, Groups: []string{"release"}}})
	running := stagecoachv1.GateBlock{Gate: stagecoachv1.GateChecks, Reason: stagecoachv1.ReasonChecksRunning,
		Message: "running the checks before apply (smoke, db)"}
	smokePassed := stagecoachv1.GateResult{Gate: "check/smoke", Passed: true, Message: "200 OK"}
	dbPassed := stagecoachv1.GateResult{Gate: "check/db", Passed: true, Message: "migrated"}
	dbFailed := stagecoachv1.GateResult{Gate: "check/db", Message: "db: schema 41 < 42"}
	for _, tc := range []struct {
		name    string
		stage   *stagecoachv1.Stage
		checks  *ChecksVerdict
		due     bool
		blocks  []stagecoachv1.GateBlock
		results []stagecoachv1.GateResult
		refused string
	}{
		{name: "no checks: not asked", stage: &stagecoachv1.Stage{}},
		{name: "another gate holds: the checks are not due", stage: approved,
			blocks:  []stagecoachv1.GateBlock{{Gate: stagecoachv1.GateApprovals}, running},
			results: []stagecoachv1.GateResult{{Gate: stagecoachv1.GateApprovals}, {Gate: stagecoachv1.GateChecks, Message: running.Message}}},
		{name: "due and not started: held while they run", stage: plain, due: true,
			blocks: []stagecoachv1.GateBlock{running}, results: []stagecoachv1.GateResult{{Gate: stagecoachv1.GateChecks, Message: running.Message}}},
		{name: "still running: held", stage: plain, due: true, checks: &ChecksVerdict{},
			blocks: []stagecoachv1.GateBlock{running}, results: []stagecoachv1.GateResult{{Gate: stagecoachv1.GateChecks, Message: running.Message}}},
		{name: "every check passed: a verdict per check", stage: plain, due: true,
			checks:  &ChecksVerdict{Done: true, Results: []stagecoachv1.GateResult{smokePassed, dbPassed}},
			results: []stagecoachv1.GateResult{smokePassed, dbPassed}},
		{name: "a check failed: refused, naming it", stage: plain, due: true,
			checks:  &ChecksVerdict{Done: true, Results: []stagecoachv1.GateResult{smokePassed, dbFailed}},
			blocks:  []stagecoachv1.GateBlock{{Gate: stagecoachv1.GateChecks, Reason: stagecoachv1.ReasonCheckFailed, Message: dbFailed.Message}},
			results: []stagecoachv1.GateResult{smokePassed, dbFailed}, refused: dbFailed.Message},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			in := GateInputs{Stage: tc.stage, Digest: d2, Now: t0, Checks: tc.checks}
			g.Expect(ChecksDue(in)).To(Equal(tc.due))
			blocks, results := RunGates(ApplyGates, in)
			// Only the gate names and reasons matter for the gates before the checks.
			for i := range blocks {
				if blocks[i].Gate != stagecoachv1.GateChecks {
					blocks[i] = stagecoachv1.GateBlock{Gate: blocks[i].Gate}
				}
			}
			for i := range results {
				if results[i].Gate == stagecoachv1.GateApprovals {
					results[i] = stagecoachv1.GateResult{Gate: results[i].Gate}
				}
			}
			g.Expect(blocks).To(Equal(tc.blocks))
			g.Expect(results).To(Equal(tc.results))
			g.Expect(Refusal(ApplyGates, in)).To(Equal(tc.refused))
			// Automation's chain leaves them out: they run when a promote starts.
			_, results = RunGates(PromoteGates, in)
			g.Expect(results).NotTo(ContainElement(HaveField("Gate", stagecoachv1.GateChecks)))
		})
	}
}

// The checks before apply call out, so they never start for a version the records have not shown
// published (issue 37: a ChecksDue that skipped the published gate passed every other test).
func TestChecksDueWaitsForPublished(t *testing.T) {
	follower := &stagecoachv1.Stage{Spec: stagecoachv1.StageSpec{
		Source:    stagecoachv1.StageSource{UpstreamRecords: &stagecoachv1.UpstreamRecordsSource{Repository: "registry.example/streams", Stream: "payments-staging"}},
		Promotion: &stagecoachv1.PromotionPolicy{Checks: []stagecoachv1.Check{{Name: "smoke"}}}}}
	notPublished := &stagecoachv1.GateBlock{Reason: stagecoachv1.ReasonNotPublished, Message: "no record shows " + d2 + " verified"}
	for _, tc := range []struct {
		name      string
		published *PublishedVerdict
		due       bool
	}{
		{name: "not checked against the records", published: nil},
		{name: "the records do not show it yet", published: &PublishedVerdict{Block: notPublished}},
		{name: "the records rule it out", published: &PublishedVerdict{Block: notPublished, Excluded: true}},
		{name: "the records show it verified", published: &PublishedVerdict{Evidence: "record 7 verified it"}, due: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(ChecksDue(GateInputs{Stage: follower, Digest: d2, Now: t0, Published: tc.published})).To(Equal(tc.due))
		})
	}
}

// One chain: every gate is declared once, with where it applies, and each use takes its gates in
// the chain's order.
func TestChainIsOne(t *testing.T) {
	names := func(chain []Gate) []string {
		out := make([]string, 0, len(chain))
		for _, g := range chain {
			out = append(out, g.Name)
		}
		return out
	}
	g := NewWithT(t)
	g.Expect(names(Chain)).To(HaveLen(len(slices.Compact(slices.Sorted(slices.Values(names(Chain)))))), "a gate declared twice")
	for _, tc := range []struct {
		name  string
		chain []Gate
		want  []string
	}{
		{name: "automation", chain: AutomationGates, want: []string{stagecoachv1.GateHistory, stagecoachv1.GateSuspend, stagecoachv1.GateFreeze,
			stagecoachv1.GateHold, stagecoachv1.GateSoak, stagecoachv1.GateAuto, stagecoachv1.GateMediated}},
		{name: "every promote", chain: PromoteGates, want: []string{stagecoachv1.GateSignature, stagecoachv1.GateAttestations, stagecoachv1.GateWindow, stagecoachv1.GateApprovals,
			stagecoachv1.GateDependsOn, stagecoachv1.GatePrereqs, stagecoachv1.GateMediated}},
		{name: "a promote that starts", chain: ApplyGates, want: []string{stagecoachv1.GateSignature, stagecoachv1.GateAttestations, stagecoachv1.GateWindow, stagecoachv1.GateApprovals,
			stagecoachv1.GateDependsOn, stagecoachv1.GatePrereqs, stagecoachv1.GateMediated, stagecoachv1.GatePublished, stagecoachv1.GateChecks}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(names(tc.chain)).To(Equal(tc.want))
		})
	}
	t.Run("mediated holds automation and notes a promote", func(t *testing.T) {
		g := NewWithT(t)
		stage := &stagecoachv1.Stage{Status: stagecoachv1.StageStatus{Conditions: []metav1.Condition{{Type: stagecoachv1.ConditionMediated,
			Status: metav1.ConditionFalse, Reason: stagecoachv1.ReasonNotMediated, Message: "kustomize.images set"}}}}
		auto := AutomationBlocks(stage, &Candidate{Digest: d2}, t0)
		g.Expect(auto).To(ContainElement(HaveField("Gate", stagecoachv1.GateMediated)))
		blocks, results := RunGates(PromoteGates, GateInputs{Stage: stage, Digest: d2, Now: t0})
		g.Expect(blocks).To(BeEmpty())
		g.Expect(results).To(ContainElement(And(HaveField("Gate", stagecoachv1.GateMediated), HaveField("Passed", true),
			HaveField("Message", ContainSubstring("kustomize.images set; this Promotion runs")))))
	})
}
