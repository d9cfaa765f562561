package promotion

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/forge"
	gitsource "github.com/stagecoach-dev/stagecoach/internal/source/git"
)

// How often a pull request is read while it waits: for a person's merge, and for the forge to
// finish a merge it was asked for (the commit it made is read back).
const (
	pullRequestWaitInterval  = 15 * time.Second
	pullRequestMergeInterval = time.Second
)

// pullRequest moves a Promotion of a Stage that promotes by pull request: the commit is pushed to
// the request's own branch and the request opened (once), then merged by Stagecoach or waited
// for. merged: the environment's branch holds the version (p.Status.Commit is set) and the
// engine's proof is next. A request that is closed without merging, conflicts with the branch,
// or holds a commit Stagecoach did not push is not taken as the promotion: the Promotion fails.
func (g gitRollout) pullRequest(ctx context.Context, run *Run, p *stagecoachv1.Promotion) (merged bool, requeue time.Duration, err error) {
	spec := g.spec.PullRequest
	f, problem, err := g.forge(ctx, run)
	if err != nil || problem != "" {
		return false, 0, errors.Join(err, g.reject(ctx, run, p, stagecoachv1.ReasonGitWriteFailed, problem))
	}
	pr := p.Status.PullRequest
	if pr == nil {
		// Named by namespace too: Stages of one name in two namespaces may write one repository.
		branch := fmt.Sprintf("stagecoach/%s/%s/%s", run.stage.Namespace, run.stage.Name, p.Name)
		res, done, err := g.write(ctx, run, p, branch)
		if err != nil || done {
			return false, 0, err
		}
		if !res.Written {
			// The branch holds the version already: nothing to propose.
			return true, 0, g.onBranch(ctx, run, p, res.Commit, false)
		}
		opened, err := f.Find(ctx, branch, g.spec.Branch)
		if err == nil && opened == nil {
			opened, err = f.Open(ctx, branch, g.spec.Branch, firstLine(CommitMessage(run.stage, p)), PullRequestBody(run.stage, p, spec, res.Diff))
		}
		if err != nil {
			if errors.Is(err, forge.ErrUnauthorized) {
				return false, 0, g.reject(ctx, run, p, stagecoachv1.ReasonGitWriteFailed, fmt.Sprintf("%v: fix the token in Secret '%s/%s'", err, run.stage.Namespace, spec.TokenSecretRef.Name))
			}
			return false, 0, fmt.Errorf("failed to open the pull request of Promotion %s on %s: %w", p.Name, spec.Provider, err)
		}
		pr = &stagecoachv1.PullRequestReference{Number: opened.Number, URL: opened.URL, Branch: branch, HeadSHA: res.Commit}
		p.Status.PullRequest = pr
		p.Status.Message = fmt.Sprintf("opened pull request #%d (%s) into %s", pr.Number, pr.URL, g.spec.Branch)
		if err := run.status.save(ctx, p); err != nil {
			return false, 0, err
		}
		run.event(p, corev1.EventTypeNormal, stagecoachv1.ReasonPullRequestOpened, "Opened pull request #%d (%s) to promote %s into %s of %s",
			pr.Number, pr.URL, versionString(p.Status.Version), g.spec.Branch, g.spec.URL)
	}

	got, err := f.Get(ctx, pr.Number)
	if err != nil {
		return false, 0, fmt.Errorf("failed to read pull request #%d of Promotion %s: %w", pr.Number, p.Name, err)
	}
	described := fmt.Sprintf("pull request #%d (%s)", pr.Number, pr.URL)
	// reject fails the Promotion and closes the request, so that nobody merges it later.
	reject := func(message string) error {
		if got.Open {
			if err := f.Close(ctx, pr.Number); err != nil {
				return fmt.Errorf("failed to close %s of Promotion %s: %w", described, p.Name, err)
			}
			message += "; Stagecoach closed it"
		}
		return g.reject(ctx, run, p, stagecoachv1.ReasonPullRequestRejected, message)
	}
	switch {
	case got.Base != "" && got.Base != g.spec.Branch:
		return false, 0, reject(fmt.Sprintf("%s was retargeted to branch %s, not %s: it is not this promotion", described, got.Base, g.spec.Branch))
	case got.Merged && got.HeadSHA != pr.HeadSHA:
		return false, 0, reject(fmt.Sprintf(
			"%s was merged by %s with commit %s at its head, which Stagecoach did not push (it pushed %s): someone else changed it, so it is not this promotion",
			described, got.MergedBy, gitsource.Short(got.HeadSHA), gitsource.Short(pr.HeadSHA)))
	case got.Merged && got.MergeCommit == "":
		return false, pullRequestMergeInterval, nil // the forge has not said which commit yet
	case got.Merged:
		if err := g.onBranch(ctx, run, p, got.MergeCommit, true); err != nil {
			return false, 0, err
		}
		run.event(p, corev1.EventTypeNormal, stagecoachv1.ReasonPullRequestMerged, "%s merged by %s into %s as commit %s",
			described, got.MergedBy, g.spec.Branch, gitsource.Short(got.MergeCommit))
		return true, 0, nil
	case !got.Open:
		return false, 0, reject(described + " was closed without merging")
	case got.HeadSHA != pr.HeadSHA:
		return false, 0, reject(fmt.Sprintf("someone else pushed to %s: its head is %s, not the commit %s Stagecoach pushed; it is not merged", described,
			gitsource.Short(got.HeadSHA), gitsource.Short(pr.HeadSHA)))
	case got.Conflicting:
		return false, 0, reject(fmt.Sprintf("%s conflicts with %s: promote again to write the version on the branch as it is now", described, g.spec.Branch))
	case spec.Merge == stagecoachv1.PullRequestMergeManual:
		return false, pullRequestWaitInterval, run.status.note(ctx, p, fmt.Sprintf("waiting for a person to merge %s into %s", described, g.spec.Branch))
	}
	style := spec.MergeStyle
	if style == "" {
		style = "merge"
	}
	if err := f.Merge(ctx, pr.Number, pr.HeadSHA, style); err != nil {
		if errors.Is(err, forge.ErrUnauthorized) {
			return false, 0, g.reject(ctx, run, p, stagecoachv1.ReasonGitWriteFailed, fmt.Sprintf("%v: the token in Secret '%s/%s' may not merge", err, run.stage.Namespace, spec.TokenSecretRef.Name))
		}
		// The forge may still be checking the request (mergeability is computed after it opens):
		// try again, until the progress deadline counted from the Promotion's start.
		if started := p.Status.StartedAt; started != nil && run.now.Sub(started.Time) > run.stage.GetProgressDeadline() {
			return false, 0, reject(fmt.Sprintf("%s could not be merged within the progress deadline: %v", described, err))
		}
		return false, pullRequestWaitInterval, run.status.note(ctx, p, fmt.Sprintf("merging %s: %v; trying again", described, err))
	}
	return false, pullRequestMergeInterval, run.status.note(ctx, p, fmt.Sprintf("merged %s; reading the commit it made", described))
}

// reject fails the Promotion (nothing is written to the environment's branch; a merged
// request's commit is rolled back as any failed version is).
func (g gitRollout) reject(ctx context.Context, run *Run, p *stagecoachv1.Promotion, reason, message string) error {
	if message == "" {
		return nil
	}
	return run.finishFailed(ctx, p, reason, message)
}

// forge is the Stage's forge, with the token of its Secret.
func (g gitRollout) forge(ctx context.Context, run *Run) (forge.Forge, string, error) {
	spec := g.spec.PullRequest
	data, problem, err := g.secret(ctx, run, spec.TokenSecretRef.Name, "forge token")
	if err != nil || problem != "" {
		return nil, problem, err
	}
	token := strings.TrimSpace(string(data["token"]))
	if token == "" {
		return nil, fmt.Sprintf("Secret '%s/%s' has no key token (the forge's API token)", run.stage.Namespace, spec.TokenSecretRef.Name), nil
	}
	newForge := run.r.Forges
	if newForge == nil {
		newForge = forge.New
	}
	f, err := newForge(forge.Options{Provider: spec.Provider, RepositoryURL: g.spec.URL, APIURL: spec.APIURL, Token: token})
	if err != nil {
		return nil, fmt.Sprintf("spec.promotion.git.pullRequest: %v", err), nil
	}
	return f, "", nil
}

// PullRequestBody is what a promotion's pull request says: the version, each gate's verdict,
// who merges, and the change as a diff.
func PullRequestBody(stage *stagecoachv1.Stage, p *stagecoachv1.Promotion, spec *stagecoachv1.GitPullRequest, diff string) string {
	var b strings.Builder
	version := p.Status.Version
	name := version.Tag
	if name == "" {
		name = version.Digest
	}
	fmt.Fprintf(&b, "Stagecoach promotes **%s** to **%s** in **%s** (Stage `%s/%s`, Promotion `%s`).\n\n", stage.Spec.Service, name,
		stage.Spec.Environment, stage.Namespace, stage.Name, p.Name)
	fmt.Fprintf(&b, "Version: `%s`", version.Digest)
	if p.Spec.RequestedBy != "" {
		fmt.Fprintf(&b, ", requested by %s", p.Spec.RequestedBy)
	}
	b.WriteString("\n\n")
	if len(p.Status.Gates) > 0 {
		b.WriteString("| Gate | Verdict | |\n|---|---|---|\n")
		for _, gate := range p.Status.Gates {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", gate.Gate, verdictOf(gate), strings.ReplaceAll(firstLine(gate.Message), "|", "\\|"))
		}
		b.WriteString("\n")
	} else {
		b.WriteString("No gate applies to this promotion.\n\n")
	}
	if spec.Merge == stagecoachv1.PullRequestMergeManual {
		b.WriteString("A person merges this pull request; the Promotion waits until then. Pushing to its branch, or closing it, fails the Promotion.\n\n")
	} else {
		b.WriteString("Stagecoach merges this pull request: the gates above have passed. Pushing to its branch, or closing it, fails the Promotion.\n\n")
	}
	fmt.Fprintf(&b, "```diff\n%s```\n", diff)
	return b.String()
}

// closeOpen closes the pull request of a Promotion that ends before it was merged (aborted), so
// that nobody merges it later; it says so in a phrase for the Promotion's message ("" when there
// was none open).
func (g gitRollout) closeOpen(ctx context.Context, run *Run, p *stagecoachv1.Promotion) (string, error) {
	pr := p.Status.PullRequest
	if g.spec.PullRequest == nil || pr == nil || p.Status.Commit != nil {
		return "", nil
	}
	f, problem, err := g.forge(ctx, run)
	if err != nil || problem != "" {
		return "", errors.Join(err, errorIf(problem))
	}
	got, err := f.Get(ctx, pr.Number)
	if err != nil || !got.Open {
		return "", err
	}
	if err := f.Close(ctx, pr.Number); err != nil {
		return "", err
	}
	return fmt.Sprintf("; its pull request #%d (%s) was closed", pr.Number, pr.URL), nil
}

func errorIf(problem string) error {
	if problem == "" {
		return nil
	}
	return errors.New(problem)
}
