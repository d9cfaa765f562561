package controller

import (
	"fmt"
	"os"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/stagecoach-dev/stagecoach/internal/api"
)

// The API acts as the Argo CD user who asks (impersonation), so that Kubernetes RBAC and the
// admission policies decide what that user may do; see internal/api.
// +kubebuilder:rbac:groups="",resources=users;groups,verbs=impersonate

// A pipeline shows a viewer only the namespaces where RBAC lets them list Stages (and Promotions),
// and the controller writes through a Stage only what its author may write: both are asked of
// the API server as SubjectAccessReviews.
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

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
		Mapper: mgr.GetRESTMapper(), ProxyToken: strings.TrimSpace(string(token)), Log: ctrl.Log.WithName("api"), Clock: opts.Clock,
		TrustGroupsHeader: opts.APITrustGroupsHeader})
	if err != nil {
		return fmt.Errorf("failed to set up the API with the token of %s: %w", opts.APIProxyTokenFile, err)
	}
	// Every replica serves the API: it reads from the cache and acts by creating objects, which
	// needs no leadership.
	return addServer(mgr, "HTTP API", opts.APIBindAddress, handler.Handler(), api.DefaultTimeout+5*time.Second,
		opts.APITLSCertFile, opts.APITLSKeyFile)
}
