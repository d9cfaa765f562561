// Package localstack runs the end-to-end stack on 127.0.0.1 as plain processes: etcd and kube-apiserver
// (with a generated CA, tokens, service-account keys and kubeconfigs), Argo CD v3.6.1
// (application-controller, repo-server, cmp-server with Stagecoach's plugin, and redis from the
// distribution), Flux source-, kustomize- and notification-controller, an in-memory OCI registry,
// a git smart-HTTP server, and the real `stagecoach controller` built from the checkout. Every port
// is allocated per run, every component logs to its own file, and Stop ends exactly the processes
// Start began.
//
// Scenarios share one Stack per test binary (see Scenario); the binaries come from Build.
package localstack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options shape a stack.
type Options struct {
	// Dir holds data, logs and kubeconfigs; a new temporary folder when empty. It is kept after
	// Stop so logs can be read.
	Dir string
	// Progress receives one line per step (stderr when nil).
	Progress io.Writer
	// CMPConfigDir is the folder of the plugin.yaml argocd-cmp-server runs (default: the
	// checkout's plugin/, the Stagecoach plugin); its generate command finds `stagecoach` on PATH
	// and the trusted keys in PluginKeysDir.
	CMPConfigDir string
	// ControllerArgs are extra flags for `stagecoach controller`.
	ControllerArgs []string
}

// Stack is a running local control plane with Argo CD, Flux and Stagecoach.
type Stack struct {
	Bin    *Binaries
	Dir    string
	LogDir string
	// Kubeconfig is the admin's (cluster-admin and break-glass); ControllerKubeconfig is the
	// controller's service account, bound by manifests/controller/serviceaccount.yaml.
	Kubeconfig, ControllerKubeconfig string
	Config                           *rest.Config
	Client                           client.Client

	Registry *Registry
	Git      *GitServer

	// PluginKeysDir is the Stagecoach plugin's STAGECOACH_VERIFY_KEYS_DIR, as the sidecar's mounted
	// Secret of trusted cosign keys would be: TrustPluginKey adds a key. The plugin renders a
	// promoted digest only if one of them verifies its signature.
	PluginKeysDir string

	// Addresses (host:port) of the listeners scenarios talk to.
	APIServer, FluxEvents, FluxReceiver, Hooks, ControllerMetrics, ControllerHealth string
	// ControllerAPI is the controller's HTTP API for Argo CD's proxy extension (argocdserver.go).
	ControllerAPI string
	// HookToken is the key in Secret stagecoach-system/stagecoach-hooks: the Flux generic-hmac
	// Provider's HMAC key and the Argo CD notifications webhook's bearer token.
	HookToken string

	// Controller is the running `stagecoach controller`; RestartController replaces it.
	Controller *Process

	progress   io.Writer
	procs      []*Process
	fixtureLog *os.File
	pki        *pki
	opts       Options
	binDir     string // symlinks and scripts put first on PATH
	env        []string
	// argoEnv and repoServer are how Argo CD's components were started, for the ones started
	// later (StartArgoCDNotifications).
	argoEnv    []string
	repoServer string
	redis      string
	// apiToken is the API's proxy token; argoUI the optional argocd-server (argocdserver.go).
	apiToken string
	argoUI   *ArgoCDUI
	// gitea is the forge, started by the first scenario that asks (gitea.go).
	gitea giteaOnce
}

// Component names, also the log file names (<LogDir>/<name>.log).
const (
	Etcd                   = "etcd"
	KubeAPIServer          = "kube-apiserver"
	KubeControllerManager  = "kube-controller-manager"
	Redis                  = "redis"
	ArgoCDRepoServer       = "argocd-repo-server"
	ArgoCDCMPServer        = "argocd-cmp-server"
	ArgoCDAppController    = "argocd-application-controller"
	ArgoCDNotifications    = "argocd-notifications"
	SourceController       = "source-controller"
	KustomizeController    = "kustomize-controller"
	NotificationController = "notification-controller"
	StagecoachController   = "stagecoach-controller"
	Fixtures               = "fixtures" // registry and git server, in the test process
)

// ArgoCDNamespace holds Argo CD's configuration; Applications may live in any namespace.
const ArgoCDNamespace = "argocd"

// FluxNamespace is Flux's RUNTIME_NAMESPACE.
const FluxNamespace = "flux-system"

// Start brings the whole stack up and waits until every component is ready. On error, whatever
// started is stopped again.
func Start(ctx context.Context, bin *Binaries, opts Options) (*Stack, error) {
	if opts.Progress == nil {
		opts.Progress = os.Stderr
	}
	if opts.CMPConfigDir == "" {
		opts.CMPConfigDir = filepath.Join(bin.RepoRoot, "plugin")
	}
	if opts.Dir == "" {
		var err error
		if opts.Dir, err = os.MkdirTemp("", "stagecoach-e2e-"); err != nil {
			return nil, err
		}
	}
	s := &Stack{Bin: bin, Dir: opts.Dir, LogDir: filepath.Join(opts.Dir, "logs"), progress: opts.Progress, opts: opts,
		binDir: filepath.Join(opts.Dir, "bin")}
	if err := s.startAll(ctx); err != nil {
		s.Stop()
		return nil, fmt.Errorf("%w (logs in %s)", err, s.LogDir)
	}
	return s, nil
}

func (s *Stack) startAll(ctx context.Context) error {
	var err error
	for _, d := range []string{s.LogDir, s.binDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	start := time.Now()
	if err := s.startControlPlane(ctx); err != nil {
		return err
	}
	s.step("control plane ready in %s (kubeconfig %s)", time.Since(start).Round(time.Millisecond), s.Kubeconfig)

	if err := s.install(ctx); err != nil {
		return err
	}
	if s.fixtureLog, err = os.OpenFile(filepath.Join(s.LogDir, Fixtures+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return err
	}
	if s.Registry, err = startRegistry(s.fixtureLog); err != nil {
		return err
	}
	if s.Git, err = startGitServer(filepath.Join(s.Dir, "git"), s.fixtureLog); err != nil {
		return err
	}
	if err := s.startEngines(ctx); err != nil {
		return err
	}
	if err := s.StartController(ctx); err != nil {
		return err
	}
	s.step("stack ready in %s (logs in %s)", time.Since(start).Round(time.Millisecond), s.LogDir)
	return nil
}

func (s *Stack) step(format string, args ...any) {
	fmt.Fprintf(s.progress, "stack: "+format+"\n", args...)
}

// startControlPlane runs etcd and kube-apiserver with fresh PKI and writes the kubeconfigs.
func (s *Stack) startControlPlane(ctx context.Context) error {
	var err error
	if s.pki, err = newPKI(filepath.Join(s.Dir, "pki")); err != nil {
		return err
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	etcdClient, etcdPeer := fmt.Sprintf("http://127.0.0.1:%d", ports[0]), fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	s.APIServer = fmt.Sprintf("127.0.0.1:%d", ports[2])
	data := filepath.Join(s.Dir, "etcd")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	etcd, err := s.start(processSpec{name: Etcd, path: s.Bin.Etcd, grace: 10 * time.Second, args: []string{
		"--data-dir", data, "--listen-client-urls", etcdClient, "--advertise-client-urls", etcdClient,
		"--listen-peer-urls", etcdPeer, "--initial-advertise-peer-urls", etcdPeer,
		"--initial-cluster", "default=" + etcdPeer, "--unsafe-no-fsync", "--log-level", "warn"}})
	if err != nil {
		return err
	}
	api, err := s.start(processSpec{name: KubeAPIServer, path: s.Bin.KubeAPIServer, grace: 10 * time.Second, args: []string{
		"--etcd-servers", etcdClient, "--bind-address", "127.0.0.1", "--secure-port", fmt.Sprint(ports[2]),
		"--advertise-address", "127.0.0.1", "--tls-cert-file", s.pki.servingCert, "--tls-private-key-file", s.pki.key,
		"--client-ca-file", s.pki.caCert, "--service-cluster-ip-range", "10.0.0.0/24", "--allow-privileged=true",
		"--disable-admission-plugins", "ServiceAccount", "--authorization-mode", "RBAC", "--token-auth-file", s.pki.tokens,
		"--service-account-issuer", "https://" + s.APIServer + "/", "--service-account-key-file", s.pki.saPub,
		"--service-account-signing-key-file", s.pki.saKey}})
	if err != nil {
		return err
	}
	if err := etcd.waitReady(ctx, 30*time.Second, "GET /health", httpOK(nil, etcdClient+"/health")); err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.pki.caPEM)
	authed := &http.Client{Transport: &bearer{token: s.pki.adminToken, rt: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}}
	if err := api.waitReady(ctx, 60*time.Second, "GET /readyz", httpOK(authed, "https://"+s.APIServer+"/readyz")); err != nil {
		return err
	}

	server := "https://" + s.APIServer
	s.Kubeconfig = filepath.Join(s.Dir, "kubeconfig")
	s.ControllerKubeconfig = filepath.Join(s.Dir, "kubeconfig-stagecoach-controller")
	if err := writeKubeconfig(s.Kubeconfig, server, s.pki.caPEM, AdminUser, s.pki.adminToken); err != nil {
		return err
	}
	if err := writeKubeconfig(s.ControllerKubeconfig, server, s.pki.caPEM, "stagecoach-controller", s.pki.controllerToken); err != nil {
		return err
	}
	if err := s.startControllerManager(ctx, server); err != nil {
		return err
	}
	if s.Config, err = clientcmd.BuildConfigFromFlags("", s.Kubeconfig); err != nil {
		return err
	}
	s.Config.QPS, s.Config.Burst = 100, 200
	scheme, err := NewScheme()
	if err != nil {
		return err
	}
	s.Client, err = client.New(s.Config, client.Options{Scheme: scheme})
	return err
}

// KubeControllerManagerControllers are the only controllers the stack's kube-controller-manager
// runs: Deployments get ReplicaSets and a status written by Kubernetes' own code (a Deployment with
// replicas 0 needs no kubelet), Jobs get their Pods and their conditions from the Job controller
// (the Pods' ends are played by Scenario.RunPods, as no node runs them), and nothing else of a
// cluster's machinery runs behind the tests.
var KubeControllerManagerControllers = []string{"deployment-controller", "replicaset-controller", "job-controller"}

// startControllerManager runs kube-controller-manager (when built) as its own user, with each
// controller acting as its kube-system service account, and waits for /healthz.
func (s *Stack) startControllerManager(ctx context.Context, server string) error {
	if s.Bin.KubeControllerManager == "" {
		return nil
	}
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(s.Dir, "kubeconfig-kube-controller-manager")
	if err := writeKubeconfig(kubeconfig, server, s.pki.caPEM, KubeControllerManagerUser, s.pki.kcmToken); err != nil {
		return err
	}
	certs := filepath.Join(s.Dir, "kube-controller-manager")
	if err := os.MkdirAll(certs, 0o700); err != nil {
		return err
	}
	kcm, err := s.start(processSpec{name: KubeControllerManager, path: s.Bin.KubeControllerManager, grace: 10 * time.Second,
		env: []string{"KUBECONFIG=" + kubeconfig}, args: []string{
			"--kubeconfig", kubeconfig, "--controllers", strings.Join(KubeControllerManagerControllers, ","),
			"--use-service-account-credentials", "--leader-elect=false",
			"--bind-address", "127.0.0.1", "--secure-port", fmt.Sprint(ports[0]), "--cert-dir", certs,
			// The serving certificate is self-signed and /healthz is always allowed: no delegated
			// authentication or authorization is needed for the readiness check.
			"--authentication-skip-lookup", "--authorization-always-allow-paths", "/healthz,/readyz,/livez"}})
	if err != nil {
		return err
	}
	selfSigned := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback health check of a self-signed test process
	return kcm.waitReady(ctx, 60*time.Second, "GET /healthz", httpOK(selfSigned, fmt.Sprintf("https://127.0.0.1:%d/healthz", ports[0])))
}

type bearer struct {
	token string
	rt    http.RoundTripper
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

// install applies the CRDs, Stagecoach's installation (RBAC, service account, admission policies;
// not the Deployment: the controller runs as a process here) and Argo CD's and Flux's bootstrap.
func (s *Stack) install(ctx context.Context) error {
	start := time.Now()
	if err := installCRDs(ctx, s.Client, s.Bin.StagecoachCRDs, s.Bin.ArgoCDCRDs, s.Bin.FluxCRDs); err != nil {
		return err
	}
	s.step("CRDs established in %s", time.Since(start).Round(time.Millisecond))
	manifests := filepath.Join(s.Bin.RepoRoot, "manifests")
	if err := applyFiles(ctx, s.Client, filepath.Join(manifests, "rbac")); err != nil {
		return err
	}
	if err := applyFiles(ctx, s.Client, filepath.Join(manifests, "controller"), "namespace.yaml", "serviceaccount.yaml"); err != nil {
		return err
	}
	if err := applyFiles(ctx, s.Client, filepath.Join(manifests, "policies")); err != nil {
		return err
	}
	s.HookToken = token()
	if err := ApplyYAML(ctx, s.Client, []byte(fmt.Sprintf(bootstrapYAML, s.HookToken))); err != nil {
		return err
	}
	s.step("installed CRDs, Stagecoach RBAC and policies, Argo CD and Flux bootstrap in %s", time.Since(start).Round(time.Millisecond))
	return nil
}

// OperationProcessors is how many syncs the application-controller runs at once: as many as the
// fleet benchmark's largest wave (18). With Argo CD's default 10, 8 of them waited 2-4 s for a
// processor (issue 17); Argo CD's HA guide raises it with the number of Applications.
const OperationProcessors = 20

// bootstrapYAML is what Argo CD and Flux read at start, plus the hook Secret (%s: its token).
const bootstrapYAML = `
apiVersion: v1
kind: Namespace
metadata: {name: argocd}
---
apiVersion: v1
kind: Namespace
metadata: {name: flux-system}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-cm, namespace: argocd, labels: {app.kubernetes.io/part-of: argocd}}
data:
  timeout.reconciliation: 10s
  # Fleet clusters (FleetCluster: this API server under 127.0.0.x) stand for remote clusters, which
  # hold none of Argo CD's or Stagecoach's own objects: without this each of their caches would
  # also watch every Application, Stage and Promotion of the management cluster.
  resource.exclusions: |
    - apiGroups: [argoproj.io, stagecoach.dev]
      kinds: ["*"]
      clusters: ["https://127.0.0.*"]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-cmd-params-cm, namespace: argocd, labels: {app.kubernetes.io/part-of: argocd}}
---
apiVersion: v1
kind: Secret
metadata: {name: argocd-secret, namespace: argocd, labels: {app.kubernetes.io/part-of: argocd}}
stringData:
  server.secretkey: e2e-not-secret
---
apiVersion: argoproj.io/v1alpha1
kind: AppProject
metadata: {name: default, namespace: argocd}
spec:
  sourceRepos: ['*']
  sourceNamespaces: ['*']
  destinations: [{server: '*', namespace: '*'}]
  clusterResourceWhitelist: [{group: '*', kind: '*'}]
---
apiVersion: v1
kind: Secret
metadata: {name: stagecoach-hooks, namespace: stagecoach-system}
stringData:
  token: %s
`

// start launches a process with the stack's environment and remembers it for Stop.
func (s *Stack) start(spec processSpec) (*Process, error) {
	base := []string{"PATH=" + s.binDir + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	if s.Kubeconfig != "" {
		base = append(base, "KUBECONFIG="+s.Kubeconfig)
	}
	tmp := filepath.Join(s.Dir, "tmp", spec.name)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	base = append(base, "TMPDIR="+tmp)
	spec.env = append(base, spec.env...)
	p, err := startProcess(s.LogDir, spec)
	if err != nil {
		return nil, err
	}
	s.procs = append(s.procs, p)
	return p, nil
}

// startEngines runs redis, Argo CD and the Flux controllers, and waits for them.
func (s *Stack) startEngines(ctx context.Context) error {
	start := time.Now()
	redisServer, err := exec.LookPath("redis-server")
	if err != nil {
		return fmt.Errorf("redis-server is not installed (Argo CD needs it): apt-get install redis-server: %w", err)
	}
	// Argo CD's components pick their role from the name they are run by.
	for _, n := range []string{ArgoCDRepoServer, ArgoCDAppController, ArgoCDCMPServer, ArgoCDNotifications} {
		if err := os.Symlink(s.Bin.ArgoCD, filepath.Join(s.binDir, n)); err != nil {
			return err
		}
	}
	hack, err := os.ReadDir(s.Bin.ArgoCDHack)
	if err != nil {
		return err
	}
	for _, h := range hack {
		if err := os.Symlink(filepath.Join(s.Bin.ArgoCDHack, h.Name()), filepath.Join(s.binDir, h.Name())); err != nil {
			return err
		}
	}
	if err := os.Symlink(s.Bin.Stagecoach, filepath.Join(s.binDir, "stagecoach")); err != nil {
		return err
	}
	if s.Bin.Helm != "" {
		// The repo-server runs `helm` from its PATH for Applications with a Helm chart.
		if err := os.Symlink(s.Bin.Helm, filepath.Join(s.binDir, "helm")); err != nil {
			return err
		}
	}

	ports, err := freePorts(13)
	if err != nil {
		return err
	}
	addr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[i]) }
	redisAddr, repoAddr := addr(0), addr(1)
	s.FluxEvents, s.FluxReceiver = addr(5), addr(6)

	var waits []readiness
	run := func(spec processSpec, what string, check func(context.Context) error) error {
		p, err := s.start(spec)
		if err != nil {
			return err
		}
		waits = append(waits, readiness{p, what, check})
		return nil
	}

	if err := run(processSpec{name: Redis, path: redisServer, args: []string{"--port", fmt.Sprint(ports[0]), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", filepath.Join(s.Dir, "tmp")}}, "TCP "+redisAddr, tcpOpen(redisAddr)); err != nil {
		return err
	}
	argoDirs := map[string]string{}
	for _, k := range []string{"tls", "ssh", "gnupg", "plugins", "cmp", "cmp-keys"} {
		argoDirs[k] = filepath.Join(s.Dir, "argocd", k)
		if err := os.MkdirAll(argoDirs[k], 0o700); err != nil {
			return err
		}
	}
	argoEnv := []string{"ARGOCD_FAKE_IN_CLUSTER=true", "ARGOCD_GPG_ENABLED=false",
		"ARGOCD_TLS_DATA_PATH=" + argoDirs["tls"], "ARGOCD_SSH_DATA_PATH=" + argoDirs["ssh"], "ARGOCD_GNUPGHOME=" + argoDirs["gnupg"],
		"ARGOCD_PLUGINSOCKFILEPATH=" + argoDirs["plugins"], "ARGOCD_CMP_WORKDIR=" + argoDirs["cmp"]}
	s.argoEnv, s.repoServer, s.redis = argoEnv, repoAddr, redisAddr
	s.PluginKeysDir = argoDirs["cmp-keys"]
	// cmp-server ignores SIGTERM (it only removes its socket), so Stop kills it after a short grace.
	if err := run(processSpec{name: ArgoCDCMPServer, path: filepath.Join(s.binDir, ArgoCDCMPServer), grace: 2 * time.Second,
		env:  append(slices.Clone(argoEnv), "STAGECOACH_VERIFY_KEYS_DIR="+s.PluginKeysDir),
		args: []string{"--config-dir-path", s.opts.CMPConfigDir, "--loglevel", "info", "--logformat", "text"}},
		"plugin socket in "+argoDirs["plugins"], anySocket(argoDirs["plugins"])); err != nil {
		return err
	}
	if err := run(processSpec{name: ArgoCDRepoServer, path: filepath.Join(s.binDir, ArgoCDRepoServer), env: argoEnv, args: []string{
		"--address", "127.0.0.1", "--port", fmt.Sprint(ports[1]), "--metrics-address", "127.0.0.1", "--metrics-port", fmt.Sprint(ports[2]),
		"--disable-tls", "--client-ca-path=", "--redis", redisAddr, "--logformat", "text"}}, "TCP "+repoAddr, tcpOpen(repoAddr)); err != nil {
		return err
	}
	if err := run(processSpec{name: ArgoCDAppController, path: filepath.Join(s.binDir, ArgoCDAppController), env: argoEnv, args: []string{
		"--namespace", ArgoCDNamespace, "--application-namespaces", "*", "--repo-server", repoAddr, "--repo-server-plaintext",
		"--redis", redisAddr, "--metrics-port", fmt.Sprint(ports[3]), "--logformat", "text", "--app-resync", "10",
		"--operation-processors", fmt.Sprint(OperationProcessors)}},
		"metrics on port "+fmt.Sprint(ports[3]), httpOK(nil, fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[3]))); err != nil {
		return err
	}

	if s.Bin.SourceController == "" {
		// A Binaries without Flux runs an Argo CD-only stack.
		return s.waitAll(ctx, waits, start)
	}
	fluxEnv := []string{"RUNTIME_NAMESPACE=" + FluxNamespace}
	common := []string{"--enable-leader-election=false", "--log-encoding=console", "--log-level=info"}
	storage := filepath.Join(s.Dir, "flux-storage")
	if err := os.MkdirAll(storage, 0o755); err != nil {
		return err
	}
	if err := run(processSpec{name: NotificationController, path: s.Bin.NotificationController, env: fluxEnv, args: append(slices.Clone(common),
		"--events-addr="+s.FluxEvents, "--receiverAddr="+s.FluxReceiver, "--metrics-addr="+addr(7), "--health-addr="+addr(8))},
		"GET /readyz", httpOK(nil, "http://"+addr(8)+"/readyz")); err != nil {
		return err
	}
	events := "--events-addr=http://" + s.FluxEvents + "/"
	if err := run(processSpec{name: SourceController, path: s.Bin.SourceController, env: fluxEnv, args: append(slices.Clone(common),
		"--storage-path="+storage, "--storage-addr="+addr(4), "--storage-adv-addr="+addr(4), events,
		"--metrics-addr="+addr(9), "--health-addr="+addr(10))}, "GET /readyz", httpOK(nil, "http://"+addr(10)+"/readyz")); err != nil {
		return err
	}
	if err := run(processSpec{name: KustomizeController, path: s.Bin.KustomizeController, env: fluxEnv, args: append(slices.Clone(common),
		events, "--metrics-addr="+addr(11), "--health-addr="+addr(12))}, "GET /readyz", httpOK(nil, "http://"+addr(12)+"/readyz")); err != nil {
		return err
	}
	return s.waitAll(ctx, waits, start)
}

// readiness is how to tell that a started process is ready.
type readiness struct {
	p     *Process
	what  string
	check func(context.Context) error
}

func (s *Stack) waitAll(ctx context.Context, waits []readiness, start time.Time) error {
	var names []string
	for _, w := range waits {
		if err := w.p.waitReady(ctx, 60*time.Second, w.what, w.check); err != nil {
			return err
		}
		names = append(names, w.p.Name)
	}
	s.step("%s ready in %s", strings.Join(names, ", "), time.Since(start).Round(time.Millisecond))
	return nil
}

// anySocket succeeds once dir holds a file (cmp-server's <plugin>.sock).
func anySocket(dir string) func(context.Context) error {
	return func(context.Context) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".sock") {
				return nil
			}
		}
		return errors.New("no socket yet")
	}
}

// StartController runs `stagecoach controller` as its service account and waits for /readyz.
// It can be called again after StopController or KillController (restart chaos).
func (s *Stack) StartController(ctx context.Context) error {
	if s.Controller != nil {
		if ended, _ := s.Controller.Exited(); !ended {
			return fmt.Errorf("stagecoach controller (pid %d) is still running: stop it first", s.Controller.Pid())
		}
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	s.ControllerMetrics = fmt.Sprintf("127.0.0.1:%d", ports[0])
	s.ControllerHealth = fmt.Sprintf("127.0.0.1:%d", ports[1])
	s.Hooks = fmt.Sprintf("127.0.0.1:%d", ports[2])
	args := append([]string{"controller", "--log-encoding=console", "--log-level=debug",
		"--metrics-bind-address=" + s.ControllerMetrics, "--health-probe-bind-address=" + s.ControllerHealth,
		"--hooks-bind-address=" + s.Hooks, "--events-addr=http://" + s.FluxEvents + "/",
		"--flux-hook-secret=stagecoach-system/stagecoach-hooks", "--argocd-hook-secret=stagecoach-system/stagecoach-hooks",
		// Everything here listens on loopback, check endpoints too.
		"--allow-internal-check-targets"},
		s.opts.ControllerArgs...)
	apiArgs, err := s.controllerAPIArgs()
	if err != nil {
		return err
	}
	args = append(args, apiArgs...)
	p, err := s.start(processSpec{name: StagecoachController, path: s.Bin.Stagecoach, args: args, grace: 10 * time.Second,
		env: []string{"KUBECONFIG=" + s.ControllerKubeconfig}})
	if err != nil {
		return err
	}
	s.Controller = p
	return p.waitReady(ctx, 60*time.Second, "GET /readyz", httpOK(nil, "http://"+s.ControllerHealth+"/readyz"))
}

// StopController stops the controller gracefully (SIGTERM).
func (s *Stack) StopController() {
	if s.Controller != nil {
		s.Controller.Stop()
	}
}

// KillController ends the controller at once (SIGKILL), as a crash or eviction would.
func (s *Stack) KillController() {
	if s.Controller != nil {
		s.Controller.Kill()
	}
}

// Process is the running component named name (one of the constants above), nil when none runs.
func (s *Stack) Process(name string) *Process {
	for i := len(s.procs) - 1; i >= 0; i-- {
		if s.procs[i].Name == name {
			return s.procs[i]
		}
	}
	return nil
}

// Processes lists what the stack started, in start order.
func (s *Stack) Processes() []*Process { return slices.Clone(s.procs) }

// Stop ends every process the stack started, newest first (so kube-apiserver stops before etcd),
// and closes the in-process fixtures. The folder with the logs stays.
func (s *Stack) Stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		p := s.procs[i]
		if p.Name == KubeAPIServer {
			// The fixtures are clients of nobody; close them before the control plane goes.
			s.closeFixtures()
		}
		p.Stop()
	}
	s.closeFixtures()
	s.releaseExtensions()
}

func (s *Stack) closeFixtures() {
	if s.Registry != nil {
		s.Registry.close()
		s.Registry = nil
	}
	if s.Git != nil {
		s.Git.close()
		s.Git = nil
	}
	if s.fixtureLog != nil {
		s.fixtureLog.Close()
		s.fixtureLog = nil
	}
}

// Namespace creates a namespace (labelled for the scenario that owns it).
func (s *Stack) Namespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"stagecoach.dev/e2e": "true"}}}
	return s.Client.Create(ctx, ns)
}

// PluginName is the Stagecoach plugin as Applications name it: plugin/plugin.yaml's name-version.
const PluginName = "stagecoach-v1"

// TrustPluginKey adds a cosign public key (PEM) to the plugin's trusted keys, as <name>.pub.
func (s *Stack) TrustPluginKey(name string, publicPEM []byte) error {
	return os.WriteFile(filepath.Join(s.PluginKeysDir, name+".pub"), publicPEM, 0o644)
}

// ArgoCDOCIRepository registers an OCI repository of the stack's registry with Argo CD (plain HTTP).
func (s *Stack) ArgoCDOCIRepository(ctx context.Context, repo string) error {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "repo-" + strings.NewReplacer("/", "-", ".", "-").Replace(repo), "namespace": ArgoCDNamespace,
			"labels": map[string]any{"argocd.argoproj.io/secret-type": "repository"}},
		"stringData": map[string]any{"type": "oci", "name": repo, "url": s.Registry.OCIURL(repo), "insecureOCIForceHttp": "true"},
	}}
	return Apply(ctx, s.Client, u)
}
