package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/cli"
)

var (
	current   = "sha256:" + strings.Repeat("1", 64)
	candidate = "sha256:" + strings.Repeat("2", 64)
)

// pipeline is a service's two Stages in two namespaces: staging (from a registry) and prod (from
// staging, one approval from release-managers), each applied by an Application of its name.
type pipeline struct {
	service, stagingNS, prodNS string
}

func (p pipeline) prodApp() string    { return p.prodNS + ":" + p.service + "-prod" }
func (p pipeline) stagingApp() string { return p.stagingNS + ":" + p.service + "-staging" }

// newPipeline creates the Stages with the status a reconcile would have written.
func newPipeline(t *testing.T, service string) pipeline {
	t.Helper()
	g := NewWithT(t)
	p := pipeline{stagingNS: env.NewNamespace(t, service+"-staging"), prodNS: env.NewNamespace(t, service+"-prod")}
	// A service name of this run alone: Stages of earlier runs (-count) stay in their namespaces.
	p.service = service + "-" + p.stagingNS[len(p.stagingNS)-5:]
	service = p.service
	stage := func(ns, env string, source stagecoachv1.StageSource, policy *stagecoachv1.PromotionPolicy) *stagecoachv1.Stage {
		return &stagecoachv1.Stage{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: env, Labels: map[string]string{"app": service, "env": env}},
			Spec: stagecoachv1.StageSpec{Service: service, Environment: env,
				ApplyRef: stagecoachv1.ApplierReference{Kind: "Application", Name: service + "-" + env}, Source: source, Promotion: policy},
		}
	}
	since := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	// Created prod first: the pipeline's order must come from the upstream link, not the names.
	prod := stage(p.prodNS, "prod", stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "staging", Namespace: p.stagingNS}},
		&stagecoachv1.PromotionPolicy{Approvals: &stagecoachv1.ApprovalPolicy{Required: 1, Groups: []string{"release-managers"}}})
	staging := stage(p.stagingNS, "staging", stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: "registry.example/deploy/" + service}}, nil)
	for _, s := range []*stagecoachv1.Stage{prod, staging} {
		g.Expect(env.Client.Create(t.Context(), s)).To(Succeed())
		s.Status.ObservedGeneration = s.Generation
		meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: stagecoachv1.ConditionReady, Status: metav1.ConditionTrue,
			Reason: "Verified", Message: "runs v1.2.0", ObservedGeneration: s.Generation})
		s.Status.Current = &stagecoachv1.CurrentVersion{Version: "v1.2.0", Digest: current, PromotedAt: &since, VerifiedAt: &since}
		g.Expect(env.Client.Status().Update(t.Context(), s)).To(Succeed())
	}
	prod.Status.Candidate = &stagecoachv1.CandidateVersion{Version: "v1.3.0", Digest: candidate, BlockedBy: []stagecoachv1.GateBlock{
		{Gate: stagecoachv1.GateApprovals, Reason: "ApprovalRequired", Message: "0 of 1 approvals from release-managers"}}}
	g.Expect(env.Client.Status().Update(t.Context(), prod)).To(Succeed())
	return p
}

// grant binds a ClusterRole with the rule to a group, for the test's lifetime.
func grant(t *testing.T, name, group string, rule rbacv1.PolicyRule) {
	t.Helper()
	bind(t, name, "", rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: group}, rule)
}

// bind binds a ClusterRole with the rule to a subject, in one namespace (a RoleBinding) or, with
// namespace "", cluster-wide, for the test's lifetime.
func bind(t *testing.T, name, namespace string, subject rbacv1.Subject, rule rbacv1.PolicyRule) {
	t.Helper()
	g := NewWithT(t)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{rule}}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}
	var binding client.Object = &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: ref, Subjects: []rbacv1.Subject{subject}}
	if namespace != "" {
		binding = &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, RoleRef: ref, Subjects: []rbacv1.Subject{subject}}
	}
	for _, obj := range []client.Object{role, binding} {
		if err := env.Client.Create(t.Context(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
			g.Expect(err).NotTo(HaveOccurred())
		}
		t.Cleanup(func() {
			// The test's context is done by now.
			if err := env.Client.Delete(context.WithoutCancel(t.Context()), obj); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("failed to delete %s: %v", obj.GetName(), err)
			}
		})
	}
}

// The proxy token is required, anonymous callers only read, and the Application Argo CD
// authorized must belong to the pipeline.
func TestAuthentication(t *testing.T) {
	p := newPipeline(t, "auth")
	approve := "/api/v1/stages/" + p.prodNS + "/prod/approve"
	pipelinePath := "/api/v1/pipelines/" + p.service
	alice := caller{token: token, user: "alice", groups: "release-managers", app: p.prodApp(), trustGroups: true}
	for _, tc := range []struct {
		name         string
		who          caller
		method, path string
		body         any
		wantCode     int
		wantReason   string
		wantMessage  string
	}{
		{name: "no token", who: caller{user: "alice", app: p.prodApp()}, method: "GET", path: pipelinePath,
			wantCode: 401, wantReason: "Unauthorized", wantMessage: "missing or wrong proxy token"},
		{name: "wrong token", who: caller{token: "guess", user: "alice", app: p.prodApp()}, method: "GET", path: pipelinePath,
			wantCode: 401, wantReason: "Unauthorized"},
		{name: "a token one character longer", who: caller{token: token + "x", user: "alice", app: p.prodApp()}, method: "POST", path: approve,
			wantCode: 401, wantReason: "Unauthorized"},
		{name: "anonymous reads the pipeline", who: caller{token: token, app: p.prodApp()}, method: "GET", path: pipelinePath, wantCode: 200},
		{name: "anonymous cannot approve", who: caller{token: token, app: p.prodApp()}, method: "POST", path: approve, body: map[string]any{},
			wantCode: 403, wantReason: "Forbidden", wantMessage: "anonymous users may only read"},
		{name: "an Application of another pipeline cannot approve", who: caller{token: token, user: "alice", groups: "release-managers", app: p.prodNS + ":billing-prod"},
			method: "POST", path: approve, body: map[string]any{}, wantCode: 403, wantReason: "Forbidden",
			wantMessage: fmt.Sprintf(`Application %s/billing-prod is not applied by any Stage of service %q`, p.prodNS, p.service)},
		{name: "an Application of another pipeline cannot read it", who: caller{token: token, user: "alice", app: "argocd:billing-prod"},
			method: "GET", path: pipelinePath, wantCode: 403, wantReason: "Forbidden"},
		{name: "no Application header", who: caller{token: token, user: "alice"}, method: "GET", path: pipelinePath,
			wantCode: 403, wantMessage: "the Argocd-Application-Name header"},
		{name: "a system: group is not impersonated", who: caller{token: token, user: "alice", groups: "system:masters", app: p.prodApp(), trustGroups: true},
			method: "POST", path: approve, body: map[string]any{}, wantCode: 403, wantMessage: `"system:masters" uses the prefix system:`},
		{name: "a body too large", who: alice, method: "POST", path: approve,
			body: []byte(`{"comment":"` + strings.Repeat("x", maxBody) + `"}`), wantCode: 413, wantReason: "RequestEntityTooLarge"},
		{name: "a read with the wrong method", who: alice, method: "POST", path: pipelinePath, wantCode: 405, wantReason: "MethodNotAllowed"},
		{name: "an unknown route", who: alice, method: "GET", path: "/api/v1/nothing", wantCode: 404, wantReason: "NotFound"},
		{name: "a Stage that does not exist", who: alice, method: "POST", path: "/api/v1/stages/" + p.prodNS + "/nope/approve", body: map[string]any{},
			wantCode: 404, wantMessage: "Stage " + p.prodNS + "/nope not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			code, body := tc.who.do(t, tc.method, tc.path, tc.body)
			g.Expect(code).To(Equal(tc.wantCode), "answer: %v", body)
			if tc.wantCode >= 300 {
				g.Expect(body).To(HaveKeyWithValue("code", BeNumerically("==", tc.wantCode)))
				g.Expect(body).To(HaveKey("reason"))
				g.Expect(body["message"]).To(ContainSubstring(tc.wantMessage))
			}
			if tc.wantReason != "" {
				g.Expect(body).To(HaveKeyWithValue("reason", tc.wantReason))
			}
		})
	}
	t.Run("whoami", func(t *testing.T) {
		g := NewWithT(t)
		code, body := alice.do(t, "GET", "/api/v1/whoami", nil)
		g.Expect(code).To(Equal(200))
		g.Expect(body).To(Equal(map[string]any{"user": "alice", "groups": []any{"release-managers"}, "readOnly": false}))
		code, body = caller{token: token}.do(t, "GET", "/api/v1/whoami", nil)
		g.Expect(code).To(Equal(200))
		g.Expect(body).To(Equal(map[string]any{"user": "", "groups": []any{}, "readOnly": true}))
	})
	// No case above may have created anything.
	var approvals stagecoachv1.ApprovalList
	NewWithT(t).Expect(env.Client.List(t.Context(), &approvals, client.InNamespace(p.prodNS))).To(Succeed())
	NewWithT(t).Expect(approvals.Items).To(BeEmpty())
}

// Actions are taken as the Argo CD user: RBAC's refusal comes back with the API server's message,
// and what passes names that user.
func TestActionsActAsTheUser(t *testing.T) {
	p := newPipeline(t, "act")
	applyManifests(t, policies)
	// Everyone may read Stages (the CLI functions read the Stage as the user); only the group
	// approvers may create Approvals and Promotions.
	grant(t, "api-test-reader", "system:authenticated", rbacv1.PolicyRule{APIGroups: []string{"stagecoach.dev"},
		Resources: []string{"stages", "promotions", "approvals"}, Verbs: []string{"get", "list"}})
	grant(t, "api-test-approver", "approvers", rbacv1.PolicyRule{APIGroups: []string{"stagecoach.dev"},
		Resources: []string{"approvals", "promotions"}, Verbs: []string{"create"}})
	grant(t, "api-test-freezer", "freezers", rbacv1.PolicyRule{APIGroups: []string{"stagecoach.dev"},
		Resources: []string{"freezes"}, Verbs: []string{"create", "delete"}})
	approve := "/api/v1/stages/" + p.prodNS + "/prod/approve"

	t.Run("a release manager without RBAC to create Approvals", func(t *testing.T) {
		g := NewWithT(t)
		dave := caller{token: token, user: "dave", groups: "release-managers", app: p.prodApp(), trustGroups: true}
		code, body := dave.do(t, "POST", approve, map[string]any{"comment": "looks good"})
		g.Expect(code).To(Equal(403), "answer: %v", body)
		g.Expect(body).To(HaveKeyWithValue("reason", "Forbidden"))
		// The API server's own words, naming the impersonated user.
		g.Expect(body["message"]).To(Equal(fmt.Sprintf(`approvals.stagecoach.dev is forbidden: User "dave" cannot create resource "approvals" in API group "stagecoach.dev" in the namespace "%s"`, p.prodNS)))
	})
	t.Run("a release manager who may create Approvals, from the staging Application", func(t *testing.T) {
		g := NewWithT(t)
		alice := caller{token: token, user: "alice", groups: "release-managers,approvers", app: p.stagingApp(), trustGroups: true}
		code, body := alice.do(t, "POST", approve, map[string]any{"digest": candidate, "comment": "looks good"})
		g.Expect(code).To(Equal(201), "answer: %v", body)
		g.Expect(body).To(HaveKeyWithValue("kind", "Approval"))
		g.Expect(body).To(HaveKeyWithValue("namespace", p.prodNS))
		g.Expect(body["message"]).To(ContainSubstring("approves v1.3.0 (" + candidate + ") for Stage prod as alice"))
		a := &stagecoachv1.Approval{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: p.prodNS, Name: body["name"].(string)}, a)).To(Succeed())
		g.Expect(a.Spec).To(Equal(stagecoachv1.ApprovalSpec{Stage: "prod", Digest: candidate, Approver: "alice",
			Groups: []string{"release-managers"}, Comment: "looks good"}))
	})
	t.Run("promote a tag", func(t *testing.T) {
		g := NewWithT(t)
		bob := caller{token: token, user: "bob", groups: "approvers", app: p.prodApp(), trustGroups: true}
		code, body := bob.do(t, "POST", "/api/v1/stages/"+p.prodNS+"/prod/promote", map[string]any{"version": "v1.3.0", "reason": "release"})
		g.Expect(code).To(Equal(201), "answer: %v", body)
		g.Expect(body).To(HaveKeyWithValue("kind", "Promotion"))
		pr := &stagecoachv1.Promotion{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: p.prodNS, Name: body["name"].(string)}, pr)).To(Succeed())
		g.Expect(pr.Spec.RequestedBy).To(Equal("bob"))
		g.Expect(pr.Spec.Version).To(Equal(&stagecoachv1.VersionReference{Digest: candidate, Tag: "v1.3.0"}))
	})
	t.Run("roll back without a reason", func(t *testing.T) {
		g := NewWithT(t)
		bob := caller{token: token, user: "bob", groups: "approvers", app: p.prodApp(), trustGroups: true}
		code, body := bob.do(t, "POST", "/api/v1/stages/"+p.prodNS+"/prod/rollback", map[string]any{})
		g.Expect(code).To(Equal(201), "answer: %v", body)
		pr := &stagecoachv1.Promotion{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: p.prodNS, Name: body["name"].(string)}, pr)).To(Succeed())
		g.Expect(pr.Spec.Action).To(Equal(stagecoachv1.ActionRollback))
		g.Expect(pr.Spec.Reason).To(Equal("rollback by bob from the Argo CD UI"))
	})
	t.Run("freeze the Stage by its labels, then unfreeze it", func(t *testing.T) {
		g := NewWithT(t)
		erin := caller{token: token, user: "erin", groups: "freezers", app: p.prodApp(), trustGroups: true}
		code, body := erin.do(t, "POST", "/api/v1/stages/"+p.prodNS+"/prod/freeze", map[string]any{"reason": "incident 42", "until": "2h"})
		g.Expect(code).To(Equal(201), "answer: %v", body)
		g.Expect(body).To(HaveKeyWithValue("kind", "Freeze"))
		f := &stagecoachv1.Freeze{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: p.prodNS, Name: body["name"].(string)}, f)).To(Succeed())
		g.Expect(f.Spec.Reason).To(Equal("incident 42"))
		g.Expect(f.Spec.Selector).To(Equal(&metav1.LabelSelector{MatchLabels: map[string]string{"app": p.service, "env": "prod"}}))
		g.Expect(f.Spec.Until.Time).To(BeTemporally("~", time.Now().Add(2*time.Hour), time.Minute))

		code, body = erin.do(t, "POST", "/api/v1/stages/"+p.prodNS+"/prod/unfreeze", map[string]any{})
		g.Expect(code).To(Equal(201), "answer: %v", body)
		g.Expect(body).To(HaveKeyWithValue("kind", "Freeze"))
		g.Expect(body).To(HaveKeyWithValue("name", f.Name))
		g.Expect(apierrors.IsNotFound(env.Client.Get(t.Context(), client.ObjectKeyFromObject(f), f))).To(BeTrue(), "the Freeze is deleted")
	})
	t.Run("freeze without RBAC to create Freezes", func(t *testing.T) {
		g := NewWithT(t)
		bob := caller{token: token, user: "bob", groups: "approvers", app: p.prodApp(), trustGroups: true}
		code, body := bob.do(t, "POST", "/api/v1/stages/"+p.prodNS+"/prod/freeze", map[string]any{"reason": "incident 43"})
		g.Expect(code).To(Equal(403), "answer: %v", body)
		g.Expect(body["message"]).To(ContainSubstring(`User "bob" cannot create resource "freezes"`))
	})
	t.Run("promote a tag nobody knows", func(t *testing.T) {
		g := NewWithT(t)
		bob := caller{token: token, user: "bob", groups: "approvers", app: p.prodApp(), trustGroups: true}
		code, body := bob.do(t, "POST", "/api/v1/stages/"+p.prodNS+"/prod/promote", map[string]any{"version": "v9.9.9"})
		g.Expect(code).To(Equal(400), "answer: %v", body)
		g.Expect(body["message"]).To(ContainSubstring(`version "v9.9.9" is not known to Stage`))
	})
}

// The pipeline has every field of the contract, Stages in promotion order across namespaces.
func TestPipelineShape(t *testing.T) {
	g := NewWithT(t)
	p := newPipeline(t, "shape")
	grant(t, "api-test-reader", "system:authenticated", rbacv1.PolicyRule{APIGroups: []string{"stagecoach.dev"},
		Resources: []string{"stages", "promotions"}, Verbs: []string{"get", "list"}})
	viewer := caller{token: token, user: "carol", groups: "developers", app: p.prodApp(), trustGroups: true}
	code, byService := viewer.do(t, "GET", "/api/v1/pipelines/"+p.service, nil)
	g.Expect(code).To(Equal(200), "answer: %v", byService)
	code, byApp := viewer.do(t, "GET", "/api/v1/apps/"+p.prodNS+"/"+p.service+"-prod/pipeline", nil)
	g.Expect(code).To(Equal(200), "answer: %v", byApp)
	g.Expect(byApp).To(Equal(byService))

	g.Expect(byService).To(HaveKeyWithValue("service", p.service))
	g.Expect(byService).To(HaveKeyWithValue("viewer", map[string]any{"user": "carol", "groups": []any{"developers"}, "readOnly": false}))
	stages := byService["stages"].([]any)
	g.Expect(stages).To(HaveLen(2))
	staging, prod := stages[0].(map[string]any), stages[1].(map[string]any)
	g.Expect(staging).To(HaveKeyWithValue("namespace", p.stagingNS))
	g.Expect(staging).To(HaveKeyWithValue("name", "staging"))
	g.Expect(staging).To(HaveKeyWithValue("candidate", BeNil()))
	for _, key := range []string{"namespace", "name", "environment", "applier", "current", "health", "ready", "frozen", "frozenReason",
		"candidate", "promotions", "waves", "records"} {
		g.Expect(prod).To(HaveKey(key))
	}
	g.Expect(prod).To(HaveKeyWithValue("namespace", p.prodNS))
	g.Expect(prod).To(HaveKeyWithValue("environment", "prod"))
	g.Expect(prod).To(HaveKeyWithValue("applier", map[string]any{"kind": "Application", "namespace": p.prodNS, "name": p.service + "-prod"}))
	g.Expect(prod).To(HaveKeyWithValue("current", HaveKeyWithValue("since", "2026-12-01T10:00:00Z")))
	g.Expect(prod["current"]).To(And(HaveKeyWithValue("tag", "v1.2.0"), HaveKeyWithValue("digest", current)))
	g.Expect(prod).To(HaveKeyWithValue("health", "Healthy"))
	g.Expect(prod).To(HaveKeyWithValue("ready", map[string]any{"status": "True", "reason": "Verified", "message": "runs v1.2.0"}))
	g.Expect(prod).To(HaveKeyWithValue("frozen", false))
	g.Expect(prod).To(HaveKeyWithValue("candidate", map[string]any{"tag": "v1.3.0", "digest": candidate, "blocked": []any{
		map[string]any{"gate": "approvals", "reason": "ApprovalRequired", "message": "0 of 1 approvals from release-managers", "until": ""}}}))
	g.Expect(prod).To(HaveKeyWithValue("promotions", BeEmpty()))
	g.Expect(prod).To(HaveKeyWithValue("waves", []any{}))
	g.Expect(prod).To(HaveKeyWithValue("records", []any{}))

	// A Promotion shows, newest first. It names its creator, the test's admin: the admission
	// policies (another test installs them) require it.
	admin, err := cli.WhoAmI(t.Context(), env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	pr := &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: p.prodNS, Name: "prod-1"},
		Spec: stagecoachv1.PromotionSpec{Stage: "prod", Action: stagecoachv1.ActionRollback, RequestedBy: admin.Username, Reason: "broken"}}
	g.Expect(env.Client.Create(t.Context(), pr)).To(Succeed())
	code, byService = viewer.do(t, "GET", "/api/v1/pipelines/"+p.service, nil)
	g.Expect(code).To(Equal(200))
	prod = byService["stages"].([]any)[1].(map[string]any)
	g.Expect(prod["promotions"]).To(ConsistOf(And(HaveKeyWithValue("name", "prod-1"), HaveKeyWithValue("action", "Rollback"),
		HaveKeyWithValue("phase", "Pending"), HaveKeyWithValue("actor", admin.Username), HaveKeyWithValue("reason", "broken"),
		HaveKey("tag"), HaveKey("digest"), HaveKey("startedAt"), HaveKey("finishedAt"), HaveKey("message"))))

	code, body := viewer.do(t, "GET", "/api/v1/apps/"+p.prodNS+"/nothing/pipeline", nil)
	g.Expect(code).To(Equal(http.StatusNotFound), "answer: %v", body)
	g.Expect(body["message"]).To(ContainSubstring("no Stage applies Application " + p.prodNS + "/nothing"))
}
