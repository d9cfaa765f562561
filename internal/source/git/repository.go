package git

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // OpenSSH hashes known_hosts names with HMAC-SHA1
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"

	fluxgit "github.com/fluxcd/pkg/git"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/go-git/go-git/v5/storage/memory"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Errors a fetch ends with, for the source's block reasons.
var (
	ErrUnauthorized = errors.New("the server refused the credentials")
	ErrUnreachable  = errors.New("the server cannot be reached")
	ErrRefNotFound  = errors.New("no such branch or tag")
)

// Credentials are what a fetch or a push authenticates with, from a Secret in Flux's
// GitRepository format.
type Credentials struct {
	Auth     transport.AuthMethod
	CABundle []byte
}

// CredentialsFrom reads a Secret's data as Flux's GitRepository does (fluxcd/pkg/git
// AuthOptions): username/password or bearerToken over HTTPS, identity and known_hosts over SSH.
// An SSH host is trusted only as known_hosts says: there is no fallback to trusting any key.
func CredentialsFrom(rawURL string, data map[string][]byte) (Credentials, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return Credentials{}, fmt.Errorf("the URL %q does not parse: %w", rawURL, err)
	}
	opts, err := fluxgit.NewAuthOptions(*u, data)
	if err != nil {
		return Credentials{}, err
	}
	switch opts.Transport {
	case fluxgit.SSH:
		keys, err := gitssh.NewPublicKeys(opts.Username, opts.Identity, opts.Password)
		if err != nil {
			return Credentials{}, fmt.Errorf("its identity is not a private key this can use: %w", err)
		}
		callback, err := hostKeyCallback(opts.KnownHosts)
		if err != nil {
			return Credentials{}, err
		}
		keys.HostKeyCallback = callback
		return Credentials{Auth: keys}, nil
	default:
		c := Credentials{CABundle: opts.CAFile}
		switch {
		case opts.BearerToken != "":
			c.Auth = &githttp.TokenAuth{Token: opts.BearerToken}
		case opts.Username != "" || opts.Password != "":
			c.Auth = &githttp.BasicAuth{Username: opts.Username, Password: opts.Password}
		}
		return c, nil
	}
}

// hostKeyCallback accepts a server's host key only when known_hosts lists it for that host
// (plain or hashed host names, [host]:port for another port).
func hostKeyCallback(knownHosts []byte) (ssh.HostKeyCallback, error) {
	type entry struct {
		hosts []string
		key   ssh.PublicKey
	}
	var entries []entry
	rest := knownHosts
	for len(bytes.TrimSpace(rest)) > 0 {
		marker, hosts, key, _, next, err := ssh.ParseKnownHosts(rest)
		if err != nil {
			return nil, fmt.Errorf("known_hosts does not parse: %w", err)
		}
		if marker == "" { // @revoked and @cert-authority lines are not host keys
			entries = append(entries, entry{hosts: hosts, key: key})
		}
		rest = next
	}
	if len(entries) == 0 {
		return nil, errors.New("known_hosts lists no host key: add the server's (ssh-keyscan <host>)")
	}
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		address := knownhosts.Normalize(hostname)
		for _, e := range entries {
			if !bytes.Equal(e.key.Marshal(), key.Marshal()) {
				continue
			}
			for _, h := range e.hosts {
				if knownhosts.Normalize(h) == address || hashedMatches(h, address) {
					return nil
				}
			}
		}
		return fmt.Errorf("the host key of %s (%s) is not in known_hosts", hostname, ssh.FingerprintSHA256(key))
	}, nil
}

// hashedMatches reports whether a hashed known_hosts name (|1|base64 salt|base64 HMAC-SHA1 of
// the host name keyed by the salt, as OpenSSH writes it) names address.
func hashedMatches(hashed, address string) bool {
	parts := strings.Split(hashed, "|")
	if len(parts) != 4 || parts[0] != "" || parts[1] != "1" {
		return false
	}
	salt, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil {
		return false
	}
	want, err := base64.StdEncoding.DecodeString(parts[3])
	if err != nil {
		return false
	}
	mac := hmac.New(sha1.New, salt)
	mac.Write([]byte(address))
	return hmac.Equal(mac.Sum(nil), want)
}

// repository is one clone: a repository's objects in memory, fetched incrementally.
type repository struct {
	mu   sync.Mutex
	repo *gogit.Repository
	// onBranches are the commits found on a branch (onBranch).
	onBranches map[string]bool
}

// onBranch says whether commit (40 hex digits) is a branch's head or one of its ancestors in the
// clone; a commit found so is remembered (a branch force-pushed later does not unmake a release
// another cluster verified).
func (r *repository) onBranch(commit string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.repo == nil {
		return false
	}
	if r.onBranches[commit] {
		return true
	}
	target, err := r.repo.CommitObject(plumbing.NewHash(commit))
	if err != nil {
		return false
	}
	refs, err := r.repo.References()
	if err != nil {
		return false
	}
	defer refs.Close()
	found := false
	_ = refs.ForEach(func(ref *plumbing.Reference) error {
		if !ref.Name().IsBranch() || ref.Type() != plumbing.HashReference {
			return nil
		}
		if ref.Hash() == target.Hash {
			found = true
			return storer.ErrStop
		}
		head, err := r.repo.CommitObject(ref.Hash())
		if err != nil {
			return nil
		}
		if ok, err := target.IsAncestor(head); err == nil && ok {
			found = true
			return storer.ErrStop
		}
		return nil
	})
	if found {
		if r.onBranches == nil {
			r.onBranches = map[string]bool{}
		}
		r.onBranches[commit] = true
	}
	return found
}

// fetch brings refspecs from url into the clone (creating it on first use); force-pushed refs
// are taken as they are now.
func (r *repository) fetch(ctx context.Context, rawURL string, creds Credentials, refspecs ...string) error {
	if r.repo == nil {
		repo, err := gogit.Init(memory.NewStorage(), nil)
		if err != nil {
			return err
		}
		if _, err := repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{rawURL}}); err != nil {
			return err
		}
		r.repo = repo
	}
	specs := make([]config.RefSpec, 0, len(refspecs))
	for _, s := range refspecs {
		specs = append(specs, config.RefSpec(s))
	}
	err := r.repo.FetchContext(ctx, &gogit.FetchOptions{RemoteName: "origin", RemoteURL: rawURL, RefSpecs: specs, Auth: creds.Auth,
		CABundle: creds.CABundle, Tags: gogit.NoTags, Force: true})
	if err == nil || errors.Is(err, gogit.NoErrAlreadyUpToDate) {
		return nil
	}
	return Classify(err)
}

// Classify wraps an error of a fetch or a push in the error saying what went wrong
// (ErrUnauthorized, ErrRefNotFound, ErrUnreachable); a cancelled context stays as it is.
func Classify(err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed):
		return fmt.Errorf("%w: %v", ErrUnauthorized, err)
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return fmt.Errorf("%w: %v", ErrUnauthorized, err) // servers answer 404 to those who may not read
	case isNoMatchingRef(err):
		return fmt.Errorf("%w: %v", ErrRefNotFound, err)
	}
	return fmt.Errorf("%w: %v", ErrUnreachable, err)
}

func isNoMatchingRef(err error) bool {
	var noMatch gogit.NoMatchingRefSpecError
	return errors.As(err, &noMatch) || strings.Contains(err.Error(), "couldn't find remote ref")
}
