package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/cli"
)

// outputFlags are -o for every verb, and --wait/--timeout for the verbs that move a version.
type outputFlags struct {
	output  string
	wait    bool
	timeout time.Duration
}

func (o *outputFlags) register(cmd *cobra.Command, wait bool) {
	cmd.Flags().StringVarP(&o.output, "output", "o", "text",
		"Output format: text, or json or yaml (the object on stdout; what happens goes to stderr).")
	if wait {
		cmd.Flags().BoolVar(&o.wait, "wait", false,
			"Follow the Promotion step by step; exit 0 only once the version is Verified, non-zero with the reason otherwise.")
		cmd.Flags().DurationVar(&o.timeout, "timeout", 10*time.Minute, "How long --wait waits before giving up.")
	}
	cmd.PreRunE = func(*cobra.Command, []string) error {
		switch o.output {
		case "text", "json", "yaml":
		default:
			return fmt.Errorf("unknown output format %q: use text, json or yaml", o.output)
		}
		if o.wait && o.timeout <= 0 {
			return fmt.Errorf("--timeout must be positive, such as 10m")
		}
		return nil
	}
}

func (o *outputFlags) structured() bool { return o.output == "json" || o.output == "yaml" }

// human is where lines for people go: stdout, or stderr when stdout carries JSON or YAML.
func (o *outputFlags) human(cmd *cobra.Command) io.Writer {
	if o.structured() {
		return cmd.ErrOrStderr()
	}
	return cmd.OutOrStdout()
}

func (o *outputFlags) print(cmd *cobra.Command, obj client.Object) error {
	if !o.structured() {
		return nil
	}
	return cli.PrintObject(cmd.OutOrStdout(), o.output, obj)
}

func (o *outputFlags) waitOptions() cli.WaitOptions { return cli.WaitOptions{Timeout: o.timeout} }

// finishPromotion waits for a created Promotion when asked, and prints it as it ended.
func (o *outputFlags) finishPromotion(cmd *cobra.Command, c client.Reader, p *stagecoachv1.Promotion) error {
	if !o.wait {
		return o.print(cmd, p)
	}
	ended, err := cli.WaitForPromotion(cmd.Context(), c, p.Namespace, p.Name, o.waitOptions(), o.human(cmd))
	if ended != nil {
		if perr := o.print(cmd, ended); perr != nil && err == nil {
			err = perr
		}
	}
	return err
}
