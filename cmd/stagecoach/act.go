package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/stagecoach-dev/stagecoach/internal/cli"
)

func newPromoteCommand() *cobra.Command {
	var opts cli.PromoteOptions
	var kube kubeFlags
	var o outputFlags
	cmd := &cobra.Command{
		Use:   "promote STAGE (--version TAG | --digest DIGEST)",
		Short: "Promote a version to a Stage (creates a Promotion in your name)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := kube.client()
			if err != nil {
				return err
			}
			opts.Namespace, opts.Stage = kube.namespace, args[0]
			p, err := cli.Promote(cmd.Context(), c, opts, o.human(cmd))
			if err != nil {
				return err
			}
			return o.finishPromotion(cmd, c, p)
		},
	}
	kube.register(cmd)
	o.register(cmd, true)
	cmd.Flags().StringVar(&opts.Version, "version", "", "Tag of the version, as the Stage or its upstream knows it.")
	cmd.Flags().StringVar(&opts.Digest, "digest", "", "Digest of the version (sha256:...).")
	cmd.Flags().BoolVar(&opts.BreakGlass, "break-glass", false, "Start even during a Freeze or outside the windows (stagecoach:break-glass members only).")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "Why, for people and the record.")
	return cmd
}

func newRollbackCommand() *cobra.Command {
	var opts cli.RollbackOptions
	var kube kubeFlags
	var o outputFlags
	cmd := &cobra.Command{
		Use:   "rollback STAGE",
		Short: "Roll a Stage back to its last verified version (or the one named)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := kube.client()
			if err != nil {
				return err
			}
			opts.Namespace, opts.Stage = kube.namespace, args[0]
			p, err := cli.Rollback(cmd.Context(), c, opts, o.human(cmd))
			if err != nil {
				return err
			}
			return o.finishPromotion(cmd, c, p)
		},
	}
	kube.register(cmd)
	o.register(cmd, true)
	cmd.Flags().StringVar(&opts.Version, "version", "", "Tag to return to (default: the last verified version).")
	cmd.Flags().StringVar(&opts.Digest, "digest", "", "Digest to return to.")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "Why, for people and the record.")
	return cmd
}

func newApproveCommand() *cobra.Command {
	var opts cli.ApproveOptions
	var kube kubeFlags
	var o outputFlags
	cmd := &cobra.Command{
		Use:   "approve STAGE [--digest DIGEST]",
		Short: "Approve a version for a Stage (its candidate by default), in your name",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := kube.client()
			if err != nil {
				return err
			}
			opts.Namespace, opts.Stage = kube.namespace, args[0]
			a, err := cli.Approve(cmd.Context(), c, opts, o.human(cmd))
			if err != nil {
				return err
			}
			if !o.wait {
				return o.print(cmd, a)
			}
			// The approved version moves once a Promotion carries it (automation creates one
			// when the approval opens the gate): follow that one.
			p, err := cli.WaitForVersion(cmd.Context(), c, a.Namespace, a.Spec.Stage, a.Spec.Digest, a.CreationTimestamp.Time,
				o.waitOptions(), o.human(cmd))
			if p != nil {
				if perr := o.print(cmd, p); perr != nil && err == nil {
					err = perr
				}
			}
			return err
		},
	}
	kube.register(cmd)
	o.register(cmd, true)
	cmd.Flags().StringVar(&opts.Digest, "digest", "", "Digest of the version (default: the Stage's candidate).")
	cmd.Flags().StringSliceVar(&opts.Groups, "group", nil, "Group to approve as (default: your groups that the Stage's policy names).")
	cmd.Flags().StringVar(&opts.Comment, "comment", "", "A comment, for people and the record.")
	return cmd
}

func newFreezeCommand() *cobra.Command {
	var opts cli.FreezeOptions
	var kube kubeFlags
	var until string
	var o outputFlags
	cmd := &cobra.Command{
		Use:   "freeze [SELECTOR] --reason REASON [--until TIME|DURATION]",
		Short: "Freeze the Stages a label selector picks (every Stage of the namespace without one)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if until != "" {
				t, err := parseUntil(until, time.Now())
				if err != nil {
					return err
				}
				opts.Until = t
			}
			c, err := kube.client()
			if err != nil {
				return err
			}
			opts.Namespace = kube.namespace
			if len(args) == 1 {
				opts.Selector = args[0]
			}
			f, err := cli.Freeze(cmd.Context(), c, opts, o.human(cmd))
			if err != nil {
				return err
			}
			return o.print(cmd, f)
		},
	}
	kube.register(cmd)
	o.register(cmd, false)
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "Why (required).")
	cmd.Flags().StringVar(&until, "until", "", "When the Freeze ends by itself: a time (RFC 3339) or a duration from now such as 4h.")
	return cmd
}

func newUnfreezeCommand() *cobra.Command {
	var kube kubeFlags
	var stage, reason string
	var o outputFlags
	cmd := &cobra.Command{
		Use:   "unfreeze (FREEZE | --stage STAGE)",
		Short: "Delete a Freeze, or unfreeze a Stage that a foreign write or a Freeze Promotion froze",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (len(args) == 1) == (stage != "") {
				return fmt.Errorf("name a Freeze to delete, or a Stage with --stage, not both")
			}
			c, err := kube.client()
			if err != nil {
				return err
			}
			if stage != "" {
				p, err := cli.UnfreezeStage(cmd.Context(), c, kube.namespace, stage, reason, o.human(cmd))
				if err != nil {
					return err
				}
				return o.print(cmd, p)
			}
			if err := cli.Unfreeze(cmd.Context(), c, kube.namespace, args[0], o.human(cmd)); err != nil {
				return err
			}
			if o.structured() {
				return cli.PrintDeleted(cmd.OutOrStdout(), o.output, kube.namespace, args[0])
			}
			return nil
		},
	}
	kube.register(cmd)
	o.register(cmd, false)
	cmd.Flags().StringVar(&stage, "stage", "", "Unfreeze this Stage (creates an Unfreeze Promotion).")
	cmd.Flags().StringVar(&reason, "reason", "", "Why, for people and the record.")
	return cmd
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
