// Package stage runs the real Stage reconciler against a real API server (Flux CRDs installed,
// Argo CD's not: one test installs them while the controller runs) and asserts through a live client.
package stage

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

const (
	timeout  = 20 * time.Second
	interval = 100 * time.Millisecond
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	testenv.SetLogger()
	var err error
	env, err = testenv.Start(testenv.FluxCRDs)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "failed to stop the test API server:", err)
		}
	}()
	// The upstream Stage that newStage's Stages follow exists (a missing upstream makes a Stage
	// not Ready) and never offers anything: its applier does not exist.
	if err := createUpstream(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stop, err := env.RunManager(context.Background(), func(o *controller.Options) {
		o.ApplierRetryInterval = 500 * time.Millisecond
		o.PolicyRecheckInterval = 200 * time.Millisecond
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if err := stop(); err != nil {
		fmt.Fprintln(os.Stderr, "manager stopped with an error:", err)
		code = 1
	}
	return code
}

func newNamespace(t *testing.T) string { return env.NewNamespace(t, "stage") }

func createUpstream(ctx context.Context) error {
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "staging"}}); err != nil {
		return fmt.Errorf("failed to create namespace staging: %w", err)
	}
	upstream := &stagecoachv1.Stage{
		ObjectMeta: metav1.ObjectMeta{Namespace: "staging", Name: "payments"},
		Spec: stagecoachv1.StageSpec{
			Service: "payments", Environment: "staging",
			ApplyRef: stagecoachv1.ApplierReference{Kind: "Application", Name: "payments"},
			Source:   stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: "registry.invalid/payments"}},
		},
	}
	if err := env.Client.Create(ctx, upstream); err != nil {
		return fmt.Errorf("failed to create the upstream Stage staging/payments: %w", err)
	}
	return nil
}

// newStage creates a Stage that applies through the given kind and name, from an upstream Stage.
func newStage(t *testing.T, ns, name, kind, applier string) *stagecoachv1.Stage {
	t.Helper()
	stage := &stagecoachv1.Stage{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: stagecoachv1.StageSpec{
			Service:     "payments",
			Environment: "prod",
			ApplyRef:    stagecoachv1.ApplierReference{Kind: kind, Name: applier},
			Source:      stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "payments", Namespace: "staging"}},
		},
	}
	NewWithT(t).Expect(env.Client.Create(t.Context(), stage)).To(Succeed())
	return stage
}

// eventuallyReady waits until the Stage's Ready condition, read live, has the status and reason and
// a message containing want, for the Stage's current generation; it returns the Stage.
func eventuallyReady(t *testing.T, ns, name string, status metav1.ConditionStatus, reason, want string) *stagecoachv1.Stage {
	t.Helper()
	g := NewWithT(t)
	stage := &stagecoachv1.Stage{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, stage)).To(Succeed())
		ready := meta.FindStatusCondition(stage.Status.Conditions, stagecoachv1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(status))
		g.Expect(ready.Reason).To(Equal(reason))
		g.Expect(ready.Message).To(ContainSubstring(want))
		g.Expect(ready.ObservedGeneration).To(Equal(stage.Generation))
		g.Expect(stage.Status.ObservedGeneration).To(Equal(stage.Generation))
	}, timeout, interval).Should(Succeed())
	g.Expect(testenv.StageConforms(stage)).To(Succeed())
	return stage
}
