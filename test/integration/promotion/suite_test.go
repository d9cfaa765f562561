// Package promotion runs the Stage reconciler against a real API server with Argo CD's CRDs, and
// plays argocd-application-controller's status writes the way it makes them (see fakeargocd_test.go).
package promotion

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

const (
	timeout  = 20 * time.Second
	interval = 50 * time.Millisecond
)

var (
	env *testenv.Env
	// author is the suite's admin as spec.author (set once, before the tests).
	author *stagecoachv1.StageAuthor
)

func TestMain(m *testing.M) {
	testenv.SetLogger()
	var err error
	env, err = testenv.Start(testenv.ArgoCDCRDs, testenv.StandInCRDs)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The suites' admin writes every Stage: a generic applier is written as its author.
	if author, err = env.Author(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "failed to stop the test API server:", err)
	}
	os.Exit(code)
}

// runningController is a started manager and the count of targetRevision/plugin-env writes it made.
type runningController struct {
	revisionPatches *atomic.Int32
	stop            func()
}

// startController starts a manager with the real reconcilers; it stops when the test ends (or
// earlier through stop). Writes of a revision to an Application are counted.
func startController(t *testing.T, patches *atomic.Int32) *runningController {
	t.Helper()
	return startControllerWith(t, patches, nil)
}

// startControllerWith is startController with more options set by mutate.
func startControllerWith(t *testing.T, patches *atomic.Int32, mutate func(*controller.Options)) *runningController {
	t.Helper()
	if patches == nil {
		patches = &atomic.Int32{}
	}
	countingClient := func(cfg *rest.Config, o client.Options) (client.Client, error) {
		c, err := client.NewWithWatch(cfg, o)
		if err != nil {
			return nil, err
		}
		return interceptor.NewClient(c, interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, po ...client.PatchOption) error {
				written := false
				if u, ok := obj.(*unstructured.Unstructured); ok && u.GetKind() == "Application" {
					if data, err := patch.Data(obj); err == nil && (strings.Contains(string(data), "targetRevision") || strings.Contains(string(data), "STAGECOACH_DIGEST")) {
						written = true
					}
				}
				// Counted when the API server took it (a write refused for a conflict wrote nothing).
				err := c.Patch(ctx, obj, patch, po...)
				if err == nil && written {
					patches.Add(1)
				}
				return err
			},
		}), nil
	}
	stopManager, err := env.RunManager(context.Background(), func(o *controller.Options) {
		o.ApplierRetryInterval = 500 * time.Millisecond
		o.SkipNameValidation = true // one manager per test, in one process
		o.NewClient = countingClient
		if mutate != nil {
			mutate(o)
		}
	})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			NewWithT(t).Expect(stopManager()).To(Succeed())
		}
	}
	t.Cleanup(stop)
	return &runningController{revisionPatches: patches, stop: stop}
}

func newNamespace(t *testing.T) string { return env.NewNamespace(t, "promo") }

func digest(n int) string {
	return fmt.Sprintf("sha256:%064x", n)
}

// stageSpec builds a Stage applying through the Application of the same name, following upstream.
func newStage(t *testing.T, ns, name string, mutate func(*stagecoachv1.Stage)) *stagecoachv1.Stage {
	t.Helper()
	grace := metav1.Duration{Duration: time.Second}
	stage := &stagecoachv1.Stage{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: stagecoachv1.StageSpec{
			Service: "payments", Environment: name,
			ApplyRef:     stagecoachv1.ApplierReference{Kind: "Application", Name: name},
			Source:       stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "none"}},
			Verification: &stagecoachv1.VerificationPolicy{Grace: &grace},
		},
	}
	if mutate != nil {
		mutate(stage)
	}
	if up := stage.Spec.Source.Upstream; up != nil && up.Stage == "none" && up.Namespace == "" {
		env.CreatePlaceholderUpstream(t, ns)
	}
	NewWithT(t).Expect(env.Client.Create(t.Context(), stage)).To(Succeed())
	return stage
}

// newPipeline creates staging and prod, each applied by its own Application, prod following
// staging; prodPolicy sets prod's promotion policy (nil: promote by hand) and mutate changes more.
func newPipeline(t *testing.T, ns string, prodPolicy *stagecoachv1.PromotionPolicy, mutate func(*stagecoachv1.Stage)) (staging, prod *fakeArgoCD) {
	t.Helper()
	staging = newApplication(t, ns, "staging", ociSpec(ns))
	prod = newApplication(t, ns, "prod", ociSpec(ns))
	newStage(t, ns, "staging", nil)
	newStage(t, ns, "prod", func(s *stagecoachv1.Stage) {
		s.Spec.Source.Upstream = &stagecoachv1.UpstreamSource{Stage: "staging"}
		s.Spec.Promotion = prodPolicy
		if mutate != nil {
			mutate(s)
		}
	})
	return staging, prod
}

func newPromotion(t *testing.T, ns, name, stage string, action stagecoachv1.PromotionAction, d, tag string) *stagecoachv1.Promotion {
	t.Helper()
	p := &stagecoachv1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       stagecoachv1.PromotionSpec{Stage: stage, Action: action},
	}
	if d != "" {
		p.Spec.Version = &stagecoachv1.VersionReference{Digest: d, Tag: tag}
	}
	NewWithT(t).Expect(env.Client.Create(t.Context(), p)).To(Succeed())
	return p
}

func getStage(g Gomega, ctx context.Context, ns, name string) *stagecoachv1.Stage {
	s := &stagecoachv1.Stage{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
	return s
}

func getPromotion(g Gomega, ctx context.Context, ns, name string) *stagecoachv1.Promotion {
	p := &stagecoachv1.Promotion{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
	return p
}

// eventuallyPhase waits for a Promotion's phase and returns it.
func eventuallyPhase(t *testing.T, ns, name string, phase stagecoachv1.Phase) *stagecoachv1.Promotion {
	t.Helper()
	var p *stagecoachv1.Promotion
	NewWithT(t).Eventually(func(g Gomega) {
		p = getPromotion(g, t.Context(), ns, name)
		g.Expect(p.Status.Phase).To(Equal(phase), "message: %s", p.Status.Message)
	}, timeout, interval).Should(Succeed())
	return p
}

// eventuallyCondition waits for a Stage condition and returns the Stage.
func eventuallyCondition(t *testing.T, ns, name, condType string, status metav1.ConditionStatus, reason, msg string) *stagecoachv1.Stage {
	t.Helper()
	var s *stagecoachv1.Stage
	NewWithT(t).Eventually(func(g Gomega) {
		s = getStage(g, t.Context(), ns, name)
		c := meta.FindStatusCondition(s.Status.Conditions, condType)
		g.Expect(c).NotTo(BeNil(), "no %s condition in %v", condType, s.Status.Conditions)
		g.Expect(c.Status).To(Equal(status), c.Message)
		g.Expect(c.Reason).To(Equal(reason), c.Message)
		g.Expect(c.Message).To(ContainSubstring(msg))
		g.Expect(c.ObservedGeneration).To(Equal(s.Generation))
		g.Expect(testenv.StageConforms(s)).To(Succeed())
	}, timeout, interval).Should(Succeed())
	return s
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
