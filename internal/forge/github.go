package forge

import (
	"context"
	"fmt"
	"net/http"

	"github.com/google/go-github/v93/github"
)

type githubForge struct {
	client      *github.Client
	owner, repo string
}

func newGitHub(opts Options, api, owner, repo string) (Forge, error) {
	clientOpts := []github.ClientOptionsFunc{github.WithHTTPClient(opts.HTTPClient), github.WithAuthToken(opts.Token)}
	if api != "" {
		clientOpts = append(clientOpts, github.WithEnterpriseURLs(api, api))
	}
	c, err := github.NewClient(clientOpts...)
	if err != nil {
		return nil, err
	}
	return &githubForge{client: c, owner: owner, repo: repo}, nil
}

func (f *githubForge) Find(ctx context.Context, head, base string) (*PullRequest, error) {
	prs, resp, err := f.client.PullRequests.List(ctx, f.owner, f.repo, &github.PullRequestListOptions{State: "open", Head: f.owner + ":" + head, Base: base})
	if err != nil {
		return nil, githubError("finding the pull request from "+head, resp, err)
	}
	if len(prs) == 0 {
		return nil, nil
	}
	return fromGitHub(prs[0]), nil
}

func (f *githubForge) Open(ctx context.Context, head, base, title, body string) (*PullRequest, error) {
	pr, resp, err := f.client.PullRequests.Create(ctx, f.owner, f.repo, github.CreatePullRequest{Title: &title, Head: head, Base: base, Body: &body})
	if err != nil {
		return nil, githubError(fmt.Sprintf("opening a pull request from %s into %s", head, base), resp, err)
	}
	return fromGitHub(pr), nil
}

func (f *githubForge) Get(ctx context.Context, number int64) (*PullRequest, error) {
	pr, resp, err := f.client.PullRequests.Get(ctx, f.owner, f.repo, int(number))
	if err != nil {
		return nil, githubError(fmt.Sprintf("reading pull request #%d", number), resp, err)
	}
	return fromGitHub(pr), nil
}

func (f *githubForge) Merge(ctx context.Context, number int64, headSHA, style string) error {
	res, resp, err := f.client.PullRequests.Merge(ctx, f.owner, f.repo, int(number), "", &github.PullRequestOptions{SHA: headSHA, MergeMethod: style})
	if err != nil {
		return githubError(fmt.Sprintf("merging pull request #%d", number), resp, err)
	}
	if !res.GetMerged() {
		return fmt.Errorf("merging pull request #%d: GitHub did not merge it: %s", number, res.GetMessage())
	}
	return nil
}

func (f *githubForge) Close(ctx context.Context, number int64) error {
	closed := "closed"
	if _, resp, err := f.client.PullRequests.Edit(ctx, f.owner, f.repo, int(number), &github.PullRequest{State: &closed}); err != nil {
		return githubError(fmt.Sprintf("closing pull request #%d", number), resp, err)
	}
	return nil
}

func fromGitHub(pr *github.PullRequest) *PullRequest {
	return &PullRequest{Number: int64(pr.GetNumber()), URL: pr.GetHTMLURL(), Open: pr.GetState() == "open", Merged: pr.GetMerged(),
		HeadSHA: pr.GetHead().GetSHA(), Base: pr.GetBase().GetRef(), MergeCommit: pr.GetMergeCommitSHA(), MergedBy: pr.GetMergedBy().GetLogin(),
		// mergeable is computed in the background: null until known, false on a conflict.
		Conflicting: pr.GetState() == "open" && pr.Mergeable != nil && !*pr.Mergeable && pr.GetMergeableState() == "dirty"}
}

func githubError(what string, resp *github.Response, err error) error {
	status := 0
	if resp != nil && resp.Response != nil {
		status = resp.StatusCode
	}
	if status == http.StatusNotFound {
		// GitHub answers 404 to a token that may not see the repository.
		return fmt.Errorf("%s: %w (HTTP 404: no such repository, or the token may not see it): %v", what, ErrUnauthorized, err)
	}
	return statusError(what, status, err)
}
