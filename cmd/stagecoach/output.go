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

// outputKind says what a verb's -o formats.
type outputKind int

const (
	// reportOutput: the verb writes a report in the format of -o and checks it itself.
	reportOutput outputKind = iota
	// objectOutput: the verb creates or deletes an object and prints it with -o json or yaml;
	// -o is checked before anything runs.
	objectOutput
	// promotionOutput is objectOutput with --wait and --timeout, for the verbs that move a version.
	promotionOutput
)

// outputFlags are -o for every verb, and --wait/--timeout for the verbs that move a version.
type outputFlags struct {
	output  string
	wait    bool
	timeout time.Duration
}

func (o *outputFlags) register(cmd *cobra.Command, kind outputKind) {
	if kind == reportOutput {
		cmd.Flags().StringVarP(&o.output, "output", "o", "text", "Output format: text, json or yaml.")
		return
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "text",
		"Output format: text, or json or yaml (the object on stdout; what happens goes to stderr).")
	if kind == promotionOutput {
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

func (o *outputFlags) waitOptions() cli.WaitOptions { return cli.WaitOptions{Timeout: o.timeout} }

// human is where lines for people go: stdout, or stderr when stdout carries JSON or YAML.
func (x *call) human() io.Writer {
	if x.o.structured() {
		return x.cmd.ErrOrStderr()
	}
	return x.cmd.OutOrStdout()
}

// printed passes err on, or prints the object the verb made when -o asks for it.
func (x *call) printed(obj client.Object, err error) error {
	if err != nil || !x.o.structured() {
		return err
	}
	return cli.PrintObject(x.cmd.OutOrStdout(), x.o.output, obj)
}

// finished passes err on, or waits for a created Promotion when asked and prints it as it ended.
func (x *call) finished(p *stagecoachv1.Promotion, err error) error {
	if err != nil || !x.o.wait {
		return x.printed(p, err)
	}
	return x.ended(cli.WaitForPromotion(x.ctx(), x.c, p.Namespace, p.Name, x.o.waitOptions(), x.human()))
}

// ended prints the Promotion a wait ended with, if any; the wait's error comes first.
func (x *call) ended(p *stagecoachv1.Promotion, err error) error {
	if p != nil {
		if perr := x.printed(p, nil); perr != nil && err == nil {
			err = perr
		}
	}
	return err
}
