package localstack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// StartSecondCluster starts another cluster beside the stack, from the same cached binaries: its
// own etcd, kube-apiserver (and kube-controller-manager when built), PKI, tokens and
// kubeconfigs, the Stagecoach install (CRDs, RBAC, policies) and its own `stagecoach controller`
// with controllerArgs. It runs no Argo CD or Flux and shares no object with the stack: only the
// loopback network, so its controller can reach the stack's registry and nothing else of the
// first cluster. Only tests that need it start it; its Stop ends it (the stack's Stop does not).
//
// The returned Stack is that cluster: Client, Kubeconfig, Controller, StartController and
// StopController act on it; Registry and Git are nil (use the stack's).
func (s *Stack) StartSecondCluster(ctx context.Context, name string, controllerArgs ...string) (*Stack, error) {
	dir := filepath.Join(s.Dir, name)
	b := &Stack{Bin: s.Bin, Dir: dir, LogDir: filepath.Join(dir, "logs"), progress: s.progress, binDir: filepath.Join(dir, "bin"),
		opts: Options{Dir: dir, Progress: s.progress, CMPConfigDir: s.opts.CMPConfigDir,
			// No Flux in this cluster, so no events address: a later flag wins over StartController's.
			ControllerArgs: append([]string{"--events-addr="}, controllerArgs...)}}
	for _, d := range []string{b.LogDir, b.binDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	err := func() error {
		if err := b.startControlPlane(ctx); err != nil {
			return err
		}
		if err := b.install(ctx); err != nil {
			return err
		}
		return b.StartController(ctx)
	}()
	if err != nil {
		b.Stop()
		return nil, fmt.Errorf("second cluster %s: %w (logs in %s)", name, err, b.LogDir)
	}
	s.step("second cluster %s ready in %s (kubeconfig %s)", name, time.Since(start).Round(time.Millisecond), b.Kubeconfig)
	return b, nil
}

// RestartControllerWith restarts the stack's controller with extra flags after the usual ones (a
// flag given again wins). The returned function restarts it with the flags it had, for the test's
// cleanup: other scenarios share this controller.
func (s *Stack) RestartControllerWith(ctx context.Context, extra ...string) (restore func(context.Context) error, err error) {
	before := slices.Clone(s.opts.ControllerArgs)
	s.StopController()
	s.opts.ControllerArgs = append(slices.Clone(before), extra...)
	restore = func(ctx context.Context) error {
		s.StopController()
		s.opts.ControllerArgs = before
		return s.StartController(ctx)
	}
	if err := s.StartController(ctx); err != nil {
		return restore, err
	}
	return restore, nil
}
