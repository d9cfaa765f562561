package forge

import (
	"context"
	"fmt"
	"net/http"

	"code.gitea.io/sdk/gitea"
)

type giteaForge struct {
	opts        Options
	api         string
	owner, repo string
}

func newGitea(opts Options, api, owner, repo string) (Forge, error) {
	return &giteaForge{opts: opts, api: api, owner: owner, repo: repo}, nil
}

// client is made per call: the SDK takes its context as a client option. SetGiteaVersion("")
// skips the version request the SDK would make first.
func (f *giteaForge) client(ctx context.Context) (*gitea.Client, error) {
	return gitea.NewClient(f.api, gitea.SetContext(ctx), gitea.SetToken(f.opts.Token), gitea.SetHTTPClient(f.opts.HTTPClient),
		gitea.SetGiteaVersion(""))
}

func (f *giteaForge) Find(ctx context.Context, head, base string) (*PullRequest, error) {
	c, err := f.client(ctx)
	if err != nil {
		return nil, err
	}
	pr, resp, err := c.GetPullRequestByBaseHead(f.owner, f.repo, base, head)
	switch {
	case resp != nil && resp.StatusCode == http.StatusNotFound:
		return nil, nil
	case err != nil:
		return nil, giteaError("finding the pull request from "+head, resp, err)
	case pr.State != gitea.StateOpen:
		return nil, nil
	}
	return fromGitea(pr), nil
}

func (f *giteaForge) Open(ctx context.Context, head, base, title, body string) (*PullRequest, error) {
	c, err := f.client(ctx)
	if err != nil {
		return nil, err
	}
	pr, resp, err := c.CreatePullRequest(f.owner, f.repo, gitea.CreatePullRequestOption{Head: head, Base: base, Title: title, Body: body})
	if err != nil {
		return nil, giteaError(fmt.Sprintf("opening a pull request from %s into %s", head, base), resp, err)
	}
	return fromGitea(pr), nil
}

func (f *giteaForge) Get(ctx context.Context, number int64) (*PullRequest, error) {
	c, err := f.client(ctx)
	if err != nil {
		return nil, err
	}
	pr, resp, err := c.GetPullRequest(f.owner, f.repo, number)
	if err != nil {
		return nil, giteaError(fmt.Sprintf("reading pull request #%d", number), resp, err)
	}
	return fromGitea(pr), nil
}

func (f *giteaForge) Merge(ctx context.Context, number int64, headSHA, style string) error {
	c, err := f.client(ctx)
	if err != nil {
		return err
	}
	deleteBranch := true
	merged, resp, err := c.MergePullRequest(f.owner, f.repo, number, gitea.MergePullRequestOption{Style: gitea.MergeStyle(style), HeadCommitId: headSHA,
		DeleteBranchAfterMerge: &deleteBranch})
	if err != nil {
		return giteaError(fmt.Sprintf("merging pull request #%d", number), resp, err)
	}
	if !merged {
		return fmt.Errorf("merging pull request #%d: Gitea did not merge it", number)
	}
	return nil
}

func (f *giteaForge) Close(ctx context.Context, number int64) error {
	c, err := f.client(ctx)
	if err != nil {
		return err
	}
	closed := gitea.StateClosed
	if _, resp, err := c.EditPullRequest(f.owner, f.repo, number, gitea.EditPullRequestOption{State: &closed}); err != nil {
		return giteaError(fmt.Sprintf("closing pull request #%d", number), resp, err)
	}
	return nil
}

func fromGitea(pr *gitea.PullRequest) *PullRequest {
	// Gitea's mergeable is false while it is still checking a new request for conflicts, and the
	// API does not say which: a conflict shows as a refused merge instead (Conflicting stays false).
	out := &PullRequest{Number: pr.Index, URL: pr.HTMLURL, Open: pr.State == gitea.StateOpen, Merged: pr.HasMerged}
	if pr.Head != nil {
		out.HeadSHA = pr.Head.Sha
	}
	if pr.Base != nil {
		out.Base = pr.Base.Ref
	}
	if pr.MergedCommitID != nil {
		out.MergeCommit = *pr.MergedCommitID
	}
	if pr.MergedBy != nil {
		out.MergedBy = pr.MergedBy.UserName
	}
	return out
}

func giteaError(what string, resp *gitea.Response, err error) error {
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	return statusError(what, status, err)
}
