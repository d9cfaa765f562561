package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stagecoach-dev/stagecoach/internal/cli"
)

func newPromoteCommand() *cobra.Command {
	var opts cli.PromoteOptions
	return verb{
		use:    "promote STAGE (--version TAG | --digest DIGEST)",
		short:  "Promote a version to a Stage (creates a Promotion in your name)",
		args:   cobra.ExactArgs(1),
		output: promotionOutput,
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&opts.Version, "version", "", "Tag of the version, as the Stage or its upstream knows it.")
			f.StringVar(&opts.Digest, "digest", "", "Digest of the version (sha256:...).")
			f.BoolVar(&opts.BreakGlass, "break-glass", false, "Start even during a Freeze or outside the windows (stagecoach:break-glass members only).")
			f.StringVar(&opts.Reason, "reason", "", "Why, for people and the record.")
		},
		run: func(x *call) error {
			opts.Namespace, opts.Stage = x.namespace, x.args[0]
			return x.finished(cli.Promote(x.ctx(), x.c, opts, x.human()))
		},
	}.command()
}

func newRollbackCommand() *cobra.Command {
	var opts cli.RollbackOptions
	return verb{
		use:    "rollback STAGE",
		short:  "Roll a Stage back to its last verified version (or the one named)",
		args:   cobra.ExactArgs(1),
		output: promotionOutput,
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&opts.Version, "version", "", "Tag to return to (default: the last verified version).")
			f.StringVar(&opts.Digest, "digest", "", "Digest to return to.")
			f.StringVar(&opts.Reason, "reason", "", "Why, for people and the record.")
		},
		run: func(x *call) error {
			opts.Namespace, opts.Stage = x.namespace, x.args[0]
			return x.finished(cli.Rollback(x.ctx(), x.c, opts, x.human()))
		},
	}.command()
}

func newApproveCommand() *cobra.Command {
	var opts cli.ApproveOptions
	return verb{
		use:    "approve STAGE [--digest DIGEST]",
		short:  "Approve a version for a Stage (its candidate by default), in your name",
		args:   cobra.ExactArgs(1),
		output: promotionOutput,
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&opts.Digest, "digest", "", "Digest of the version (default: the Stage's candidate).")
			f.StringSliceVar(&opts.Groups, "group", nil, "Group to approve as (default: your groups that the Stage's policy names).")
			f.StringVar(&opts.Comment, "comment", "", "A comment, for people and the record.")
		},
		run: func(x *call) error {
			opts.Namespace, opts.Stage = x.namespace, x.args[0]
			a, err := cli.Approve(x.ctx(), x.c, opts, x.human())
			if err != nil || !x.o.wait {
				return x.printed(a, err)
			}
			// The approved version moves once a Promotion carries it (automation creates one
			// when the approval opens the gate): follow that one.
			return x.ended(cli.WaitForVersion(x.ctx(), x.c, a.Namespace, a.Spec.Stage, a.Spec.Digest, a.CreationTimestamp.Time,
				x.o.waitOptions(), x.human()))
		},
	}.command()
}

func newFreezeCommand() *cobra.Command {
	var opts cli.FreezeOptions
	var until string
	return verb{
		use:    "freeze [SELECTOR] --reason REASON [--until TIME|DURATION]",
		short:  "Freeze the Stages a label selector picks (every Stage of the namespace without one)",
		args:   cobra.MaximumNArgs(1),
		output: objectOutput,
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&opts.Reason, "reason", "", "Why (required).")
			f.StringVar(&until, "until", "", "When the Freeze ends by itself: a time (RFC 3339) or a duration from now such as 4h.")
		},
		check: func([]string) error {
			if until == "" {
				return nil
			}
			var err error
			opts.Until, err = parseUntil(until, time.Now())
			return err
		},
		run: func(x *call) error {
			opts.Namespace = x.namespace
			if len(x.args) == 1 {
				opts.Selector = x.args[0]
			}
			return x.printed(cli.Freeze(x.ctx(), x.c, opts, x.human()))
		},
	}.command()
}

func newUnfreezeCommand() *cobra.Command {
	var stage, reason string
	return verb{
		use:    "unfreeze (FREEZE | --stage STAGE)",
		short:  "Delete a Freeze, or unfreeze a Stage that a foreign write or a Freeze Promotion froze",
		args:   cobra.MaximumNArgs(1),
		output: objectOutput,
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&stage, "stage", "", "Unfreeze this Stage (creates an Unfreeze Promotion).")
			f.StringVar(&reason, "reason", "", "Why, for people and the record.")
		},
		check: func(args []string) error {
			if (len(args) == 1) == (stage != "") {
				return fmt.Errorf("name a Freeze to delete, or a Stage with --stage, not both")
			}
			return nil
		},
		run: func(x *call) error {
			if stage != "" {
				return x.printed(cli.UnfreezeStage(x.ctx(), x.c, x.namespace, stage, reason, x.human()))
			}
			if err := cli.Unfreeze(x.ctx(), x.c, x.namespace, x.args[0], x.human()); err != nil {
				return err
			}
			if x.o.structured() {
				return cli.PrintDeleted(x.cmd.OutOrStdout(), x.o.output, x.namespace, x.args[0])
			}
			return nil
		},
	}.command()
}

// parseUntil reads an RFC 3339 time or a duration from now.
func parseUntil(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("--until %q must be in the future", s)
		}
		return now.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--until %q is neither a time such as 2026-12-24T18:00:00Z nor a duration such as 4h", s)
	}
	return t, nil
}
