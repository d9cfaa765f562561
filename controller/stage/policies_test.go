package stage

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

func TestApplyGuarded(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	vap := func(name string) client.Object {
		return &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	binding := func(name string, actions ...admissionregistrationv1.ValidationAction) client.Object {
		return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: actions}}
	}
	deny, audit, warn := admissionregistrationv1.Deny, admissionregistrationv1.Audit, admissionregistrationv1.Warn
	const app, create, requester, author = "application-guard.stagecoach.dev", "application-create-guard.stagecoach.dev", "promotion-requester-guard.stagecoach.dev", "stage-author-guard.stagecoach.dev"
	const stageStatus, promotionStatus = "stage-status-guard.stagecoach.dev", "promotion-status-guard.stagecoach.dev"
	statusGuards := []client.Object{vap(stageStatus), binding(stageStatus, deny), vap(promotionStatus), binding(promotionStatus, deny)}
	cases := []struct {
		name       string
		kind       string
		objs       []client.Object
		forbidden  bool
		wantStatus metav1.ConditionStatus // "" for no condition
		wantReason string
		wantMsg    string
	}{
		{name: "installed and denying", kind: "Application", objs: append([]client.Object{vap(app), binding(app, deny, audit), vap(create), binding(create, deny), vap(requester), binding(requester, deny)}, statusGuards...),
			wantStatus: metav1.ConditionTrue, wantReason: stagecoachv1.ReasonPoliciesInstalled},
		{name: "nothing installed", kind: "Application",
			wantStatus: metav1.ConditionFalse, wantReason: stagecoachv1.ReasonPoliciesMissing,
			wantMsg: "admission policies application-guard.stagecoach.dev, application-create-guard.stagecoach.dev, promotion-requester-guard.stagecoach.dev, stage-status-guard.stagecoach.dev, promotion-status-guard.stagecoach.dev are not installed and bound to deny"},
		{name: "bound only to warn: not enforced", kind: "Application", objs: append([]client.Object{vap(app), binding(app, warn, audit), vap(create), binding(create, deny), vap(requester), binding(requester, deny)}, statusGuards...),
			wantStatus: metav1.ConditionFalse, wantReason: stagecoachv1.ReasonPoliciesMissing, wantMsg: "admission policy application-guard.stagecoach.dev is not installed"},
		{name: "a binding without its policy", kind: "Application", objs: append([]client.Object{binding(app, deny), vap(create), binding(create, deny), vap(requester), binding(requester, deny)}, statusGuards...),
			wantStatus: metav1.ConditionFalse, wantReason: stagecoachv1.ReasonPoliciesMissing},
		{name: "not allowed to look", kind: "Application", forbidden: true,
			wantStatus: metav1.ConditionUnknown, wantReason: stagecoachv1.ReasonPoliciesUnreadable, wantMsg: "grant its service account list on validatingadmissionpolicies"},
		{name: "any other kind relies on the author guard", kind: "Widget", objs: append([]client.Object{vap(author), binding(author, deny)}, statusGuards...),
			wantStatus: metav1.ConditionTrue, wantReason: stagecoachv1.ReasonPoliciesInstalled, wantMsg: author},
		{name: "any other kind without the author guard", kind: "Widget", objs: append([]client.Object{vap(app), binding(app, deny)}, statusGuards...),
			wantStatus: metav1.ConditionFalse, wantReason: stagecoachv1.ReasonPoliciesMissing,
			wantMsg: "admission policy stage-author-guard.stagecoach.dev is not installed and bound to deny: anyone who may write Stage 'shop/payments' can name an author"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			scheme := runtime.NewScheme()
			g.Expect(admissionregistrationv1.AddToScheme(scheme)).To(Succeed())
			b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.objs...)
			if tc.forbidden {
				b = b.WithInterceptorFuncs(interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
					return apierrors.NewForbidden(schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies"}, "", nil)
				}})
			}
			r := &Reconciler{Clock: clocktesting.NewFakePassiveClock(now), policies: &policyCheck{reader: b.Build(), interval: time.Minute}}
			apiVersion := ""
			if tc.kind == "Widget" {
				apiVersion = "example.com/v1"
			}
			stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "payments"},
				Spec: stagecoachv1.StageSpec{ApplyRef: stagecoachv1.ApplierReference{APIVersion: apiVersion, Kind: tc.kind, Name: "payments"}}}
			r.applyGuarded(t.Context(), stage)
			c := meta.FindStatusCondition(stage.Status.Conditions, stagecoachv1.ConditionGuarded)
			if tc.wantStatus == "" {
				g.Expect(c).To(BeNil())
				return
			}
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(tc.wantStatus))
			g.Expect(c.Reason).To(Equal(tc.wantReason))
			g.Expect(c.Message).To(ContainSubstring(tc.wantMsg))
		})
	}
}

// The API server is asked at most once per interval, whatever the number of Stages.
func TestPolicyCheckReadsOncePerInterval(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(admissionregistrationv1.AddToScheme(scheme)).To(Succeed())
	lists := 0
	reader := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lists++
			return c.List(ctx, list, opts...)
		}}).Build()
	p := &policyCheck{reader: reader, interval: time.Minute}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, at := range []time.Duration{0, time.Second, 59 * time.Second} {
		_, err := p.read(t.Context(), now.Add(at))
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(lists).To(Equal(2), "policies and bindings, once")
	_, err := p.read(t.Context(), now.Add(time.Minute))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lists).To(Equal(4))
}
