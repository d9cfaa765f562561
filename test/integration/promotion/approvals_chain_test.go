package promotion

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

// controllerSA is the controller's user in an install: the promotion-requester-guard policy lets
// only it label a Promotion automatic.
const controllerSA = "system:serviceaccount:stagecoach-system:stagecoach-controller"

// enforcePromotionPolicies installs the admission policies of approval-guard.yaml and binds them
// (Deny) to the namespace alone, so that the suite's other tests, which create Promotions as an
// admin in anyone's name, are not held to them.
func enforcePromotionPolicies(t *testing.T, ns string) {
	t.Helper()
	g := NewWithT(t)
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "manifests", "policies", "approval-guard.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		g.Expect(err).NotTo(HaveOccurred())
		policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		g.Expect(utilyaml.Unmarshal(doc, policy)).To(Succeed())
		if policy.Kind != "ValidatingAdmissionPolicy" {
			continue // the file's own bindings hold cluster-wide: ours hold in ns
		}
		if err := env.Client.Create(t.Context(), policy); !apierrors.IsAlreadyExists(err) {
			g.Expect(err).NotTo(HaveOccurred())
		}
		binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: policy.Name + "." + ns},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName:        policy.Name,
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
				MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
			},
		}
		g.Expect(env.Client.Create(t.Context(), binding)).To(Succeed())
		t.Cleanup(func() {
			NewWithT(t).Expect(client.IgnoreNotFound(env.Client.Delete(context.WithoutCancel(t.Context()), binding))).To(Succeed())
		})
	}
}

// mayPromoteAndApprove lets the users create and read Promotions and Approvals in ns.
func mayPromoteAndApprove(t *testing.T, ns string, users ...string) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(env.Client.Create(t.Context(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "promoter"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{stagecoachv1.GroupVersion.Group}, Resources: []string{"promotions", "approvals"},
			Verbs: []string{"get", "list", "create"}}}})).To(Succeed())
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "promoter"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "promoter"}}
	for _, u := range users {
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: u})
	}
	g.Expect(env.Client.Create(t.Context(), binding)).To(Succeed())
}

// startControllerAsServiceAccount runs the manager as the install's service account (with an
// admin's rights), so that its automatic Promotions pass the promotion-requester-guard policy.
func startControllerAsServiceAccount(t *testing.T) {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: controllerSA, Groups: []string{"system:masters", "system:serviceaccounts", "system:authenticated"}}
	stop, err := env.RunManagerAs(context.Background(), cfg, func(o *controller.Options) {
		o.ApplierRetryInterval = 500 * time.Millisecond
		o.SkipNameValidation = true // one manager per test, in one process
	})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { NewWithT(t).Expect(stop()).To(Succeed()) })
}

// A person who promoted a version by hand cannot approve it anywhere down the chain, however it
// travelled: alice promotes v1 by hand in dev, automation carries it to staging, and her own
// Approval in prod does not open prod's approvals gate, which names her and where she promoted
// it. Bob's Approval opens it.
func TestHandPromoterUpTheChainCannotApprove(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	enforcePromotionPolicies(t, ns)
	mayPromoteAndApprove(t, ns, "alice", "bob")
	alice := env.ClientAs(t, "alice", "release-managers")
	bob := env.ClientAs(t, "bob", "release-managers")
	// The policies take a moment to be enforced: alice may not promote in bob's name.
	probes := 0
	g.Eventually(func() error {
		probes++
		return alice.Create(t.Context(), &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("probe-%d", probes)},
			Spec: stagecoachv1.PromotionSpec{Stage: "nowhere", RequestedBy: "bob", Version: &stagecoachv1.VersionReference{Digest: digest(9)}}})
	}, timeout, interval).Should(MatchError(ContainSubstring("names requester bob but was created by alice")))

	devApp := newApplication(t, ns, "dev", ociSpec(ns))
	stagingApp := newApplication(t, ns, "staging", ociSpec(ns))
	prodApp := newApplication(t, ns, "prod", ociSpec(ns))
	newStage(t, ns, "dev", nil)
	newStage(t, ns, "staging", func(s *stagecoachv1.Stage) {
		s.Spec.Source.Upstream = &stagecoachv1.UpstreamSource{Stage: "dev"}
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true}
	})
	newStage(t, ns, "prod", func(s *stagecoachv1.Stage) {
		s.Spec.Source.Upstream = &stagecoachv1.UpstreamSource{Stage: "staging"}
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true,
			Approvals: &stagecoachv1.ApprovalPolicy{Required: 1, Groups: []string{"release-managers"}}}
	})
	startControllerAsServiceAccount(t)

	// alice promotes v1 by hand in dev, as herself.
	g.Expect(alice.Create(t.Context(), &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dev-v1"},
		Spec: stagecoachv1.PromotionSpec{Stage: "dev", Action: stagecoachv1.ActionPromote, RequestedBy: "alice",
			Version: &stagecoachv1.VersionReference{Digest: digest(1), Tag: "v1.0.0"}}})).To(Succeed())
	devApp.deploy(digest(1), false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, "dev-v1", stagecoachv1.PhaseSucceeded)

	// Automation carries it to staging, in the controller's name.
	stagingApp.deploy(digest(1), false, "Succeeded", "Healthy")
	carried := onlyPromotion(t, ns, "staging")
	g.Expect(plan.IsAutomatic(&carried)).To(BeTrue())
	g.Expect(carried.Spec.RequestedBy).To(Equal(controllerSA))
	eventuallyPhase(t, ns, carried.Name, stagecoachv1.PhaseSucceeded)
	eventuallyBlockedBy(t, ns, "prod", stagecoachv1.GateApprovals, "0 of 1 approvals for "+digest(1))

	// alice's own Approval in prod does not count, and the gate says why.
	g.Expect(alice.Create(t.Context(), &stagecoachv1.Approval{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "by-alice"},
		Spec: stagecoachv1.ApprovalSpec{Stage: "prod", Digest: digest(1), Approver: "alice", Groups: []string{"release-managers"}}})).To(Succeed())
	eventuallyBlockedBy(t, ns, "prod", stagecoachv1.GateApprovals, "0 of 1 approvals for "+digest(1),
		"alice promoted this version by hand in "+ns+"/dev and cannot approve it")
	g.Consistently(func(g Gomega) {
		g.Expect(promotionsOf(g, t, ns, "prod")).To(BeEmpty())
	}, 2*time.Second, interval).Should(Succeed())

	// bob's opens it.
	g.Expect(bob.Create(t.Context(), &stagecoachv1.Approval{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "by-bob"},
		Spec: stagecoachv1.ApprovalSpec{Stage: "prod", Digest: digest(1), Approver: "bob", Groups: []string{"release-managers"}}})).To(Succeed())
	auto := onlyPromotion(t, ns, "prod")
	g.Expect(plan.IsAutomatic(&auto)).To(BeTrue())
	prodApp.deploy(digest(1), false, "Succeeded", "Healthy")
	done := eventuallyPhase(t, ns, auto.Name, stagecoachv1.PhaseSucceeded)
	g.Expect(done.Status.Gates).To(ContainElement(And(HaveField("Gate", stagecoachv1.GateApprovals), HaveField("Passed", true))))
}
