package main

import (
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stagecoach-dev/stagecoach/internal/cli"
)

func newPlanCommand() *cobra.Command {
	var opts cli.PlanOptions
	var trustFile, dockerConfig string
	return verb{
		use:   "plan [STAGE]",
		short: "Explain what each Stage runs, what it is doing, and what holds its next version back",
		long: "Explains each Stage from the cluster: what it runs, its running and waiting Promotions, what holds its\n" +
			"candidate back, and its signed records (its stream, the newest record written, the upstream stream it\n" +
			"follows and how far it read). With --trust FILE a follower also reads its upstream stream afresh and says\n" +
			"which version it would take, citing upstreamSeq and upstreamHead, and which versions the records refuse.",
		args: cobra.MaximumNArgs(1),
		flags: func(f *pflag.FlagSet) {
			f.BoolVarP(&opts.AllNamespaces, "all-namespaces", "A", false, "Explain the Stages of every namespace.")
			f.StringVar(&trustFile, "trust", "", "Trust config file (the controller's --upstream-trust): with it, each Stage following upstreamRecords reads its upstream stream and says what it would take, and which records it refuses or skips.")
			f.StringVar(&dockerConfig, "docker-config", "", "Docker config JSON with credentials for the upstream records' registry (with --trust); anonymous when empty.")
			f.BoolVar(&opts.Registry.Insecure, "insecure", false, "Allow plain HTTP to a records registry that is not on loopback (with --trust).")
		},
		// A bad --trust is said before the cluster is asked anything.
		check: func([]string) error {
			if trustFile == "" {
				return nil
			}
			var err error
			if opts.Trust, err = loadTrust(trustFile); err != nil {
				return err
			}
			opts.Registry.Keychain, err = loadKeychain(dockerConfig)
			return err
		},
		run: func(x *call) error {
			opts.Namespace, opts.Output = x.namespace, x.o.output
			if len(x.args) == 1 {
				opts.Stage = x.args[0]
			}
			return cli.Plan(x.ctx(), x.c, opts, x.cmd.OutOrStdout(), time.Now())
		},
	}.command()
}
