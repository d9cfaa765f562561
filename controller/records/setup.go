package records

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
	recstore "github.com/stagecoach-dev/stagecoach/internal/records"
	recordsource "github.com/stagecoach-dev/stagecoach/internal/source/records"
)

// Config is what the controller's flags say of records.
type Config struct {
	// RegistryTimeout bounds each registry request.
	RegistryTimeout time.Duration
	// UpstreamRecordsInterval is how often a follower reads its upstream stream.
	UpstreamRecordsInterval time.Duration
	// TrustFile is read once, or TrustConfigMap is read now and every TrustRecheck (neither: no
	// upstream record is trusted, and follower Stages say so).
	TrustFile      string
	TrustConfigMap *client.ObjectKey
	TrustRecheck   time.Duration
	// Repository is where the recorder writes (--records-repository; "": no recorder), signing
	// with the key in KeySecret as Cluster ("" : from kube-system's UID).
	Repository string
	KeySecret  client.ObjectKey
	Cluster    string
}

// SetUp builds the recorder (with a repository) and the follower of upstreamRecords sources
// (always: without trust it says so on every follower Stage). It returns the runnable that keeps a
// trust ConfigMap current, nil for a file or none.
func SetUp(ctx context.Context, reader client.Reader, cfg Config) (*Recorder, *recordsource.Source, *TrustWatch, error) {
	transport := ociclient.NewTransport(cfg.RegistryTimeout)
	// Secrets: the Stage reconciler sets the author-checked reader (authz.Secrets) it shares.
	follower := &recordsource.Source{Transport: transport, Interval: cfg.UpstreamRecordsInterval,
		RepositoryOf: applyRepositoryOf(reader)}
	watch, err := setUpTrust(ctx, reader, cfg, follower)
	if err != nil {
		return nil, nil, nil, err
	}
	if cfg.Repository == "" {
		return nil, follower, watch, nil
	}
	key := cfg.KeySecret
	secret := &corev1.Secret{}
	if err := reader.Get(ctx, key, secret); err != nil {
		return nil, nil, nil, fmt.Errorf("cannot read the recorder key Secret %s (--records-key-secret): %w", key, err)
	}
	signer, err := recstore.LoadSigner(secret.Data["cosign.key"], secret.Data["cosign.password"])
	if err != nil {
		return nil, nil, nil, fmt.Errorf("Secret %s (--records-key-secret): %w", key, err)
	}
	store, err := recstore.NewStore(cfg.Repository, ociclient.Options{Transport: transport})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("invalid --records-repository: %w", err)
	}
	rec := &Recorder{Store: store, Writer: recstore.NewWriter(store, signer), Cluster: cfg.Cluster, Reader: reader}
	return rec, follower, watch, nil
}

// applyRepositoryOf reads the OCI repository a Stage applies from off its applier: an Argo CD
// Application's OCI source (with a Helm chart's name: the chart's own repository), a Flux
// OCIRepository's url; "" when it cannot tell.
func applyRepositoryOf(reader client.Reader) func(context.Context, *stagecoachv1.Stage) string {
	return func(ctx context.Context, stage *stagecoachv1.Stage) string {
		if stage.Status.Applier == nil {
			return ""
		}
		a := stage.Status.Applier
		obj := &unstructured.Unstructured{}
		obj.SetAPIVersion(a.APIVersion)
		obj.SetKind(a.Kind)
		if err := reader.Get(ctx, client.ObjectKey{Namespace: stage.Namespace, Name: a.Name}, obj); err != nil {
			return ""
		}
		for _, path := range [][]string{{"spec", "source", "repoURL"}, {"spec", "url"}} {
			if v, ok, _ := unstructured.NestedString(obj.Object, path...); ok && v != "" {
				repo := strings.TrimSuffix(strings.TrimPrefix(v, "oci://"), "/")
				if chart, _, _ := unstructured.NestedString(obj.Object, "spec", "source", "chart"); chart != "" {
					repo += "/" + chart
				}
				return repo
			}
		}
		return ""
	}
}
