package admission

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/cli"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

// The CLI verbs act in the user's name, pass the admission policies, and name the fix when they
// cannot act.
func TestCLIVerbsActInTheUsersName(t *testing.T) {
	g := NewWithT(t)
	grantEveryone(t, "stagecoach-cli-user", rbacv1.PolicyRule{APIGroups: []string{"stagecoach.dev"},
		Resources: []string{"stages", "approvals", "promotions", "freezes"}, Verbs: []string{"get", "list", "create", "delete"}})
	applyManifests(t, filepath.Join(testenv.RepoRoot(), "manifests", "policies", "approval-guard.yaml"))
	alice := as(t, "alice", "release-managers")
	carol := as(t, "carol", "developers")

	stage := &stagecoachv1.Stage{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "checkout", Labels: map[string]string{"tier": "critical"}},
		Spec: stagecoachv1.StageSpec{Service: "checkout", Environment: "prod",
			ApplyRef:  stagecoachv1.ApplierReference{Kind: "Application", Name: "checkout"},
			Source:    stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "staging"}},
			Promotion: &stagecoachv1.PromotionPolicy{Approvals: &stagecoachv1.ApprovalPolicy{Required: 1, Groups: []string{"release-managers"}}}},
	}
	g.Expect(env.Client.Create(t.Context(), stage)).To(Succeed())
	candidate := "sha256:" + "ab" + anyDigest[9:]
	stage.Status.ObservedGeneration = -1
	stage.Status.Candidate = &stagecoachv1.CandidateVersion{Version: "v1.4.0", Digest: candidate}
	g.Expect(env.Client.Status().Update(t.Context(), stage)).To(Succeed())

	var out bytes.Buffer
	// The policies take a moment to be enforced after they are created.
	g.Eventually(func() error {
		_, err := cli.Promote(t.Context(), alice, cli.PromoteOptions{Namespace: ns, Stage: "checkout", Digest: anyDigest, BreakGlass: true}, &out)
		return err
	}, 10*time.Second, 100*time.Millisecond).Should(MatchError(ContainSubstring("asks for break-glass, which only members of the stagecoach:break-glass group may use")))

	get := func(obj client.Object) client.Object {
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		return obj
	}
	for _, tc := range []struct {
		name    string
		run     func() (client.Object, error)
		wantErr string
		check   func(g Gomega, obj client.Object)
		says    string
	}{
		{name: "promote a tag the Stage knows", run: func() (client.Object, error) {
			return cli.Promote(t.Context(), alice, cli.PromoteOptions{Namespace: ns, Stage: "checkout", Version: "v1.4.0"}, &out)
		}, says: "promotes Stage checkout to v1.4.0 (" + candidate + ")", check: func(g Gomega, obj client.Object) {
			p := obj.(*stagecoachv1.Promotion)
			g.Expect(p.Spec.RequestedBy).To(Equal("alice"))
			g.Expect(p.Spec.Version).To(Equal(&stagecoachv1.VersionReference{Digest: candidate, Tag: "v1.4.0"}))
			g.Expect(p.Labels).To(HaveKeyWithValue(stagecoachv1.PromotionStageLabel, "checkout"))
		}},
		{name: "promote a digest", run: func() (client.Object, error) {
			return cli.Promote(t.Context(), alice, cli.PromoteOptions{Namespace: ns, Stage: "checkout", Digest: anyDigest}, &out)
		}, says: "promotes Stage checkout to " + anyDigest},
		{name: "promote a tag nobody knows", run: func() (client.Object, error) {
			return cli.Promote(t.Context(), alice, cli.PromoteOptions{Namespace: ns, Stage: "checkout", Version: "v9.9.9"}, &out)
		}, wantErr: `version "v9.9.9" is not known to Stage default/checkout (not its candidate, nor in its or its upstream's history): pass --digest`},
		{name: "promote to a Stage that does not exist", run: func() (client.Object, error) {
			return cli.Promote(t.Context(), alice, cli.PromoteOptions{Namespace: ns, Stage: "nope", Digest: anyDigest}, &out)
		}, wantErr: `stage "nope" not found in namespace "default" (use -n NAMESPACE)`},
		{name: "approve the candidate as a member of the approving group", run: func() (client.Object, error) {
			return cli.Approve(t.Context(), alice, cli.ApproveOptions{Namespace: ns, Stage: "checkout"}, &out)
		}, says: "approves v1.4.0 (" + candidate + ") for Stage checkout as alice", check: func(g Gomega, obj client.Object) {
			a := obj.(*stagecoachv1.Approval)
			g.Expect(a.Spec).To(Equal(stagecoachv1.ApprovalSpec{Stage: "checkout", Digest: candidate, Approver: "alice", Groups: []string{"release-managers"}}))
		}},
		{name: "approve from outside the approving groups", run: func() (client.Object, error) {
			return cli.Approve(t.Context(), carol, cli.ApproveOptions{Namespace: ns, Stage: "checkout"}, &out)
		}, wantErr: "carol is in none of the groups that may approve Stage default/checkout (release-managers)"},
		{name: "approve claiming a group one is not in is refused by admission", run: func() (client.Object, error) {
			return cli.Approve(t.Context(), carol, cli.ApproveOptions{Namespace: ns, Stage: "checkout", Groups: []string{"release-managers"}}, &out)
		}, wantErr: "but carol is not a member of all of them"},
		{name: "rollback", run: func() (client.Object, error) {
			return cli.Rollback(t.Context(), alice, cli.RollbackOptions{Namespace: ns, Stage: "checkout"}, &out)
		}, says: "rolls Stage checkout back to its last verified version", check: func(g Gomega, obj client.Object) {
			p := obj.(*stagecoachv1.Promotion)
			g.Expect(p.Spec.Action).To(Equal(stagecoachv1.ActionRollback))
			g.Expect(p.Spec.RequestedBy).To(Equal("alice"))
		}},
		{name: "unfreeze a Stage", run: func() (client.Object, error) {
			return cli.UnfreezeStage(t.Context(), alice, ns, "checkout", "checked the foreign write", &out)
		}, says: "unfreezes Stage checkout", check: func(g Gomega, obj client.Object) {
			g.Expect(obj.(*stagecoachv1.Promotion).Spec.Action).To(Equal(stagecoachv1.ActionUnfreeze))
		}},
		{name: "freeze by selector until a time", run: func() (client.Object, error) {
			return cli.Freeze(t.Context(), alice, cli.FreezeOptions{Namespace: ns, Selector: "tier=critical", Reason: "year-end",
				Until: time.Date(2027, 1, 2, 0, 0, 0, 0, time.UTC)}, &out)
		}, says: "freezes the Stages of namespace default matching tier=critical", check: func(g Gomega, obj client.Object) {
			f := obj.(*stagecoachv1.Freeze)
			g.Expect(f.Spec.Selector.MatchLabels).To(Equal(map[string]string{"tier": "critical"}))
			g.Expect(f.Spec.Until.UTC()).To(Equal(time.Date(2027, 1, 2, 0, 0, 0, 0, time.UTC)))
		}},
		{name: "freeze without a reason", run: func() (client.Object, error) {
			return cli.Freeze(t.Context(), alice, cli.FreezeOptions{Namespace: ns}, &out)
		}, wantErr: "a Freeze needs a reason: pass --reason"},
		{name: "freeze with a broken selector", run: func() (client.Object, error) {
			return cli.Freeze(t.Context(), alice, cli.FreezeOptions{Namespace: ns, Selector: "tier in (", Reason: "x"}, &out)
		}, wantErr: `selector "tier in (" does not parse`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			out.Reset()
			obj, err := tc.run()
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out.String()).To(ContainSubstring(tc.says))
			g.Expect(out.String()).To(ContainSubstring(obj.GetName() + " created"))
			if tc.check != nil {
				tc.check(g, get(obj))
			}
		})
	}

	var freezes stagecoachv1.FreezeList
	g.Expect(env.Client.List(t.Context(), &freezes, client.InNamespace(ns))).To(Succeed())
	g.Expect(freezes.Items).To(HaveLen(1))
	out.Reset()
	g.Expect(cli.Unfreeze(t.Context(), alice, ns, freezes.Items[0].Name, &out)).To(Succeed())
	g.Expect(out.String()).To(Equal("freeze.stagecoach.dev/" + freezes.Items[0].Name + " deleted\n"))
	g.Expect(cli.Unfreeze(t.Context(), alice, ns, freezes.Items[0].Name, &out)).To(MatchError(ContainSubstring(
		`freeze "` + freezes.Items[0].Name + `" not found in namespace "default"`)))
}
