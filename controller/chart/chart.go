// Package chart resolves the tag of a Helm chart given to an engine by version where the engine
// pulls it (the chart's own OCI repository), for the Stage's verdict on its applier and for a
// Promotion's write and landing alike: both must resolve it the same way.
package chart

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/applier"
	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
	"github.com/stagecoach-dev/stagecoach/internal/source/registry"
)

// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=helmrepositories,verbs=get

// helmRepositoryGVK is the kind a HelmRelease's chart comes from.
var helmRepositoryGVK = schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "HelmRepository"}

// Resolver reads where a chart comes from and what its tags name.
type Resolver struct {
	// Live reads what carries no Stage label (a HelmRepository), live.
	Live client.Reader
	// Secrets reads registry credentials, as far as the Stage's author may.
	Secrets registry.Secrets
	// Stages reads the Stages up an upstream chain.
	Stages client.Reader
	// Registry resolves tags; nil answers every resolve with an error.
	Registry *registry.Lister
}

// RecheckInterval bounds how long a tag pushed again after its version was verified goes
// unnoticed: the registry source's interval when shorter.
func RecheckInterval(head *stagecoachv1.Stage) time.Duration {
	if head != nil {
		return min(head.GetRegistryInterval(), stagecoachv1.DefaultRegistryInterval)
	}
	return stagecoachv1.DefaultRegistryInterval
}

// Source is where the applier's engine pulls the chart of a version given by chart version,
// with a HelmRelease's HelmRepository read (live: it carries no Stage label); ok is false for
// an applier given the digest.
func (r Resolver) Source(ctx context.Context, engine applier.Applier, obj *unstructured.Unstructured) (applier.ChartSource, bool, error) {
	src, ok := applier.ChartOf(engine, obj)
	if !ok || src.HelmRepository == nil {
		return src, ok, nil
	}
	repo := &unstructured.Unstructured{}
	repo.SetGroupVersionKind(helmRepositoryGVK)
	err := r.Live.Get(ctx, *src.HelmRepository, repo)
	switch {
	case err == nil:
		return src.WithHelmRepository(repo, ""), true, nil
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err), meta.IsNoMatchError(err):
		return src.WithHelmRepository(nil, err.Error()), true, nil
	}
	return src, true, fmt.Errorf("failed to read HelmRepository %s, the chart source of %s %q: %w", src.HelmRepository, obj.GetKind(), obj.GetName(), err)
}

// JudgedRepository is the repository where the Stage's versions (tags and their digests) are
// judged: the registry source at the head of its upstream chain, or a records follower's apply
// repository; "" when none is known. what names the field that says so.
func JudgedRepository(stage, head *stagecoachv1.Stage) (repo, what string) {
	switch {
	case head != nil:
		return head.Spec.Source.Registry.Repository, fmt.Sprintf("spec.source.registry.repository of Stage '%s/%s'", head.Namespace, head.Name)
	case stage.Spec.Source.UpstreamRecords != nil && stage.Spec.Source.UpstreamRecords.ApplyRepository != "":
		return stage.Spec.Source.UpstreamRecords.ApplyRepository, "spec.source.upstreamRecords.applyRepository"
	}
	return "", ""
}

// Resolve returns the digest tag names now in the chart's repository ("" when gone).
// Credentials: the head registry source's when the chart is in that very repository, a records
// follower's own otherwise (a keychain answers only for the hosts it holds).
func (r Resolver) Resolve(ctx context.Context, stage, head *stagecoachv1.Stage, src applier.ChartSource, tag string) (string, error) {
	if r.Registry == nil {
		return "", errors.New("the controller has no registry client")
	}
	req := registry.Request{Repository: src.Repository}
	owner, ref, field := stage, (*stagecoachv1.LocalObjectReference)(nil), ""
	switch {
	case head != nil && applier.SameRepository(head.Spec.Source.Registry.Repository, src.Repository):
		owner, ref, req.Insecure = head, head.Spec.Source.Registry.SecretRef, head.Spec.Source.Registry.Insecure
		field = "spec.source.registry.secretRef of Stage " + head.Name
	case stage.Spec.Source.UpstreamRecords != nil:
		ref, field = stage.Spec.Source.UpstreamRecords.SecretRef, "spec.source.upstreamRecords.secretRef"
	}
	keychain, block, err := registry.Keychain(ctx, r.Secrets, owner, ref, field)
	switch {
	case err != nil:
		return "", err
	case block != nil:
		return "", errors.New(block.Message)
	}
	req.Keychain = keychain
	return r.Registry.Resolve(ctx, req, tag)
}

// Head is the Stage whose registry source the Stage's versions come from: itself, or the head
// of its upstream chain (up to 16 hops). Nil when none is known.
func (r Resolver) Head(ctx context.Context, stage *stagecoachv1.Stage) *stagecoachv1.Stage {
	cur := stage
	for hops := 0; hops < 16 && cur != nil; hops++ {
		if cur.Spec.Source.Registry != nil {
			return cur
		}
		up, ok := cur.UpstreamKey()
		if !ok {
			return nil
		}
		next := &stagecoachv1.Stage{}
		if err := r.Stages.Get(ctx, up, next); err != nil {
			return nil
		}
		cur = next
	}
	return nil
}

// Reason is the reason of a registry error, for a condition.
func Reason(err error) string {
	switch {
	case errors.Is(err, ociclient.ErrUnauthorized):
		return stagecoachv1.ReasonRegistryUnauthorized
	case errors.Is(err, ociclient.ErrNotFound):
		return stagecoachv1.ReasonRepositoryNotFound
	}
	return stagecoachv1.ReasonRegistryUnreachable
}
