package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stagecoach-dev/stagecoach/internal/cli"
	"github.com/stagecoach-dev/stagecoach/internal/version"
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "stagecoach",
		Short:         "Promote releases from environment to environment inside Argo CD and Flux",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newControllerCommand(), newPlanCommand(), newCMPCommand(cosignVerifier), newPromoteCommand(), newApproveCommand(),
		newRollbackCommand(), newFreezeCommand(), newUnfreezeCommand(), newDoraCommand(), newHistoryCommand(), newVersionCommand())
	root.AddCommand(newRecordsCommand(), newAbortCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch output {
			case "json", "yaml":
				return cli.PrintValue(cmd.OutOrStdout(), output, map[string]string{"version": version.Version})
			case "text":
				_, err := fmt.Fprintln(cmd.OutOrStdout(), "stagecoach", version.Version)
				return err
			}
			return fmt.Errorf("unknown output format %q: use text, json or yaml", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "Output format: text, json or yaml.")
	return cmd
}
