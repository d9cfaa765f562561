// Package e2e runs Stagecoach's scenarios end to end on the local stack: real kube-apiserver, Argo CD
// and Flux controllers built from the Go module proxy, a loopback OCI registry and git server, and
// the real `stagecoach controller` binary. One stack serves every scenario of the run; each
// scenario works in its own namespace (see localstack.Scenario).
package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
)

// env is the stack every scenario shares; it is only read after TestMain has started it.
var env *localstack.Stack

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// Cancelled when the scenarios end: a Gitea build still running (no forge scenario ran) stops.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Clients log through controller-runtime; their few lines are of no use here.
	ctrllog.SetLogger(logr.Discard())
	start := time.Now()
	bin, err := localstack.Build(ctx, os.Stderr, localstack.GiteaLater)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building the stack failed:", err)
		return 1
	}
	built := time.Since(start)
	env, err = localstack.Start(ctx, bin, localstack.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting the stack failed:", err)
		return 1
	}
	report("stack: binaries ready in %s, stack started in %s", built.Round(time.Second), (time.Since(start) - built).Round(time.Millisecond))
	code := m.Run()
	cancel()
	bin.WaitBuilds()
	env.Stop()
	if code == 0 {
		// etcd data, registry contents and logs of a passing run are of no further use.
		_ = os.RemoveAll(env.Dir)
	} else {
		fmt.Fprintln(os.Stderr, "e2e: logs of every component are kept in", env.LogDir)
	}
	return code
}

// report prints a line that testsum shows even when every test passes (lead times, latencies).
func report(format string, args ...any) {
	fmt.Printf("REPORT: "+format+"\n", args...)
}
