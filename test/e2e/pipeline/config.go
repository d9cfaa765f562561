package pipeline

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
)

// ConfigDelivery is the delivery of a config repository, whose commits are the releases (issue
// 39): dev is a Flux GitRepository and the Kustomization applying it, taking each commit of main
// that changes app/; staging is an Argo CD Application on the plain Git source, following dev,
// and a Job run of the commit's integration tests after landing decides it (the stand-in kubelet
// ends the Job's Pod: localstack.Stack.RunPods).
type ConfigDelivery struct {
	Stack     *localstack.Stack
	Namespace string
	Service   string
	// Repo is the repository's name on Stack.Git.
	Repo string
	// Stages maps Dev and Staging to the Stages' names; Targets to the namespaces they deploy into.
	Stages, Targets map[string]string
}

// SetupConfig creates the config repository's delivery for service in namespace (created if
// missing). Its Stages are named <service>-dev and <service>-staging.
func SetupConfig(ctx context.Context, s *localstack.Stack, namespace, service string) (*ConfigDelivery, error) {
	d := &ConfigDelivery{Stack: s, Namespace: namespace, Service: service, Repo: namespace + "-" + service,
		Stages: map[string]string{Dev: service + "-dev", Staging: service + "-staging"}, Targets: map[string]string{}}
	for _, ns := range []string{namespace, namespace + "-" + service + "-" + Dev, namespace + "-" + service + "-" + Staging} {
		if err := s.Namespace(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	for _, env := range []string{Dev, Staging} {
		d.Targets[env] = namespace + "-" + service + "-" + env
	}
	url := s.Git.URL(d.Repo)
	objects := localstack.JobGrantYAML(namespace) + fmt.Sprintf(`
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: %[2]s-config, namespace: %[1]s, labels: {stagecoach.dev/stage: %[3]s}}
spec:
  interval: 10m
  url: %[5]s
  ref: {branch: main}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: %[3]s, namespace: %[1]s, labels: {stagecoach.dev/stage: %[3]s}}
spec:
  interval: 10m
  prune: true
  path: ./app
  targetNamespace: %[6]s
  sourceRef: {kind: GitRepository, name: %[2]s-config}
---
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: %[4]s, namespace: %[1]s, labels: {stagecoach.dev/stage: %[4]s}}
spec:
  project: default
  source: {repoURL: %[5]s, path: app, targetRevision: main}
  destination: {server: https://kubernetes.default.svc, namespace: %[7]s}
  syncPolicy:
    automated: {prune: true, selfHeal: true}
`, namespace, service, d.Stages[Dev], d.Stages[Staging], url, d.Targets[Dev], d.Targets[Staging])
	if err := localstack.ApplyYAML(ctx, s.Client, []byte(objects)); err != nil {
		return nil, err
	}
	grace := &metav1.Duration{Duration: time.Second}
	tests := runtime.RawExtension{Raw: fmt.Appendf(nil, `{"apiVersion":"batch/v1","kind":"Job","spec":{"backoffLimit":0,"template":{"spec":{
		"restartPolicy":"Never","containers":[{"name":"integration","image":"registry.example/%s-tests:1","args":["--commit={{.Revision}}","--stage={{.Stage}}"]}]}}}}`, service)}
	stages := []*stagecoachv1.Stage{
		{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: d.Stages[Dev]}, Spec: stagecoachv1.StageSpec{
			Service: service, Environment: Dev,
			ApplyRef: stagecoachv1.ApplierReference{Kind: "GitRepository", Name: service + "-config", Kustomization: d.Stages[Dev]},
			Source: stagecoachv1.StageSource{Git: &stagecoachv1.GitSource{URL: url, Branch: "main", Paths: []string{"app"}, Insecure: true,
				Interval: &metav1.Duration{Duration: 5 * time.Second}}},
			Promotion:    &stagecoachv1.PromotionPolicy{Auto: true},
			Verification: &stagecoachv1.VerificationPolicy{Grace: grace}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: d.Stages[Staging]}, Spec: stagecoachv1.StageSpec{
			Service: service, Environment: Staging, Author: localstack.AdminAuthor(),
			ApplyRef:  stagecoachv1.ApplierReference{Kind: "Application", Name: d.Stages[Staging]},
			Source:    stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: d.Stages[Dev]}},
			Promotion: &stagecoachv1.PromotionPolicy{Auto: true},
			Verification: &stagecoachv1.VerificationPolicy{Grace: grace,
				Checks: []stagecoachv1.Check{{Name: "integration", Run: &stagecoachv1.RunCheck{Template: tests}}}}}},
	}
	for _, st := range stages {
		if err := s.Client.Create(ctx, st); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("failed to create Stage %s/%s: %w", namespace, st.Name, err)
		}
	}
	return d, nil
}

// Commit commits version as the app's ConfigMap to main, then asks dev to fetch at once (as a
// forge's webhook would); it returns the commit's digest (sha1:<SHA>).
func (d *ConfigDelivery) Commit(ctx context.Context, message, version string) (string, error) {
	sha, err := d.Stack.Git.Commit(ctx, d.Repo, message, map[string]string{"app/configmap.yaml": fmt.Sprintf(
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {version: %q}\n", d.Service, version)})
	if err != nil {
		return "", err
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, stagecoachv1.ReconcileRequestAnnotation, time.Now().Format(time.RFC3339Nano))
	st := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Stages[Dev]}}
	if err := d.Stack.Client.Patch(ctx, st, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return "", fmt.Errorf("failed to ask Stage %s to fetch: %w", st.Name, err)
	}
	return "sha1:" + sha, nil
}

// Stage reads the Stage of env (Dev or Staging).
func (d *ConfigDelivery) Stage(ctx context.Context, env string) (*stagecoachv1.Stage, error) {
	st := &stagecoachv1.Stage{}
	if err := d.Stack.Client.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: d.Stages[env]}, st); err != nil {
		return nil, err
	}
	return st, nil
}

// Version reads the version the app's ConfigMap carries in env ("" before it exists).
func (d *ConfigDelivery) Version(ctx context.Context, env string) (string, error) {
	cm := &corev1.ConfigMap{}
	if err := d.Stack.Client.Get(ctx, client.ObjectKey{Namespace: d.Targets[env], Name: d.Service}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", err
	}
	return cm.Data["version"], nil
}
