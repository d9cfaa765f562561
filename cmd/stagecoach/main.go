// Command stagecoach is Stagecoach's one binary: the controller and the user's CLI.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	// Time windows name IANA zones; the controller image need not ship a zoneinfo database.
	_ "time/tzdata"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}
