package admission

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

// Only the controller's service account writes a Promotion's status (promotion-status-guard):
// another service account that RBAC lets patch promotions/status (a CI pipeline's, another
// service account in the controller's namespace, one named like the controller in another
// namespace) is refused by the policy; the controller's is allowed.
func TestPromotionStatusGuardServiceAccounts(t *testing.T) {
	g := NewWithT(t)
	const (
		ciSA       = "system:serviceaccount:other:ci"
		neighborSA = "system:serviceaccount:stagecoach-system:ci"
		lookalike  = "system:serviceaccount:other:stagecoach-controller"
	)
	// RBAC for these service accounts only (not everyone): what refuses is the policy.
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "promotion-status-sa-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"stagecoach.dev"}, Resources: []string{"promotions", "promotions/status"},
			Verbs: []string{"get", "list", "create", "patch", "update"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "promotion-status-sa-writer"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}}
	for _, sa := range []string{ciSA, neighborSA, lookalike, controllerSA} {
		parts := strings.Split(sa, ":") // system:serviceaccount:<namespace>:<name>
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: parts[2], Name: parts[3]})
	}
	g.Expect(env.Client.Create(t.Context(), role)).To(Succeed())
	g.Expect(env.Client.Create(t.Context(), binding)).To(Succeed())
	applyManifests(t, filepath.Join(testenv.RepoRoot(), "manifests", "policies", "approval-guard.yaml"))

	asSA := func(user string) client.Client {
		return as(t, user, "system:serviceaccounts", "system:serviceaccounts:"+strings.Split(user, ":")[2])
	}
	stagecoach := asSA(controllerSA)
	ci := asSA(ciSA)
	// RBAC lets each of them patch a Promotion's status.
	for _, sa := range []string{ciSA, neighborSA, lookalike, controllerSA} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: sa,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + strings.Split(sa, ":")[2], "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "patch", Group: "stagecoach.dev",
				Resource: "promotions", Subresource: "status"}}}
		g.Eventually(func(g Gomega) {
			g.Expect(env.Client.Create(t.Context(), sar)).To(Succeed())
			g.Expect(sar.Status.Allowed).To(BeTrue(), "RBAC lets %s patch promotions/status: %s", sa, sar.Status.Reason)
		}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	}

	newPromotion := func(name string) *stagecoachv1.Promotion {
		p := &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: stagecoachv1.PromotionSpec{Stage: "payments", Action: stagecoachv1.ActionPromote, RequestedBy: controllerSA,
				Version: &stagecoachv1.VersionReference{Digest: "sha256:" + fmt.Sprintf("%064d", 3), Tag: "v3.0.0"}}}
		g.Expect(stagecoach.Create(t.Context(), p)).To(Succeed())
		p.Status.Phase, p.Status.Message = stagecoachv1.PhasePending, "waiting: approvals: 0 of 2"
		g.Expect(stagecoach.Status().Update(t.Context(), p)).To(Succeed())
		return p
	}
	const refused = "only the Stagecoach controller writes the status of Promotion"
	// The policy takes a moment to be enforced after it is created.
	probes := 0
	g.Eventually(func() error {
		probes++
		p := newPromotion(fmt.Sprintf("sa-status-probe-%d", probes))
		return ci.Status().Patch(t.Context(), p, client.RawPatch("application/merge-patch+json", []byte(`{"status":{"message":"x"}}`)))
	}, 10*time.Second, 100*time.Millisecond).Should(MatchError(ContainSubstring(refused)))

	for i, tc := range []struct {
		name string
		who  string
		// patch is a merge patch of the status; empty: the whole status is updated to Succeeded.
		patch       string
		wantErr     string
		wantPhase   stagecoachv1.Phase
		wantMessage string
	}{
		{name: "a CI service account marks it Succeeded", who: ciSA, patch: `{"status":{"phase":"Succeeded","verifiedAt":"2026-01-01T00:00:00Z"}}`,
			wantErr: refused},
		{name: "a CI service account rewrites the whole status", who: ciSA, wantErr: refused},
		{name: "a CI service account only changes the message", who: ciSA, patch: `{"status":{"message":"looks fine to me"}}`,
			wantErr: "create a Promotion to abort, retry or roll back"},
		{name: "another service account of the controller's namespace", who: neighborSA, patch: `{"status":{"phase":"Succeeded"}}`,
			wantErr: refused},
		{name: "a service account named like the controller in another namespace", who: lookalike, patch: `{"status":{"phase":"Succeeded"}}`,
			wantErr: refused},
		{name: "the controller's service account writes its verdict", who: controllerSA, patch: `{"status":{"phase":"Running","message":"applying"}}`,
			wantPhase: stagecoachv1.PhaseRunning, wantMessage: "applying"},
		{name: "the controller's service account rewrites the whole status", who: controllerSA,
			wantPhase: stagecoachv1.PhaseSucceeded, wantMessage: "rewritten"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := newPromotion(fmt.Sprintf("sa-status-case-%d", i))
			who := asSA(tc.who)
			var err error
			if tc.patch != "" {
				err = who.Status().Patch(t.Context(), p, client.RawPatch("application/merge-patch+json", []byte(tc.patch)))
			} else {
				g.Expect(who.Get(t.Context(), client.ObjectKeyFromObject(p), p)).To(Succeed())
				p.Status.Phase, p.Status.Message = stagecoachv1.PhaseSucceeded, "rewritten"
				err = who.Status().Update(t.Context(), p)
			}
			got := &stagecoachv1.Promotion{}
			g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(p), got)).To(Succeed())
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got.Status.Phase).To(Equal(tc.wantPhase))
				g.Expect(got.Status.Message).To(Equal(tc.wantMessage))
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			g.Expect(err).To(MatchError(ContainSubstring("Promotion sa-status-case-%d", i)))
			g.Expect(got.Status.Phase).To(Equal(stagecoachv1.PhasePending), "the refused write changed nothing")
			g.Expect(got.Status.Message).To(Equal("waiting: approvals: 0 of 2"))
		})
	}
}
