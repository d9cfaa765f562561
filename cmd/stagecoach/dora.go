package main

import (
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stagecoach-dev/stagecoach/internal/cli"
)

func newDoraCommand() *cobra.Command {
	var opts cli.DoraOptions
	var since string
	return verb{
		use:   "dora [SERVICE] [--since 30d]",
		short: "Compute the four DORA keys per service and environment from the Stages and their Promotions",
		long: `Deployment frequency, lead time (first seen in the pipeline to Verified), change failure rate
and time to restore, per Stage, over a window ending now. The numbers are those of the
stagecoach_* metrics, computed from the objects alone.`,
		args: cobra.MaximumNArgs(1),
		flags: func(f *pflag.FlagSet) {
			f.BoolVarP(&opts.AllNamespaces, "all-namespaces", "A", false, "Every namespace's Stages.")
			f.StringVar(&since, "since", "30d", "Window length, ending now: days (30d) or a duration (12h).")
		},
		check: func(args []string) error {
			d, err := cli.ParseSince(since)
			if err != nil {
				return err
			}
			opts.Since = d
			if len(args) == 1 {
				opts.Service = args[0]
			}
			return nil
		},
		run: func(x *call) error {
			opts.Namespace, opts.Output = x.namespace, x.o.output
			return cli.Dora(x.ctx(), x.c, opts, x.cmd.OutOrStdout(), time.Now())
		},
	}.command()
}
