package main

import (
	"context"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// verb is a user verb that talks to the cluster, declared by what sets it apart; command gives
// every verb -n and --kubeconfig, its -o (and --wait/--timeout), and one order: the verb's own
// checks, then the client, then the verb.
type verb struct {
	use, short, long string
	args             cobra.PositionalArgs
	output           outputKind
	// flags registers the verb's own flags.
	flags func(*pflag.FlagSet)
	// check, when set, refuses bad arguments before the kubeconfig is read.
	check func(args []string) error
	run   func(x *call) error
}

// call is one run of a verb, connected.
type call struct {
	cmd       *cobra.Command
	c         client.Client
	namespace string // -n, or the current context's
	args      []string
	o         *outputFlags
}

func (x *call) ctx() context.Context { return x.cmd.Context() }

func (v verb) command() *cobra.Command {
	var kube kubeFlags
	o := &outputFlags{}
	cmd := &cobra.Command{
		Use:   v.use,
		Short: v.short,
		Long:  v.long,
		Args:  v.args,
		RunE: func(cmd *cobra.Command, args []string) error {
			if v.check != nil {
				if err := v.check(args); err != nil {
					return err
				}
			}
			c, err := kube.client()
			if err != nil {
				return err
			}
			return v.run(&call{cmd: cmd, c: c, namespace: kube.namespace, args: args, o: o})
		},
	}
	kube.register(cmd)
	o.register(cmd, v.output)
	if v.flags != nil {
		v.flags(cmd.Flags())
	}
	return cmd
}
