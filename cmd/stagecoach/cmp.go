package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stagecoach-dev/stagecoach/plugin/cmp"
)

// verifyKeysDirEnv names the keys directory when the flag is not given (the sidecar's env).
const verifyKeysDirEnv = "STAGECOACH_VERIFY_KEYS_DIR"

// digestVerifierFactory builds the signature check for the trust in keysDir: public keys (*.pub)
// and keyless identities (verify.yaml, with an optional trusted_root.json). The check receives
// "<repository>@sha256:..." and returns why it does not verify.
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
	var allowUnverified bool
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
			if v := os.Getenv(cmp.EnvAllowUnverified); v != "" && !cmd.Flags().Changed("allow-unverified") {
				if opts.AllowUnverified, err = strconv.ParseBool(v); err != nil {
					return fmt.Errorf("%s=%q is not true or false", cmp.EnvAllowUnverified, v)
				}
			}
			if cmd.Flags().Changed("allow-unverified") {
				opts.AllowUnverified = allowUnverified
			}
			if keysDir != "" {
				if newVerifier == nil {
					return fmt.Errorf("verification keys are configured (%s) but this stagecoach binary has no signature verifier: refusing to render unverified; use a build with verification or unset --verify-keys-dir and %s", keysDir, verifyKeysDirEnv)
				}
				opts.VerifyDigest, err = newVerifier(keysDir)
				switch {
				case errors.Is(err, errNoKeys) && opts.AllowUnverified:
					// Explicitly allowed: render as if no keys were configured.
				case errors.Is(err, errNoKeys):
					return fmt.Errorf("verification keys directory %s holds no public keys (*.pub): refusing to render unverified; add the trusted cosign public keys (or the keyless identities, in %s) to the Secret mounted there, or set %s=true in the plugin's sidecar to render without verification", keysDir, cmpIdentitiesFile, cmp.EnvAllowUnverified)
				case err != nil:
					return fmt.Errorf("failed to load the verification keys in %s: %s", keysDir, oneLine(err))
				}
			}
			return cmp.Generate(cmd.Context(), opts, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&allowUnverified, "allow-unverified", false, "Render without verification where it cannot happen (no digest, no keys) even though --verify-keys-dir is set (default: $"+cmp.EnvAllowUnverified+").")
	cmd.Flags().StringVar(&keysDir, "verify-keys-dir", "", "Directory of trusted public keys (*.pub) and keyless identities ("+cmpIdentitiesFile+": {matchOIDCIdentity: [{issuer, subject}]}, checked against "+cmpTrustedRootFile+" if present, else the public Sigstore instance's); when set, the digest's signature must verify before anything is rendered (default: $"+verifyKeysDirEnv+").")
	return cmd
}

// errNoKeys: the keys directory holds no public key and no keyless identity, so nothing could verify.
var errNoKeys = errors.New("no public keys (*.pub) and no keyless identities (" + cmpIdentitiesFile + ")")

// oneLine keeps an error on one line: Argo CD shows the plugin's stderr as the app's condition.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
