package api

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/cli"
)

// spec.service is a free string: a tenant can add her own Stage to another team's service. The
// pipeline then shows her only what RBAC lets her list, through both pipeline routes; the team's
// Stages are counted as hidden, nothing more.
func TestPipelineShowsOnlyWhatTheViewerMayRead(t *testing.T) {
	p := newPipeline(t, "tenant")
	// The team's own Promotion, whose requester and reason are the team's business (the admission
	// policies, which another test installs, make its creator the requester).
	g := NewWithT(t)
	lead, err := cli.WhoAmI(t.Context(), env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Create(t.Context(), &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: p.prodNS, Name: "prod-secret"},
		Spec: stagecoachv1.PromotionSpec{Stage: "prod", Action: stagecoachv1.ActionRollback, RequestedBy: lead.Username, Reason: "incident 7 at customer X"}})).To(Succeed())
	// Tina's namespace, her Stage in the team's service applying her own Application.
	tinaNS := env.NewNamespace(t, "tina")
	g.Expect(env.Client.Create(t.Context(), &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: tinaNS, Name: "spy"},
		Spec: stagecoachv1.StageSpec{Service: p.service, Environment: "spy",
			ApplyRef: stagecoachv1.ApplierReference{Kind: "Application", Name: "spy"},
			Source:   stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "prod", Namespace: p.prodNS}}}})).To(Succeed())
	user := func(name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
	}
	read := rbacv1.PolicyRule{APIGroups: []string{"stagecoach.dev"}, Resources: []string{"stages", "promotions"}, Verbs: []string{"get", "list"}}
	bind(t, "api-test-tenant-tina", tinaNS, user("tina"), read)
	// Sam of the team may read every namespace of it; Stan may read prod's Stages but not its Promotions.
	bind(t, "api-test-tenant-sam-staging", p.stagingNS, user("sam"), read)
	bind(t, "api-test-tenant-sam-prod", p.prodNS, user("sam"), read)
	bind(t, "api-test-tenant-stan", p.prodNS, user("stan"), rbacv1.PolicyRule{APIGroups: []string{"stagecoach.dev"},
		Resources: []string{"stages"}, Verbs: []string{"get", "list"}})

	tina := caller{token: token, user: "tina", app: tinaNS + ":spy"}
	sam := caller{token: token, user: "sam", app: p.prodApp()}
	stan := caller{token: token, user: "stan", app: p.prodApp()}
	byService := "/api/v1/pipelines/" + p.service
	for _, tc := range []struct {
		name       string
		who        caller
		path       string
		wantStages []string // namespace/name
		wantHidden int
		// wantPromotion is whether prod lists the team's Promotion.
		wantPromotion bool
	}{
		{name: "a tenant by service sees her own Stage alone", who: tina, path: byService,
			wantStages: []string{tinaNS + "/spy"}, wantHidden: 2},
		{name: "a tenant by her Application sees her own Stage alone", who: tina, path: "/api/v1/apps/" + tinaNS + "/spy/pipeline",
			wantStages: []string{tinaNS + "/spy"}, wantHidden: 2},
		{name: "anonymous sees nothing", who: caller{token: token, app: tinaNS + ":spy"}, path: byService, wantHidden: 3},
		{name: "the team sees its Stages, not the tenant's", who: sam, path: "/api/v1/apps/" + p.prodNS + "/" + p.service + "-prod/pipeline",
			wantStages: []string{p.stagingNS + "/staging", p.prodNS + "/prod"}, wantHidden: 1, wantPromotion: true},
		{name: "who may read Stages but not Promotions sees no requester or reason", who: stan, path: byService,
			wantStages: []string{p.prodNS + "/prod"}, wantHidden: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			// RBAC bindings reach the API server's authorizer within moments.
			var body map[string]any
			g.Eventually(func(g Gomega) {
				var code int
				code, body = tc.who.do(t, "GET", tc.path, nil)
				g.Expect(code).To(Equal(200), "answer: %v", body)
				var names []string
				for _, s := range body["stages"].([]any) {
					st := s.(map[string]any)
					names = append(names, st["namespace"].(string)+"/"+st["name"].(string))
				}
				g.Expect(names).To(Equal(tc.wantStages))
				g.Expect(body).To(HaveKeyWithValue("hidden", BeNumerically("==", tc.wantHidden)))
			}, 10*time.Second, 200*time.Millisecond).Should(Succeed())
			for _, s := range body["stages"].([]any) {
				st := s.(map[string]any)
				if st["name"] != "prod" {
					continue
				}
				if tc.wantPromotion {
					g.Expect(st["promotions"]).To(ContainElement(And(HaveKeyWithValue("actor", lead.Username), HaveKeyWithValue("reason", "incident 7 at customer X"))))
				} else {
					g.Expect(st["promotions"]).To(BeEmpty())
				}
			}
		})
	}
}
