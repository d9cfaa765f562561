package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
	"github.com/stagecoach-dev/stagecoach/internal/records"
	recordsource "github.com/stagecoach-dev/stagecoach/internal/source/records"
)

// setUpRecords builds the recorder (with --records-repository) and the follower of upstreamRecords
// sources (always: without --upstream-trust it says so on every follower Stage). It returns the
// runnable that keeps a trust ConfigMap current, nil for a file or none.
func setUpRecords(ctx context.Context, reader client.Reader, opts Options, stages *StageReconciler) (*trustWatch, error) {
	transport := ociclient.NewTransport(opts.RegistryTimeout)
	follower := &recordsource.Source{Secrets: reader, Transport: transport, Interval: opts.UpstreamRecordsInterval,
		RepositoryOf: stages.applyRepositoryOf}
	watch, err := setUpTrust(ctx, reader, opts, follower)
	if err != nil {
		return nil, err
	}
	stages.Follower = follower
	if opts.RecordsRepository == "" {
		return watch, nil
	}
	key, _ := parseSecretRef(opts.RecordsKeySecret)
	secret := &corev1.Secret{}
	if err := reader.Get(ctx, key, secret); err != nil {
		return nil, fmt.Errorf("cannot read the recorder key Secret %s (--records-key-secret): %w", key, err)
	}
	signer, err := records.LoadSigner(secret.Data["cosign.key"], secret.Data["cosign.password"])
	if err != nil {
		return nil, fmt.Errorf("Secret %s (--records-key-secret): %w", key, err)
	}
	store, err := records.NewStore(opts.RecordsRepository, ociclient.Options{Transport: transport})
	if err != nil {
		return nil, fmt.Errorf("invalid --records-repository: %w", err)
	}
	stages.Recorder = &Recorder{Store: store, Writer: records.NewWriter(store, signer), Cluster: opts.RecordsCluster, Reader: reader}
	return watch, nil
}

// applyRepositoryOf reads the OCI repository a Stage applies from off its applier: an Argo CD
// Application's OCI source (with a Helm chart's name: the chart's own repository), a Flux
// OCIRepository's url; "" when it cannot tell.
func (r *StageReconciler) applyRepositoryOf(ctx context.Context, stage *stagecoachv1.Stage) string {
	if stage.Status.Applier == nil {
		return ""
	}
	a := stage.Status.Applier
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(a.APIVersion)
	obj.SetKind(a.Kind)
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: stage.Namespace, Name: a.Name}, obj); err != nil {
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
