package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/stagecoach-dev/stagecoach/plugin/cmp"
)

// verifyKeysDirEnv names the keys directory when the flag is not given (the sidecar's env).
const verifyKeysDirEnv = "STAGECOACH_VERIFY_KEYS_DIR"

// digestVerifierFactory builds the signature check for the public keys in keysDir. The check
// receives "<repository>@sha256:..." and returns why it does not verify.
type digestVerifierFactory func(keysDir string) (func(ctx context.Context, imageRef string) error, error)

// newCMPCommand groups the Argo CD config management plugin's commands. newVerifier may be nil:
// such a binary refuses to render when verification keys are configured.
func newCMPCommand(newVerifier digestVerifierFactory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cmp",
		Short: "Argo CD config management plugin (run by argocd-cmp-server, see plugin/plugin.yaml)",
	}
	cmd.AddCommand(newCMPGenerateCommand(newVerifier))
	return cmd
}

func newCMPGenerateCommand(newVerifier digestVerifierFactory) *cobra.Command {
	var keysDir string
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Render the app in the current directory at STAGECOACH_DIGEST and print its objects",
		Long: `Render the app in the current directory (plain YAML/JSON, Kustomize or a Helm chart), pin the
images .stagecoach.yaml declares to ARGOCD_ENV_STAGECOACH_DIGEST, annotate every object with
stagecoach.dev/stage and stagecoach.dev/version, and print the objects as YAML. Reads Argo CD's
plugin environment (ARGOCD_APP_*, ARGOCD_ENV_*, ARGOCD_APP_PARAMETERS or PARAM_*).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("verify-keys-dir") {
				keysDir = os.Getenv(verifyKeysDirEnv)
			}
			dir, err := os.Getwd()
			if err != nil {
				return fmt.Errorf("failed to read the current directory: %w", err)
			}
			opts := cmp.Options{Dir: dir, Env: os.LookupEnv}
			if keysDir != "" {
				if newVerifier == nil {
					return fmt.Errorf("verification keys are configured (%s) but this stagecoach binary has no signature verifier: refusing to render unverified; use a build with verification or unset --verify-keys-dir and %s", keysDir, verifyKeysDirEnv)
				}
				if opts.VerifyDigest, err = newVerifier(keysDir); err != nil {
					return fmt.Errorf("failed to load the verification keys in %s: %w", keysDir, err)
				}
			}
			return cmp.Generate(cmd.Context(), opts, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&keysDir, "verify-keys-dir", "", "Directory of public keys; when set, the digest's signature must verify before anything is rendered (default: $"+verifyKeysDirEnv+").")
	return cmd
}
