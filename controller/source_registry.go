package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
	"github.com/stagecoach-dev/stagecoach/internal/semver"
	"github.com/stagecoach-dev/stagecoach/internal/source/registry"
)

// defaultRegistryInterval is how often a registry is listed when spec.source.registry.interval
// is not set.
const defaultRegistryInterval = time.Minute

// Reasons of the source gate for registries.
const (
	ReasonRegistryUnreachable  = "RegistryUnreachable"
	ReasonRegistryUnauthorized = "RegistryUnauthorized"
	ReasonRegistryNotFound     = "RepositoryNotFound"
	ReasonRegistryCredentials  = "CredentialsUnreadable"
	ReasonNoEligibleTag        = "NoEligibleTag"
	ReasonSourceInvalid        = "SourceInvalid"
)

// registryListings remembers each Stage's last listing, so that a reconcile caused by anything
// else does not list the registry again before the interval (or a stagecoach.dev/requested-at)
// asks for it. It is lost on restart, which only means one listing more.
type registryListings struct {
	mu    sync.Mutex
	byKey map[types.NamespacedName]registryListing
}

type registryListing struct {
	at          time.Time
	generation  int64
	requestedAt string
	result      registry.Result
	block       *stagecoachv1.GateBlock
}

func (l *registryListings) get(key types.NamespacedName) (registryListing, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.byKey[key]
	return v, ok
}

func (l *registryListings) put(key types.NamespacedName, v registryListing) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byKey == nil {
		l.byKey = map[types.NamespacedName]registryListing{}
	}
	l.byKey[key] = v
}

// registryCandidate offers the newest eligible tag of the Stage's registry source. It lists the
// registry when the interval has passed, the spec changed, or a person asked with
// stagecoach.dev/requested-at; recheck says when to look again.
func (r *StageReconciler) registryCandidate(ctx context.Context, stage *stagecoachv1.Stage, now time.Time) (c *plan.Candidate, block *stagecoachv1.GateBlock, recheck time.Duration, err error) {
	src := stage.Spec.Source.Registry
	interval := defaultRegistryInterval
	if src.Interval != nil && src.Interval.Duration > 0 {
		interval = src.Interval.Duration
	}
	key := client.ObjectKeyFromObject(stage)
	requestedAt := stage.Annotations[stagecoachv1.ReconcileRequestAnnotation]
	listing, ok := r.listings.get(key)
	if !ok || listing.generation != stage.Generation || listing.requestedAt != requestedAt || !now.Before(listing.at.Add(interval)) {
		listing = registryListing{at: now, generation: stage.Generation, requestedAt: requestedAt}
		listing.result, listing.block, err = r.listRegistry(ctx, stage)
		if err != nil {
			return nil, nil, 0, err
		}
		r.listings.put(key, listing)
	}
	recheck = listing.at.Add(interval).Sub(now)
	if listing.block != nil {
		return nil, listing.block, recheck, nil
	}
	if len(listing.result.Candidates) == 0 {
		return nil, &stagecoachv1.GateBlock{Gate: plan.GateSource, Reason: ReasonNoEligibleTag,
			Message: fmt.Sprintf("no tag of %s %s (%d tags looked at)", src.Repository, describeSelection(src), listing.result.Skipped)}, recheck, nil
	}
	newest := listing.result.Candidates[0]
	if !newerThanCurrent(stage.Status.Current, newest) {
		return nil, nil, recheck, nil
	}
	return &plan.Candidate{Digest: newest.Digest, Tag: newest.Tag}, nil, recheck, nil
}

// newerThanCurrent keeps automation from going backwards when a newer tag is deleted (or moved
// back): the candidate must not be what runs, nor an older semantic version than it.
func newerThanCurrent(current *stagecoachv1.CurrentVersion, c registry.Candidate) bool {
	if current == nil || current.Digest == "" {
		return true
	}
	if current.Digest == c.Digest {
		return false
	}
	if c.Version == nil {
		return true
	}
	running, err := semver.Parse(current.Version)
	return err != nil || c.Version.Compare(running) > 0
}

func describeSelection(src *stagecoachv1.RegistrySource) string {
	switch {
	case src.Semver != "":
		return fmt.Sprintf("meets semver %q", src.Semver)
	case src.Pattern != "":
		return fmt.Sprintf("matches pattern %q", src.Pattern)
	}
	return "exists"
}

// listRegistry lists the repository with the Stage's credentials. What a person must fix (or
// what fixes itself, like a registry that is down) is a block on the candidate, not an error.
func (r *StageReconciler) listRegistry(ctx context.Context, stage *stagecoachv1.Stage) (registry.Result, *stagecoachv1.GateBlock, error) {
	src := stage.Spec.Source.Registry
	keychain, block, err := r.registryKeychain(ctx, stage, src.SecretRef)
	if err != nil || block != nil {
		return registry.Result{}, block, err
	}
	res, err := r.Registry.List(ctx, registry.Request{Repository: src.Repository, Semver: src.Semver, Pattern: src.Pattern,
		Insecure: src.Insecure, Keychain: keychain})
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return registry.Result{}, nil, err
		}
		return registry.Result{}, &stagecoachv1.GateBlock{Gate: plan.GateSource, Reason: registryReason(err), Message: err.Error()}, nil
	}
	return res, nil, nil
}

func registryReason(err error) string {
	switch {
	case errors.Is(err, ociclient.ErrUnauthorized):
		return ReasonRegistryUnauthorized
	case errors.Is(err, ociclient.ErrNotFound):
		return ReasonRegistryNotFound
	case errors.Is(err, ociclient.ErrUnreachable):
		return ReasonRegistryUnreachable
	}
	return ReasonSourceInvalid
}

// registryKeychain reads a docker-config Secret of the Stage's namespace (read live: the
// controller may get Secrets but does not cache them).
func (r *StageReconciler) registryKeychain(ctx context.Context, stage *stagecoachv1.Stage, ref *stagecoachv1.LocalObjectReference) (authn.Keychain, *stagecoachv1.GateBlock, error) {
	if ref == nil {
		return nil, nil, nil
	}
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: stage.Namespace, Name: ref.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return nil, &stagecoachv1.GateBlock{Gate: plan.GateSource, Reason: ReasonRegistryCredentials,
				Message: fmt.Sprintf("Secret '%s/%s' with the registry credentials cannot be read (%v): create it or fix secretRef", stage.Namespace, ref.Name, err)}, nil
		}
		return nil, nil, fmt.Errorf("failed to read Secret %s/%s for Stage %q: %w", stage.Namespace, ref.Name, stage.Name, err)
	}
	data, ok := secret.Data[corev1.DockerConfigJsonKey]
	if !ok {
		data, ok = secret.Data["config.json"]
	}
	if !ok {
		return nil, &stagecoachv1.GateBlock{Gate: plan.GateSource, Reason: ReasonRegistryCredentials,
			Message: fmt.Sprintf("Secret '%s/%s' has no %s key: create it with kubectl create secret docker-registry", stage.Namespace, ref.Name, corev1.DockerConfigJsonKey)}, nil
	}
	keychain, err := registry.KeychainFromDockerConfig(data)
	if err != nil {
		return nil, &stagecoachv1.GateBlock{Gate: plan.GateSource, Reason: ReasonRegistryCredentials,
			Message: fmt.Sprintf("Secret '%s/%s' does not hold a docker config: %v", stage.Namespace, ref.Name, err)}, nil
	}
	return keychain, nil, nil
}
