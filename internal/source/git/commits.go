package git

import (
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	fluxgit "github.com/fluxcd/pkg/git"
	"github.com/fluxcd/pkg/git/signature"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/semver"
)

// DigestPrefix is how a commit's SHA is written as a version's digest (Flux's revision form).
const DigestPrefix = "sha1:"

// Digest is the version digest of a commit SHA.
func Digest(commit string) string { return DigestPrefix + commit }

// Commit is the SHA of a commit digest, or "" when digest names no commit.
func Commit(digest string) string {
	sha, ok := strings.CutPrefix(digest, DigestPrefix)
	if !ok || len(sha) != 40 {
		return ""
	}
	return sha
}

// Short is the SHA as people read it.
func Short(commit string) string {
	if len(commit) > 7 {
		return commit[:7]
	}
	return commit
}

// Version is one commit the source offers.
type Version struct {
	Commit string
	// Tag is the Git tag (semver sources), or "".
	Tag string
	// Subject is the commit message's first line.
	Subject string

	semver *semver.Version
}

// Name is what people read: the tag, or the short SHA.
func (v Version) Name() string {
	if v.Tag != "" {
		return v.Tag
	}
	return Short(v.Commit)
}

// maxCommits bounds how far back a branch is walked for candidates.
const maxCommits = 200

// branchVersions returns the commits of branch newer than current, newest first (in the order
// of the branch's history), keeping only those that change a file under paths when paths are
// given; from the commit at (a Flux artifact's) instead of the branch's head when at is set.
// rewound is true when current is set but is not an ancestor of the head: the branch was
// force-pushed behind what runs.
func branchVersions(repo *gogit.Repository, branch, at string, paths []string, current string) (versions []Version, rewound bool, err error) {
	ref, err := repo.Reference(plumbing.NewBranchReferenceName(branch), true)
	if err != nil {
		return nil, false, fmt.Errorf("%w: branch %q was not fetched: %v", ErrRefNotFound, branch, err)
	}
	headHash := ref.Hash()
	if at != "" {
		headHash = plumbing.NewHash(at)
	}
	head, err := repo.CommitObject(headHash)
	if err != nil {
		return nil, false, fmt.Errorf("%w: commit %s is not on branch %q: %v", ErrRefNotFound, Short(at), branch, err)
	}
	if current != "" && current != head.Hash.String() {
		running, err := repo.CommitObject(plumbing.NewHash(current))
		if err != nil {
			return nil, true, nil // not even fetched: not on the branch
		}
		if ok, err := running.IsAncestor(head); err != nil || !ok {
			return nil, true, err
		}
	}
	commits := object.NewCommitPreorderIter(head, nil, nil)
	defer commits.Close()
	walked := 0
	err = commits.ForEach(func(c *object.Commit) error {
		if c.Hash.String() == current || walked >= maxCommits {
			return errStop
		}
		walked++
		if len(paths) > 0 {
			touched, err := Touches(c, paths)
			if err != nil || !touched {
				return err
			}
		}
		versions = append(versions, Version{Commit: c.Hash.String(), Subject: subject(c.Message)})
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return nil, false, err
	}
	return versions, false, nil
}

var errStop = errors.New("stop")

// Touches reports whether c changes a file under one of paths, compared with its first parent
// (a root commit adds every file it has).
func Touches(c *object.Commit, paths []string) (bool, error) {
	tree, err := c.Tree()
	if err != nil {
		return false, err
	}
	var parentTree *object.Tree
	if c.NumParents() > 0 {
		parent, err := c.Parent(0)
		if err != nil {
			return false, err
		}
		if parentTree, err = parent.Tree(); err != nil {
			return false, err
		}
	}
	changes, err := object.DiffTree(parentTree, tree)
	if err != nil {
		return false, err
	}
	for _, ch := range changes {
		for _, name := range []string{ch.From.Name, ch.To.Name} {
			if name != "" && under(name, paths) {
				return true, nil
			}
		}
	}
	return false, nil
}

// under reports whether file is one of paths or inside one of them.
func under(file string, paths []string) bool {
	for _, p := range paths {
		p = strings.Trim(path.Clean("/"+p), "/")
		if p == "" || file == p || strings.HasPrefix(file, p+"/") {
			return true
		}
	}
	return false
}

func subject(message string) string {
	s, _, _ := strings.Cut(strings.TrimSpace(message), "\n")
	return strings.TrimSpace(s)
}

// tagVersions returns the tags that meet constraint, highest version first, each with the commit
// it points to; skipped counts the tags that are no version or do not meet it.
func tagVersions(repo *gogit.Repository, constraint semver.Constraint) (versions []Version, skipped int, err error) {
	tags, err := repo.Tags()
	if err != nil {
		return nil, 0, err
	}
	err = tags.ForEach(func(ref *plumbing.Reference) error {
		name := ref.Name().Short()
		v, err := semver.Parse(name)
		if err != nil || !constraint.Check(v) {
			skipped++
			return nil
		}
		c, err := tagCommit(repo, ref.Hash())
		if err != nil {
			skipped++
			return nil //nolint:nilerr // a tag of something other than a commit is no version
		}
		versions = append(versions, Version{Commit: c.Hash.String(), Tag: name, Subject: subject(c.Message), semver: &v})
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	slices.SortFunc(versions, func(a, b Version) int { return b.semver.Compare(*a.semver) })
	return versions, skipped, nil
}

// tagCommit peels a tag (annotated or lightweight) to its commit.
func tagCommit(repo *gogit.Repository, hash plumbing.Hash) (*object.Commit, error) {
	if tag, err := repo.TagObject(hash); err == nil {
		return tag.Commit()
	}
	return repo.CommitObject(hash)
}

// Keys are the trusted keys of a git source's verify Secret.
type Keys struct {
	PGP []string
	SSH []string
}

// KeysFrom reads a verify Secret as Flux's GitRepository does: an entry ending .sshpub holds SSH
// public keys (authorized_keys format), every other entry an armored OpenPGP key ring.
func KeysFrom(data map[string][]byte) (Keys, error) {
	var k Keys
	for name, value := range data {
		if strings.HasSuffix(name, ".sshpub") {
			if _, err := signature.ParseAuthorizedKeys(string(value)); err != nil {
				return Keys{}, fmt.Errorf("entry %s holds no SSH public key: %w", name, err)
			}
			k.SSH = append(k.SSH, string(value))
			continue
		}
		k.PGP = append(k.PGP, string(value))
	}
	if len(k.PGP)+len(k.SSH) == 0 {
		return Keys{}, errors.New("it holds no key: add OpenPGP keys (entries ending .asc) or SSH public keys (entries ending .sshpub)")
	}
	slices.Sort(k.PGP)
	slices.Sort(k.SSH)
	return k, nil
}

// verifyCommit checks the signature of commit (mode HEAD, TagAndHEAD) and of the annotated tag
// naming it (mode Tag, TagAndHEAD; tag is the tag's name). It returns who signed, or why the
// version is not trusted.
func verifyCommit(repo *gogit.Repository, commit, tag, mode string, keys Keys) (string, error) {
	var signers []string
	if mode == stagecoachv1.GitVerifyTag || mode == stagecoachv1.GitVerifyTagAndHEAD {
		if tag == "" {
			return "", fmt.Errorf("commit %s has no tag to verify (verify.mode %s needs a semver source)", Short(commit), mode)
		}
		ref, err := repo.Tag(tag)
		if err != nil {
			return "", fmt.Errorf("tag %s is %w", tag, errNotFetched)
		}
		obj, err := repo.TagObject(ref.Hash())
		if err != nil {
			return "", fmt.Errorf("tag %s is a lightweight tag: only an annotated tag carries a signature", tag)
		}
		signer, err := signedBy(obj, obj.PGPSignature, keys, true)
		if err != nil {
			return "", fmt.Errorf("tag %s: %w", tag, err)
		}
		signers = append(signers, "tag "+tag+" signed by "+signer)
	}
	if mode != stagecoachv1.GitVerifyTag {
		c, err := repo.CommitObject(plumbing.NewHash(commit))
		if err != nil {
			return "", fmt.Errorf("commit %s is %w", Short(commit), errNotFetched)
		}
		signer, err := SignedBy(c, keys)
		if err != nil {
			return "", fmt.Errorf("commit %s: %w", Short(commit), err)
		}
		signers = append(signers, "commit "+Short(commit)+" signed by "+signer)
	}
	return strings.Join(signers, ", "), nil
}

// SignedBy reports who of keys signed commit c ("" and an error when none did).
func SignedBy(c *object.Commit, keys Keys) (string, error) {
	return signedBy(c, c.PGPSignature, keys, false)
}

// signedBy checks the signature sig of a commit or tag object (isTag) over its encoding without it.
func signedBy(obj interface {
	EncodeWithoutSignature(plumbing.EncodedObject) error
}, sig string, keys Keys, isTag bool) (string, error) {
	encoded := &plumbing.MemoryObject{}
	if err := obj.EncodeWithoutSignature(encoded); err != nil {
		return "", err
	}
	payload, err := readAll(encoded)
	if err != nil {
		return "", err
	}
	return verifySignature(sig, payload, keys, isTag)
}

// errUnsigned marks a version that carries no signature at all; errNotFetched one whose commit or
// tag the clone does not hold (yet).
var (
	errUnsigned   = errors.New("it is not signed")
	errNotFetched = errors.New("not in the fetched repository")
)

// verifySignature checks an OpenPGP or SSH signature over payload (a tag's when isTag: the
// library's errors then say "tag", not "commit") with the trusted keys, as Flux's Git library does.
func verifySignature(sig string, payload []byte, keys Keys, isTag bool) (string, error) {
	switch {
	case strings.TrimSpace(sig) == "":
		return "", errUnsigned
	case signature.IsSSHSignature(sig):
		if len(keys.SSH) == 0 {
			return "", errors.New("it has an SSH signature, and verify.secretRef holds no SSH key (.sshpub)")
		}
		verify := (&fluxgit.Commit{Signature: sig, Encoded: payload}).VerifySSH
		if isTag {
			verify = (&fluxgit.Tag{Signature: sig, Encoded: payload}).VerifySSH
		}
		fingerprint, err := verify(keys.SSH...)
		if err != nil {
			return "", fmt.Errorf("its SSH signature is from no trusted key: %w", err)
		}
		return "SSH key " + fingerprint, nil
	default:
		if len(keys.PGP) == 0 {
			return "", errors.New("it has an OpenPGP signature, and verify.secretRef holds no OpenPGP key")
		}
		verify := (&fluxgit.Commit{Signature: sig, Encoded: payload}).VerifyPGP
		if isTag {
			verify = (&fluxgit.Tag{Signature: sig, Encoded: payload}).VerifyPGP
		}
		keyID, err := verify(keys.PGP...)
		if err != nil {
			return "", fmt.Errorf("its OpenPGP signature is from no trusted key: %w", err)
		}
		return "OpenPGP key " + keyID, nil
	}
}

func readAll(o plumbing.EncodedObject) ([]byte, error) {
	r, err := o.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}
