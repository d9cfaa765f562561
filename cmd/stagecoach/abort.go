package main

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stagecoach-dev/stagecoach/internal/cli"
)

func newAbortCommand() *cobra.Command {
	var reason string
	return verb{
		use:    "abort STAGE [--reason REASON]",
		short:  "Cancel the Stage's running Promotion (a fleet rollout stops where it is)",
		args:   cobra.ExactArgs(1),
		output: objectOutput,
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&reason, "reason", "", "Why, for people and the record (the aborted Promotion keeps it).")
		},
		run: func(x *call) error {
			return x.printed(cli.AbortStage(x.ctx(), x.c, x.namespace, x.args[0], reason, x.human()))
		},
	}.command()
}
