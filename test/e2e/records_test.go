package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
)

// prod in a second cluster follows staging in the stack's cluster through the registry alone:
// the clusters share no object and no controller talks to the other cluster. Staging (Flux)
// records every step, signed; prod (a Deployment, kube-controller-manager of its own) takes the
// version staging verified, and never the one that failed there.
func TestProdFollowsStagingInAnotherCluster(t *testing.T) {
	sc := env.Scenario(t)
	ctx := sc.Ctx()
	repo, target := sc.NS+"/payments", sc.TargetNamespace("staging")
	good := sc.Push(repo, "v1.0.0", map[string]string{"configmap.yaml": localstack.ConfigMap("payments", "v1.0.0")})
	// Of a kind no API server serves: kustomize-controller's apply fails with ReconciliationFailed.
	broken := sc.Push(repo, "v2.0.0", map[string]string{"broken.yaml": "apiVersion: e2e.stagecoach.dev/v1\nkind: NoSuchKind\nmetadata: {name: broken}\n"})
	streams := sc.Registry.Repository(sc.NS + "/records")

	// Cluster A's recorder: a cosign key pair in a Secret, and the controller restarted with it
	// (and back without it when the test ends: the other scenarios share it).
	const password = "e2e-records"
	key, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return []byte(password), nil })
	sc.G.Expect(err).NotTo(HaveOccurred())
	secret := "recorder-key-" + sc.NS
	sc.G.Expect(sc.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "stagecoach-system", Name: secret},
		Data: map[string][]byte{"cosign.key": key.PrivateBytes, "cosign.password": []byte(password)}})).To(Succeed())
	restore, err := env.RestartControllerWith(ctx, "--records-repository="+streams,
		"--records-key-secret=stagecoach-system/"+secret, "--records-cluster=e2e-a")
	t.Cleanup(func() {
		if err := restore(context.WithoutCancel(ctx)); err != nil {
			t.Errorf("cannot restart the stack's controller without records: %v", err)
		}
	})
	sc.G.Expect(err).NotTo(HaveOccurred())

	sc.FluxOCISource("payments-staging", repo, "v1.0.0", "staging", target)
	sc.Stage("staging", "payments", "staging",
		stagecoachv1.ApplierReference{Kind: "OCIRepository", Name: "payments-staging", Kustomization: "payments-staging-apply"},
		stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "none"}},
		func(s *stagecoachv1.Stage) {
			s.Spec.Verification.ProgressDeadline = &metav1.Duration{Duration: time.Minute}
		})
	var stream string
	sc.G.Eventually(func(g Gomega) {
		s := sc.GetStage(g, "staging")
		g.Expect(s.Status.Stream).NotTo(BeNil())
		g.Expect(s.Status.Stream.ID).NotTo(BeEmpty(), s.Status.Stream.Message)
		stream = s.Status.Stream.ID
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
	sc.G.Expect(stream).To(Equal("e2e-a/" + sc.NS + "/staging"))

	// Cluster B: its own control plane and controller, trusting staging's recorder key through a
	// ConfigMap, reading the stream every 2 s.
	b, err := env.StartSecondCluster(ctx, "cluster-b-"+sc.NS,
		"--upstream-trust=configmap:stagecoach-system/stagecoach-upstream-trust", "--upstream-trust-recheck=1s", "--upstream-records-interval=2s")
	sc.G.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if t.Failed() && b.Controller != nil {
			t.Logf("cluster B's controller logged:\n%s", b.Controller.Tail(80))
		}
		b.Stop()
	})
	sc.G.Expect(b.Namespace(ctx, sc.NS)).To(Succeed())
	trustYAML := "keys:\n- name: staging-recorder\n  repositories: [\"" + streams + "\"]\n  streams: [\"e2e-a/" + sc.NS + "/*\"]\n  publicKey: |\n    " +
		strings.ReplaceAll(strings.TrimSpace(string(key.PublicBytes)), "\n", "\n    ") + "\n"
	sc.G.Expect(b.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "stagecoach-system", Name: "stagecoach-upstream-trust"},
		Data: map[string]string{"upstream-trust.yaml": trustYAML}})).To(Succeed())
	sc.G.Expect(localstack.ApplyYAML(ctx, b.Client, []byte(fmt.Sprintf(deploymentGrantYAML, sc.NS)))).To(Succeed())
	sc.G.Expect(localstack.ApplyYAML(ctx, b.Client, []byte(fmt.Sprintf(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: payments, namespace: %s, labels: {stagecoach.dev/stage: prod}}
spec:
  replicas: 0
  selector: {matchLabels: {app: payments}}
  template:
    metadata: {labels: {app: payments}}
    spec:
      containers: [{name: payments, image: %s}]
`, sc.NS, sc.Registry.Repository(repo)+":initial")))).To(Succeed())
	auto := true
	sc.G.Expect(b.Client.Create(ctx, &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: sc.NS, Name: "prod"},
		Spec: stagecoachv1.StageSpec{Service: "payments", Environment: "prod", Author: localstack.AdminAuthor(),
			ApplyRef: stagecoachv1.ApplierReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "payments",
				Set: []stagecoachv1.FieldSetting{{Path: "/spec/template/spec/containers/0/image", Value: sc.Registry.Repository(repo) + "@{{ .Digest }}"}}},
			Source: stagecoachv1.StageSource{UpstreamRecords: &stagecoachv1.UpstreamRecordsSource{
				Repository: streams, Stream: stream, ApplyRepository: sc.Registry.Repository(repo)}},
			Promotion:    &stagecoachv1.PromotionPolicy{Auto: auto},
			Verification: &stagecoachv1.VerificationPolicy{Grace: &metav1.Duration{Duration: time.Second}},
			Completion: &stagecoachv1.CompletionRules{ObservedCompletion: &stagecoachv1.ObservedCompletion{
				Succeeded: &stagecoachv1.FieldMatch{Key: progressingReason, Value: "NewReplicaSetAvailable"},
				Failed:    &stagecoachv1.FieldMatch{Key: progressingReason, Value: "ProgressDeadlineExceeded"},
			}},
		}})).To(Succeed())
	prodIn := func(g Gomega) *stagecoachv1.Stage {
		s := &stagecoachv1.Stage{}
		g.Expect(b.Client.Get(ctx, client.ObjectKey{Namespace: sc.NS, Name: "prod"}, s)).To(Succeed())
		return s
	}
	promotionsIn := func(g Gomega) []stagecoachv1.Promotion {
		var list stagecoachv1.PromotionList
		g.Expect(b.Client.List(ctx, &list, client.InNamespace(sc.NS))).To(Succeed())
		return list.Items
	}

	t.Run("prod takes the version staging verified", func(t *testing.T) {
		g := NewWithT(t)
		created := time.Now()
		p := sc.Promote("staging", "v1.0.0", good)
		sc.WaitVerified("staging", good, created)
		// The follower lag: from staging's verdict recorded (seen here polling every 100 ms) to
		// prod's automatic Promotion created (its exact creation time).
		var recorded time.Time
		g.Eventually(func(g Gomega) {
			got := &stagecoachv1.Promotion{}
			g.Expect(sc.Client.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
			g.Expect(got.Status.Record).NotTo(BeNil())
			g.Expect(got.Status.Record.Action).To(Equal("Verify"))
			recorded = time.Now()
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
		var taken time.Time
		g.Eventually(func(g Gomega) {
			for _, q := range promotionsIn(g) {
				if q.Spec.Version != nil && q.Spec.Version.Digest == good {
					taken, _ = time.Parse(time.RFC3339Nano, q.Annotations[stagecoachv1.CreatedAtAnnotation])
				}
			}
			g.Expect(taken).NotTo(BeZero(), "prod has no Promotion of v1.0.0")
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
		g.Eventually(func(g Gomega) {
			prod := prodIn(g)
			g.Expect(prod.Status.Current).NotTo(BeNil(), "prod runs nothing verified yet")
			g.Expect(prod.Status.Current.Digest).To(Equal(good))
			g.Expect(prod.Status.UpstreamSeen).NotTo(BeNil())
			g.Expect(prod.Status.UpstreamSeen.Seq).To(BeNumerically(">=", 2))
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
		report("%-8s prod in cluster B took v1.0.0 from staging's records: follower lag %s (staging's verdict recorded → prod's Promotion created; interval 2 s)",
			"records", taken.Sub(recorded).Round(10*time.Millisecond))
	})

	t.Run("prod never takes the version that failed in staging", func(t *testing.T) {
		g := NewWithT(t)
		p := sc.Promote("staging", "v2.0.0", broken)
		var failedAt int64
		g.Eventually(func(g Gomega) {
			got := &stagecoachv1.Promotion{}
			g.Expect(sc.Client.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
			g.Expect(got.Status.Phase).To(Equal(stagecoachv1.PhaseFailed), got.Status.Message)
			g.Expect(got.Status.Record).NotTo(BeNil())
			failedAt = got.Status.Record.Seq
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
		// prod reads the failure...
		g.Eventually(func(g Gomega) {
			g.Expect(prodIn(g).Status.UpstreamSeen.Seq).To(BeNumerically(">=", failedAt))
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
		// ...and a person's promote of that version is refused, citing the record.
		g.Expect(b.Client.Create(ctx, &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: sc.NS, Name: "prod-v2"},
			Spec: stagecoachv1.PromotionSpec{Stage: "prod", Action: stagecoachv1.ActionPromote, RequestedBy: localstack.AdminUser,
				Version: &stagecoachv1.VersionReference{Digest: broken, Tag: "v2.0.0"}}})).To(Succeed())
		g.Eventually(func(g Gomega) {
			got := &stagecoachv1.Promotion{}
			g.Expect(b.Client.Get(ctx, client.ObjectKey{Namespace: sc.NS, Name: "prod-v2"}, got)).To(Succeed())
			g.Expect(got.Status.Phase).To(Equal(stagecoachv1.PhaseFailed), got.Status.Message)
			g.Expect(got.Status.Message).To(ContainSubstring("NotPublished"))
			g.Expect(got.Status.Message).To(ContainSubstring("is never taken"))
			g.Expect(got.Status.Message).To(ContainSubstring("upstreamSeq="))
		}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
		for _, q := range promotionsIn(g) {
			g.Expect(q.Name == "prod-v2" || q.Spec.Version == nil || q.Spec.Version.Digest != broken).To(BeTrue(), "prod took v2.0.0 by itself: %s", q.Name)
		}
		prod := prodIn(g)
		g.Expect(prod.Status.Current.Digest).To(Equal(good))
		ready := meta.FindStatusCondition(prod.Status.Conditions, stagecoachv1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)
		report("%-8s prod in cluster B refused v2.0.0, failed in staging (record %d)", "records", failedAt)
	})
}

// deploymentGrantYAML gives the controller of a cluster what an operator would for a Deployment
// applier in namespace %[1]s (grantDeployments, for a client of another cluster).
const deploymentGrantYAML = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: stagecoach-read-deployments}
rules: [{apiGroups: [apps], resources: [deployments], verbs: [get, list, watch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: stagecoach-read-deployments}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: stagecoach-read-deployments}
subjects: [{kind: ServiceAccount, name: stagecoach-controller, namespace: stagecoach-system}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: stagecoach-apply-deployments, namespace: %[1]s}
rules: [{apiGroups: [apps], resources: [deployments], verbs: [patch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: stagecoach-apply-deployments, namespace: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: stagecoach-apply-deployments}
subjects: [{kind: ServiceAccount, name: stagecoach-controller, namespace: stagecoach-system}]
`
