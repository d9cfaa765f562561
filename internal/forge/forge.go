// Package forge opens, reads and merges the pull requests of promotion.git.pullRequest through
// each forge's maintained Go client: Gitea (code.gitea.io/sdk/gitea), GitHub (google/go-github)
// and GitLab merge requests (gitlab.com/gitlab-org/api/client-go). One interface; the controller
// never asks which forge it talks to.
package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// PullRequest is what Stagecoach reads of a pull (or merge) request.
type PullRequest struct {
	Number int64
	URL    string
	// Open, Merged: an open request is neither merged nor closed; a closed one not merged was
	// closed without merging.
	Open, Merged bool
	// HeadSHA is the commit the request's branch points to now; Base the branch it would merge
	// into (someone may retarget an open request).
	HeadSHA, Base string
	// MergeCommit is the commit the merge made on the base branch (the squash or rebase result).
	MergeCommit string
	// MergedBy is who merged it.
	MergedBy string
	// Conflicting: the forge says it cannot be merged as it is.
	Conflicting bool
}

// Forge is one repository on a forge.
type Forge interface {
	// Find returns the open request from head into base, nil when there is none.
	Find(ctx context.Context, head, base string) (*PullRequest, error)
	// Open opens a request from head into base.
	Open(ctx context.Context, head, base, title, body string) (*PullRequest, error)
	// Get reads a request.
	Get(ctx context.Context, number int64) (*PullRequest, error)
	// Merge merges a request whose head is still headSHA (the forge refuses otherwise), in style
	// (merge, squash or rebase), deleting its branch where the forge can.
	Merge(ctx context.Context, number int64, headSHA, style string) error
	// Close closes an open request without merging it.
	Close(ctx context.Context, number int64) error
}

// Providers.
const (
	Gitea  = "Gitea"
	GitHub = "GitHub"
	GitLab = "GitLab"
)

// ErrUnauthorized: the forge refused the token.
var ErrUnauthorized = errors.New("the forge refused the token")

// Options say where a forge is.
type Options struct {
	Provider string
	// RepositoryURL is the repository's Git URL (https://host/owner/repo.git): the API is found
	// from it unless APIURL is set.
	RepositoryURL string
	APIURL        string
	Token         string
	// HTTPClient carries requests (TLS roots, timeouts); http.DefaultClient when nil.
	HTTPClient *http.Client
}

// New returns the forge of a repository.
func New(opts Options) (Forge, error) {
	u, err := url.Parse(opts.RepositoryURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("the repository URL %q does not parse", opts.RepositoryURL)
	}
	path := strings.TrimSuffix(strings.Trim(u.Path, "/"), ".git")
	if strings.Count(path, "/") < 1 {
		return nil, fmt.Errorf("the repository URL %q names no owner/repository", opts.RepositoryURL)
	}
	if opts.HTTPClient == nil {
		// A forge that does not answer must not hold a reconcile: the next one asks again.
		opts.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	host := u.Scheme + "://" + u.Host
	if u.Scheme == "ssh" {
		host = "https://" + u.Hostname()
	}
	switch opts.Provider {
	case Gitea:
		owner, repo, _ := strings.Cut(path, "/")
		return newGitea(opts, firstNonEmpty(opts.APIURL, host), owner, repo)
	case GitHub:
		owner, repo, _ := strings.Cut(path, "/")
		api := opts.APIURL
		if api == "" && u.Hostname() != "github.com" {
			api = host + "/api/v3/" // GitHub Enterprise Server
		}
		return newGitHub(opts, api, owner, repo)
	case GitLab:
		return newGitLab(opts, firstNonEmpty(opts.APIURL, host+"/api/v4"), path)
	}
	return nil, fmt.Errorf("no forge %q: use Gitea, GitHub or GitLab", opts.Provider)
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// statusError maps an HTTP status of a forge's answer to what it means.
func statusError(what string, status int, err error) error {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("%s: %w (HTTP %d): %v", what, ErrUnauthorized, status, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
