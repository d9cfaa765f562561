// Package git offers the commits of a Git repository as a Stage's versions (spec.source.git): each
// new commit of a branch (optionally only those that change given paths), or each tag that meets a
// semver constraint. A version's digest is sha1:<commit>, its tag the Git tag or the short SHA.
// One clone per repository and credentials is kept in memory and fetched incrementally; commit and
// tag signatures are verified with OpenPGP or SSH keys as Flux's GitRepository verifies them.
package git

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	gogit "github.com/go-git/go-git/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/authz"
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
	// Reader reads the Stages' credential and key Secrets and the Flux GitRepositories they
	// follow, live (the controller does not cache Secrets).
	Reader client.Reader
	// MayRead says why the Stage's author may not have the controller fetch with a credentials
	// Secret the Stage names (field says where), or nil when they may (authz.Secrets.MayRead):
	// whoever sets a source sends its credentials to the URL it names, so they are used only as
	// far as the author could read them. Nil: no check (tests of the source alone).
	MayRead func(ctx context.Context, stage *stagecoachv1.Stage, secret, field string) (*authz.Refusal, error)

	mu       sync.Mutex
	repos    map[string]*repository
	listings map[types.NamespacedName]listing
	// followers are the clones Stages following records of commits use (HasCommit), by Stage.
	followers map[types.NamespacedName]string
}

var _ source.Source = (*Source)(nil)

type listing struct {
	at          time.Time
	generation  int64
	requestedAt string
	versions    []Version
	block       *stagecoachv1.GateBlock
	// blocked counts the looks in a row that ended in a block (source.NextLook).
	blocked  int
	seen     map[string]time.Time
	settings settings
	where    string
	// repo is the clone the versions were listed from: their signatures are judged in it even if
	// Forget dropped it from repos while it was being fetched.
	repo *repository
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
	if !ok || l.generation != stage.Generation || l.requestedAt != requestedAt || !now.Before(l.at.Add(source.NextLook(interval, l.blocked))) {
		prev, blocked := l.seen, l.blocked
		if ok && (l.generation != stage.Generation || l.requestedAt != requestedAt) {
			blocked = 0 // a changed spec, or a person asking, starts the backoff afresh
		}
		l = listing{at: now, generation: stage.Generation, requestedAt: requestedAt}
		var err error
		if l.settings, l.block, err = s.settingsOf(ctx, stage); err != nil {
			return source.Offer{}, err
		}
		l.where = l.settings.url
		if l.block == nil {
			if l.versions, l.repo, l.block, err = s.list(ctx, stage, l.settings); err != nil {
				return source.Offer{}, err
			}
		}
		l.seen = prev // a server that is down forgets nothing
		if l.block == nil {
			l.seen = firstSeen(prev, l.versions, stage.Status.Candidate, now)
		} else {
			l.blocked = blocked + 1
		}
		s.mu.Lock()
		if s.listings == nil {
			s.listings = map[types.NamespacedName]listing{}
		}
		s.listings[key] = l
		if l.repo != nil {
			// Another Stage's Forget during the fetch dropped this clone (no listing used it yet):
			// take it back, so the next fetch is incremental and verifies in the same clone.
			if k := repositoryKey(stage.Namespace, l.settings); s.repos[k] == nil {
				s.repos[k] = l.repo
			}
		}
		s.mu.Unlock()
	}
	offer := source.Offer{Recheck: l.at.Add(source.NextLook(interval, l.blocked)).Sub(now), Block: l.block}
	if l.block != nil {
		return offer, nil
	}
	for _, v := range l.versions {
		seen := metav1.NewTime(l.seen[v.Commit])
		offer.Candidates = append(offer.Candidates, plan.Candidate{Digest: Digest(v.Commit), Tag: v.Name(), FirstSeen: &seen, Title: v.Subject})
	}
	if len(offer.Candidates) == 0 && stage.Status.Current == nil {
		offer.Block = &stagecoachv1.GateBlock{Gate: stagecoachv1.GateSource, Reason: stagecoachv1.ReasonNoEligibleCommit,
			Message: fmt.Sprintf("%s offers no commit: %s", l.where, describe(l.settings, src.Paths))}
	}
	return offer, nil
}

// Forget drops a deleted Stage's listing, and the clones no other Stage's last listing used.
func (s *Source) Forget(key types.NamespacedName) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.listings, key)
	delete(s.followers, key)
	used := map[string]bool{}
	for k, l := range s.listings {
		used[repositoryKey(k.Namespace, l.settings)] = true
	}
	for _, repo := range s.followers {
		used[repo] = true
	}
	for k := range s.repos {
		if !used[k] {
			delete(s.repos, k)
		}
	}
}

func describe(set settings, paths []string) string {
	if set.semver != "" {
		return fmt.Sprintf("no tag meets semver %q", set.semver)
	}
	if len(paths) > 0 {
		return fmt.Sprintf("no commit of branch %s changes %s", set.branch, strings.Join(paths, ", "))
	}
	return fmt.Sprintf("branch %s has no commit", set.branch)
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
// what runs (and, following a GitRepository, not beyond its artifact). What a person must fix (or
// what fixes itself, like a server that is down) is a block naming the Stage's source and the fix,
// not an error.
func (s *Source) list(ctx context.Context, stage *stagecoachv1.Stage, set settings) ([]Version, *repository, *stagecoachv1.GateBlock, error) {
	repo, block, err := s.fetch(ctx, stage, set)
	if err != nil || block != nil {
		return nil, nil, block, err
	}
	versions, block, err := s.versionsIn(repo, stage, set)
	return versions, repo, block, err
}

// versionsIn lists the versions the fetched clone offers the Stage.
func (s *Source) versionsIn(repo *repository, stage *stagecoachv1.Stage, set settings) ([]Version, *stagecoachv1.GateBlock, error) {
	src := stage.Spec.Source.Git
	repo.mu.Lock()
	defer repo.mu.Unlock()
	current := ""
	if stage.Status.Current != nil {
		current = Commit(stage.Status.Current.Digest)
	}
	if set.semver != "" {
		constraint, err := semver.ParseConstraint(set.semver)
		if err != nil {
			return nil, sourceBlock(stagecoachv1.ReasonSourceInvalid, "%s %q does not parse: %v", set.field("semver", "spec.ref.semver"), set.semver, err), nil
		}
		versions, _, err := tagVersions(repo.repo, constraint)
		if err != nil {
			return nil, nil, fmt.Errorf("failed to list the tags of %s for Stage %q: %w", set.url, stage.Name, err)
		}
		return notBeyond(newerTags(versions, stage.Status.Current), set.head), nil, nil
	}
	versions, rewound, err := branchVersions(repo.repo, set.branch, set.head, src.Paths, current)
	switch {
	case errors.Is(err, ErrRefNotFound):
		return nil, sourceBlock(stagecoachv1.ReasonGitRefNotFound, "%s has no branch %s (or not the commit %s): fix %s", set.url, set.branch, Short(set.head), set.field("branch", "spec.ref.branch")), nil
	case err != nil:
		return nil, nil, fmt.Errorf("failed to walk branch %s of %s for Stage %q: %w", set.branch, set.url, stage.Name, err)
	case rewound:
		return nil, sourceBlock(stagecoachv1.ReasonSourceRewound,
			"branch %s of %s no longer contains the running commit %s (it was force-pushed or reset): automation never goes backwards; "+
				"promote a commit of the branch by hand to follow it again", set.branch, set.url, Short(current)), nil
	}
	return versions, nil, nil
}

// notBeyond drops the tags above the artifact's commit (head): a GitRepository's artifact is the
// newest version its semver range selected.
func notBeyond(versions []Version, head string) []Version {
	if head == "" {
		return versions
	}
	for i, v := range versions {
		if v.Commit == head {
			return versions[i:]
		}
	}
	return nil
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
func (s *Source) fetch(ctx context.Context, stage *stagecoachv1.Stage, set settings) (*repository, *stagecoachv1.GateBlock, error) {
	var data map[string][]byte
	if ref := set.secretRef; ref != nil {
		// A followed GitRepository names its own URL and Secret: whoever wrote it already has
		// source-controller fetch with them there, and the Stage adds no new destination.
		if s.MayRead != nil && !set.followed {
			refusal, err := s.MayRead(ctx, stage, ref.Name, set.field("secretRef", "spec.secretRef"))
			if err != nil {
				return nil, nil, err
			}
			if refusal != nil {
				return nil, sourceBlock(refusal.Reason, "%s", refusal.Message), nil
			}
		}
		secret := &corev1.Secret{}
		if err := s.Reader.Get(ctx, client.ObjectKey{Namespace: stage.Namespace, Name: ref.Name}, secret); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
				return nil, sourceBlock(stagecoachv1.ReasonCredentialsUnreadable, "Secret '%s/%s' with the Git credentials cannot be read (%v): create it or fix %s",
					stage.Namespace, ref.Name, err, set.field("secretRef", "spec.secretRef")), nil
			}
			return nil, nil, fmt.Errorf("failed to read Secret %s/%s for Stage %q: %w", stage.Namespace, ref.Name, stage.Name, err)
		}
		data = secret.Data
	}
	creds, err := CredentialsFrom(set.url, data)
	if err != nil {
		where := set.field("url", "spec.url")
		if set.secretRef != nil {
			where = fmt.Sprintf("Secret '%s/%s' (%s)", stage.Namespace, set.secretRef.Name, set.field("secretRef", "spec.secretRef"))
		}
		return nil, sourceBlock(stagecoachv1.ReasonCredentialsUnreadable, "%s cannot be used to fetch %s: %v", where, set.url, err), nil
	}
	repo := s.repository(stage.Namespace, set)
	refspec := "+refs/tags/*:refs/tags/*"
	switch {
	case set.allBranches:
		refspec = "+refs/heads/*:refs/heads/*"
	case set.branch != "":
		refspec = fmt.Sprintf("+refs/heads/%[1]s:refs/heads/%[1]s", set.branch)
	}
	fetchCtx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	repo.mu.Lock()
	err = repo.fetch(fetchCtx, set.url, creds, refspec)
	repo.mu.Unlock()
	switch {
	case err == nil:
		return repo, nil, nil
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return nil, nil, err
	case errors.Is(err, ErrUnauthorized):
		fix := fmt.Sprintf("set %s to a Secret with username and password, bearerToken, or identity and known_hosts", set.field("secretRef", "spec.secretRef"))
		if set.secretRef != nil {
			fix = fmt.Sprintf("fix the credentials in Secret '%s/%s'", stage.Namespace, set.secretRef.Name)
		}
		return nil, sourceBlock(stagecoachv1.ReasonGitUnauthorized, "%s refused to serve the repository (or it does not exist): %s; %v", set.url, fix, err), nil
	case errors.Is(err, ErrRefNotFound):
		what := "has no tags"
		if set.allBranches {
			what = "has no branches"
		}
		if set.branch != "" {
			what = "has no branch " + set.branch + ": fix " + set.field("branch", "spec.ref.branch")
		}
		return nil, sourceBlock(stagecoachv1.ReasonGitRefNotFound, "%s %s", set.url, what), nil
	}
	return nil, sourceBlock(stagecoachv1.ReasonGitUnreachable, "cannot fetch %s: %v", set.url, err), nil
}

// HasCommit says whether the commit of digest (sha1:<SHA>) is on a branch of the repository ref
// names, fetched (every branch, incrementally, into the clone of that URL and Secret) with the
// credentials of ref.secretRef in the Stage's namespace, as far as its author may (MayRead); field
// names ref in messages. It returns a problem for people ("" when the commit is there), or an
// error to retry. A commit once found on a branch is not fetched for again.
func (s *Source) HasCommit(ctx context.Context, stage *stagecoachv1.Stage, ref *stagecoachv1.GitRepositoryReference, field, digest string) (string, error) {
	commit := Commit(digest)
	if _, err := hex.DecodeString(commit); err != nil || commit == "" {
		return fmt.Sprintf("%s is not a Git commit (sha1:<40 hex>), and %s takes Git commits", digest, field), nil
	}
	set := settings{url: ref.URL, secretRef: ref.SecretRef, origin: field, allBranches: true}
	// The author's right first, even for a commit already found: the clone is shared by every
	// Stage of the namespace naming this URL and Secret, and says what the repository holds.
	if ref.SecretRef != nil && s.MayRead != nil {
		refusal, err := s.MayRead(ctx, stage, ref.SecretRef.Name, set.field("secretRef", ""))
		if err != nil {
			return "", err
		}
		if refusal != nil {
			return refusal.Message, nil
		}
	}
	key := client.ObjectKeyFromObject(stage)
	s.mu.Lock()
	if s.followers == nil {
		s.followers = map[types.NamespacedName]string{}
	}
	s.followers[key] = repositoryKey(stage.Namespace, set) // Forget keeps this clone
	s.mu.Unlock()
	if s.repository(stage.Namespace, set).onBranch(commit) {
		return "", nil
	}
	repo, block, err := s.fetch(ctx, stage, set)
	if err != nil || block != nil {
		if block != nil {
			return block.Message, nil
		}
		return "", err
	}
	if !repo.onBranch(commit) {
		return fmt.Sprintf("commit %s is on no branch of %s (%s): push it there, or name a repository (or mirror) that has the upstream's commits",
			Short(commit), ref.URL, field), nil
	}
	return "", nil
}

// repositoryKey names the clone of a URL fetched with a Secret of namespace: one namespace's
// credentials never serve another's reads.
func repositoryKey(namespace string, set settings) string {
	if set.secretRef != nil {
		return namespace + "/" + set.secretRef.Name + " " + set.url
	}
	return set.url
}

// listedIn is the clone the Stage's last listing came from when it was made with these settings,
// else the clone of the settings.
func (s *Source) listedIn(key types.NamespacedName, namespace string, set settings) *repository {
	s.mu.Lock()
	l, ok := s.listings[key]
	s.mu.Unlock()
	if ok && l.repo != nil && repositoryKey(namespace, l.settings) == repositoryKey(namespace, set) {
		return l.repo
	}
	return s.repository(namespace, set)
}

// repository is the clone for a URL and its credentials (a Secret of namespace).
func (s *Source) repository(namespace string, set settings) *repository {
	key := repositoryKey(namespace, set)
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
// sha1:<commit>; for a source of tags, the highest tag meeting its range that names it) by its
// signature, from the Stage's clone. A version whose signature is missing or untrusted is blocked with SignatureMissing or
// SignatureInvalid and the reason.
func (s *Source) Verifier(ctx context.Context, stage *stagecoachv1.Stage, now time.Time) (func(digest string) *plan.SignatureVerdict, error) {
	src := stage.Spec.Source.Git
	blocked := func(reason, format string, args ...any) *plan.SignatureVerdict {
		return &plan.SignatureVerdict{Block: &stagecoachv1.GateBlock{Gate: stagecoachv1.GateSignature, Reason: reason, Message: fmt.Sprintf(format, args...)}}
	}
	always := func(v *plan.SignatureVerdict) (func(string) *plan.SignatureVerdict, error) {
		return func(string) *plan.SignatureVerdict { return v }, nil
	}
	if src == nil || src.Verify == nil {
		return always(blocked(stagecoachv1.ReasonVerificationUnavailable, "Stage %s has no spec.source.git.verify", stage.Name))
	}
	ref := src.Verify.SecretRef
	secret := &corev1.Secret{}
	if err := s.Reader.Get(ctx, client.ObjectKey{Namespace: stage.Namespace, Name: ref.Name}, secret); err != nil {
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
	set, block, err := s.settingsOf(ctx, stage)
	switch {
	case err != nil:
		return nil, err
	case block != nil:
		return always(blocked(stagecoachv1.ReasonVerificationUnavailable, "%s", block.Message))
	}
	repo := s.listedIn(client.ObjectKeyFromObject(stage), stage.Namespace, set)
	mode := src.Verify.GetMode()
	return func(digest string) *plan.SignatureVerdict {
		tag := ""
		commit := Commit(digest)
		if commit == "" {
			return blocked(stagecoachv1.ReasonSignatureInvalid, "%s is not a Git commit (sha1:<40 hex>): Stage %s takes commits of %s", digest, stage.Name, set.url)
		}
		repo.mu.Lock()
		defer repo.mu.Unlock()
		if repo.repo == nil {
			// A Promotion asked for before this controller's first fetch: judged after it.
			until := metav1.NewTime(now.Add(source.NextLook(stage.GetGitInterval(), 1)))
			v := blocked(stagecoachv1.ReasonVerificationUnavailable, "%s has not been fetched yet", set.url)
			v.Block.Until = &until
			return v
		}
		if tag == "" && set.semver != "" {
			tag = tagOf(repo.repo, set.semver, digest)
		}
		signer, err := verifyCommit(repo.repo, commit, tag, mode, keys)
		switch {
		case errors.Is(err, errNotFetched):
			// A commit pushed since the last fetch: judged once the source has fetched it.
			until := metav1.NewTime(now.Add(stage.GetGitInterval()))
			v := blocked(stagecoachv1.ReasonVerificationUnavailable, "%s: the source fetches %s again within %s", err, set.url, stage.GetGitInterval())
			v.Block.Until = &until
			return v
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

// tagOf is the highest tag meeting constraint that names the commit of digest in repo, "" when
// none does.
func tagOf(repo *gogit.Repository, constraint, digest string) string {
	c, err := semver.ParseConstraint(constraint)
	if err != nil {
		return ""
	}
	versions, _, err := tagVersions(repo, c)
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

// settings are where a Stage's commits come from: its spec.source.git, or the Flux GitRepository
// it follows.
type settings struct {
	url, branch, semver string
	secretRef           *stagecoachv1.LocalObjectReference
	// head, following a GitRepository, is its artifact's commit: nothing beyond it is offered.
	head string
	// origin names where they were read, for messages.
	origin string
	// followed: read from a GitRepository (spec.source.git.sourceRef).
	followed bool
	// allBranches fetches every branch (a commit is looked up on any of them).
	allBranches bool
}

// field names a setting where a person fixes it: in the Stage, or in the GitRepository it follows.
func (set settings) field(stageField, repositoryField string) string {
	if set.followed {
		return repositoryField + " of " + set.origin
	}
	return set.origin + "." + stageField
}

var gitRepositoryGVK = schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "GitRepository"}

// settingsOf reads where the Stage's commits come from. A GitRepository that cannot be read, has
// no artifact yet, or selects its commits by something other than a branch or a semver range is
// a block naming it.
func (s *Source) settingsOf(ctx context.Context, stage *stagecoachv1.Stage) (settings, *stagecoachv1.GateBlock, error) {
	src := stage.Spec.Source.Git
	if src.SourceRef == nil {
		return settings{url: src.URL, branch: src.Branch, semver: src.Semver, secretRef: src.SecretRef, origin: "spec.source.git"}, nil, nil
	}
	described := fmt.Sprintf("GitRepository '%s/%s' (spec.source.git.sourceRef)", stage.Namespace, src.SourceRef.Name)
	repo := &unstructured.Unstructured{}
	repo.SetGroupVersionKind(gitRepositoryGVK)
	if err := s.Reader.Get(ctx, client.ObjectKey{Namespace: stage.Namespace, Name: src.SourceRef.Name}, repo); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || meta.IsNoMatchError(err) {
			return settings{}, sourceBlock(stagecoachv1.ReasonSourceInvalid, "%s cannot be read (%v): create it or fix spec.source.git.sourceRef", described, err), nil
		}
		return settings{}, nil, fmt.Errorf("failed to read %s for Stage %q: %w", described, stage.Name, err)
	}
	str := func(path ...string) string { v, _, _ := unstructured.NestedString(repo.Object, path...); return v }
	set := settings{url: str("spec", "url"), branch: str("spec", "ref", "branch"), semver: str("spec", "ref", "semver"), origin: described, followed: true}
	if name := str("spec", "secretRef", "name"); name != "" {
		set.secretRef = &stagecoachv1.LocalObjectReference{Name: name}
	}
	if set.semver != "" {
		set.branch = "" // Flux: a semver range wins over a branch
	}
	if set.branch == "" && set.semver == "" {
		return settings{}, sourceBlock(stagecoachv1.ReasonSourceInvalid, "%s selects its commits by neither spec.ref.branch nor spec.ref.semver: "+
			"a Stage follows a branch or a semver range", described), nil
	}
	revision := str("status", "artifact", "revision")
	_, hash, _ := strings.Cut(revision, "@")
	if hash == "" {
		hash = revision
	}
	if set.head = Commit(hash); set.head == "" {
		return settings{}, sourceBlock(stagecoachv1.ReasonGitUnreachable, "%s has no artifact of a commit yet (revision %q): the Stage follows what source-controller fetched",
			described, revision), nil
	}
	return set, nil, nil
}
