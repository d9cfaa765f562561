package main

import (
	"github.com/spf13/cobra"

	"github.com/stagecoach-dev/stagecoach/internal/cli"
)

func newAbortCommand() *cobra.Command {
	var kube kubeFlags
	var reason string
	var o outputFlags
	cmd := &cobra.Command{
		Use:   "abort STAGE [--reason REASON]",
		Short: "Cancel the Stage's running Promotion (a fleet rollout stops where it is)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := kube.client()
			if err != nil {
				return err
			}
			p, err := cli.AbortStage(cmd.Context(), c, kube.namespace, args[0], reason, o.human(cmd))
			if err != nil {
				return err
			}
			return o.print(cmd, p)
		},
	}
	kube.register(cmd)
	o.register(cmd, false)
	cmd.Flags().StringVar(&reason, "reason", "", "Why, for people and the record (the aborted Promotion keeps it).")
	return cmd
}
