package controller

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/stagecoach-dev/stagecoach/internal/api"
)

// The API acts as the Argo CD user who asks (impersonation), so that Kubernetes RBAC and the
// admission policies decide what that user may do; see internal/api.
// +kubebuilder:rbac:groups="",resources=users;groups,verbs=impersonate

// addAPI serves the HTTP API for the Argo CD UI extension when --api-bind-address is set.
func addAPI(mgr ctrl.Manager, opts Options) error {
	if opts.APIBindAddress == "" || opts.APIBindAddress == "0" {
		return nil
	}
	token, err := os.ReadFile(opts.APIProxyTokenFile)
	if err != nil {
		return fmt.Errorf("failed to read the API's proxy token (--api-proxy-token-file): %w", err)
	}
	handler, err := api.New(api.Options{Reader: mgr.GetClient(), Config: mgr.GetConfig(), Scheme: mgr.GetScheme(),
		Mapper: mgr.GetRESTMapper(), ProxyToken: strings.TrimSpace(string(token)), Log: ctrl.Log.WithName("api"), Clock: opts.Clock})
	if err != nil {
		return fmt.Errorf("failed to set up the API with the token of %s: %w", opts.APIProxyTokenFile, err)
	}
	server := &http.Server{Addr: opts.APIBindAddress, Handler: handler.Handler(), ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: 30 * time.Second, WriteTimeout: api.DefaultTimeout + 5*time.Second}
	if opts.APITLSCertFile != "" {
		certs := &certReloader{certFile: opts.APITLSCertFile, keyFile: opts.APITLSKeyFile}
		if _, err := certs.GetCertificate(nil); err != nil {
			return err
		}
		server.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.GetCertificate}
	}
	// Every replica serves the API: it reads from the cache and acts by creating objects, which
	// needs no leadership.
	return mgr.Add(everyReplica(func(ctx context.Context) error {
		ln, err := net.Listen("tcp", opts.APIBindAddress)
		if err != nil {
			return fmt.Errorf("failed to listen for the API on %s: %w", opts.APIBindAddress, err)
		}
		ctrl.LoggerFrom(ctx).Info("serving the HTTP API", "address", ln.Addr().String(), "tls", server.TLSConfig != nil)
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
			return fmt.Errorf("API server: %w", err)
		}
		return nil
	}))
}
