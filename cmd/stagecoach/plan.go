package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/stagecoach-dev/stagecoach/internal/cli"
)

func newPlanCommand() *cobra.Command {
	var opts cli.PlanOptions
	var kube kubeFlags
	cmd := &cobra.Command{
		Use:   "plan [STAGE]",
		Short: "Explain what each Stage runs, what it is doing, and what holds its next version back",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := kube.client()
			if err != nil {
				return err
			}
			opts.Namespace = kube.namespace
			if len(args) == 1 {
				opts.Stage = args[0]
			}
			return cli.Plan(cmd.Context(), c, opts, cmd.OutOrStdout(), time.Now())
		},
	}
	kube.register(cmd)
	cmd.Flags().BoolVarP(&opts.AllNamespaces, "all-namespaces", "A", false, "Explain the Stages of every namespace.")
	cmd.Flags().StringVarP(&opts.Output, "output", "o", "text", "Output format: text, json or yaml.")
	return cmd
}
