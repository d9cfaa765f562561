package controller

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stagecoach-dev/stagecoach/controller/records"
	"github.com/stagecoach-dev/stagecoach/internal/verify"
)

// Options configure the controller; BindFlags declares them as flags and Validate checks them
// before anything starts, so that a bad value fails at once with a clear error.
type Options struct {
	LogLevel               string
	LogEncoding            string
	MetricsBindAddress     string
	HealthProbeBindAddress string
	// PprofBindAddress serves Go's /debug/pprof profiles (host:port); empty or 0 (the default)
	// disables it. For measuring the controller at scale; keep it on loopback.
	PprofBindAddress string
	LeaderElect      bool
	LeaderElectionID string
	WatchNamespaces  []string
	EventsAddr       string
	HooksBindAddress string
	FluxHookSecret   string
	ArgoCDHookSecret string
	// HooksTLSCertFile and HooksTLSKeyFile (both or neither) make the hooks serve TLS; mount
	// a kubernetes.io/tls Secret and name its tls.crt and tls.key. Re-read when they change.
	HooksTLSCertFile string
	HooksTLSKeyFile  string
	// APIBindAddress serves the HTTP API for the Argo CD UI extension; empty (the default) or 0
	// disables it. APIProxyTokenFile holds the secret Argo CD's proxy extension sends.
	APIBindAddress    string
	APIProxyTokenFile string
	// APITLSCertFile and APITLSKeyFile (both or neither) make the API serve TLS.
	APITLSCertFile string
	APITLSKeyFile  string
	// APITrustGroupsHeader makes the API act with the groups in Argo CD's Argocd-User-Groups
	// header (internal/api Options.TrustGroupsHeader says when that is safe).
	APITrustGroupsHeader bool
	// ApplierRetryInterval is how soon a Stage whose applier cannot be read looks again
	// (the applier's CRD may be installed later; no watch can tell us).
	ApplierRetryInterval time.Duration
	// PolicyRecheckInterval is how long the answer to "are the admission policies installed"
	// (condition Guarded) is kept; a minute when zero (tests shorten it).
	PolicyRecheckInterval time.Duration
	// CheckPluginDir holds the check plugin binaries Stages name (spec...checks[].plugin.name).
	CheckPluginDir string
	// ClusterFreezeNamespace is the namespace whose Freezes may select other namespaces.
	ClusterFreezeNamespace string
	// AllowInternalCheckTargets lets HTTP checks call private, shared, loopback, link-local and
	// other special-purpose addresses and cluster-internal names (*.svc, *.cluster.local, names
	// without a domain).
	AllowInternalCheckTargets bool
	// Concurrency is how many Stages reconcile at once (one Stage is never reconciled twice at once).
	Concurrency int
	// ReconcileTimeout bounds one reconcile: nothing one Stage waits on may hold a worker for good.
	ReconcileTimeout time.Duration
	// RegistryTimeout bounds one registry request (listing tags, resolving, reading signatures).
	RegistryTimeout time.Duration
	// SigstoreTrustedRoot is a file holding the public Sigstore instance's trusted_root.json, in
	// place of the one shipped with Stagecoach: keyless signatures of Stages without
	// verify.trustedRoot are checked against it. It refreshes the root (Sigstore adds keys: a new
	// Rekor shard, CT log or timestamp authority) without a new Stagecoach; read at start.
	SigstoreTrustedRoot string

	// RecordsRepository is the OCI repository the recorder writes the Stages' record streams to;
	// empty turns records off. RecordsKeySecret (namespace/name) holds the recorder key
	// (cosign.key and cosign.password, as `cosign generate-key-pair` writes them).
	RecordsRepository string
	RecordsKeySecret  string
	// AttestationKeySecret (namespace/name) holds the key that signs promotion attestations
	// (cosign.key and cosign.password); empty: Stages with spec.attest attach nothing and say so.
	AttestationKeySecret string
	// RecordsCluster is the cluster part of this cluster's stream ids; the first 12 hex digits
	// of kube-system's UID when empty.
	RecordsCluster string
	// UpstreamTrust is a file, or configmap:NAMESPACE/NAME (key upstream-trust.yaml, read again
	// every UpstreamTrustRecheck), of the upstream recorders' public keys bound to their streams;
	// without it Stages with an upstreamRecords source are not Ready (UpstreamUntrusted).
	UpstreamTrust string
	// UpstreamTrustRecheck is how often a trust ConfigMap is read again.
	UpstreamTrustRecheck time.Duration
	// UpstreamRecordsInterval is how often automation reads an upstream stream at most.
	UpstreamRecordsInterval time.Duration

	// Not flags: hooks for tests that run several managers in one process, or count what the
	// controller writes.
	NewClient          client.NewClientFunc
	SkipNameValidation bool
	Clock              clock.PassiveClock
}

// DefaultOptions returns the options a controller starts with when no flag is given.
func DefaultOptions() Options {
	return Options{
		LogLevel:                "info",
		LogEncoding:             "json",
		MetricsBindAddress:      ":8080",
		HealthProbeBindAddress:  ":8081",
		HooksBindAddress:        ":8082",
		LeaderElectionID:        "stagecoach-controller.stagecoach.dev",
		ApplierRetryInterval:    30 * time.Second,
		CheckPluginDir:          "/var/run/stagecoach/plugins",
		ClusterFreezeNamespace:  "stagecoach-system",
		Concurrency:             defaultConcurrency(runtime.GOMAXPROCS(0)),
		ReconcileTimeout:        2 * time.Minute,
		RegistryTimeout:         30 * time.Second,
		UpstreamRecordsInterval: 30 * time.Second,
		UpstreamTrustRecheck:    DefaultUpstreamTrustRecheck,
	}
}

// defaultConcurrency sizes the Stage workers for the cores the controller has (2 and up). A
// reconcile mostly waits on the API server (13–18 ms, of which a few are CPU), so several run per
// core: with 4 workers, 100 Promotions landing at once queued for seconds. Each Stage is in the
// queue at most once and is never reconciled by two workers at once (controller-runtime's queue
// guarantees both), so more workers never act twice on one Stage, and a namespace with many busy
// Stages delays another's by at most its number of Stages, never starves it.
func defaultConcurrency(cores int) int { return max(16, 8*cores) }

// BindFlags declares every option as a flag.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "Log verbosity: info or debug.")
	fs.StringVar(&o.LogEncoding, "log-encoding", o.LogEncoding, "Log format: json or console.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress,
		"Address the Prometheus metrics endpoint listens on (host:port); 0 disables it.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress,
		"Address the /healthz and /readyz probes listen on (host:port); 0 disables them.")
	fs.StringVar(&o.PprofBindAddress, "pprof-bind-address", o.PprofBindAddress,
		"Address Go's /debug/pprof profiles listen on (host:port, keep it on loopback); empty or 0 disables them (the default).")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect,
		"Elect a leader so that only one of several replicas acts (use with more than one replica).")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "Name of the leader election Lease.")
	fs.IntVar(&o.Concurrency, "concurrency", o.Concurrency,
		"How many Stages reconcile at once (default 8 per core, at least 16); one Stage is never reconciled by two workers at once.")
	fs.DurationVar(&o.ReconcileTimeout, "reconcile-timeout", o.ReconcileTimeout,
		"Longest one reconcile may take; a Stage whose registry or checks hang is looked at again later instead of holding a worker.")
	fs.DurationVar(&o.RegistryTimeout, "registry-timeout", o.RegistryTimeout,
		"Longest one registry request may take, from dialing to the end of its body.")
	fs.StringVar(&o.ClusterFreezeNamespace, "cluster-freeze-namespace", o.ClusterFreezeNamespace,
		"The only namespace whose Freezes may hold Stages of other namespaces (spec.namespaceSelector); the controller's own by default.")
	fs.StringSliceVar(&o.WatchNamespaces, "watch-namespaces", o.WatchNamespaces,
		"Comma-separated namespaces whose Stages (and appliers) the controller watches; empty watches all.")
	fs.StringVar(&o.EventsAddr, "events-addr", o.EventsAddr,
		"URL of Flux's notification-controller event receiver (for example http://notification-controller.flux-system/); empty sends no Flux events.")
	fs.StringVar(&o.HooksBindAddress, "hooks-bind-address", o.HooksBindAddress,
		"Address the notification hooks (/hooks/flux, /hooks/argocd) listen on (host:port); 0 disables them.")
	fs.StringVar(&o.FluxHookSecret, "flux-hook-secret", o.FluxHookSecret,
		"Secret (namespace/name) whose key 'token' is the HMAC key of the Flux generic-hmac Provider; empty disables /hooks/flux.")
	fs.StringVar(&o.ArgoCDHookSecret, "argocd-hook-secret", o.ArgoCDHookSecret,
		"Secret (namespace/name) whose key 'token' is the bearer token of the Argo CD notifications webhook; empty disables /hooks/argocd.")
	fs.StringVar(&o.HooksTLSCertFile, "hooks-tls-cert-file", o.HooksTLSCertFile,
		"PEM certificate the hooks serve TLS with (for example tls.crt of a mounted kubernetes.io/tls Secret); needs --hooks-tls-key-file; empty serves plain HTTP.")
	fs.StringVar(&o.HooksTLSKeyFile, "hooks-tls-key-file", o.HooksTLSKeyFile,
		"PEM private key of --hooks-tls-cert-file.")
	fs.StringVar(&o.APIBindAddress, "api-bind-address", o.APIBindAddress,
		"Address the HTTP API for the Argo CD UI extension (/api/v1) listens on (host:port); empty or 0 disables it (the default).")
	fs.StringVar(&o.APIProxyTokenFile, "api-proxy-token-file", o.APIProxyTokenFile,
		"File holding the token Argo CD's proxy extension sends as 'Authorization: Bearer <token>' (argocd-secret key stagecoach.proxy.token); required with --api-bind-address.")
	fs.StringVar(&o.APITLSCertFile, "api-tls-cert-file", o.APITLSCertFile,
		"PEM certificate the API serves TLS with; needs --api-tls-key-file; empty serves plain HTTP.")
	fs.StringVar(&o.APITLSKeyFile, "api-tls-key-file", o.APITLSKeyFile, "PEM private key of --api-tls-cert-file.")
	fs.BoolVar(&o.APITrustGroupsHeader, "api-trust-argocd-groups", o.APITrustGroupsHeader,
		"Act with the groups Argo CD's proxy forwards (Argocd-User-Groups). Argo CD sets that header only for users who have groups and forwards a caller's own otherwise: "+
			"set this only when Argo CD's RBAC lets no session without groups invoke the extension (no local accounts, no anonymous access). Off: the API acts as the user alone.")
	fs.DurationVar(&o.ApplierRetryInterval, "applier-retry-interval", o.ApplierRetryInterval,
		"How soon a Stage whose applier cannot be read (missing, forbidden, CRD not installed) checks again.")
	fs.StringVar(&o.CheckPluginDir, "check-plugin-dir", o.CheckPluginDir,
		"Directory of the check plugin binaries that Stages name; each runs only if its SHA-256 matches the Stage's.")
	fs.BoolVar(&o.AllowInternalCheckTargets, "allow-internal-check-targets", o.AllowInternalCheckTargets,
		"Let HTTP checks call private (RFC 1918, fc00::/7), shared (100.64.0.0/10), loopback, link-local, multicast and other special-purpose addresses, also embedded in IPv4-mapped, NAT64, 6to4 or Teredo addresses, and cluster-internal names (*.svc, *.cluster.local, names without a domain); refused by default, so that a Stage cannot probe what only the controller reaches.")
	fs.StringVar(&o.RecordsRepository, "records-repository", o.RecordsRepository,
		"OCI repository the signed record of every Stage step is pushed to (for example registry.example/delivery/streams); empty turns records off.")
	fs.StringVar(&o.AttestationKeySecret, "attestation-key-secret", o.AttestationKeySecret,
		"Secret (namespace/name) with the key that signs promotion attestations (spec.attest): cosign.key and cosign.password from `cosign generate-key-pair`; empty: no Stage attests.")
	fs.StringVar(&o.RecordsKeySecret, "records-key-secret", o.RecordsKeySecret,
		"Secret (namespace/name) with the recorder key: cosign.key and cosign.password from `cosign generate-key-pair`; required with --records-repository.")
	fs.StringVar(&o.RecordsCluster, "records-cluster", o.RecordsCluster,
		"Cluster part of this cluster's record stream ids (a lowercase DNS label); the first 12 hex digits of kube-system's UID when empty.")
	fs.StringVar(&o.SigstoreTrustedRoot, "sigstore-trusted-root", o.SigstoreTrustedRoot,
		"File with the public Sigstore instance's trusted_root.json (as its TUF repository publishes it), in place of the one shipped with Stagecoach, for Stages trusting keyless identities without verify.trustedRoot; read at start.")
	fs.StringVar(&o.UpstreamTrust, "upstream-trust", o.UpstreamTrust,
		"File, or configmap:NAMESPACE/NAME (key "+TrustConfigMapKey+", read again as it changes), of the upstream recorders' public keys, each bound to the streams it signs and the repositories they are read from ({keys: [{name, publicKey, repositories, streams}]}); without it Stages following upstreamRecords are not Ready.")
	fs.DurationVar(&o.UpstreamTrustRecheck, "upstream-trust-recheck", o.UpstreamTrustRecheck,
		"How often a --upstream-trust ConfigMap is read again.")
	fs.DurationVar(&o.UpstreamRecordsInterval, "upstream-records-interval", o.UpstreamRecordsInterval,
		"How often automation reads an upstream record stream at most; a promote about to start always reads it afresh.")
}

// Validate reports the first bad option, naming the flag and what it accepts.
func (o *Options) Validate() error {
	switch o.LogLevel {
	case "info", "debug":
	default:
		return fmt.Errorf("invalid --log-level %q: must be info or debug", o.LogLevel)
	}
	switch o.LogEncoding {
	case "json", "console":
	default:
		return fmt.Errorf("invalid --log-encoding %q: must be json or console", o.LogEncoding)
	}
	if o.Concurrency < 1 {
		return fmt.Errorf("invalid --concurrency %d: must be at least 1", o.Concurrency)
	}
	if o.ReconcileTimeout < 0 || o.RegistryTimeout < 0 {
		return fmt.Errorf("invalid --reconcile-timeout %s or --registry-timeout %s: must not be negative", o.ReconcileTimeout, o.RegistryTimeout)
	}
	if err := validateBindAddress(o.MetricsBindAddress); err != nil {
		return fmt.Errorf("invalid --metrics-bind-address %q: %w", o.MetricsBindAddress, err)
	}
	if err := validateBindAddress(o.HealthProbeBindAddress); err != nil {
		return fmt.Errorf("invalid --health-probe-bind-address %q: %w", o.HealthProbeBindAddress, err)
	}
	if err := validateBindAddress(o.PprofBindAddress); o.PprofBindAddress != "" && err != nil {
		return fmt.Errorf("invalid --pprof-bind-address %q: %w", o.PprofBindAddress, err)
	}
	if err := validateBindAddress(o.HooksBindAddress); err != nil {
		return fmt.Errorf("invalid --hooks-bind-address %q: %w", o.HooksBindAddress, err)
	}
	for flag, ref := range map[string]string{"--flux-hook-secret": o.FluxHookSecret, "--argocd-hook-secret": o.ArgoCDHookSecret} {
		if _, err := parseSecretRef(ref); ref != "" && err != nil {
			return fmt.Errorf("invalid %s %q: %w", flag, ref, err)
		}
	}
	if (o.HooksTLSCertFile == "") != (o.HooksTLSKeyFile == "") {
		return fmt.Errorf("invalid --hooks-tls-cert-file %q and --hooks-tls-key-file %q: set both or neither", o.HooksTLSCertFile, o.HooksTLSKeyFile)
	}
	if o.APIBindAddress != "" {
		if err := validateBindAddress(o.APIBindAddress); err != nil {
			return fmt.Errorf("invalid --api-bind-address %q: %w", o.APIBindAddress, err)
		}
		if o.APIBindAddress != "0" && o.APIProxyTokenFile == "" {
			return fmt.Errorf("--api-bind-address %q needs --api-proxy-token-file: without the proxy's token anyone could claim to be any Argo CD user", o.APIBindAddress)
		}
	}
	if (o.APITLSCertFile == "") != (o.APITLSKeyFile == "") {
		return fmt.Errorf("invalid --api-tls-cert-file %q and --api-tls-key-file %q: set both or neither", o.APITLSCertFile, o.APITLSKeyFile)
	}
	for _, ns := range o.WatchNamespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("invalid --watch-namespaces entry %q: %s", ns, strings.Join(errs, "; "))
		}
	}
	if o.EventsAddr != "" {
		u, err := url.Parse(o.EventsAddr)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("invalid --events-addr %q: must be an http(s) URL such as http://notification-controller.flux-system/", o.EventsAddr)
		}
	}
	if o.LeaderElect && o.LeaderElectionID == "" {
		return fmt.Errorf("invalid --leader-election-id: must not be empty with --leader-elect")
	}
	if o.RecordsRepository != "" {
		if _, err := parseSecretRef(o.RecordsKeySecret); err != nil {
			return fmt.Errorf("invalid --records-key-secret %q: %w; --records-repository needs the recorder key", o.RecordsKeySecret, err)
		}
	}
	if o.AttestationKeySecret != "" {
		if _, err := parseSecretRef(o.AttestationKeySecret); err != nil {
			return fmt.Errorf("invalid --attestation-key-secret %q: %w", o.AttestationKeySecret, err)
		}
	}
	if o.RecordsCluster != "" && len(validation.IsDNS1123Label(o.RecordsCluster)) > 0 {
		return fmt.Errorf("invalid --records-cluster %q: must be a lowercase DNS label", o.RecordsCluster)
	}
	if o.SigstoreTrustedRoot != "" {
		if _, err := o.sigstoreTrustedRoot(); err != nil {
			return err
		}
	}
	if _, _, err := trustConfigMap(o.UpstreamTrust); err != nil {
		return fmt.Errorf("invalid --upstream-trust %q: %w", o.UpstreamTrust, err)
	}
	if o.UpstreamTrustRecheck <= 0 {
		return fmt.Errorf("invalid --upstream-trust-recheck %s: must be positive", o.UpstreamTrustRecheck)
	}
	if o.UpstreamRecordsInterval <= 0 {
		return fmt.Errorf("invalid --upstream-records-interval %s: must be positive", o.UpstreamRecordsInterval)
	}
	if o.ApplierRetryInterval <= 0 {
		return fmt.Errorf("invalid --applier-retry-interval %s: must be positive", o.ApplierRetryInterval)
	}
	return nil
}

// validateBindAddress accepts "0" (disabled), ":port" and "host:port" with a numeric port.
func validateBindAddress(addr string) error {
	if addr == "0" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("must be host:port, :port or 0 to disable")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q must be a number from 0 to 65535", port)
	}
	return nil
}

// parseSecretRef reads "namespace/name".
func parseSecretRef(ref string) (client.ObjectKey, error) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return client.ObjectKey{}, fmt.Errorf("must be namespace/name of a Secret")
	}
	return client.ObjectKey{Namespace: ns, Name: name}, nil
}

// sigstoreTrustedRoot reads and checks --sigstore-trusted-root: nil when it is not set (the
// shipped root then counts).
func (o *Options) sigstoreTrustedRoot() ([]byte, error) {
	if o.SigstoreTrustedRoot == "" {
		return nil, nil
	}
	data, err := os.ReadFile(o.SigstoreTrustedRoot)
	if err != nil {
		return nil, fmt.Errorf("invalid --sigstore-trusted-root: %w", err)
	}
	if len(data) > verify.MaxTrustedRootBytes {
		return nil, fmt.Errorf("invalid --sigstore-trusted-root %q: %d bytes, more than a trusted_root.json may hold (%d)", o.SigstoreTrustedRoot, len(data), verify.MaxTrustedRootBytes)
	}
	if _, err := verify.ParseTrustedRoot(data); err != nil {
		return nil, fmt.Errorf("invalid --sigstore-trusted-root %q: %w", o.SigstoreTrustedRoot, err)
	}
	return data, nil
}

const (
	// TrustConfigMapPrefix marks --upstream-trust as a ConfigMap: configmap:NAMESPACE/NAME.
	TrustConfigMapPrefix = "configmap:"
	// TrustConfigMapKey is the key of that ConfigMap holding the trust config.
	TrustConfigMapKey = records.TrustConfigMapKey
	// DefaultUpstreamTrustRecheck is how often a trust ConfigMap is read again.
	DefaultUpstreamTrustRecheck = records.DefaultUpstreamTrustRecheck
)

// trustConfigMap returns the ConfigMap --upstream-trust names; ok is false for a file.
func trustConfigMap(flag string) (key client.ObjectKey, ok bool, err error) {
	ref, ok := strings.CutPrefix(flag, TrustConfigMapPrefix)
	if !ok {
		return client.ObjectKey{}, false, nil
	}
	key, err = parseSecretRef(ref)
	if err != nil {
		return client.ObjectKey{}, true, fmt.Errorf("must be configmap:NAMESPACE/NAME of a ConfigMap with key %s", TrustConfigMapKey)
	}
	return key, true, nil
}

// recordsConfig is what the validated options say of records.
func (o *Options) recordsConfig() records.Config {
	cfg := records.Config{RegistryTimeout: o.RegistryTimeout, UpstreamRecordsInterval: o.UpstreamRecordsInterval,
		TrustRecheck: o.UpstreamTrustRecheck, Repository: o.RecordsRepository, Cluster: o.RecordsCluster}
	if key, isConfigMap, _ := trustConfigMap(o.UpstreamTrust); isConfigMap {
		cfg.TrustConfigMap = &key
	} else {
		cfg.TrustFile = o.UpstreamTrust
	}
	if o.RecordsRepository != "" {
		cfg.KeySecret, _ = parseSecretRef(o.RecordsKeySecret)
	}
	return cfg
}
