package main

import (
	"github.com/spf13/cobra"

	"github.com/stagecoach-dev/stagecoach/internal/cli"
)

func newHistoryCommand() *cobra.Command {
	var opts cli.HistoryOptions
	var kube kubeFlags
	cmd := &cobra.Command{
		Use:   "history STAGE",
		Short: "List a Stage's Promotions, newest first: who asked for what, the result and how long each phase took",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := kube.client()
			if err != nil {
				return err
			}
			opts.Namespace, opts.Stage = kube.namespace, args[0]
			return cli.History(cmd.Context(), c, opts, cmd.OutOrStdout())
		},
	}
	kube.register(cmd)
	cmd.Flags().StringVarP(&opts.Output, "output", "o", "text", "Output format: text, json or yaml.")
	return cmd
}
