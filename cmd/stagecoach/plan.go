package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stagecoach-dev/stagecoach/controller"
	"github.com/stagecoach-dev/stagecoach/internal/cli"
)

func newPlanCommand() *cobra.Command {
	var opts cli.PlanOptions
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "plan [STAGE]",
		Short: "Explain what each Stage runs, what it is doing, and what holds its next version back",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			rules.ExplicitPath = kubeconfig
			loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
			cfg, err := loader.ClientConfig()
			if err != nil {
				return fmt.Errorf("failed to load a kubeconfig: %w", err)
			}
			if opts.Namespace == "" {
				if opts.Namespace, _, err = loader.Namespace(); err != nil {
					return fmt.Errorf("failed to read the namespace of the current context: %w", err)
				}
			}
			if len(args) == 1 {
				opts.Stage = args[0]
			}
			scheme, err := controller.NewScheme()
			if err != nil {
				return err
			}
			c, err := client.New(cfg, client.Options{Scheme: scheme})
			if err != nil {
				return fmt.Errorf("failed to create a client: %w", err)
			}
			return cli.Plan(cmd.Context(), c, opts, cmd.OutOrStdout(), time.Now())
		},
	}
	cmd.Flags().StringVarP(&opts.Namespace, "namespace", "n", "", "Namespace of the Stages (default: the current context's).")
	cmd.Flags().BoolVarP(&opts.AllNamespaces, "all-namespaces", "A", false, "Explain the Stages of every namespace.")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "Path to the kubeconfig (default: $KUBECONFIG or ~/.kube/config).")
	return cmd
}
