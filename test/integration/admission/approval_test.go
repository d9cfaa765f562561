package admission

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

const anyDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// An Approval speaks only for its creator, a Promotion names its creator, and only break-glass
// members may ask for break-glass.
func TestApprovalPromotionAndBreakGlassGuards(t *testing.T) {
	g := NewWithT(t)
	grantEveryone(t, "stagecoach-user", rbacv1.PolicyRule{APIGroups: []string{"stagecoach.dev"}, Resources: []string{"approvals", "promotions"},
		Verbs: []string{"get", "list", "create"}})
	applyManifests(t, filepath.Join(testenv.RepoRoot(), "manifests", "policies", "approval-guard.yaml"))

	alice := as(t, "alice", "release-managers")
	bob := as(t, "bob", "stagecoach:break-glass")
	approval := func(name, approver string, groups ...string) *stagecoachv1.Approval {
		return &stagecoachv1.Approval{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: stagecoachv1.ApprovalSpec{Stage: "payments", Digest: anyDigest, Approver: approver, Groups: groups}}
	}
	promotion := func(name, requester string, breakGlass bool) *stagecoachv1.Promotion {
		return &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: stagecoachv1.PromotionSpec{Stage: "payments", BreakGlass: breakGlass, RequestedBy: requester,
				Version: &stagecoachv1.VersionReference{Digest: anyDigest}}}
	}
	// The policies take a moment to be enforced after they are created, each on its own: probe
	// every one (probing only the Approvals' let the Promotion cases run before theirs held).
	probes := 0
	for _, probe := range []struct {
		create  func(name string) client.Object
		refusal string
	}{
		{func(name string) client.Object { return approval(name, "mallory") }, "names approver mallory but was created by alice"},
		{func(name string) client.Object { return promotion(name, "mallory", false) }, "names requester mallory but was created by alice"},
		{func(name string) client.Object { return promotion(name, "alice", true) }, "asks for break-glass"},
	} {
		g.Eventually(func() error {
			probes++
			return alice.Create(t.Context(), probe.create(fmt.Sprintf("probe-%d", probes)))
		}, 10*time.Second, 100*time.Millisecond).Should(MatchError(ContainSubstring(probe.refusal)))
	}

	cases := []struct {
		name    string
		who     client.Client
		obj     client.Object
		wantErr string
	}{
		{name: "alice approves as herself", who: alice, obj: approval("by-alice", "alice", "release-managers")},
		{name: "alice approves as bob", who: alice, obj: approval("as-bob", "bob"),
			wantErr: "Approval as-bob names approver bob but was created by alice: set spec.approver to your own user name"},
		{name: "alice claims a group she is not in", who: alice, obj: approval("as-admins", "alice", "release-managers", "admins"),
			wantErr: "Approval as-admins approves as groups release-managers,admins, but alice is not a member of all of them"},
		{name: "alice promotes", who: alice, obj: promotion("normal", "alice", false)},
		{name: "alice promotes in bob's name", who: alice, obj: promotion("for-bob", "bob", false),
			wantErr: "Promotion for-bob names requester bob but was created by alice: set spec.requestedBy to your own user name"},
		{name: "alice promotes without naming herself", who: alice, obj: promotion("nameless", "", false),
			wantErr: "Promotion nameless names requester (none) but was created by alice"},
		{name: "alice asks for break-glass", who: alice, obj: promotion("glass-alice", "alice", true),
			wantErr: "Promotion glass-alice asks for break-glass, which only members of the stagecoach:break-glass group may use (alice is not one)"},
		{name: "a break-glass member asks for it", who: bob, obj: promotion("glass-bob", "bob", true)},
		{name: "alice labels her Promotion automatic", who: alice, obj: func() client.Object {
			p := promotion("fake-auto", "alice", false)
			p.Labels = map[string]string{stagecoachv1.AutomaticLabel: "true"}
			return p
		}(), wantErr: "Promotion fake-auto carries the label stagecoach.dev/automatic, which only the Stagecoach controller sets: remove it"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := tc.who.Create(t.Context(), tc.obj)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

// A Freeze that selects namespaces may live only in the controller's namespace: anyone who may
// create Freezes in their own namespace must not freeze everyone else's Stages.
func TestFreezeGuard(t *testing.T) {
	g := NewWithT(t)
	grantEveryone(t, "stagecoach-freezer", rbacv1.PolicyRule{APIGroups: []string{"stagecoach.dev"}, Resources: []string{"freezes"},
		Verbs: []string{"get", "list", "create"}})
	applyManifests(t, filepath.Join(testenv.RepoRoot(), "manifests", "policies", "approval-guard.yaml"))
	// Its own team namespace: other tests count the Freezes of theirs.
	const team = "team-freezer"
	for _, name := range []string{"stagecoach-system", team} {
		if err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	alice := as(t, "alice")
	freeze := func(namespace, name string, everywhere bool) *stagecoachv1.Freeze {
		f := &stagecoachv1.Freeze{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: stagecoachv1.FreezeSpec{Reason: "quarter end"}}
		if everywhere {
			f.Spec.NamespaceSelector = &metav1.LabelSelector{}
		}
		return f
	}
	probes := 0
	g.Eventually(func() error {
		probes++
		return alice.Create(t.Context(), freeze(team, fmt.Sprintf("probe-%d", probes), true))
	}, 10*time.Second, 100*time.Millisecond).Should(MatchError(ContainSubstring("selects namespaces (spec.namespaceSelector), which only a Freeze in stagecoach-system may do")))

	for _, tc := range []struct {
		name    string
		freeze  *stagecoachv1.Freeze
		wantErr string
	}{
		{name: "a Freeze of the own namespace", freeze: freeze(team, "mine", false)},
		{name: "a cluster-wide Freeze from a team's namespace", freeze: freeze(team, "everyone", true),
			wantErr: "Freeze everyone selects namespaces (spec.namespaceSelector), which only a Freeze in stagecoach-system may do"},
		{name: "a cluster-wide Freeze from the controller's namespace", freeze: freeze("stagecoach-system", "quarter-end", true)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := alice.Create(t.Context(), tc.freeze)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

// Only the controller writes a Promotion's status: someone who may patch promotions/status still
// cannot mark a Promotion Succeeded (which the Stage's history, the Stages that follow and the
// records would take for a verdict), nor change its gates or landing proof.
func TestPromotionStatusGuard(t *testing.T) {
	g := NewWithT(t)
	grantEveryone(t, "promotion-status-writer", rbacv1.PolicyRule{APIGroups: []string{"stagecoach.dev"}, Resources: []string{"promotions", "promotions/status"},
		Verbs: []string{"get", "list", "create", "patch", "update"}})
	applyManifests(t, filepath.Join(testenv.RepoRoot(), "manifests", "policies", "approval-guard.yaml"))
	stagecoach := as(t, controllerSA, "system:serviceaccounts")
	mallory := as(t, "mallory", "release-managers")
	newPromotion := func(name string) *stagecoachv1.Promotion {
		p := &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: stagecoachv1.PromotionSpec{Stage: "payments", Action: stagecoachv1.ActionPromote, RequestedBy: controllerSA,
				Version: &stagecoachv1.VersionReference{Digest: "sha256:" + fmt.Sprintf("%064d", 2), Tag: "v2.0.0"}}}
		g.Expect(stagecoach.Create(t.Context(), p)).To(Succeed())
		p.Status.Phase, p.Status.Message = stagecoachv1.PhasePending, "waiting: approvals: 0 of 2"
		g.Expect(stagecoach.Status().Update(t.Context(), p)).To(Succeed())
		return p
	}
	probes := 0
	g.Eventually(func() error {
		probes++
		p := newPromotion(fmt.Sprintf("status-probe-%d", probes))
		return mallory.Status().Patch(t.Context(), p, client.RawPatch("application/merge-patch+json", []byte(`{"status":{"message":"x"}}`)))
	}, 10*time.Second, 100*time.Millisecond).Should(MatchError(ContainSubstring("only the Stagecoach controller writes the status of Promotion")))

	for i, tc := range []struct {
		name    string
		who     client.Client
		patch   string
		wantErr string
	}{
		{name: "mallory marks it Succeeded", who: mallory, patch: `{"status":{"phase":"Succeeded","verifiedAt":"2026-01-01T00:00:00Z"}}`,
			wantErr: "only the Stagecoach controller writes the status of Promotion"},
		{name: "mallory passes a gate", who: mallory, patch: `{"status":{"gates":[{"gate":"approvals","passed":true,"message":"2 of 2"}]}}`,
			wantErr: "create a Promotion to abort, retry or roll back"},
		{name: "mallory clears the attestation", who: mallory, patch: `{"status":{"attestation":null}}`,
			wantErr: "only the Stagecoach controller writes the status of Promotion"},
		{name: "the controller writes its verdict", who: stagecoach, patch: `{"status":{"phase":"Running","message":"applying"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := newPromotion(fmt.Sprintf("status-case-%d", i))
			err := tc.who.Status().Patch(t.Context(), p, client.RawPatch("application/merge-patch+json", []byte(tc.patch)))
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(p), p)).To(Succeed())
			g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhasePending))
		})
	}
}
