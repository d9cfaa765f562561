// Package stage runs the real Stage reconciler against a real API server (Flux CRDs installed,
// Argo CD's not: one test installs them while the controller runs) and asserts through a live client.
package stage

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

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
	logs := io.Discard
	if os.Getenv("DEBUG_TEST") != "" {
		logs = os.Stderr
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(logs), zap.UseDevMode(true)))

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

	ctx, cancel := context.WithCancel(context.Background())
	opts := controller.DefaultOptions()
	opts.MetricsBindAddress = "0"
	opts.HealthProbeBindAddress = "0"
	opts.ApplierRetryInterval = 500 * time.Millisecond
	mgr, err := controller.NewManager(ctx, env.Config, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		cancel()
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager stopped with an error:", err)
		code = 1
	}
	return code
}

// newNamespace gives each test a namespace of its own, so tests need no cleanup order.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "stage-"}}
	NewWithT(t).Expect(env.Client.Create(t.Context(), ns)).To(Succeed())
	return ns.Name
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
	expectOneConditionPerType(t, stage)
	return stage
}

func expectOneConditionPerType(t *testing.T, stage *stagecoachv1.Stage) {
	t.Helper()
	seen := map[string]int{}
	for _, c := range stage.Status.Conditions {
		seen[c.Type]++
	}
	for condType, n := range seen {
		NewWithT(t).Expect(n).To(Equal(1), "condition %s appears %d times", condType, n)
	}
}
