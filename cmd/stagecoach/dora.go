package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/stagecoach-dev/stagecoach/internal/cli"
)

func newDoraCommand() *cobra.Command {
	var opts cli.DoraOptions
	var kube kubeFlags
	var since string
	cmd := &cobra.Command{
		Use:   "dora [SERVICE] [--since 30d]",
		Short: "Compute the four DORA keys per service and environment from the Stages and their Promotions",
		Long: `Deployment frequency, lead time (first seen in the pipeline to Verified), change failure rate
and time to restore, per Stage, over a window ending now. The numbers are those of the
stagecoach_* metrics, computed from the objects alone.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := cli.ParseSince(since)
			if err != nil {
				return err
			}
			opts.Since = d
			if len(args) == 1 {
				opts.Service = args[0]
			}
			c, err := kube.client()
			if err != nil {
				return err
			}
			opts.Namespace = kube.namespace
			return cli.Dora(cmd.Context(), c, opts, cmd.OutOrStdout(), time.Now())
		},
	}
	kube.register(cmd)
	cmd.Flags().BoolVarP(&opts.AllNamespaces, "all-namespaces", "A", false, "Every namespace's Stages.")
	cmd.Flags().StringVar(&since, "since", "30d", "Window length, ending now: days (30d) or a duration (12h).")
	cmd.Flags().StringVarP(&opts.Output, "output", "o", "text", "Output format: text, json or yaml.")
	return cmd
}
