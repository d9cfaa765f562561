// Command hooks measures hook-to-decision latency: from a signed Flux notification POSTed to
// /hooks/flux to the Stage's status being updated, on a real API server, over real HTTP on
// loopback. To make the hook the only way the Stage can learn anything, each Stage applies
// through an object of a kind whose CRD is installed only after the Stage gave up on it (with an
// hour's retry): no watch exists for it, so only the hook wakes the Stage. Prints p50 and p99.
// Run it with `make bench`.
package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

const (
	group = "bench.stagecoach.dev"
	key   = "bench-hmac-key"
)

func main() {
	n := flag.Int("events", 100, "signed events to send")
	flag.Parse()
	if err := run(*n); err != nil {
		fmt.Fprintln(os.Stderr, "hooks:", err)
		os.Exit(1)
	}
}

func kind(i int) string { return fmt.Sprintf("Thing%d", i) }

func crd(i int) *apiextensionsv1.CustomResourceDefinition {
	plural := fmt.Sprintf("thing%ds", i)
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind(i), ListKind: kind(i) + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve}}}},
		},
	}
}

func run(n int) error {
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		return err
	}
	const ns = "default"
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hook"},
		Data: map[string][]byte{"token": []byte(key)}}); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	_ = ln.Close()

	opts := controller.DefaultOptions()
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	opts.HooksBindAddress, opts.FluxHookSecret = addr, ns+"/hook"
	opts.ApplierRetryInterval = time.Hour
	mgr, err := controller.NewManager(ctx, env.Config, opts)
	if err != nil {
		return err
	}
	go func() { _ = mgr.Start(ctx) }()

	// Stages first, so that each one finds its kind missing and stops looking.
	for i := 0; i < n; i++ {
		if err := c.Create(ctx, &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("s%d", i)},
			Spec: stagecoachv1.StageSpec{Service: "bench", Environment: "bench",
				ApplyRef:   stagecoachv1.ApplierReference{APIVersion: group + "/v1", Kind: kind(i), Name: "x"},
				Completion: &stagecoachv1.CompletionRules{ObservedMatches: []stagecoachv1.ObservedMatch{{Input: "spec.a", Output: "status.a"}}},
				Source:     stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "none"}}}}); err != nil {
			return err
		}
	}
	if err := waitAll(ctx, c, n, stagecoachv1.ReasonApplierUnreadable); err != nil {
		return err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for i := 0; i < n; i++ {
		crds = append(crds, crd(i))
	}
	if err := envtest.CreateCRDs(env.Config, crds); err != nil {
		return err
	}
	if err := envtest.WaitForCRDs(env.Config, crds, envtest.CRDInstallOptions{MaxTime: time.Minute, PollInterval: 100 * time.Millisecond}); err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"a": "1"}}}
		u.SetAPIVersion(group + "/v1")
		u.SetKind(kind(i))
		u.SetNamespace(ns)
		u.SetName("x")
		u.SetLabels(map[string]string{stagecoachv1.StageLabel: fmt.Sprintf("s%d", i)})
		if err := c.Create(ctx, u); err != nil {
			return err
		}
	}

	// Watch the Stages; record when each first turns Ready.
	var mu sync.Mutex
	readyAt := map[string]time.Time{}
	w, err := c.Watch(ctx, &stagecoachv1.StageList{}, client.InNamespace(ns))
	if err != nil {
		return err
	}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Modified {
				continue
			}
			s := ev.Object.(*stagecoachv1.Stage)
			if meta.IsStatusConditionTrue(s.Status.Conditions, stagecoachv1.ConditionReady) {
				mu.Lock()
				if _, ok := readyAt[s.Name]; !ok {
					readyAt[s.Name] = time.Now()
				}
				mu.Unlock()
			}
		}
	}()

	var latencies []time.Duration
	for i := 0; i < n; i++ {
		body := fmt.Sprintf(`{"involvedObject":{"kind":%q,"namespace":%q,"name":"x","apiVersion":"%s/v1"},"severity":"info","reason":"ReconciliationSucceeded","message":"m","reportingController":"bench"}`,
			kind(i), ns, group)
		mac := hmac.New(sha256.New, []byte(key))
		mac.Write([]byte(body))
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/hooks/flux", bytes.NewBufferString(body))
		req.Header.Set("X-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		sent := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return fmt.Errorf("event %d: status %d", i, resp.StatusCode)
		}
		name := fmt.Sprintf("s%d", i)
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			at, ok := readyAt[name]
			mu.Unlock()
			if ok {
				latencies = append(latencies, at.Sub(sent))
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("stage %s was not updated within 10s of its hook", name)
			}
			time.Sleep(time.Millisecond)
		}
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	pct := func(p float64) time.Duration { return latencies[int(p*float64(len(latencies)-1))] }
	fmt.Printf("hook-to-decision latency over %d signed Flux events (POST /hooks/flux -> Stage status updated)\n", n)
	fmt.Printf("  n=%d p50=%s p99=%s max=%s\n", len(latencies), pct(0.5).Round(100*time.Microsecond),
		pct(0.99).Round(100*time.Microsecond), latencies[len(latencies)-1].Round(100*time.Microsecond))
	return nil
}

// waitAll waits until every Stage reports the reason on Ready.
func waitAll(ctx context.Context, c client.Client, n int, reason string) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var list stagecoachv1.StageList
		if err := c.List(ctx, &list); err != nil {
			return err
		}
		count := 0
		for _, s := range list.Items {
			if r := meta.FindStatusCondition(s.Status.Conditions, stagecoachv1.ConditionReady); r != nil && r.Reason == reason {
				count++
			}
		}
		if count == n {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not every Stage reported %s within a minute", reason)
}
