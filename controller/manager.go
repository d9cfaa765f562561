// Package controller is Stagecoach's controller: the manager, its reconcilers and their wiring.
package controller

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fluxevents "github.com/fluxcd/pkg/runtime/events"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller/freeze"
	"github.com/stagecoach-dev/stagecoach/controller/hooks"
	"github.com/stagecoach-dev/stagecoach/controller/records"
	"github.com/stagecoach-dev/stagecoach/controller/stage"
	"github.com/stagecoach-dev/stagecoach/internal/applier"
	"github.com/stagecoach-dev/stagecoach/internal/attest"
	"github.com/stagecoach-dev/stagecoach/internal/metrics"
	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
	recstore "github.com/stagecoach-dev/stagecoach/internal/records"
	"github.com/stagecoach-dev/stagecoach/internal/source/registry"
)

// FieldManager is the field manager of what Stagecoach server-side applies.
const FieldManager = applier.FieldManager

// ControllerName is the name the controller reports in events and as its field owner.
const ControllerName = "stagecoach-controller"

// NewScheme returns a scheme with the Kubernetes and Stagecoach kinds. Argo CD and Flux objects are
// read as unstructured, so they need no registration.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("failed to register Kubernetes kinds: %w", err)
	}
	if err := stagecoachv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("failed to register Stagecoach kinds: %w", err)
	}
	return scheme, nil
}

// NewManager builds a manager from validated options and registers every reconciler with it.
func NewManager(ctx context.Context, cfg *rest.Config, opts Options) (ctrl.Manager, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	// Nothing reads managedFields from the cache; stripped, 5,000 Stages and their Promotions
	// take far less memory (issue 21). The Applications a fleet watches are slimmed too.
	cacheOpts := cache.Options{DefaultTransform: stage.SlimCached}
	if len(opts.WatchNamespaces) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range opts.WatchNamespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	stage.ClusterSecretCache(&cacheOpts)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cacheOpts,
		Metrics:                metricsserver.Options{BindAddress: opts.MetricsBindAddress},
		HealthProbeBindAddress: opts.HealthProbeBindAddress,
		PprofBindAddress:       opts.PprofBindAddress,
		LeaderElection:         opts.LeaderElect,
		LeaderElectionID:       opts.LeaderElectionID,
		// The controller holds no state that a successor could not rebuild from the objects,
		// so it may give up the lease at once on shutdown.
		LeaderElectionReleaseOnCancel: true,
		NewClient:                     opts.NewClient,
		Controller: config.Controller{SkipNameValidation: &opts.SkipNameValidation,
			MaxConcurrentReconciles: opts.Concurrency, ReconciliationTimeout: opts.ReconcileTimeout},
	})
	if err != nil {
		return nil, fmt.Errorf("failed to create the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("failed to add the liveness check: %w", err)
	}
	if err := mgr.AddReadyzCheck("informers", cacheSyncedCheck(mgr.GetCache())); err != nil {
		return nil, fmt.Errorf("failed to add the readiness check: %w", err)
	}
	applierCache, err := stage.NewApplierCache(mgr, opts.WatchNamespaces)
	if err != nil {
		return nil, fmt.Errorf("failed to create the cache of appliers: %w", err)
	}
	if err := mgr.Add(stage.CacheRunnable{Cache: applierCache}); err != nil {
		return nil, fmt.Errorf("failed to add the cache of appliers: %w", err)
	}
	if err := mgr.AddReadyzCheck("applier-informers", cacheSyncedCheck(applierCache)); err != nil {
		return nil, fmt.Errorf("failed to add the readiness check: %w", err)
	}
	appliers := stage.NewApplierReader(applierCache, mgr.GetAPIReader())
	versions, err := newServerVersionReader(mgr.GetConfig(), 10*time.Minute)
	if err != nil {
		return nil, err
	}
	sigstoreRoot, err := opts.sigstoreTrustedRoot()
	if err != nil {
		return nil, err
	}
	attestor, err := loadAttestor(ctx, mgr.GetAPIReader(), opts.AttestationKeySecret)
	if err != nil {
		return nil, err
	}
	// Attestations name their cluster, as record streams do: --records-cluster, or kube-system's UID.
	cluster := opts.RecordsCluster
	if attestor != nil && cluster == "" {
		if cluster, err = clusterIdentity(ctx, mgr.GetAPIReader()); err != nil {
			return nil, err
		}
	}
	stages := &stage.Reconciler{
		SigstoreTrustedRoot:       sigstoreRoot,
		Attestor:                  attestor,
		Cluster:                   cluster,
		ServerVersion:             versions.Read,
		WatchNamespaces:           opts.WatchNamespaces,
		Identity:                  whoAmI(ctx, mgr.GetClient()),
		Registry:                  &registry.Lister{Transport: ociclient.NewTransport(opts.RegistryTimeout)},
		RegistryTransport:         ociclient.NewTransport(opts.RegistryTimeout),
		CheckPluginDir:            opts.CheckPluginDir,
		ClusterFreezeNamespace:    opts.ClusterFreezeNamespace,
		AllowInternalCheckTargets: opts.AllowInternalCheckTargets,
		Client:                    stage.NewWriteTrackingClient(mgr.GetClient(), appliers),
		APIReader:                 mgr.GetAPIReader(),
		Appliers:                  appliers,
		RESTMapper:                mgr.GetRESTMapper(),
		Events:                    mgr.GetEventRecorder(ControllerName),
		ApplierRetryInterval:      opts.ApplierRetryInterval,
		PolicyRecheckInterval:     opts.PolicyRecheckInterval,
		Clock:                     opts.Clock,
		Observer:                  &metrics.Observer{Reader: mgr.GetClient(), APIReader: appliers, Vectors: metrics.Shared()},
	}
	if opts.EventsAddr != "" {
		recorder, err := fluxevents.NewRecorder(ctrl.Log.WithName("flux-events"), opts.EventsAddr, ControllerName,
			fluxevents.WithManager(mgr), fluxevents.WithEventsAPI(fluxevents.EventsAPIEventsV1))
		if err != nil {
			return nil, fmt.Errorf("failed to create the Flux event recorder for %s: %w", opts.EventsAddr, err)
		}
		stages.FluxEvents = recorder
	}
	recorder, follower, trustWatch, err := records.SetUp(ctx, mgr.GetAPIReader(), opts.recordsConfig())
	if err != nil {
		return nil, err
	}
	stages.Recorder, stages.Follower = recorder, follower
	if trustWatch != nil {
		if err := mgr.Add(trustWatch); err != nil {
			return nil, fmt.Errorf("failed to add the upstream trust ConfigMap reader: %w", err)
		}
	}
	if err := stages.SetupWithManager(ctx, mgr); err != nil {
		return nil, err
	}
	freezes := &freeze.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		ClusterFreezeNamespace: opts.ClusterFreezeNamespace, Clock: opts.Clock}
	if err := freezes.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("failed to set up the Freeze controller: %w", err)
	}
	if err := addHooks(mgr, opts, stages); err != nil {
		return nil, err
	}
	if err := addAPI(mgr, opts); err != nil {
		return nil, err
	}
	// The Stages' state is read from the cache at each scrape, while this replica leads.
	state := &metrics.StateCollector{Reader: mgr.GetClient(), Timeout: 10 * time.Second}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return state.Start(ctx, ctrlmetrics.Registry) })); err != nil {
		return nil, fmt.Errorf("failed to add the Stage metrics: %w", err)
	}
	return mgr, nil
}

// loadAttestor loads the key that signs promotion attestations (nil when none is configured).
func loadAttestor(ctx context.Context, reader client.Reader, ref string) (*attest.Signer, error) {
	if ref == "" {
		return nil, nil
	}
	key, err := parseSecretRef(ref)
	if err != nil {
		return nil, fmt.Errorf("invalid --attestation-key-secret %q: %w", ref, err)
	}
	secret := &corev1.Secret{}
	if err := reader.Get(ctx, key, secret); err != nil {
		return nil, fmt.Errorf("cannot read the attestation key Secret %s (--attestation-key-secret): %w", key, err)
	}
	signer, err := attest.LoadSigner(secret.Data["cosign.key"], secret.Data["cosign.password"])
	if err != nil {
		return nil, fmt.Errorf("Secret %s (--attestation-key-secret): %w", key, err)
	}
	return signer, nil
}

// clusterIdentity is the first 12 hex digits of kube-system's UID, as record streams name the
// cluster.
func clusterIdentity(ctx context.Context, reader client.Reader) (string, error) {
	ns := &corev1.Namespace{}
	if err := reader.Get(ctx, client.ObjectKey{Name: "kube-system"}, ns); err != nil {
		return "", fmt.Errorf("cannot read namespace kube-system for the cluster identity of promotion attestations (or set --records-cluster): %w", err)
	}
	return recstore.ClusterIdentity(string(ns.UID))
}

// cacheSyncedCheck is ready once the informers have synced, so that no replica is sent traffic
// (or counted as up) while it still decides from an empty cache.
func cacheSyncedCheck(c cache.Cache) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return fmt.Errorf("informer caches have not synced yet")
		}
		return nil
	}
}

// addHooks serves the notification hooks when an address and at least one secret are configured.
func addHooks(mgr ctrl.Manager, opts Options, stages *stage.Reconciler) error {
	if opts.HooksBindAddress == "0" || (opts.FluxHookSecret == "" && opts.ArgoCDHookSecret == "") {
		return nil
	}
	elected := mgr.Elected()
	receiver := &hooks.Receiver{Lookup: stages.StagesForHookEvent, Wake: stages.Wake, Leading: func() bool {
		select {
		case <-elected:
			return true
		default:
			return false
		}
	}}
	// Tokens are read live (not from the cache): the controller may read only these Secrets.
	if opts.FluxHookSecret != "" {
		key, _ := parseSecretRef(opts.FluxHookSecret)
		receiver.FluxToken = hooks.CachedSecretKey(mgr.GetAPIReader(), key, "token", 30*time.Second)
	}
	if opts.ArgoCDHookSecret != "" {
		key, _ := parseSecretRef(opts.ArgoCDHookSecret)
		receiver.ArgoCDToken = hooks.CachedSecretKey(mgr.GetAPIReader(), key, "token", 30*time.Second)
	}
	// Every replica serves the hooks (not only the leader), so that the engines always reach a
	// ready endpoint; a replica that is not leading answers 503 (see hooks.Receiver.Leading).
	return addServer(mgr, "notification hooks", opts.HooksBindAddress, receiver.Handler(), 30*time.Second,
		opts.HooksTLSCertFile, opts.HooksTLSKeyFile, receiver.ConfigureServer)
}

// addServer serves handler on addr from every replica (with TLS when a certificate is given,
// reloaded as it changes) until the manager stops; configure adjusts the server (timeouts).
func addServer(mgr ctrl.Manager, what, addr string, handler http.Handler, writeTimeout time.Duration, certFile, keyFile string,
	configure ...func(*http.Server)) error {
	server := &http.Server{Addr: addr, Handler: handler, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: 30 * time.Second, WriteTimeout: writeTimeout}
	for _, c := range configure {
		c(server)
	}
	if certFile != "" {
		certs := &certReloader{certFile: certFile, keyFile: keyFile}
		if _, err := certs.GetCertificate(nil); err != nil {
			return err
		}
		server.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.GetCertificate}
	}
	return mgr.Add(everyReplica(func(ctx context.Context) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("failed to listen for the %s on %s: %w", what, addr, err)
		}
		ctrl.LoggerFrom(ctx).Info("serving the "+what, "address", ln.Addr().String(), "tls", server.TLSConfig != nil)
		if server.TLSConfig != nil {
			ln = tls.NewListener(ln, server.TLSConfig)
		}
		go func() {
			<-ctx.Done()
			shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = server.Shutdown(shutdown)
		}()
		if err := server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("%s server: %w", what, err)
		}
		return nil
	}))
}

// everyReplica is a runnable that runs whether or not this replica leads.
type everyReplica func(ctx context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }
func (everyReplica) NeedLeaderElection() bool          { return false }

// whoAmI asks the API server which user the controller is, to name it as the requester of the
// Promotions automation creates (the promotion guard checks that name). It returns "" when the
// API server cannot say; the guard then refuses those Promotions with a message that says why.
func whoAmI(ctx context.Context, c client.Client) string {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "failed to learn the controller's user name (SelfSubjectReview); automatic Promotions will not name their requester")
		return ""
	}
	return review.Status.UserInfo.Username
}
