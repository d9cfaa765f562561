package main

import (
	"github.com/spf13/cobra"

	"github.com/stagecoach-dev/stagecoach/internal/cli"
)

func newHistoryCommand() *cobra.Command {
	return verb{
		use:   "history STAGE",
		short: "List a Stage's Promotions, newest first: who asked for what, the result and how long each phase took",
		args:  cobra.ExactArgs(1),
		run: func(x *call) error {
			return cli.History(x.ctx(), x.c, cli.HistoryOptions{Namespace: x.namespace, Stage: x.args[0], Output: x.o.output}, x.cmd.OutOrStdout())
		},
	}.command()
}
