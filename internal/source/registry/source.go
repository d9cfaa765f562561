package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/authz"
	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
	"github.com/stagecoach-dev/stagecoach/internal/semver"
	"github.com/stagecoach-dev/stagecoach/internal/source"
	"github.com/stagecoach-dev/stagecoach/internal/verify"
)

// Source offers Stages the newest eligible tags of their registry source. It lists a registry
// when the interval has passed, the Stage's spec changed, or a person asked with
// stagecoach.dev/requested-at; in between it answers from the last listing. Listings are kept in
// memory: a restart only means one listing more.
type Source struct {
	Lister *Lister
	// Secrets reads the Stages' credential Secrets, as far as each Stage's author may.
	Secrets Secrets
	// Verdicts, when set, is the signature verdict cache of the Stages' verifiers: each listing
	// drops the repository's "not signed" verdicts from it, so a signature pushed after the
	// image counts from the next listing (or at once when a person asks for one), not only when
	// the cached verdict expires.
	Verdicts *verify.Cache

	mu       sync.Mutex
	listings map[types.NamespacedName]listing
}

var _ source.Source = (*Source)(nil)

type listing struct {
	at          time.Time
	generation  int64
	requestedAt string
	result      Result
	block       *stagecoachv1.GateBlock
	// blocked counts the looks in a row that ended in a block (source.NextLook).
	blocked int
	// seen is when each listed digest was first seen (soak counts from it), whole seconds, as
	// status keeps them.
	seen map[string]time.Time
}

// Offer lists the Stage's registry when due and offers the eligible tags newer than what the
// Stage runs, newest first.
func (s *Source) Offer(ctx context.Context, stage *stagecoachv1.Stage, now time.Time) (source.Offer, error) {
	src := stage.Spec.Source.Registry
	interval := stage.GetRegistryInterval()
	key := client.ObjectKeyFromObject(stage)
	requestedAt := stage.Annotations[stagecoachv1.ReconcileRequestAnnotation]
	l, ok := s.get(key)
	if !ok || l.generation != stage.Generation || l.requestedAt != requestedAt || !now.Before(l.at.Add(source.NextLook(interval, l.blocked))) {
		prev, blocked := l.seen, l.blocked
		if ok && (l.generation != stage.Generation || l.requestedAt != requestedAt) {
			blocked = 0 // a changed spec, or a person asking, starts the backoff afresh
		}
		l = listing{at: now, generation: stage.Generation, requestedAt: requestedAt}
		var err error
		if l.result, l.block, err = s.list(ctx, stage); err != nil {
			return source.Offer{}, err
		}
		l.seen = prev // a registry that is down forgets nothing
		s.forgetUnsigned(src)
		if l.block == nil {
			l.seen = firstSeen(prev, l.result.Candidates, stage.Status.Candidate, now)
		} else {
			l.blocked = blocked + 1
		}
		s.put(key, l)
	}
	offer := source.Offer{Recheck: l.at.Add(source.NextLook(interval, l.blocked)).Sub(now), Block: l.block}
	if l.block != nil {
		return offer, nil
	}
	if len(l.result.Candidates) == 0 {
		offer.Block = &stagecoachv1.GateBlock{Gate: stagecoachv1.GateSource, Reason: stagecoachv1.ReasonNoEligibleTag,
			Message: fmt.Sprintf("no tag of %s %s (%d tags looked at)", src.Repository, describeSelection(src), l.result.Skipped)}
		return offer, nil
	}
	// Never backwards: a newer tag deleted (or moved back) must not take the Stage to an older
	// version, so the offer ends at the first candidate that is not newer than what runs.
	for _, c := range l.result.Candidates {
		if !NewerThanCurrent(stage.Status.Current, c) {
			break
		}
		seen := metav1.NewTime(l.seen[c.Digest])
		offer.Candidates = append(offer.Candidates, plan.Candidate{Digest: c.Digest, Tag: c.Tag, FirstSeen: &seen})
	}
	return offer, nil
}

// firstSeen carries when each listed digest was first seen over from the previous listing (a
// digest no longer listed is forgotten). After a restart the Stage's candidate keeps its time
// from status; any other digest counts from now, which only makes a soak longer. A registry
// says nothing of when a tag was pushed, and an image's created time is no help (reproducible
// builds set it to the commit's time, or zero).
func firstSeen(prev map[string]time.Time, listed []Candidate, candidate *stagecoachv1.CandidateVersion, now time.Time) map[string]time.Time {
	seen := make(map[string]time.Time, len(listed))
	for _, c := range listed {
		t, ok := prev[c.Digest]
		if !ok && candidate != nil && candidate.Digest == c.Digest && candidate.FirstSeen != nil {
			t, ok = candidate.FirstSeen.Time, true
		}
		if !ok {
			t = now.Truncate(time.Second)
		}
		seen[c.Digest] = t
	}
	return seen
}

// forgetUnsigned drops the "not signed" verdicts of the source's repository (see Verdicts).
func (s *Source) forgetUnsigned(src *stagecoachv1.RegistrySource) {
	if s.Verdicts == nil {
		return
	}
	repo, err := name.NewRepository(src.Repository, ociclient.NameOptions(src.Insecure)...)
	if err != nil {
		return // the listing said so already
	}
	s.Verdicts.ForgetUnsigned(repo.Name())
}

func (s *Source) get(key types.NamespacedName) (listing, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.listings[key]
	return l, ok
}

func (s *Source) put(key types.NamespacedName, l listing) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listings == nil {
		s.listings = map[types.NamespacedName]listing{}
	}
	s.listings[key] = l
}

// NewerThanCurrent reports whether a candidate moves the Stage forward: it is not what runs, nor
// an older semantic version than it.
func NewerThanCurrent(current *stagecoachv1.CurrentVersion, c Candidate) bool {
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

// list lists the repository with the Stage's credentials. What a person must fix (or what fixes
// itself, like a registry that is down) is a block on the candidate, not an error.
func (s *Source) list(ctx context.Context, stage *stagecoachv1.Stage) (Result, *stagecoachv1.GateBlock, error) {
	src := stage.Spec.Source.Registry
	keychain, block, err := Keychain(ctx, s.Secrets, stage, src.SecretRef, "spec.source.registry.secretRef")
	if err != nil || block != nil {
		return Result{}, block, err
	}
	res, err := s.Lister.List(ctx, Request{Repository: src.Repository, Semver: src.Semver, Pattern: src.Pattern,
		Insecure: src.Insecure, Keychain: keychain})
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return Result{}, nil, err
		}
		return Result{}, &stagecoachv1.GateBlock{Gate: stagecoachv1.GateSource, Reason: reasonOf(err), Message: err.Error()}, nil
	}
	return res, nil, nil
}

// Resolve returns the digest a tag of the Stage's registry source points to now, with the
// Stage's credentials ("" when the tag is gone). A Secret a person must fix is an error here: the
// caller waits and says so.
func (s *Source) Resolve(ctx context.Context, stage *stagecoachv1.Stage, tag string) (string, error) {
	src := stage.Spec.Source.Registry
	if src == nil {
		return "", fmt.Errorf("Stage %s/%s has no registry source to resolve tag %q in", stage.Namespace, stage.Name, tag)
	}
	keychain, block, err := Keychain(ctx, s.Secrets, stage, src.SecretRef, "spec.source.registry.secretRef")
	switch {
	case err != nil:
		return "", err
	case block != nil:
		return "", errors.New(block.Message)
	}
	return s.Lister.Resolve(ctx, Request{Repository: src.Repository, Insecure: src.Insecure, Keychain: keychain}, tag)
}

func reasonOf(err error) string {
	switch {
	case errors.Is(err, ociclient.ErrUnauthorized):
		return stagecoachv1.ReasonRegistryUnauthorized
	case errors.Is(err, ociclient.ErrNotFound):
		return stagecoachv1.ReasonRepositoryNotFound
	case errors.Is(err, ociclient.ErrUnreachable):
		return stagecoachv1.ReasonRegistryUnreachable
	}
	return stagecoachv1.ReasonSourceInvalid
}

// Secrets reads a Secret a Stage names, as far as the Stage's author may get it (authz.Secrets):
// an *authz.Refusal when the author may not or it is not there.
type Secrets interface {
	Get(ctx context.Context, stage *stagecoachv1.Stage, name, field string) (*corev1.Secret, error)
}

// Keychain reads the docker-config Secret the Stage's field names (in its namespace), only as far
// as the Stage's author may get it. A Secret a person must create, fix or grant is a source block
// (CredentialsUnreadable), not an error; nil ref means anonymous.
func Keychain(ctx context.Context, secrets Secrets, stage *stagecoachv1.Stage, ref *stagecoachv1.LocalObjectReference, field string) (authn.Keychain, *stagecoachv1.GateBlock, error) {
	if ref == nil {
		return nil, nil, nil
	}
	block := func(format string, args ...any) (authn.Keychain, *stagecoachv1.GateBlock, error) {
		return nil, &stagecoachv1.GateBlock{Gate: stagecoachv1.GateSource, Reason: stagecoachv1.ReasonCredentialsUnreadable,
			Message: fmt.Sprintf(format, args...)}, nil
	}
	if secrets == nil {
		return nil, nil, fmt.Errorf("this controller has no reader of Secrets for Stage %q's %s", stage.Name, field)
	}
	secret, err := secrets.Get(ctx, stage, ref.Name, field)
	if refusal, ok := authz.AsRefusal(err); ok {
		return nil, &stagecoachv1.GateBlock{Gate: stagecoachv1.GateSource, Reason: refusal.Reason, Message: refusal.Message}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	data, ok := secret.Data[corev1.DockerConfigJsonKey]
	if !ok {
		data, ok = secret.Data["config.json"]
	}
	if !ok {
		return block("Secret '%s/%s' has no %s key: create it with kubectl create secret docker-registry", stage.Namespace, ref.Name, corev1.DockerConfigJsonKey)
	}
	keychain, err := KeychainFromDockerConfig(data)
	if err != nil {
		return block("Secret '%s/%s' does not hold a docker config: %v", stage.Namespace, ref.Name, err)
	}
	return keychain, nil, nil
}
