// Command scale measures the controller at scale (issue 21) on a real API server: N settled Argo CD
// Applications and N Stages (pipelines of four), with the controller run as its own process (the
// built binary) so that its CPU and RSS come from /proc alone. It prints, each as a figure and as a
// ratio to the goal (≤ 1 is met):
//
//   - first sync: from the controller's start until every Stage's status is written for its
//     generation and the Stage queue is empty;
//   - idle CPU and RSS over -idle (60 s) after that, from /proc/<pid>;
//   - resync: from a restart until every Stage was reconciled again and the queue is empty;
//   - 100 Promotions at once: from the engine's landed write (test/fakeargocd, as Argo CD writes
//     it) to the Promotion's Succeeded, p50 and p99. The write's time is when a watch of the
//     Applications first shows it (the earliest any controller could know of it); the time from
//     the engine sending it is printed beside.
//   - the API server alone: with the controller stopped, 100 simultaneous writes of each kind a
//     promotion writes after it landed (Stage status, Promotion status, the Application's
//     annotation), p50 and p99: no controller reacts faster than its own writes are answered.
//
// Beside the table it counts what the controller wrote (status writes, Events, API requests by
// method) and its ERROR log lines. It asserts nothing. Run it with `make bench-scale N=5000`.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller"
	"github.com/stagecoach-dev/stagecoach/test/fakeargocd"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

// The goals.
const (
	goalFirstSync = 20 * time.Second
	goalIdleCPU   = 2.0 // percent of one core
	goalIdleRSS   = 200 // MiB
	goalResync    = 10 * time.Second
	goalP50       = 200 * time.Millisecond
	goalP99       = time.Second
)

var envs = []string{"dev", "qa", "staging", "prod"}

type config struct {
	n, promotions, perNamespace int
	idle                        time.Duration
	binary, args, logs          string
	// env is added to the controller's environment only (say GOMEMLIMIT=180MiB, what the
	// controller sets itself in a container limited to 200 MiB).
	env string
}

func main() {
	var c config
	flag.IntVar(&c.n, "n", 500, "Stages (and Applications); pipelines of four")
	flag.IntVar(&c.promotions, "promotions", 100, "Promotions created at once")
	flag.IntVar(&c.perNamespace, "per-namespace", 100, "Stages per namespace")
	flag.DurationVar(&c.idle, "idle", 60*time.Second, "how long idle CPU and RSS are sampled")
	flag.StringVar(&c.binary, "controller", "", "the stagecoach binary (make bench-scale builds it)")
	flag.StringVar(&c.args, "args", "", "extra controller flags, space-separated")
	flag.StringVar(&c.logs, "logs", "", "folder for the controller's logs (a temporary one when empty)")
	flag.StringVar(&c.env, "env", "", "extra environment of the controller only, space-separated KEY=VALUE")
	flag.Parse()
	if c.binary == "" {
		fmt.Fprintln(os.Stderr, "scale: -controller is required: run it with make bench-scale")
		os.Exit(2)
	}
	c.n -= c.n % len(envs)
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

// stageName and namespace of pipeline p, environment e.
func stageName(p, e int) string { return fmt.Sprintf("p%d-%s", p, envs[e]) }
func namespace(c config, p int) string {
	return fmt.Sprintf("scale-%d", p*len(envs)/c.perNamespace)
}

// originNamespace holds the Stage every pipeline follows.
const originNamespace = "scale-origin"

func digest(i int) string { return fmt.Sprintf("sha256:%064x", i) }

func run(c config) error {
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	env, err := testenv.Start(testenv.ArgoCDCRDs)
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The driver's client is not throttled: setting up 10,000 objects at 5 QPS would take hours.
	cfg := *env.Config
	cfg.QPS, cfg.Burst = -1, 0
	scheme, _ := controller.NewScheme()
	cl, err := client.NewWithWatch(&cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "bench-scale-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if c.logs == "" {
		c.logs = dir
	}
	kubeconfig, err := writeKubeconfig(env.Environment, dir)
	if err != nil {
		return err
	}

	start := time.Now()
	if err := setup(ctx, c, cl); err != nil {
		return err
	}
	fmt.Printf("created %d Applications and %d Stages in %d namespaces in %s\n", c.n, c.n,
		(c.n+c.perNamespace-1)/c.perNamespace, time.Since(start).Round(time.Second))

	stages := newStageWatch()
	if err := stages.start(ctx, cl); err != nil {
		return err
	}

	// First sync.
	proc, err := startController(ctx, c, kubeconfig, filepath.Join(c.logs, "controller-1.log"))
	if err != nil {
		return err
	}
	firstSync, err := proc.waitSynced(ctx, func() bool { return stages.synced() == c.n+1 }, 0)
	if err != nil {
		return err
	}
	first := proc.counts(ctx, cl, stages)
	fmt.Printf("first sync %s: %s\n", firstSync.Round(10*time.Millisecond), first)

	// Idle.
	cpu, rss, err := proc.idle(ctx, c.idle)
	if err != nil {
		return err
	}
	fmt.Printf("idle over %s: CPU %.2f %% of a core, RSS max %.0f MiB\n", c.idle, cpu, rss)

	// Resync after restart.
	if err := proc.stop(); err != nil {
		return err
	}
	beforeRestart := proc.counts(ctx, cl, stages)
	proc, err = startController(ctx, c, kubeconfig, filepath.Join(c.logs, "controller-2.log"))
	if err != nil {
		return err
	}
	defer func() { _ = proc.stop() }()
	resync, err := proc.waitSynced(ctx, func() bool { return true }, c.n)
	if err != nil {
		return err
	}
	restart := proc.counts(ctx, cl, stages).minus(beforeRestart)
	fmt.Printf("resync %s: %s\n", resync.Round(10*time.Millisecond), restart)

	// Promotions at once.
	beforePromote, _ := proc.metrics(ctx)
	latencies, fromSend, err := promote(ctx, c, cl)
	if err != nil {
		return err
	}
	if afterPromote, err := proc.metrics(ctx); err == nil && beforePromote != nil {
		fmt.Println(promoteBreakdown(beforePromote, afterPromote))
	}
	p50, p99 := pct(latencies, 0.50), pct(latencies, 0.99)
	fmt.Printf("landed write → Succeeded: from the write's first sight p50 %s p99 %s; from the engine sending it p50 %s p99 %s\n",
		ms(p50), ms(p99), ms(pct(fromSend, 0.50)), ms(pct(fromSend, 0.99)))

	// The API server alone, with nothing else running.
	if err := proc.stop(); err != nil {
		return err
	}
	floors, err := apiFloors(ctx, cl, min(c.promotions, c.n/len(envs)))
	if err != nil {
		return err
	}

	fmt.Printf("\nStagecoach at N=%d (controller: %s %s %s)\n\n", c.n, c.env, filepath.Base(c.binary), c.args)
	fmt.Printf("| | N=%d | goal | ratio |\n|---|---|---|---|\n", c.n)
	row := func(name, figure, goal string, ratio float64) {
		met := "met"
		if ratio > 1 {
			met = "NOT met"
		}
		fmt.Printf("| %s | %s | %s | %.2f (%s) |\n", name, figure, goal, ratio, met)
	}
	row("first sync of all Stages after start", secs(firstSync), "≤ 20 s", firstSync.Seconds()/goalFirstSync.Seconds())
	row("idle CPU", fmt.Sprintf("%.2f %%", cpu), "< 2 %", cpu/goalIdleCPU)
	row("idle RSS", fmt.Sprintf("%.0f MiB", rss), "< 200 MiB", rss/goalIdleRSS)
	row("resync after restart", secs(resync), "≤ 10 s", resync.Seconds()/goalResync.Seconds())
	row(fmt.Sprintf("%d Promotions at once, landed write (first seen) → Succeeded, p50", len(latencies)), ms(p50), "≤ 200 ms", p50.Seconds()/goalP50.Seconds())
	row(fmt.Sprintf("%d Promotions at once, landed write (first seen) → Succeeded, p99", len(latencies)), ms(p99), "≤ 1 s", p99.Seconds()/goalP99.Seconds())
	fmt.Printf("\nThe API server alone (controller stopped), %d simultaneous writes of each kind a promotion makes after landing:\n\n", len(latencies))
	fmt.Printf("| write | p50 | p99 |\n|---|---|---|\n")
	for _, f := range floors {
		fmt.Printf("| %s | %s | %s |\n", f.name, ms(f.p50), ms(f.p99))
	}
	fmt.Printf("\nfirst start: %s\nrestart:     %s\n", first, restart)
	return nil
}

// floor is how long the API server alone takes to answer a burst of one kind of write.
type floor struct {
	name     string
	p50, p99 time.Duration
}

// apiFloors measures n simultaneous writes of each kind a promotion makes after its landed write
// (and of a ConfigMap, a built-in kind, for scale), on objects of their own in a namespace of
// their own, with the controller stopped.
func apiFloors(ctx context.Context, cl client.Client, n int) ([]floor, error) {
	const ns = "scale-floor"
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return nil, err
	}
	name := func(kind string, i int) string { return fmt.Sprintf("%s-%d", kind, i) }
	if err := parallel(n, 16, func(i int) error {
		stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Name: name("stage", i), Namespace: ns}, Spec: stagecoachv1.StageSpec{
			Service: "floor", Environment: "dev", ApplyRef: stagecoachv1.ApplierReference{Kind: "Application", Name: name("app", i)},
			Source: stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "none"}}}}
		promotion := &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: name("promotion", i), Namespace: ns},
			Spec: stagecoachv1.PromotionSpec{Stage: stage.Name, Version: &stagecoachv1.VersionReference{Digest: digest(1), Tag: "v1"}}}
		for _, obj := range []client.Object{settledApp(ns, name("app", i)), stage, promotion,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name("configmap", i), Namespace: ns}}} {
			if err := cl.Create(ctx, obj); err != nil {
				return fmt.Errorf("failed to create %s for the API server's floor: %w", obj.GetName(), err)
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	merge := func(format string, args ...any) client.Patch {
		return client.RawPatch(types.MergePatchType, fmt.Appendf(nil, format, args...))
	}
	kinds := []struct {
		name  string
		write func(i, round int) error
	}{
		{"Stage status (merge patch)", func(i, round int) error {
			s := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Name: name("stage", i), Namespace: ns}}
			return cl.Status().Patch(ctx, s, merge(`{"status":{"lastAppliedDigest":%q}}`, digest(round)))
		}},
		{"Promotion status (merge patch)", func(i, round int) error {
			p := &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: name("promotion", i), Namespace: ns}}
			return cl.Status().Patch(ctx, p, merge(`{"status":{"message":"round %d"}}`, round))
		}},
		{"Application annotation (merge patch)", func(i, round int) error {
			return cl.Patch(ctx, settledApp(ns, name("app", i)), merge(`{"metadata":{"annotations":{%q:"round %d"}}}`, stagecoachv1.PhaseAnnotation, round))
		}},
		{"ConfigMap data (merge patch; a built-in kind, for scale)", func(i, round int) error {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name("configmap", i), Namespace: ns}}
			return cl.Patch(ctx, cm, merge(`{"data":{"round":"%d"}}`, round))
		}},
	}
	// Three bursts of each kind, the median of their p50s and p99s: one burst is noisy.
	const rounds = 3
	var out []floor
	for _, k := range kinds {
		var p50s, p99s []time.Duration
		for round := range rounds {
			latencies, err := burst(n, func(i int) error { return k.write(i, round) })
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k.name, err)
			}
			p50s, p99s = append(p50s, pct(latencies, 0.50)), append(p99s, pct(latencies, 0.99))
		}
		out = append(out, floor{name: k.name, p50: pct(p50s, 0.5), p99: pct(p99s, 0.5)})
	}
	return out, nil
}

// burst runs write for 0..n-1 all at once and returns how long each took to be answered.
func burst(n int, write func(i int) error) ([]time.Duration, error) {
	latencies, errs := make([]time.Duration, n), make([]error, n)
	var ready, done sync.WaitGroup
	ready.Add(1)
	for i := range n {
		done.Go(func() {
			ready.Wait()
			start := time.Now()
			errs[i] = write(i)
			latencies[i] = time.Since(start)
		})
	}
	ready.Done()
	done.Wait()
	return latencies, errors.Join(errs...)
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
func ms(d time.Duration) string   { return fmt.Sprintf("%d ms", d.Milliseconds()) }

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[int(p*float64(len(d)-1)+0.5)]
}

func writeKubeconfig(env *envtest.Environment, dir string) (string, error) {
	user, err := env.AddUser(envtest.User{Name: "bench-controller", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", fmt.Errorf("failed to add the controller's user: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}

// parallel runs f for 0..n-1 on a few workers and returns the first error.
func parallel(n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// settledApp is an Application Argo CD has synced and found healthy at digest 0.
func settledApp(ns, name string) *unstructured.Unstructured {
	spec := fakeargocd.OCISpec(ns)
	spec["source"].(map[string]any)["targetRevision"] = digest(0)
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion("argoproj.io/v1alpha1")
	u.SetKind("Application")
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(map[string]string{stagecoachv1.StageLabel: name})
	at := fakeargocd.Stamp(time.Now().Add(-time.Hour))
	source := spec["source"]
	_ = unstructured.SetNestedField(u.Object, map[string]any{
		"sync": map[string]any{"status": "Synced", "revision": digest(0),
			"comparedTo": map[string]any{"source": source, "destination": spec["destination"]}},
		"health":       map[string]any{"status": "Healthy", "lastTransitionTime": at},
		"reconciledAt": at,
		"operationState": map[string]any{"phase": "Succeeded", "message": "synced", "startedAt": at, "finishedAt": at,
			"operation":  map[string]any{"sync": map[string]any{"revision": digest(0)}, "initiatedBy": map[string]any{"automated": true}},
			"syncResult": map[string]any{"revision": digest(0), "source": source}},
	}, "status")
	return u
}

func setup(ctx context.Context, c config, cl client.Client) error {
	for ns := 0; ns <= (c.n-1)/c.perNamespace; ns++ {
		if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-%d", ns)}}); err != nil {
			return err
		}
	}
	zero := metav1.Duration{}
	// Every pipeline follows one origin Stage, so that no Stage's source is unreadable (an
	// origin that follows nothing is the one exception).
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: originNamespace}}); err != nil {
		return err
	}
	if err := cl.Create(ctx, settledApp(originNamespace, "origin")); err != nil {
		return err
	}
	if err := cl.Create(ctx, &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Name: "origin", Namespace: originNamespace}, Spec: stagecoachv1.StageSpec{
		Service: "origin", Environment: "origin", ApplyRef: stagecoachv1.ApplierReference{Kind: "Application", Name: "origin"},
		Source: stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "none"}}}}); err != nil {
		return err
	}
	return parallel(c.n, 16, func(i int) error {
		p, e := i/len(envs), i%len(envs)
		ns, name := namespace(c, p), stageName(p, e)
		if err := cl.Create(ctx, settledApp(ns, name)); err != nil {
			return fmt.Errorf("failed to create Application %s/%s: %w", ns, name, err)
		}
		up := &stagecoachv1.UpstreamSource{Stage: "origin", Namespace: originNamespace}
		if e > 0 {
			up = &stagecoachv1.UpstreamSource{Stage: stageName(p, e-1)}
		}
		s := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: stagecoachv1.StageSpec{
			Service: fmt.Sprintf("svc-%d", p), Environment: envs[e],
			ApplyRef:     stagecoachv1.ApplierReference{Kind: "Application", Name: name},
			Source:       stagecoachv1.StageSource{Upstream: up},
			Verification: &stagecoachv1.VerificationPolicy{Grace: &zero}}}
		if err := cl.Create(ctx, s); err != nil {
			return fmt.Errorf("failed to create Stage %s/%s: %w", ns, name, err)
		}
		return nil
	})
}

// stageWatch follows the Stages: which have a status for their generation, and how many writes
// the controller made to them.
type stageWatch struct {
	mu     sync.Mutex
	done   map[string]bool
	writes int
}

func newStageWatch() *stageWatch { return &stageWatch{done: map[string]bool{}} }

func (s *stageWatch) start(ctx context.Context, cl client.WithWatch) error {
	w, err := cl.Watch(ctx, &stagecoachv1.StageList{})
	if err != nil {
		return err
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			st, ok := ev.Object.(*stagecoachv1.Stage)
			if !ok {
				continue
			}
			key := st.Namespace + "/" + st.Name
			ready := meta.FindStatusCondition(st.Status.Conditions, stagecoachv1.ConditionReady)
			s.mu.Lock()
			if ev.Type == watch.Modified {
				s.writes++
			}
			s.done[key] = ready != nil && st.Status.ObservedGeneration == st.Generation
			s.mu.Unlock()
		}
	}()
	return nil
}

func (s *stageWatch) synced() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, ok := range s.done {
		if ok {
			n++
		}
	}
	return n
}

type process struct {
	cmd         *exec.Cmd
	started     time.Time
	metricsAddr string
	logPath     string
	exited      chan error
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String(), nil
}

func startController(ctx context.Context, c config, kubeconfig, logPath string) (*process, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	logs, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	args := []string{"controller", "--metrics-bind-address=" + addr, "--health-probe-bind-address=0", "--hooks-bind-address=0"}
	args = append(args, strings.Fields(c.args)...)
	cmd := exec.CommandContext(ctx, c.binary, args...)
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+kubeconfig), strings.Fields(c.env)...)
	cmd.Stdout, cmd.Stderr = logs, logs
	p := &process{cmd: cmd, metricsAddr: addr, logPath: logPath, exited: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("failed to start %s: %w", c.binary, err)
	}
	p.started = time.Now()
	go func() { p.exited <- cmd.Wait(); _ = logs.Close() }()
	return p, nil
}

func (p *process) stop() error {
	if p.cmd.ProcessState != nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	return nil
}

// metrics reads the controller's Prometheus metrics as name{labels} → value.
// benchMetrics are the series the benchmark reads. Asking for them alone (name[]) keeps each
// scrape cheap: the whole /metrics at 5,000 Stages costs the controller seconds of CPU, and
// polling it would measure the scrapes, not the controller.
var benchMetrics = []string{"controller_runtime_reconcile_total", "workqueue_depth", "controller_runtime_active_workers",
	"rest_client_requests_total", "workqueue_queue_duration_seconds", "workqueue_work_duration_seconds"}

func (p *process) metrics(ctx context.Context) (map[string]float64, error) {
	query := url.Values{"name[]": benchMetrics}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.metricsAddr+"/metrics?"+query.Encode(), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

// sum adds the series whose name is name and whose labels hold every one of labels.
func sum(m map[string]float64, name string, labels ...string) float64 {
	t := 0.0
	for k, v := range m {
		if !strings.HasPrefix(k, name+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(k, l)
		}
		if ok {
			t += v
		}
	}
	return t
}

// promoteBreakdown says where the promotions' time went in the controller, from its own metrics
// between two scrapes: reconciles, how long a Stage waited in the queue and how long a reconcile
// took (means), and the API requests it made.
func promoteBreakdown(before, after map[string]float64) string {
	delta := func(name string, labels ...string) float64 {
		return sum(after, name, labels...) - sum(before, name, labels...)
	}
	mean := func(metric string) time.Duration {
		n := delta(metric+"_count", `name="stage"`)
		if n == 0 {
			return 0
		}
		return time.Duration(delta(metric+"_sum", `name="stage"`) / n * float64(time.Second))
	}
	var requests []string
	for _, method := range []string{"GET", "LIST", "PATCH", "POST", "PUT"} {
		requests = append(requests, fmt.Sprintf("%s %.0f", method, delta("rest_client_requests_total", `method="`+method+`"`)))
	}
	return fmt.Sprintf("promotions: %.0f reconciles, mean wait in the queue %s, mean reconcile %s, requests %s",
		delta("controller_runtime_reconcile_total", `controller="stage"`), mean("workqueue_queue_duration_seconds").Round(time.Millisecond),
		mean("workqueue_work_duration_seconds").Round(time.Millisecond), strings.Join(requests, " "))
}

// waitSynced waits until done holds, at least minReconciles Stage reconciles ran and the Stage
// queue is empty (twice in a row), and returns the time since the process started.
func (p *process) waitSynced(ctx context.Context, done func() bool, minReconciles int) (time.Duration, error) {
	deadline := time.Now().Add(20 * time.Minute)
	empty := 0
	// A scrape costs the controller CPU (gathering every series, even for a few names): wait at
	// least twice as long as the last one took, so that asking uses at most a third of a core.
	wait := 100 * time.Millisecond
	for time.Now().Before(deadline) {
		select {
		case err := <-p.exited:
			return 0, fmt.Errorf("the controller exited: %v; see %s", err, p.logPath)
		case <-time.After(wait):
		}
		if !done() {
			empty = 0
			continue // the Stages' own status says not yet: no need to ask the controller
		}
		asked := time.Now()
		m, err := p.metrics(ctx)
		wait = max(100*time.Millisecond, 2*time.Since(asked))
		if err != nil {
			continue // not listening yet
		}
		reconciles := sum(m, "controller_runtime_reconcile_total", `controller="stage"`)
		depth := sum(m, "workqueue_depth", `name="stage"`)
		busy := sum(m, "controller_runtime_active_workers", `controller="stage"`)
		if done() && reconciles >= float64(minReconciles) && reconciles > 0 && depth == 0 && busy == 0 {
			empty++
			if empty == 2 {
				return time.Since(p.started) - wait, nil
			}
		} else {
			empty = 0
		}
	}
	return 0, fmt.Errorf("timed out waiting for the controller to sync; see %s", p.logPath)
}

// counts is what the controller did so far.
type counts struct {
	reconciles, statusWrites, events, errorLines int
	requests                                     map[string]int
}

func (p *process) counts(ctx context.Context, cl client.Client, s *stageWatch) counts {
	c := counts{requests: map[string]int{}}
	if m, err := p.metrics(ctx); err == nil {
		c.reconciles = int(sum(m, "controller_runtime_reconcile_total", `controller="stage"`))
		for _, method := range []string{"GET", "LIST", "PATCH", "POST", "PUT", "WATCH"} {
			c.requests[method] = int(sum(m, "rest_client_requests_total", `method="`+method+`"`))
		}
	}
	s.mu.Lock()
	c.statusWrites = s.writes
	s.mu.Unlock()
	var evs eventsv1.EventList
	if err := cl.List(ctx, &evs); err == nil {
		for _, e := range evs.Items {
			if e.ReportingController == controller.ControllerName {
				c.events++
			}
		}
	}
	if data, err := os.ReadFile(p.logPath); err == nil {
		c.errorLines = bytes.Count(data, []byte(`"level":"error"`))
	}
	return c
}

// minus keeps the other process's own request counts (a new process starts from zero).
func (c counts) minus(o counts) counts {
	c.statusWrites -= o.statusWrites
	c.events -= o.events
	return c
}

func (c counts) String() string {
	return fmt.Sprintf("%d reconciles, %d Stage writes, %d Events, %d ERROR log lines, requests GET %d PATCH %d POST %d PUT %d",
		c.reconciles, c.statusWrites, c.events, c.errorLines, c.requests["GET"], c.requests["PATCH"], c.requests["POST"], c.requests["PUT"])
}

// procStat reads utime+stime (clock ticks) and VmRSS (KiB) of pid.
func procStat(pid int) (ticks int64, rssKiB int64, err error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// Fields after the command name (which may hold spaces) start after the last ')'.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			rssKiB, _ = strconv.ParseInt(strings.Fields(line)[1], 10, 64)
		}
	}
	return utime + stime, rssKiB, nil
}

// idle samples CPU (percent of one core) and the largest RSS (MiB) over d.
func (p *process) idle(ctx context.Context, d time.Duration) (float64, float64, error) {
	const ticksPerSecond = 100 // USER_HZ on Linux
	pid := p.cmd.Process.Pid
	t0, rss, err := procStat(pid)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	maxRSS := rss
	for time.Since(start) < d {
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case err := <-p.exited:
			return 0, 0, fmt.Errorf("the controller exited: %v", err)
		case <-time.After(time.Second):
		}
		_, rss, err := procStat(pid)
		if err != nil {
			return 0, 0, err
		}
		maxRSS = max(maxRSS, rss)
	}
	t1, _, err := procStat(pid)
	if err != nil {
		return 0, 0, err
	}
	cpu := float64(t1-t0) / ticksPerSecond / time.Since(start).Seconds() * 100
	return cpu, float64(maxRSS) / 1024, nil
}

// promote creates c.promotions Promotions at once on the first Stage of as many pipelines, plays
// Argo CD syncing them all at once, and returns each one's time from the landed write to
// Succeeded: from the write's first sight in a watch, and from the engine sending it.
func promote(ctx context.Context, c config, cl client.WithWatch) (fromSight, fromSend []time.Duration, err error) {
	n := min(c.promotions, c.n/len(envs))
	landed, err := watchLanded(ctx, cl, digest(1))
	if err != nil {
		return nil, nil, err
	}
	succeeded := map[string]time.Time{}
	var mu sync.Mutex
	mark := func(pr *stagecoachv1.Promotion, now time.Time) {
		if pr.Status.Phase != stagecoachv1.PhaseSucceeded {
			return
		}
		mu.Lock()
		if _, ok := succeeded[pr.Namespace+"/"+pr.Name]; !ok {
			succeeded[pr.Namespace+"/"+pr.Name] = now
		}
		mu.Unlock()
	}
	first, err := cl.Watch(ctx, &stagecoachv1.PromotionList{})
	if err != nil {
		return nil, nil, err
	}
	// The API server may end a watch early (its watch cache under load): watch again from the
	// last version seen, so that no Succeeded is missed or seen late.
	var rewatched atomic.Int64
	go func() {
		w, last := first, ""
		for {
			for ev := range w.ResultChan() {
				if pr, ok := ev.Object.(*stagecoachv1.Promotion); ok {
					last = pr.ResourceVersion
					mark(pr, time.Now())
				}
			}
			if ctx.Err() != nil {
				return
			}
			rewatched.Add(1)
			again, err := cl.Watch(ctx, &stagecoachv1.PromotionList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: last}})
			if err != nil {
				return
			}
			w = again
		}
	}()
	defer func() {
		if n := rewatched.Load(); n > 0 {
			fmt.Printf("the Promotion watch ended %d times early and was started again from where it ended\n", n)
		}
	}()
	apps := make([]*fakeargocd.App, n)
	if err := parallel(n, n, func(p int) error {
		ns, name := namespace(c, p), stageName(p, 0)
		apps[p] = &fakeargocd.App{Client: cl, Key: client.ObjectKey{Namespace: ns, Name: name}}
		return cl.Create(ctx, &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: name + "-1", Namespace: ns},
			Spec: stagecoachv1.PromotionSpec{Stage: name, Version: &stagecoachv1.VersionReference{Digest: digest(1), Tag: "v1"}}})
	}); err != nil {
		return nil, nil, err
	}
	// Wait for every write, then sync them all at once: refresh, the sync operation, then the
	// health assessment that makes each one landed.
	if err := parallel(n, 16, func(p int) error {
		for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			app, err := apps[p].Get(ctx)
			if err != nil {
				return err
			}
			if fakeargocd.Applied(app, digest(1)) {
				return nil
			}
		}
		return fmt.Errorf("Stagecoach never wrote %s to Application %s", digest(1), apps[p].Key)
	}); err != nil {
		return nil, nil, err
	}
	now := time.Now()
	if err := parallel(n, 16, func(p int) error {
		if err := apps[p].Refresh(ctx, now); err != nil {
			return err
		}
		return apps[p].Sync(ctx, "Succeeded", "synced", now, now)
	}); err != nil {
		return nil, nil, err
	}
	sent := make([]time.Time, n)
	var ready sync.WaitGroup
	ready.Add(1)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for p := range n {
		wg.Go(func() {
			ready.Wait()
			// The time just before the write itself (the Get before it reads the object).
			apps[p].BeforeWrite = func() { sent[p] = time.Now() }
			errs[p] = apps[p].Assess(ctx, "Healthy", now)
		})
	}
	ready.Done()
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	for p := range n {
		key := apps[p].Key.Namespace + "/" + apps[p].Key.Name + "-1"
		deadline := time.Now().Add(2 * time.Minute)
		for {
			mu.Lock()
			at, ok := succeeded[key]
			mu.Unlock()
			if ok {
				fromSend = append(fromSend, at.Sub(sent[p]))
				seen, ok := landed.at(apps[p].Key)
				if !ok {
					return nil, nil, fmt.Errorf("the watch of the Applications never showed %s landed (it saw %d land, and was started again %d times)",
						apps[p].Key, landed.count(), landed.restarted())
				}
				fromSight = append(fromSight, at.Sub(seen))
				break
			}
			if time.Now().After(deadline) {
				pr := &stagecoachv1.Promotion{}
				_ = cl.Get(ctx, client.ObjectKey{Namespace: apps[p].Key.Namespace, Name: apps[p].Key.Name + "-1"}, pr)
				return nil, nil, fmt.Errorf("Promotion %s did not succeed in 2 minutes: phase %s, conditions %+v", key, pr.Status.Phase, pr.Status.Conditions)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return fromSight, fromSend, nil
}

// landedWatch records when a watch of the Applications first showed each one landed: Synced and
// Healthy at the digest.
type landedWatch struct {
	mu       sync.Mutex
	seen     map[client.ObjectKey]time.Time
	restarts int
}

func (l *landedWatch) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen)
}

func (l *landedWatch) restarted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.restarts
}

func (l *landedWatch) at(key client.ObjectKey) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.seen[key]
	return t, ok
}

// watchLanded starts the watch. Started before the Promotions are created, so that the events
// for what exists already (one per Application) are read long before any lands.
func watchLanded(ctx context.Context, cl client.WithWatch, digest string) (*landedWatch, error) {
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion("argoproj.io/v1alpha1")
	list.SetKind("ApplicationList")
	w, err := cl.Watch(ctx, list, client.HasLabels{stagecoachv1.StageLabel})
	if err != nil {
		return nil, fmt.Errorf("failed to watch the Applications: %w", err)
	}
	l := &landedWatch{seen: map[client.ObjectKey]time.Time{}}
	go func() {
		// The API server may end a watch early (its watch cache under load): watch again from the
		// last version seen, so that nothing is missed and nothing is seen twice.
		var last string
		for {
			for ev := range w.ResultChan() {
				app, ok := ev.Object.(*unstructured.Unstructured)
				if !ok {
					continue
				}
				last = app.GetResourceVersion()
				l.saw(app, digest, time.Now())
			}
			if ctx.Err() != nil {
				return
			}
			l.mu.Lock()
			l.restarts++
			l.mu.Unlock()
			again, err := cl.Watch(ctx, list, client.HasLabels{stagecoachv1.StageLabel},
				&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: last}})
			if err != nil {
				return
			}
			w = again
		}
	}()
	return l, nil
}

// saw records the Application's landing, the first time it is seen landed.
func (l *landedWatch) saw(app *unstructured.Unstructured, digest string, now time.Time) {
	synced, _, _ := unstructured.NestedString(app.Object, "status", "sync", "status")
	revision, _, _ := unstructured.NestedString(app.Object, "status", "sync", "revision")
	health, _, _ := unstructured.NestedString(app.Object, "status", "health", "status")
	if synced != "Synced" || revision != digest || health != "Healthy" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.seen[client.ObjectKeyFromObject(app)]; !ok {
		l.seen[client.ObjectKeyFromObject(app)] = now
	}
}
