package main

import (
	"fmt"

	"github.com/spf13/cobra"

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
		newRollbackCommand(), newFreezeCommand(), newUnfreezeCommand(), newDoraCommand(), newVersionCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "stagecoach", version.Version)
			return err
		},
	}
}
