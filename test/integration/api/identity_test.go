package api

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// The API acts only as Argo CD vouches. Argo CD v3.6.1's proxy extension sets Argocd-Username and
// Argocd-User-Id for every logged-in session, but Argocd-User-Groups only for a user who has
// groups, and forwards whatever else the caller sent: a local account (no groups) arrives with
// her own Argocd-User-Groups header. By default that header decides nothing.
func TestIdentityIsWhatArgoCDVouchesFor(t *testing.T) {
	p := newPipeline(t, "ident")
	applyManifests(t, policies)
	approve := "/api/v1/stages/" + p.prodNS + "/prod/approve"
	// Mallory may read Stages and create Approvals (RBAC binds her by name); the Stage's policy
	// wants an approval from release-managers, whom RBAC lets create Approvals too.
	user := func(name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
	}
	bind(t, "api-test-ident-mallory", p.prodNS, user("mallory"), rbacv1.PolicyRule{APIGroups: []string{"stagecoach.dev"},
		Resources: []string{"stages", "approvals"}, Verbs: []string{"get", "list", "create"}})
	grant(t, "api-test-ident-release-managers", "release-managers", rbacv1.PolicyRule{APIGroups: []string{"stagecoach.dev"},
		Resources: []string{"stages", "approvals"}, Verbs: []string{"get", "list", "create"}})

	// As Argo CD forwards a local account's request: its name twice, and the group header she
	// added herself, untouched.
	mallory := caller{token: token, user: "mallory", groups: "release-managers", app: p.prodApp()}
	for _, tc := range []struct {
		name        string
		who         caller
		method      string
		path        string
		body        any
		wantCode    int
		wantMessage string
		wantGroups  []any
	}{
		{name: "a user without groups is not in the groups she sends", who: mallory, method: "GET", path: "/api/v1/whoami",
			wantCode: 200, wantGroups: []any{}},
		{name: "her approval does not speak for release-managers", who: mallory, method: "POST", path: approve,
			body: map[string]any{"digest": candidate}, wantCode: 400,
			wantMessage: fmt.Sprintf("mallory is in none of the groups that may approve Stage %s/prod (release-managers). "+
				"The Stagecoach API acts as you without your Argo CD groups: this controller does not take Argocd-User-Groups (--api-trust-argocd-groups is off", p.prodNS)},
		{name: "a system: group she sends is ignored, not impersonated", who: caller{token: token, user: "mallory", groups: "system:masters", app: p.prodApp()},
			method: "GET", path: "/api/v1/whoami", wantCode: 200, wantGroups: []any{}},
		{name: "a user name without the user id Argo CD sets with it", who: caller{token: token, user: "release-manager", id: "-", app: p.prodApp()},
			method: "POST", path: approve, body: map[string]any{"digest": candidate}, wantCode: 403,
			wantMessage: "the request names a user in only one of Argocd-Username and Argocd-User-Id"},
		{name: "a user id without a user name", who: caller{token: token, id: "release-manager", app: p.prodApp()},
			method: "GET", path: "/api/v1/whoami", wantCode: 403, wantMessage: "Argo CD sets both for every logged-in session"},
		{name: "with --api-trust-argocd-groups the groups Argo CD sets are taken", who: caller{token: token, user: "alice", groups: "release-managers", app: p.prodApp(), trustGroups: true},
			method: "GET", path: "/api/v1/whoami", wantCode: 200, wantGroups: []any{"release-managers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			code, body := tc.who.do(t, tc.method, tc.path, tc.body)
			g.Expect(code).To(Equal(tc.wantCode), "answer: %v", body)
			if tc.wantMessage != "" {
				g.Expect(body["message"]).To(ContainSubstring(tc.wantMessage))
			}
			if tc.wantGroups != nil {
				g.Expect(body).To(HaveKeyWithValue("groups", tc.wantGroups))
			}
		})
	}
	// Nothing above approved anything; a real release manager (her groups vouched for by Argo CD
	// and trusted) can.
	g := NewWithT(t)
	var approvals stagecoachv1.ApprovalList
	g.Expect(env.Client.List(t.Context(), &approvals, client.InNamespace(p.prodNS))).To(Succeed())
	g.Expect(approvals.Items).To(BeEmpty())
	alice := caller{token: token, user: "alice", groups: "release-managers", app: p.prodApp(), trustGroups: true}
	g.Eventually(func() int {
		code, _ := alice.do(t, "POST", approve, map[string]any{"digest": candidate})
		return code
	}, 10*time.Second, 200*time.Millisecond).Should(Equal(201))
}
