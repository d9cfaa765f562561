package forge

import (
	"context"
	"fmt"

	gitlab "gitlab.com/gitlab-org/api/client-go/v2"
)

type gitlabForge struct {
	client  *gitlab.Client
	project string
}

func newGitLab(opts Options, api, project string) (Forge, error) {
	c, err := gitlab.NewClient(opts.Token, gitlab.WithBaseURL(api), gitlab.WithHTTPClient(opts.HTTPClient))
	if err != nil {
		return nil, err
	}
	return &gitlabForge{client: c, project: project}, nil
}

func (f *gitlabForge) Find(ctx context.Context, head, base string) (*PullRequest, error) {
	state := "opened"
	mrs, resp, err := f.client.MergeRequests.ListProjectMergeRequests(f.project, &gitlab.ListProjectMergeRequestsOptions{
		State: &state, SourceBranch: &head, TargetBranch: &base}, gitlab.WithContext(ctx))
	if err != nil {
		return nil, gitlabError("finding the merge request from "+head, resp, err)
	}
	if len(mrs) == 0 {
		return nil, nil
	}
	return fromGitLab(mrs[0]), nil
}

func (f *gitlabForge) Open(ctx context.Context, head, base, title, body string) (*PullRequest, error) {
	mr, resp, err := f.client.MergeRequests.CreateMergeRequest(f.project, &gitlab.CreateMergeRequestOptions{
		Title: &title, Description: &body, SourceBranch: &head, TargetBranch: &base}, gitlab.WithContext(ctx))
	if err != nil {
		return nil, gitlabError(fmt.Sprintf("opening a merge request from %s into %s", head, base), resp, err)
	}
	return fromGitLab(&mr.BasicMergeRequest), nil
}

func (f *gitlabForge) Get(ctx context.Context, number int64) (*PullRequest, error) {
	mr, resp, err := f.client.MergeRequests.GetMergeRequest(f.project, number, nil, gitlab.WithContext(ctx))
	if err != nil {
		return nil, gitlabError(fmt.Sprintf("reading merge request !%d", number), resp, err)
	}
	return fromGitLab(&mr.BasicMergeRequest), nil
}

func (f *gitlabForge) Merge(ctx context.Context, number int64, headSHA, style string) error {
	removeBranch := true
	opts := &gitlab.AcceptMergeRequestOptions{SHA: &headSHA, ShouldRemoveSourceBranch: &removeBranch}
	if style == "squash" {
		squash := true
		opts.Squash = &squash
	}
	mr, resp, err := f.client.MergeRequests.AcceptMergeRequest(f.project, number, opts, gitlab.WithContext(ctx))
	if err != nil {
		return gitlabError(fmt.Sprintf("merging merge request !%d", number), resp, err)
	}
	if mr.State != "merged" {
		return fmt.Errorf("merging merge request !%d: GitLab left it %s", number, mr.State)
	}
	return nil
}

func (f *gitlabForge) Close(ctx context.Context, number int64) error {
	closeEvent := "close"
	if _, resp, err := f.client.MergeRequests.UpdateMergeRequest(f.project, number, &gitlab.UpdateMergeRequestOptions{StateEvent: &closeEvent},
		gitlab.WithContext(ctx)); err != nil {
		return gitlabError(fmt.Sprintf("closing merge request !%d", number), resp, err)
	}
	return nil
}

func fromGitLab(mr *gitlab.BasicMergeRequest) *PullRequest {
	out := &PullRequest{Number: mr.IID, URL: mr.WebURL, Open: mr.State == "opened", Merged: mr.State == "merged", HeadSHA: mr.SHA,
		Base: mr.TargetBranch, MergeCommit: mr.MergeCommitSHA,
		Conflicting: mr.State == "opened" && (mr.HasConflicts || mr.DetailedMergeStatus == "conflict")}
	switch {
	case mr.SquashCommitSHA != "":
		out.MergeCommit = mr.SquashCommitSHA
	case out.Merged && out.MergeCommit == "":
		// A project that merges by fast-forward makes no merge commit: the branch is at the head.
		out.MergeCommit = mr.SHA
	}
	if mr.MergedBy != nil {
		out.MergedBy = mr.MergedBy.Username
	}
	return out
}

func gitlabError(what string, resp *gitlab.Response, err error) error {
	status := 0
	if resp != nil && resp.Response != nil {
		status = resp.StatusCode
	}
	return statusError(what, status, err)
}
