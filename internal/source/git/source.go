// Package git offers the commits of a Git repository as a Stage's versions (spec.source.git): each
// new commit of a branch (optionally only those that change given paths), or each tag that meets a
// semver constraint. A version's digest is sha1:<commit>, its tag the Git tag or the short SHA.
// One clone per repository and credentials is kept in memory and fetched incrementally; commit and
// tag signatures are verified with OpenPGP or SSH keys as Flux's GitRepository verifies them.
package git

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
	"github.com/stagecoach-dev/stagecoach/internal/semver"
	"github.com/stagecoach-dev/stagecoach/internal/source"
)

// fetchTimeout bounds one fetch: a server that hangs must not hold a reconcile.
const fetchTimeout = 2 * time.Minute

// Source offers Stages the commits of their git source. It fetches when the interval has passed,
// the Stage's spec changed, or a person asked with stagecoach.dev/requested-at; in between it
// answers from the last listing. Clones are kept per repository URL and credentials Secret, so a
// namespace never reads what another namespace's credentials fetched.
type Source struct {
	// Secrets reads the Stages' credential and key Secrets (live: the controller does not cache
	// Secrets).
	Secrets client.Reader

	mu       sync.Mutex
	repos    map[string]*repository
	listings map[types.NamespacedName]listing
}

var _ source.Source = (*Source)(nil)

type listing struct {
	at          time.Time
	generation  int64
	requestedAt string
	versions    []Version
	block       *stagecoachv1.GateBlock
	seen        map[string]time.Time
}

// Offer fetches the Stage's repository when due and offers the commits newer than what the Stage
// runs, newest first.
func (s *Source) Offer(ctx context.Context, stage *stagecoachv1.Stage, now time.Time) (source.Offer, error) {
	src := stage.Spec.Source.Git
	interval := stage.GetGitInterval()
	key := client.ObjectKeyFromObject(stage)
	requestedAt := stage.Annotations[stagecoachv1.ReconcileRequestAnnotation]
	s.mu.Lock()
	l, ok := s.listings[key]
	s.mu.Unlock()
	if !ok || l.generation != stage.Generation || l.requestedAt != requestedAt || !now.Before(l.at.Add(interval)) {
		prev := l.seen
		l = listing{at: now, generation: stage.Generation, requestedAt: requestedAt}
		var err error
		if l.versions, l.block, err = s.list(ctx, stage); err != nil {
			return source.Offer{}, err
		}
		l.seen = firstSeen(prev, l.versions, stage.Status.Candidate, now)
		s.mu.Lock()
		if s.listings == nil {
			s.listings = map[types.NamespacedName]listing{}
		}
		s.listings[key] = l
		s.mu.Unlock()
	}
	offer := source.Offer{Recheck: l.at.Add(interval).Sub(now), Block: l.block}
	if l.block != nil {
		return offer, nil
	}
	for _, v := range l.versions {
		seen := metav1.NewTime(l.seen[v.Commit])
		offer.Candidates = append(offer.Candidates, plan.Candidate{Digest: Digest(v.Commit), Tag: v.Name(), FirstSeen: &seen, Title: v.Subject})
	}
	if len(offer.Candidates) == 0 && stage.Status.Current == nil {
		offer.Block = &stagecoachv1.GateBlock{Gate: stagecoachv1.GateSource, Reason: stagecoachv1.ReasonNoEligibleCommit,
			Message: fmt.Sprintf("%s offers no commit: %s", src.URL, describe(src))}
	}
	return offer, nil
}

// Forget drops a deleted Stage's listing.
func (s *Source) Forget(key types.NamespacedName) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.listings, key)
}

func describe(src *stagecoachv1.GitSource) string {
	if src.Semver != "" {
		return fmt.Sprintf("no tag meets semver %q", src.Semver)
	}
	if len(src.Paths) > 0 {
		return fmt.Sprintf("no commit of branch %s changes %s", src.Branch, strings.Join(src.Paths, ", "))
	}
	return fmt.Sprintf("branch %s has no commit", src.Branch)
}

// firstSeen carries when each commit was first offered over from the previous listing (soak
// counts from it); the Stage's candidate keeps its time from status after a restart.
func firstSeen(prev map[string]time.Time, versions []Version, candidate *stagecoachv1.CandidateVersion, now time.Time) map[string]time.Time {
	seen := make(map[string]time.Time, len(versions))
	for _, v := range versions {
		t, ok := prev[v.Commit]
		if !ok && candidate != nil && candidate.Digest == Digest(v.Commit) && candidate.FirstSeen != nil {
			t, ok = candidate.FirstSeen.Time, true
		}
		if !ok {
			t = now.Truncate(time.Second)
		}
		seen[v.Commit] = t
	}
	return seen
}

// list fetches the repository with the Stage's credentials and lists its versions newer than
// what runs. What a person must fix (or what fixes itself, like a server that is down) is a block
// naming the Stage's source and the fix, not an error.
func (s *Source) list(ctx context.Context, stage *stagecoachv1.Stage) ([]Version, *stagecoachv1.GateBlock, error) {
	src := stage.Spec.Source.Git
	repo, block, err := s.fetch(ctx, stage)
	if err != nil || block != nil {
		return nil, block, err
	}
	repo.mu.Lock()
	defer repo.mu.Unlock()
	current := ""
	if stage.Status.Current != nil {
		current = Commit(stage.Status.Current.Digest)
	}
	if src.Semver != "" {
		constraint, err := semver.ParseConstraint(src.Semver)
		if err != nil {
			return nil, sourceBlock(stagecoachv1.ReasonSourceInvalid, "spec.source.git.semver %q does not parse: %v", src.Semver, err), nil
		}
		versions, _, err := tagVersions(repo.repo, constraint)
		if err != nil {
			return nil, nil, fmt.Errorf("failed to list the tags of %s for Stage %q: %w", src.URL, stage.Name, err)
		}
		return newerTags(versions, stage.Status.Current), nil, nil
	}
	versions, rewound, err := branchVersions(repo.repo, src.Branch, src.Paths, current)
	switch {
	case errors.Is(err, ErrRefNotFound):
		return nil, sourceBlock(stagecoachv1.ReasonGitRefNotFound, "%s has no branch %s: fix spec.source.git.branch", src.URL, src.Branch), nil
	case err != nil:
		return nil, nil, fmt.Errorf("failed to walk branch %s of %s for Stage %q: %w", src.Branch, src.URL, stage.Name, err)
	case rewound:
		return nil, sourceBlock(stagecoachv1.ReasonSourceRewound,
			"branch %s of %s no longer contains the running commit %s (it was force-pushed or reset): automation never goes backwards; "+
				"promote a commit of the branch by hand to follow it again", src.Branch, src.URL, Short(current)), nil
	}
	return versions, nil, nil
}

// newerTags keeps the tags whose version is above the running tag's (never backwards); all of
// them when what runs has no version tag.
func newerTags(versions []Version, current *stagecoachv1.CurrentVersion) []Version {
	if current == nil || current.Digest == "" {
		return versions
	}
	running, err := semver.Parse(current.Version)
	var out []Version
	for _, v := range versions {
		if Digest(v.Commit) == current.Digest {
			break
		}
		if err == nil && v.semver.Compare(running) <= 0 {
			break
		}
		out = append(out, v)
	}
	return out
}

func sourceBlock(reason, format string, args ...any) *stagecoachv1.GateBlock {
	return &stagecoachv1.GateBlock{Gate: stagecoachv1.GateSource, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// fetch brings the Stage's branch or tags into its clone.
func (s *Source) fetch(ctx context.Context, stage *stagecoachv1.Stage) (*repository, *stagecoachv1.GateBlock, error) {
	src := stage.Spec.Source.Git
	var data map[string][]byte
	if ref := src.SecretRef; ref != nil {
		secret := &corev1.Secret{}
		if err := s.Secrets.Get(ctx, client.ObjectKey{Namespace: stage.Namespace, Name: ref.Name}, secret); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
				return nil, sourceBlock(stagecoachv1.ReasonCredentialsUnreadable, "Secret '%s/%s' with the Git credentials cannot be read (%v): create it or fix spec.source.git.secretRef",
					stage.Namespace, ref.Name, err), nil
			}
			return nil, nil, fmt.Errorf("failed to read Secret %s/%s for Stage %q: %w", stage.Namespace, ref.Name, stage.Name, err)
		}
		data = secret.Data
	}
	creds, err := credentialsFrom(src.URL, data)
	if err != nil {
		where := "spec.source.git.url"
		if src.SecretRef != nil {
			where = fmt.Sprintf("Secret '%s/%s' (spec.source.git.secretRef)", stage.Namespace, src.SecretRef.Name)
		}
		return nil, sourceBlock(stagecoachv1.ReasonCredentialsUnreadable, "%s cannot be used to fetch %s: %v", where, src.URL, err), nil
	}
	repo := s.repository(stage)
	refspec := "+refs/tags/*:refs/tags/*"
	if src.Branch != "" {
		refspec = fmt.Sprintf("+refs/heads/%[1]s:refs/heads/%[1]s", src.Branch)
	}
	fetchCtx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	repo.mu.Lock()
	err = repo.fetch(fetchCtx, src.URL, creds, refspec)
	repo.mu.Unlock()
	switch {
	case err == nil:
		return repo, nil, nil
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return nil, nil, err
	case errors.Is(err, ErrUnauthorized):
		fix := "set spec.source.git.secretRef to a Secret with username and password, bearerToken, or identity and known_hosts"
		if src.SecretRef != nil {
			fix = fmt.Sprintf("fix the credentials in Secret '%s/%s'", stage.Namespace, src.SecretRef.Name)
		}
		return nil, sourceBlock(stagecoachv1.ReasonGitUnauthorized, "%s refused to serve the repository (or it does not exist): %s; %v", src.URL, fix, err), nil
	case errors.Is(err, ErrRefNotFound):
		what := "has no tags"
		if src.Branch != "" {
			what = "has no branch " + src.Branch + ": fix spec.source.git.branch"
		}
		return nil, sourceBlock(stagecoachv1.ReasonGitRefNotFound, "%s %s", src.URL, what), nil
	}
	return nil, sourceBlock(stagecoachv1.ReasonGitUnreachable, "cannot fetch %s (retried at the next interval): %v", src.URL, err), nil
}

// repository is the clone for the Stage's URL and credentials.
func (s *Source) repository(stage *stagecoachv1.Stage) *repository {
	src := stage.Spec.Source.Git
	key := src.URL
	if src.SecretRef != nil {
		key = stage.Namespace + "/" + src.SecretRef.Name + " " + src.URL
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.repos == nil {
		s.repos = map[string]*repository{}
	}
	r, ok := s.repos[key]
	if !ok {
		r = &repository{}
		s.repos[key] = r
	}
	return r
}

// Verifier reads the Stage's verify keys once and returns what judges one version (a digest
// sha1:<commit>, with its tag when the source takes tags) by its signature, from the Stage's
// clone. A version whose signature is missing or untrusted is blocked with SignatureMissing or
// SignatureInvalid and the reason.
func (s *Source) Verifier(ctx context.Context, stage *stagecoachv1.Stage) (func(digest, tag string) *plan.SignatureVerdict, error) {
	src := stage.Spec.Source.Git
	blocked := func(reason, format string, args ...any) *plan.SignatureVerdict {
		return &plan.SignatureVerdict{Block: &stagecoachv1.GateBlock{Gate: stagecoachv1.GateSignature, Reason: reason, Message: fmt.Sprintf(format, args...)}}
	}
	always := func(v *plan.SignatureVerdict) (func(string, string) *plan.SignatureVerdict, error) {
		return func(string, string) *plan.SignatureVerdict { return v }, nil
	}
	if src == nil || src.Verify == nil {
		return always(blocked(stagecoachv1.ReasonVerificationUnavailable, "Stage %s has no spec.source.git.verify", stage.Name))
	}
	ref := src.Verify.SecretRef
	secret := &corev1.Secret{}
	if err := s.Secrets.Get(ctx, client.ObjectKey{Namespace: stage.Namespace, Name: ref.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return always(blocked(stagecoachv1.ReasonKeysUnreadable, "Secret '%s/%s' with the trusted Git signing keys cannot be read (%v): create it or fix spec.source.git.verify.secretRef",
				stage.Namespace, ref.Name, err))
		}
		return nil, fmt.Errorf("failed to read Secret %s/%s for Stage %q: %w", stage.Namespace, ref.Name, stage.Name, err)
	}
	keys, err := KeysFrom(secret.Data)
	if err != nil {
		return always(blocked(stagecoachv1.ReasonKeysUnreadable, "Secret '%s/%s': %v", stage.Namespace, ref.Name, err))
	}
	repo := s.repository(stage)
	mode := src.Verify.GetMode()
	return func(digest, tag string) *plan.SignatureVerdict {
		commit := Commit(digest)
		if commit == "" {
			return blocked(stagecoachv1.ReasonSignatureInvalid, "%s is not a Git commit (sha1:<40 hex>): Stage %s takes commits of %s", digest, stage.Name, src.URL)
		}
		repo.mu.Lock()
		defer repo.mu.Unlock()
		if repo.repo == nil {
			return blocked(stagecoachv1.ReasonVerificationUnavailable, "%s has not been fetched yet", src.URL)
		}
		signer, err := verifyCommit(repo.repo, commit, tag, mode, keys)
		switch {
		case errors.Is(err, errUnsigned):
			return blocked(stagecoachv1.ReasonSignatureMissing, "%s is not signed (verify.mode %s): sign it with a key of Secret '%s/%s'", describeVersion(commit, tag), mode, stage.Namespace, ref.Name)
		case err != nil:
			return blocked(stagecoachv1.ReasonSignatureInvalid, "%s: %v", describeVersion(commit, tag), err)
		}
		return &plan.SignatureVerdict{Message: signer}
	}, nil
}

func describeVersion(commit, tag string) string {
	if tag != "" {
		return fmt.Sprintf("tag %s (commit %s)", tag, Short(commit))
	}
	return "commit " + Short(commit)
}

// TagOf is the highest tag meeting a semver source's constraint that names the commit of digest,
// from the Stage's clone ("" for a branch source, or when no fetched tag names it).
func (s *Source) TagOf(stage *stagecoachv1.Stage, digest string) string {
	src := stage.Spec.Source.Git
	if src == nil || src.Semver == "" {
		return ""
	}
	constraint, err := semver.ParseConstraint(src.Semver)
	if err != nil {
		return ""
	}
	repo := s.repository(stage)
	repo.mu.Lock()
	defer repo.mu.Unlock()
	if repo.repo == nil {
		return ""
	}
	versions, _, err := tagVersions(repo.repo, constraint)
	if err != nil {
		return ""
	}
	for _, v := range versions {
		if Digest(v.Commit) == digest {
			return v.Tag
		}
	}
	return ""
}
