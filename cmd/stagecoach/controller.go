package main

import (
	"fmt"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/stagecoach-dev/stagecoach/controller"
	"github.com/stagecoach-dev/stagecoach/internal/memlimit"
	"github.com/stagecoach-dev/stagecoach/internal/version"
)

func newControllerCommand() *cobra.Command {
	opts := controller.DefaultOptions()
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the Stagecoach controller against the cluster of the current kubeconfig (or in-cluster)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.Validate(); err != nil {
				return err
			}
			ctrl.SetLogger(newLogger(opts))
			// The container's memory limit bounds the heap (GOMEMLIMIT, when set, wins).
			if limit, err := memlimit.Set("/"); err != nil {
				ctrl.Log.Info("no soft memory limit: " + err.Error())
			} else if limit > 0 {
				ctrl.Log.Info("soft memory limit from the cgroup", "bytes", limit)
			}
			if percent := memlimit.SetGCPercent(); percent > 0 {
				ctrl.Log.V(1).Info("GOGC is not set: the heap grows by half of what is live before a collection", "gcPercent", percent)
			}
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return fmt.Errorf("failed to load a kubeconfig: %w", err)
			}
			mgr, err := controller.NewManager(cmd.Context(), cfg, opts)
			if err != nil {
				return err
			}
			ctrl.Log.Info("starting stagecoach controller", "version", version.Version,
				"watchNamespaces", opts.WatchNamespaces)
			return mgr.Start(cmd.Context())
		},
	}
	opts.BindFlags(cmd.Flags())
	return cmd
}

func newLogger(opts controller.Options) logr.Logger {
	level := zapcore.InfoLevel
	if opts.LogLevel == "debug" {
		level = zapcore.DebugLevel
	}
	zapOpts := []zap.Opts{zap.Level(level), zap.UseDevMode(false)}
	if opts.LogEncoding == "console" {
		zapOpts = append(zapOpts, zap.ConsoleEncoder())
	} else {
		zapOpts = append(zapOpts, zap.JSONEncoder())
	}
	return zap.New(zapOpts...)
}
