package localstack

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ArgoCDAppSetController is the applicationset-controller's component (and log) name. It is
// optional: only the fleet scenarios start it (StartApplicationSetController).
const ArgoCDAppSetController = "argocd-applicationset-controller"

// AppSetOptions shape StartApplicationSetController.
type AppSetOptions struct {
	// ProgressiveSyncs runs it with --enable-progressive-syncs (spec.strategy RollingSync).
	ProgressiveSyncs bool
}

var appSetMu sync.Mutex
var appSetRunning = map[*Stack]AppSetOptions{}

// StartApplicationSetController runs Argo CD's applicationset-controller (the multi-call binary
// under its own name, as the other Argo CD components) over ApplicationSets in Argo CD's
// namespace, and waits for its health probe. A running one with the same options is reused; one
// with other options is stopped first.
func (s *Stack) StartApplicationSetController(ctx context.Context, opts AppSetOptions) (*Process, error) {
	appSetMu.Lock()
	defer appSetMu.Unlock()
	if p := s.Process(ArgoCDAppSetController); p != nil {
		if ended, _ := p.Exited(); !ended {
			if appSetRunning[s] == opts {
				return p, nil
			}
			p.Stop()
		}
	}
	link := filepath.Join(s.binDir, ArgoCDAppSetController)
	if _, err := os.Lstat(link); err != nil {
		if err := os.Symlink(s.Bin.ArgoCD, link); err != nil {
			return nil, err
		}
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	addr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[i]) }
	args := []string{"--namespace", ArgoCDNamespace, "--argocd-repo-server", s.repoServer, "--repo-server-plaintext",
		"--metrics-addr", addr(0), "--probe-addr", addr(1), "--webhook-addr", addr(2),
		// No SCM or pull-request generators here: nothing to reach outside the stack.
		"--enable-scm-providers=false", "--logformat", "text", "--loglevel", "info"}
	if opts.ProgressiveSyncs {
		args = append(args, "--enable-progressive-syncs")
	}
	start := time.Now()
	p, err := s.start(processSpec{name: ArgoCDAppSetController, path: link, env: s.argoEnv, args: args})
	if err != nil {
		return nil, err
	}
	// Its probe server has no checks registered (404 on /healthz); the metrics server answers once
	// the manager runs.
	if err := p.waitReady(ctx, 60*time.Second, "GET /metrics", httpOK(nil, "http://"+addr(0)+"/metrics")); err != nil {
		return nil, err
	}
	appSetRunning[s] = opts
	s.step("started %s (pid %d, progressive syncs %t) in %s", ArgoCDAppSetController, p.Pid(), opts.ProgressiveSyncs,
		time.Since(start).Round(time.Millisecond))
	return p, nil
}

// FleetCluster is an Argo CD cluster of a fleet scenario: the stack's own kube-apiserver reached
// under another loopback address (127.0.0.2, 127.0.0.3, …) through a TCP forwarder in the test
// process, so that Argo CD counts it as a cluster of its own (clusters are told apart by server
// URL), with a cluster Secret in Argo CD's namespace.
type FleetCluster struct {
	// Name is the cluster's name in Argo CD (the Secret's data.name); Server its API server URL.
	Name, Server string
	// Secret is the cluster Secret's name, in ArgoCDNamespace.
	Secret string
	Labels map[string]string
}

// nextLoopback hands out 127.0.0.2, 127.0.0.3, … once per test binary.
var nextLoopback atomic.Int32

func loopbackAddress() (string, error) {
	n := nextLoopback.Add(1) + 1
	if n > 254*254 {
		return "", errors.New("no loopback address left for another fleet cluster")
	}
	return net.IPv4(127, 0, byte(n/254), byte(n%254+1)).String(), nil
}

// FleetCluster adds an Argo CD cluster named name with the Secret's labels (and annotations): a
// forwarder on the next loopback address and a cluster Secret whose config authenticates as the
// admin and verifies the API server's real serving certificate (caData, serverName localhost,
// one of its names). Both go away when the test ends.
func (sc *Scenario) FleetCluster(name string, labels, annotations map[string]string) FleetCluster {
	sc.T.Helper()
	ip, err := loopbackAddress()
	sc.G.Expect(err).NotTo(HaveOccurred())
	fwd, err := forward(ip, sc.APIServer)
	sc.G.Expect(err).NotTo(HaveOccurred(), "forwarder on %s to the API server", ip)
	sc.T.Cleanup(fwd.close)

	c := FleetCluster{Name: name, Server: "https://" + fwd.addr, Secret: "cluster-" + name, Labels: labels}
	config, err := json.Marshal(map[string]any{
		"bearerToken": sc.pki.adminToken,
		"tlsClientConfig": map[string]any{
			"serverName": "localhost",
			"caData":     base64.StdEncoding.EncodeToString(sc.pki.caPEM),
		},
	})
	sc.G.Expect(err).NotTo(HaveOccurred())
	secretLabels := map[string]any{"argocd.argoproj.io/secret-type": "cluster"}
	for k, v := range labels {
		secretLabels[k] = v
	}
	meta := map[string]any{"name": c.Secret, "namespace": ArgoCDNamespace, "labels": secretLabels}
	if len(annotations) > 0 {
		a := map[string]any{}
		for k, v := range annotations {
			a[k] = v
		}
		meta["annotations"] = a
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "metadata": meta,
		"stringData": map[string]any{"name": name, "server": c.Server, "config": string(config)},
	}}
	sc.G.Expect(Apply(sc.Ctx(), sc.Client, u)).To(Succeed())
	sc.T.Cleanup(func() {
		// The test's context is over by now.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(sc.T.Context()), 10*time.Second)
		defer cancel()
		_ = sc.Client.Delete(ctx, u)
	})
	return c
}

// InNamespace is the scenario working in namespace ns (Argo CD's, where fleet Stages live beside
// their ApplicationSet and the cluster Secrets): Apply, Stage, Promote, Get and the waits act
// there; logs and cleanup stay the scenario's.
func (sc *Scenario) InNamespace(ns string) *Scenario {
	c := *sc
	c.NS = ns
	return &c
}

// DeleteOnCleanup deletes obj when the test ends (objects outside the scenario's namespace).
func (sc *Scenario) DeleteOnCleanup(obj client.Object) {
	sc.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(sc.T.Context()), 10*time.Second)
		defer cancel()
		_ = sc.Client.Delete(ctx, obj)
	})
}

// forwarder copies TCP connections from a listener to a target address, both ways.
type forwarder struct {
	addr   string
	l      net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

func forward(ip, target string) (*forwarder, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s (a loopback address; Linux routes all of 127.0.0.0/8 to lo): %w", ip, err)
	}
	f := &forwarder{addr: l.Addr().String(), l: l}
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			if !f.track(in, out) {
				return
			}
			go pipe(in, out)
			go pipe(out, in)
		}
	}()
	return f, nil
}

func (f *forwarder) track(cs ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	f.conns = append(f.conns, cs...)
	return true
}

func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	// One direction ended: end both, the other io.Copy returns then.
	dst.Close()
	src.Close()
}

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	f.l.Close()
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
}

// ShippedApplicationSet is the example ApplicationSet Stagecoach ships for waves
// (manifests/argocd/applicationset-waves/applicationset.yaml), with the settings that keep the
// applicationset-controller from undoing what Stagecoach writes; fleet scenarios start from it.
func (s *Stack) ShippedApplicationSet() (*unstructured.Unstructured, error) {
	path := filepath.Join(s.Bin.RepoRoot, "manifests", "argocd", "applicationset-waves", "applicationset.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := decodeYAML(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(objs) != 1 || objs[0].GetKind() != "ApplicationSet" {
		return nil, fmt.Errorf("%s should hold exactly one ApplicationSet", path)
	}
	return objs[0], nil
}
