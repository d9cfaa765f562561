// Command reaction measures how fast Stagecoach reacts to the engines, on a real API server with a
// fake Argo CD application-controller (test/fakeargocd), over a two-Stage pipeline:
//
//   - landed → status: from the Argo CD status write that makes an Application landed to the
//     Promotion's status saying so (landedAt);
//   - verified → patch: from the upstream Stage becoming Verified to the downstream Application's
//     targetRevision patch.
//
// Times are taken from watch events, so the driver's own waiting does not count. It prints p50,
// p99 and max; it asserts nothing (numbers are compared by people, not by a timed test).
// Run it with `make bench`.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller"
	"github.com/stagecoach-dev/stagecoach/test/fakeargocd"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

func main() {
	n := flag.Int("promotions", 100, "versions to carry through the pipeline")
	flag.Parse()
	if err := run(*n); err != nil {
		fmt.Fprintln(os.Stderr, "reaction:", err)
		os.Exit(1)
	}
}

// seen records when watch events first showed a key.
type seen struct {
	mu    sync.Mutex
	times map[string]time.Time
}

func (s *seen) mark(key string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.times[key]; !ok {
		s.times[key] = at
	}
}

// wait polls for a key a watch event recorded; the recorded time is the event's arrival.
func (s *seen) wait(ctx context.Context, key string) (time.Time, error) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		at, ok := s.times[key]
		s.mu.Unlock()
		if ok {
			return at, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	return time.Time{}, fmt.Errorf("timed out waiting for %s", key)
}

// watchAll feeds every event of a list kind to mark.
func watchAll(ctx context.Context, c client.WithWatch, list client.ObjectList, ns string, keys func(runtime.Object) []string, s *seen) error {
	w, err := c.Watch(ctx, list, client.InNamespace(ns))
	if err != nil {
		return err
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added || ev.Type == watch.Modified {
				now := time.Now()
				for _, k := range keys(ev.Object) {
					s.mark(k, now)
				}
			}
		}
	}()
	return nil
}

func run(n int) error {
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	env, err := testenv.Start(testenv.ArgoCDCRDs)
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	opts := controller.DefaultOptions()
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	mgr, err := controller.NewManager(ctx, env.Config, opts)
	if err != nil {
		return err
	}
	go func() { _ = mgr.Start(ctx) }()

	scheme, _ := controller.NewScheme()
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-"}}
	if err := c.Create(ctx, ns); err != nil {
		return err
	}
	up, err := fakeargocd.Create(ctx, c, ns.Name, "up", fakeargocd.OCISpec(ns.Name))
	if err != nil {
		return err
	}
	down, err := fakeargocd.Create(ctx, c, ns.Name, "down", fakeargocd.OCISpec(ns.Name))
	if err != nil {
		return err
	}
	zero := metav1.Duration{}
	for _, s := range []*stagecoachv1.Stage{
		{ObjectMeta: metav1.ObjectMeta{Name: "up", Namespace: ns.Name}, Spec: stagecoachv1.StageSpec{Service: "bench", Environment: "up",
			ApplyRef: stagecoachv1.ApplierReference{Kind: "Application", Name: "up"},
			Source:   stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "none"}}, Verification: &stagecoachv1.VerificationPolicy{Grace: &zero}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "down", Namespace: ns.Name}, Spec: stagecoachv1.StageSpec{Service: "bench", Environment: "down",
			ApplyRef: stagecoachv1.ApplierReference{Kind: "Application", Name: "down"}, Promotion: &stagecoachv1.PromotionPolicy{Auto: true},
			Source: stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "up"}}, Verification: &stagecoachv1.VerificationPolicy{Grace: &zero}}},
	} {
		if err := c.Create(ctx, s); err != nil {
			return err
		}
	}

	events := &seen{times: map[string]time.Time{}}
	apps := &unstructured.UnstructuredList{}
	apps.SetAPIVersion("argoproj.io/v1alpha1")
	apps.SetKind("ApplicationList")
	if err := watchAll(ctx, c, apps, ns.Name, func(o runtime.Object) []string {
		u := o.(*unstructured.Unstructured)
		return []string{"app/" + u.GetName() + "/" + fakeargocd.DesiredRevision(u)}
	}, events); err != nil {
		return err
	}
	if err := watchAll(ctx, c, &stagecoachv1.PromotionList{}, ns.Name, func(o runtime.Object) []string {
		p := o.(*stagecoachv1.Promotion)
		if p.Status.LandedAt != nil && p.Status.Version != nil {
			return []string{"landed/" + p.Spec.Stage + "/" + p.Status.Version.Digest}
		}
		return nil
	}, events); err != nil {
		return err
	}
	if err := watchAll(ctx, c, &stagecoachv1.StageList{}, ns.Name, func(o runtime.Object) []string {
		s := o.(*stagecoachv1.Stage)
		v := meta.FindStatusCondition(s.Status.Conditions, stagecoachv1.ConditionVerified)
		if v != nil && v.Status == metav1.ConditionTrue && s.Status.Current != nil {
			return []string{"verified/" + s.Name + "/" + s.Status.Current.Digest}
		}
		return nil
	}, events); err != nil {
		return err
	}

	// land plays Argo CD syncing what Stagecoach wrote and returns when the write that makes it
	// landed was sent.
	land := func(app *fakeargocd.App, digest string) (time.Time, error) {
		now := time.Now()
		if err := app.Refresh(ctx, now); err != nil {
			return time.Time{}, err
		}
		if err := app.Sync(ctx, "Succeeded", "synced", now, now); err != nil {
			return time.Time{}, err
		}
		sent := time.Now()
		return sent, app.Assess(ctx, "Healthy", now)
	}

	var landed, patched []time.Duration
	start := time.Now()
	for i := 1; i <= n; i++ {
		digest := fmt.Sprintf("sha256:%064x", i)
		if err := c.Create(ctx, &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("up-%d", i), Namespace: ns.Name},
			Spec: stagecoachv1.PromotionSpec{Stage: "up", Version: &stagecoachv1.VersionReference{Digest: digest, Tag: fmt.Sprintf("v%d", i)}}}); err != nil {
			return err
		}
		for _, stage := range []*fakeargocd.App{up, down} {
			name := stage.Key.Name
			if _, err := events.wait(ctx, "app/"+name+"/"+digest); err != nil {
				return err
			}
			sent, err := land(stage, digest)
			if err != nil {
				return err
			}
			at, err := events.wait(ctx, "landed/"+name+"/"+digest)
			if err != nil {
				return err
			}
			landed = append(landed, at.Sub(sent))
			verifiedAt, err := events.wait(ctx, "verified/"+name+"/"+digest)
			if err != nil {
				return err
			}
			if name == "up" {
				patchAt, err := events.wait(ctx, "app/down/"+digest)
				if err != nil {
					return err
				}
				patched = append(patched, patchAt.Sub(verifiedAt))
			}
		}
	}
	fmt.Printf("reaction latency over %d promotions through 2 Stages (%s in all)\n", n, time.Since(start).Round(time.Millisecond))
	report("landed write -> Promotion landed", landed)
	report("upstream Verified -> downstream patch", patched)
	return nil
}

func report(name string, d []time.Duration) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	pct := func(p float64) time.Duration { return d[int(p*float64(len(d)-1))] }
	fmt.Printf("  %-40s n=%d p50=%s p99=%s max=%s\n", name, len(d),
		pct(0.50).Round(100*time.Microsecond), pct(0.99).Round(100*time.Microsecond), d[len(d)-1].Round(100*time.Microsecond))
}
