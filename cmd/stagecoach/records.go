package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/spf13/cobra"

	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
	"github.com/stagecoach-dev/stagecoach/internal/records"
	"github.com/stagecoach-dev/stagecoach/internal/records/trust"
)

func newRecordsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "records",
		Short: "Read and audit the signed record streams Stages write to an OCI registry",
	}
	cmd.AddCommand(newRecordsVerifyCommand())
	return cmd
}

type recordsVerifyOptions struct {
	trustFile    string
	output       string
	dockerConfig string
	insecure     bool
}

func newRecordsVerifyCommand() *cobra.Command {
	var opts recordsVerifyOptions
	cmd := &cobra.Command{
		Use:   "verify REPOSITORY STREAM",
		Short: "Audit a whole record stream: every signature against the trust config, and the hash chain",
		Long: "Reads every record of STREAM (a Stage's status.stream.id) from REPOSITORY, checks each signature\n" +
			"against the keys of --trust bound to the stream (or, for a record signed keyless, its keyless\n" +
			"identities: matchOIDCIdentity and trustedRoot) and each record's link to the one before, prints\n" +
			"the records and every break, and exits non-zero if there is any break.",
		Example: "  stagecoach records verify registry.example/delivery/streams 8d1e4f2a9c0b/staging/payments --trust upstream-trust.yaml",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRecordsVerify(cmd, args[0], args[1], opts)
		},
	}
	cmd.Flags().StringVar(&opts.trustFile, "trust", "", "Trust config file (the controller's --upstream-trust): named public keys, or keyless identities (matchOIDCIdentity), bound to streams.")
	cmd.Flags().StringVarP(&opts.output, "output", "o", "text", "Output format: text or json.")
	cmd.Flags().StringVar(&opts.dockerConfig, "docker-config", "", "Docker config JSON with registry credentials; anonymous when empty.")
	cmd.Flags().BoolVar(&opts.insecure, "insecure", false, "Allow plain HTTP to a registry that is not on loopback.")
	_ = cmd.MarkFlagRequired("trust")
	return cmd
}

func runRecordsVerify(cmd *cobra.Command, repository, stream string, opts recordsVerifyOptions) error {
	if opts.output != "text" && opts.output != "json" {
		return fmt.Errorf("unknown output format %q: use text or json", opts.output)
	}
	tc, err := loadTrust(opts.trustFile)
	if err != nil {
		return err
	}
	kc, err := loadKeychain(opts.dockerConfig)
	if err != nil {
		return err
	}
	store, err := records.NewStore(repository, ociclient.Options{Keychain: kc, Insecure: opts.insecure})
	if err != nil {
		return err
	}
	audit, err := records.AuditStream(cmd.Context(), store, tc, stream)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if opts.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(audit); err != nil {
			return err
		}
	} else if err := printAudit(out, audit); err != nil {
		return err
	}
	if n := len(audit.Breaks); n > 0 {
		return fmt.Errorf("stream %q in %s has %d break(s) in its signatures or chain; the first: %s",
			stream, repository, n, audit.Breaks[0].Message)
	}
	return nil
}

// loadTrust reads a --trust file (the controller's --upstream-trust format).
func loadTrust(path string) (*trust.Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read --trust file: %w", err)
	}
	tc, err := trust.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("--trust %s: %w", path, err)
	}
	return tc, nil
}

// loadKeychain reads --docker-config; nil (anonymous) when path is empty.
func loadKeychain(path string) (authn.Keychain, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read --docker-config file: %w", err)
	}
	kc, err := ociclient.KeychainFromDockerConfig(b)
	if err != nil {
		return nil, fmt.Errorf("--docker-config %s: %w", path, err)
	}
	return kc, nil
}

func printAudit(out io.Writer, a *records.Audit) error {
	fmt.Fprintf(out, "Stream %s in %s\n\n", a.Stream, a.Repository)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tACTION\tVERDICT\tVERSION\tDIGEST\tACTOR\tRECORDED\tKEY\tSTATUS")
	for _, e := range a.Entries {
		action, verdict, version, digest, actor, recorded := "?", "", "", "", "", ""
		if r := e.Record; r != nil {
			action, verdict, actor = string(r.Action), string(r.Verdict), r.Actor
			if r.BreakGlass != nil {
				action += " (break-glass: " + r.BreakGlass.Reason + ")"
			}
			if r.Version != nil {
				version, digest = r.Version.Tag, shortDigest(r.Version.Digest)
			}
			recorded = r.Times.Recorded.UTC().Format("2006-01-02T15:04:05Z")
		}
		status := "ok"
		if !e.OK {
			status = "BROKEN"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Seq, action, dash(verdict), dash(version), dash(digest), dash(actor), dash(recorded), dash(e.Key), status)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(a.Breaks) == 0 {
		_, err := fmt.Fprintf(out, "\n%d records, every signature trusted, chain unbroken.\n", len(a.Entries))
		return err
	}
	fmt.Fprintf(out, "\n%d break(s):\n", len(a.Breaks))
	for _, b := range a.Breaks {
		fmt.Fprintf(out, "  seq %d  %s  %s\n", b.Seq, b.Kind, b.Message)
	}
	return nil
}

func shortDigest(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
