// Package gitwrite pushes promotions to an environment's branch (promotion.git): it keeps one
// in-memory clone per repository and credentials Secret, fetched before each write (never cloned
// again per promotion), edits the files or merges the promoted commit, commits (signed when a key
// is given) and pushes without force; when the branch moved meanwhile it fetches, redoes the
// edit on the new head and pushes again, a bounded number of times. One write per clone at a
// time, so two promotions to one branch from this controller land one after the other.
//
// The objects are go-git's (the implementation beneath fluxcd/pkg/git/gogit, whose client clones
// afresh each time and cannot keep a clone fetched); credentials and signers are fluxcd/pkg/git's.
package gitwrite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5/memfs"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"

	gitsource "github.com/stagecoach-dev/stagecoach/internal/source/git"
)

// MaxAttempts bounds the pushes of one write when the branch keeps moving under it.
const MaxAttempts = 5

// idleClone is how long a clone no write used is kept.
const idleClone = 24 * time.Hour

// maxWalk bounds how many commits since the last one Stagecoach wrote are read for foreign ones.
const maxWalk = 2000

// Request is one promotion to write.
type Request struct {
	// Key identifies the clone: the URL and the credentials' Secret (clones are never shared
	// between Secrets, so a namespace never reads what another one's credentials fetched).
	Key         string
	URL         string
	Credentials gitsource.Credentials
	Branch      string

	// Edits change files (promotion.git.set); Merge is the promoted commit's SHA
	// (promotion.git.merge). Exactly one is set.
	Edits []Edit
	Merge string

	Message string
	Author  Author
	// Signer signs the commit; nil leaves it unsigned.
	Signer gogit.Signer
	Now    time.Time

	// LastCommit is the commit Stagecoach last wrote to (or found on) the branch; "" before the
	// first write. A commit after it on Paths (every commit, for a merge) that Ours does not
	// claim is someone else's: the write stops with a ForeignCommitError.
	LastCommit string
	Ours       func(*object.Commit) bool

	// PushBranch, when set, receives the commit instead of Branch (a pull request's own branch,
	// written over if it exists: it is Stagecoach's); the commit is still made on Branch's head.
	PushBranch string
}

// Edit changes one file: Apply is given its content and returns the new one.
type Edit struct {
	Path  string
	Apply func([]byte) ([]byte, error)
}

// Author is who a commit says wrote it.
type Author struct{ Name, Email string }

// Result of a write.
type Result struct {
	// Commit is the branch's head holding the version: the commit pushed, or the head found
	// when the branch already held it.
	Commit string
	// Written: this write moved the branch (a commit, or a fast-forward to the promoted commit).
	Written bool
	// Attempts is how many times the write was pushed (more than 1 when the branch moved).
	Attempts int
	// Base is the head of Branch the commit was made on; Diff the change from it, as a unified
	// diff of the files changed (at most MaxDiff bytes).
	Base, Diff string
}

// MaxDiff bounds Result.Diff: a pull request's body has room for so much (GitHub takes 65,536
// characters).
const MaxDiff = 48 << 10

// ForeignCommitError: someone else changed what Stagecoach writes since its last commit.
type ForeignCommitError struct {
	SHA, Author, Subject string
	// Rewritten: the branch no longer contains the last commit Stagecoach wrote.
	Rewritten bool
}

func (e *ForeignCommitError) Error() string {
	if e.Rewritten {
		return fmt.Sprintf("the branch was rewritten: it no longer contains %s, the last commit Stagecoach wrote; its head is %s", e.Author, e.SHA)
	}
	return fmt.Sprintf("commit %s by %s (%q) changed what Stagecoach writes", short(e.SHA), e.Author, e.Subject)
}

// ErrCannotWrite: the promotion cannot be written as the Stage says (a file or an entry it edits
// is missing, the promoted commit is on no branch): only a change to the Stage or the repository
// helps.
var ErrCannotWrite = errors.New("cannot write the promotion")

// ErrMoving: the branch moved under every attempt.
var ErrMoving = errors.New("the branch kept moving")

// Writer holds the clones.
type Writer struct {
	mu     sync.Mutex
	clones map[string]*clone
}

type clone struct {
	mu      sync.Mutex
	storage *memory.Storage
	used    time.Time
}

// New returns a Writer without clones.
func New() *Writer { return &Writer{clones: map[string]*clone{}} }

// Clones is how many clones are kept.
func (w *Writer) Clones() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.clones)
}

// Forget drops the clones not used since before.
func (w *Writer) Forget(before time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, c := range w.clones {
		if c.used.Before(before) {
			delete(w.clones, k)
		}
	}
}

func (w *Writer) clone(key string, now time.Time) *clone {
	w.mu.Lock()
	defer w.mu.Unlock()
	c, ok := w.clones[key]
	if !ok {
		c = &clone{storage: memory.NewStorage()}
		w.clones[key] = c
	}
	c.used = now
	return c
}

// Write writes the promotion and pushes it; a branch that already holds it is left alone.
func (w *Writer) Write(ctx context.Context, req Request) (Result, error) {
	if (len(req.Edits) == 0) == (req.Merge == "") {
		return Result{}, errors.New("a write sets files or merges a commit, exactly one of the two")
	}
	// Clones of repositories no Stage has written for a day go: memory is held only while used.
	w.Forget(req.Now.Add(-idleClone))
	c := w.clone(req.Key, req.Now)
	c.mu.Lock()
	defer c.mu.Unlock()
	for attempt := 1; attempt <= MaxAttempts; attempt++ {
		res, err := c.attempt(ctx, req)
		res.Attempts = attempt
		if errors.Is(err, errMoved) {
			continue
		}
		return res, err
	}
	return Result{Attempts: MaxAttempts}, fmt.Errorf("%w: %d pushes to %s were refused as not fast-forward, each after fetching it again", ErrMoving, MaxAttempts, req.Branch)
}

var errMoved = errors.New("moved")

// Holds reports whether commit synced carries what commit written wrote to req.Branch: written is
// synced or one of its ancestors, and the files req.Edits change are the same at both (for a
// merge, the whole tree). A later commit of another Stage on the branch holds it; a later commit
// that changed those files does not. synced is fetched when the clone does not have it yet.
func (w *Writer) Holds(ctx context.Context, req Request, synced, written string) (bool, error) {
	if synced == written {
		return true, nil
	}
	c := w.clone(req.Key, req.Now)
	c.mu.Lock()
	defer c.mu.Unlock()
	repo, err := c.open(req.URL)
	if err != nil {
		return false, err
	}
	commit := func(sha string) (*object.Commit, error) { return repo.CommitObject(plumbing.NewHash(sha)) }
	_, errSynced := commit(synced)
	_, errWritten := commit(written) // a forge's merge commit is made after the clone's last fetch
	if errSynced != nil || errWritten != nil {
		remoteRef := plumbing.NewRemoteReferenceName("origin", req.Branch)
		err := repo.FetchContext(ctx, &gogit.FetchOptions{RemoteName: "origin", RemoteURL: req.URL, Auth: req.Credentials.Auth,
			CABundle: req.Credentials.CABundle, Tags: gogit.NoTags, Force: true,
			RefSpecs: []config.RefSpec{config.RefSpec(fmt.Sprintf("+refs/heads/%s:%s", req.Branch, remoteRef))}})
		if err != nil && !errors.Is(err, gogit.NoErrAlreadyUpToDate) {
			return false, fmt.Errorf("fetching %s of %s: %w", req.Branch, req.URL, gitsource.Classify(err))
		}
	}
	syncedCommit, err := commit(synced)
	if err != nil {
		return false, nil // not on the branch: another commit altogether
	}
	writtenCommit, err := commit(written)
	if err != nil {
		return false, nil // gone from the branch (rewritten): nothing holds it
	}
	if ancestor, err := writtenCommit.IsAncestor(syncedCommit); err != nil || !ancestor {
		return false, err
	}
	if req.Merge != "" {
		return syncedCommit.TreeHash == writtenCommit.TreeHash, nil
	}
	for _, e := range req.Edits {
		a, errA := writtenCommit.File(e.Path)
		b, errB := syncedCommit.File(e.Path)
		if errA != nil || errB != nil || a.Hash != b.Hash {
			return false, nil
		}
	}
	return true, nil
}

// attempt fetches the branch, writes on its head and pushes once.
func (c *clone) attempt(ctx context.Context, req Request) (Result, error) {
	repo, err := c.open(req.URL)
	if err != nil {
		return Result{}, err
	}
	remoteRef := plumbing.NewRemoteReferenceName("origin", req.Branch)
	specs := []config.RefSpec{config.RefSpec(fmt.Sprintf("+refs/heads/%s:%s", req.Branch, remoteRef))}
	if req.Merge != "" {
		// The promoted commit is on another branch of the repository.
		specs = append(specs, "+refs/heads/*:refs/remotes/origin/*")
	}
	err = repo.FetchContext(ctx, &gogit.FetchOptions{RemoteName: "origin", RemoteURL: req.URL, RefSpecs: specs,
		Auth: req.Credentials.Auth, CABundle: req.Credentials.CABundle, Tags: gogit.NoTags, Force: true})
	if err != nil && !errors.Is(err, gogit.NoErrAlreadyUpToDate) {
		return Result{}, fmt.Errorf("fetching %s of %s: %w", req.Branch, req.URL, gitsource.Classify(err))
	}
	ref, err := repo.Reference(remoteRef, true)
	if err != nil {
		return Result{}, fmt.Errorf("branch %s of %s: %w", req.Branch, req.URL, gitsource.ErrRefNotFound)
	}
	head, err := repo.CommitObject(ref.Hash())
	if err != nil {
		return Result{}, err
	}

	var next plumbing.Hash
	if req.Merge != "" {
		next, err = c.merge(repo, head, req)
	} else {
		next, err = c.edit(repo, head, req)
	}
	if err != nil {
		return Result{}, err
	}
	// Judged before the branch is taken as holding the version too: the head becomes the last
	// commit Stagecoach answers for.
	if err := foreign(repo, head, req); err != nil {
		return Result{}, err
	}
	if next == head.Hash {
		return Result{Commit: head.Hash.String()}, nil
	}
	diff, err := diffOf(repo, head, next)
	if err != nil {
		return Result{}, err
	}
	target, force := req.Branch, ""
	if req.PushBranch != "" {
		target, force = req.PushBranch, "+"
	}
	local := plumbing.NewBranchReferenceName(target)
	if err := repo.Storer.SetReference(plumbing.NewHashReference(local, next)); err != nil {
		return Result{}, err
	}
	err = repo.PushContext(ctx, &gogit.PushOptions{RemoteName: "origin", RemoteURL: req.URL,
		RefSpecs: []config.RefSpec{config.RefSpec(fmt.Sprintf("%s%s:refs/heads/%s", force, local, target))},
		Auth:     req.Credentials.Auth, CABundle: req.Credentials.CABundle})
	switch {
	case err == nil, errors.Is(err, gogit.NoErrAlreadyUpToDate):
		return Result{Commit: next.String(), Written: true, Base: head.Hash.String(), Diff: diff}, nil
	case nonFastForward(err):
		return Result{}, errMoved
	}
	return Result{}, fmt.Errorf("pushing to %s of %s: %w", req.Branch, req.URL, gitsource.Classify(err))
}

// open returns the clone's repository, creating it with its remote on first use.
func (c *clone) open(url string) (*gogit.Repository, error) {
	repo, err := gogit.Open(c.storage, nil)
	if errors.Is(err, gogit.ErrRepositoryNotExists) {
		repo, err = gogit.Init(c.storage, nil)
		if err == nil {
			_, err = repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{url}})
		}
	}
	return repo, err
}

// nonFastForward: the branch moved since it was fetched (go-git finds it before sending, the
// server after).
func nonFastForward(err error) bool {
	msg := err.Error()
	return errors.Is(err, gogit.ErrForceNeeded) || errors.Is(err, plumbing.ErrObjectNotFound) ||
		strings.Contains(msg, "non-fast-forward") || strings.Contains(msg, "fetch first") || strings.Contains(msg, "failed to update ref")
}

// worktree checks commit out into a fresh in-memory worktree over the clone's objects.
func (c *clone) worktree(hash plumbing.Hash) (*gogit.Worktree, error) {
	view, err := gogit.Open(c.storage, memfs.New())
	if err != nil {
		return nil, err
	}
	wt, err := view.Worktree()
	if err != nil {
		return nil, err
	}
	if err := wt.Checkout(&gogit.CheckoutOptions{Hash: hash, Force: true}); err != nil {
		return nil, fmt.Errorf("checking out %s: %w", short(hash.String()), err)
	}
	return wt, nil
}

// edit applies the edits on head and commits them; head itself when nothing changes.
func (c *clone) edit(_ *gogit.Repository, head *object.Commit, req Request) (plumbing.Hash, error) {
	wt, err := c.worktree(head.Hash)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	for _, e := range req.Edits {
		f, err := wt.Filesystem.Open(e.Path)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("%w: %s is not on branch %s at %s (%v)", ErrCannotWrite, e.Path, req.Branch, short(head.Hash.String()), err)
		}
		content, err := io.ReadAll(f)
		_ = f.Close()
		if err != nil {
			return plumbing.ZeroHash, err
		}
		edited, err := e.Apply(content)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("%w: %s: %v", ErrCannotWrite, e.Path, err)
		}
		out, err := wt.Filesystem.Create(e.Path)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if _, err := out.Write(edited); err != nil {
			_ = out.Close()
			return plumbing.ZeroHash, err
		}
		if err := out.Close(); err != nil {
			return plumbing.ZeroHash, err
		}
		if _, err := wt.Add(e.Path); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	status, err := wt.Status()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if status.IsClean() {
		return head.Hash, nil
	}
	return commit(wt, req, head.Hash)
}

// merge moves the branch to the promoted commit: a fast-forward when head is behind it; else a
// commit of its tree on head (with it as second parent unless it is already in head's history:
// going back to an older commit is a revert).
func (c *clone) merge(repo *gogit.Repository, head *object.Commit, req Request) (plumbing.Hash, error) {
	promoted, err := repo.CommitObject(plumbing.NewHash(req.Merge))
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("%w: commit %s is on no branch of %s: promote a commit of this repository", ErrCannotWrite, short(req.Merge), req.URL)
	}
	if promoted.TreeHash == head.TreeHash {
		return head.Hash, nil
	}
	if behind, err := head.IsAncestor(promoted); err != nil || behind {
		return promoted.Hash, err
	}
	wt, err := c.worktree(promoted.Hash)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	parents := []plumbing.Hash{head.Hash}
	if contained, err := promoted.IsAncestor(head); err != nil {
		return plumbing.ZeroHash, err
	} else if !contained {
		parents = append(parents, promoted.Hash)
	}
	return commit(wt, req, parents...)
}

func commit(wt *gogit.Worktree, req Request, parents ...plumbing.Hash) (plumbing.Hash, error) {
	who := &object.Signature{Name: req.Author.Name, Email: req.Author.Email, When: req.Now}
	return wt.Commit(req.Message, &gogit.CommitOptions{Author: who, Committer: who, Parents: parents,
		Signer: req.Signer, AllowEmptyCommits: true})
}

// foreign finds a commit since req.LastCommit that someone else made on what Stagecoach writes:
// the commits of head's history that are not in LastCommit's, newest first. LastCommit no longer
// in head's history (not fetched with it, or not its ancestor) means the branch was rewritten.
func foreign(repo *gogit.Repository, head *object.Commit, req Request) error {
	if req.LastCommit == "" || req.LastCommit == head.Hash.String() {
		return nil
	}
	rewritten := &ForeignCommitError{SHA: head.Hash.String(), Author: req.LastCommit, Rewritten: true}
	last, err := repo.CommitObject(plumbing.NewHash(req.LastCommit))
	if err != nil {
		return rewritten
	}
	if ok, err := last.IsAncestor(head); err != nil || !ok {
		if err != nil {
			return err
		}
		return rewritten
	}
	// Everything last's history holds was judged before: skip it (bounded; a history longer than
	// that is walked from head again, and only its commits on the written files are judged).
	known := map[plumbing.Hash]bool{}
	err = object.NewCommitPreorderIter(last, nil, nil).ForEach(func(c *object.Commit) error {
		if len(known) >= maxKnown {
			return errStop
		}
		known[c.Hash] = true
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return err
	}
	var paths []string
	for _, e := range req.Edits {
		paths = append(paths, e.Path)
	}
	seen := 0
	var found *ForeignCommitError
	err = object.NewCommitPreorderIter(head, known, nil).ForEach(func(c *object.Commit) error {
		if seen++; seen > maxWalk {
			return errStop
		}
		if req.Ours != nil && req.Ours(c) {
			return nil
		}
		if req.Merge == "" {
			changed, err := changes(c, paths)
			if err != nil || !changed {
				return err
			}
		}
		if found == nil { // the walk meets the newest first
			found = &ForeignCommitError{SHA: c.Hash.String(), Author: fmt.Sprintf("%s <%s>", c.Author.Name, c.Author.Email),
				Subject: firstLine(c.Message)}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return err
	}
	if found != nil {
		return found
	}
	return nil
}

// maxKnown bounds the commits of the last written commit's history held to skip.
const maxKnown = 50000

// changes reports whether c changed one of files: against its parent, or, for a merge, against
// every parent (a merge that takes one side's version of the file changed nothing there).
func changes(c *object.Commit, files []string) (bool, error) {
	if c.NumParents() <= 1 {
		return gitsource.Touches(c, files)
	}
	hashAt := func(commit *object.Commit, path string) plumbing.Hash {
		f, err := commit.File(path)
		if err != nil {
			return plumbing.ZeroHash
		}
		return f.Hash
	}
	parents := make([]*object.Commit, 0, c.NumParents())
	if err := c.Parents().ForEach(func(p *object.Commit) error { parents = append(parents, p); return nil }); err != nil {
		return false, err
	}
	for _, path := range files {
		mine, same := hashAt(c, path), false
		for _, p := range parents {
			same = same || hashAt(p, path) == mine
		}
		if !same {
			return true, nil
		}
	}
	return false, nil
}

var errStop = errors.New("stop")

// diffOf is the unified diff from head to next, cut at MaxDiff.
func diffOf(repo *gogit.Repository, head *object.Commit, next plumbing.Hash) (string, error) {
	nextCommit, err := repo.CommitObject(next)
	if err != nil {
		return "", err
	}
	patch, err := head.Patch(nextCommit)
	if err != nil {
		return "", fmt.Errorf("diffing %s and %s: %w", short(head.Hash.String()), short(next.String()), err)
	}
	diff := patch.String()
	if len(diff) > MaxDiff {
		diff = diff[:MaxDiff] + fmt.Sprintf("\n... (%d more bytes: see the commit)\n", len(diff)-MaxDiff)
	}
	return diff, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
