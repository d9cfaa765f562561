package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/stagecoach-dev/stagecoach/internal/cli"
)

func newPlanCommand() *cobra.Command {
	var opts cli.PlanOptions
	var kube kubeFlags
	var trustFile, dockerConfig string
	cmd := &cobra.Command{
		Use:   "plan [STAGE]",
		Short: "Explain what each Stage runs, what it is doing, and what holds its next version back",
		Long: "Explains each Stage from the cluster: what it runs, its running and waiting Promotions, what holds its\n" +
			"candidate back, and its signed records (its stream, the newest record written, the upstream stream it\n" +
			"follows and how far it read). With --trust FILE a follower also reads its upstream stream afresh and says\n" +
			"which version it would take, citing upstreamSeq and upstreamHead, and which versions the records refuse.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// A bad --trust is said before the cluster is asked anything.
			var err error
			if trustFile != "" {
				if opts.Trust, err = loadTrust(trustFile); err != nil {
					return err
				}
				if opts.Registry.Keychain, err = loadKeychain(dockerConfig); err != nil {
					return err
				}
			}
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
	cmd.Flags().StringVar(&trustFile, "trust", "", "Trust config file (the controller's --upstream-trust): with it, each Stage following upstreamRecords reads its upstream stream and says what it would take, and which records it refuses or skips.")
	cmd.Flags().StringVar(&dockerConfig, "docker-config", "", "Docker config JSON with credentials for the upstream records' registry (with --trust); anonymous when empty.")
	cmd.Flags().BoolVar(&opts.Registry.Insecure, "insecure", false, "Allow plain HTTP to a records registry that is not on loopback (with --trust).")
	return cmd
}
