// Command localstack builds and runs the end-to-end stack outside of tests.
//
//	go run ./localstack/cmd build   # build what is missing into the cache, with progress (from test/e2e)
//	go run ./localstack/cmd build --without-gitea
//	                                # all but Gitea, which the e2e suite then builds beside its first scenarios
//	go run ./localstack/cmd up      # start the stack, print the kubeconfig, stop on Ctrl-C
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
)

func main() {
	args := os.Args[1:]
	gitea := localstack.GiteaNow
	switch {
	case len(args) == 1 && args[0] == "build":
	case len(args) == 2 && args[0] == "build" && args[1] == "--without-gitea":
		gitea = localstack.GiteaNever
	case len(args) == 1 && args[0] == "up":
		// up starts no forge.
		gitea = localstack.GiteaNever
	default:
		fmt.Fprintln(os.Stderr, "usage: localstack build [--without-gitea] | up")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, args[0], gitea); err != nil {
		fmt.Fprintln(os.Stderr, "localstack:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, verb string, gitea localstack.GiteaBuild) error {
	start := time.Now()
	bin, err := localstack.Build(ctx, os.Stderr, gitea)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "localstack: binaries ready in %s\n", time.Since(start).Round(time.Second))
	if verb == "build" {
		return nil
	}
	s, err := localstack.Start(ctx, bin, localstack.Options{})
	if err != nil {
		return err
	}
	defer s.Stop()
	fmt.Printf("export KUBECONFIG=%s\n# logs: %s\n# registry: %s, git: http://%s\n# Ctrl-C stops everything\n",
		s.Kubeconfig, s.LogDir, s.Registry.Addr, s.Git.Addr)
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "localstack: stopping")
	return nil
}
