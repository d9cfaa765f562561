package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stagecoach-dev/stagecoach/controller"
)

// kubeFlags are the flags every verb that talks to the cluster takes.
type kubeFlags struct {
	kubeconfig string
	namespace  string
}

func (k *kubeFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&k.namespace, "namespace", "n", "", "Namespace (default: the current context's).")
	cmd.Flags().StringVar(&k.kubeconfig, "kubeconfig", "", "Path to the kubeconfig (default: $KUBECONFIG or ~/.kube/config).")
}

// client builds a client from the user's kubeconfig and fills in the namespace from the
// current context when no flag set it.
func (k *kubeFlags) client() (client.Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("failed to load a kubeconfig: %w", err)
	}
	if k.namespace == "" {
		if k.namespace, _, err = loader.Namespace(); err != nil {
			return nil, fmt.Errorf("failed to read the namespace of the current context: %w", err)
		}
	}
	scheme, err := controller.NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("failed to create a client: %w", err)
	}
	return c, nil
}
