package promotion

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/forge"
)

// Issue 50 item 6: what a Promotion of a Stage that promotes by pull request decides from the
// request as the forge reports it (pullrequest.go), through internal/forge's real clients against
// a forge on 127.0.0.1 answering the calls they make as Gitea's API (gitea.com/api/swagger) and
// GitHub's REST API (docs.github.com/rest/pulls) document them.

// documentedForge is repository org/config with one pull request, #7, on a forge of one provider.
type documentedForge struct {
	provider string
	token    string

	mu    sync.Mutex
	pr    forgePR
	calls []string // "METHOD path", and the head a merge was asked at
}

type forgePR struct {
	head, base, sha string
	open, merged    bool
	mergeSHA        string
	mergedBy        string
}

const (
	forgeToken  = "forge-t0ken"
	prNumber    = 7
	pushedSHA   = "1111111111111111111111111111111111111111" // what Stagecoach pushed to the request's branch
	theirSHA    = "2222222222222222222222222222222222222222" // what someone else pushed
	mergeSHA    = "3333333333333333333333333333333333333333"
	stageMerged = "4444444444444444444444444444444444444444" // the forge's merge commit of Stagecoach's merge
)

func (d *documentedForge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, r.Method+" "+r.URL.Path)
	auth, prefix := "token "+d.token, fmt.Sprintf("/api/v1/repos/org/config/pulls/%d", prNumber) // Gitea
	if d.provider == forge.GitHub {
		auth, prefix = "Bearer "+d.token, fmt.Sprintf("/api/v3/repos/org/config/pulls/%d", prNumber)
	}
	if r.Header.Get("Authorization") != auth {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "Bad credentials"})
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, prefix)
	switch {
	case !ok:
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
	case r.Method == http.MethodGet && rest == "":
		writeJSON(w, http.StatusOK, d.view())
	case r.Method == http.MethodPatch && rest == "":
		var body struct {
			State string `json:"state"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		if body.State == "closed" {
			d.pr.open = false
		}
		// Gitea answers an edit with 201 Created, GitHub with 200.
		writeJSON(w, map[string]int{forge.Gitea: http.StatusCreated, forge.GitHub: http.StatusOK}[d.provider], d.view())
	case r.Method == http.MethodPost && rest == "/merge" && d.provider == forge.Gitea,
		r.Method == http.MethodPut && rest == "/merge" && d.provider == forge.GitHub:
		var body struct {
			GiteaHead  string `json:"head_commit_id"`
			GitHubHead string `json:"sha"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		head := body.GiteaHead + body.GitHubHead
		d.calls[len(d.calls)-1] += " at " + head
		switch {
		case !d.pr.open:
			writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"message": "Pull Request is not mergeable"})
		case head != d.pr.sha:
			writeJSON(w, http.StatusConflict, map[string]any{"message": "Head branch was modified. Review and try the merge again."})
		default:
			d.pr.open, d.pr.merged, d.pr.mergeSHA, d.pr.mergedBy = false, true, stageMerged, "stagecoach-bot"
			if d.provider == forge.Gitea {
				w.WriteHeader(http.StatusOK) // Gitea: 200, empty
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"sha": stageMerged, "merged": true, "message": "Pull Request successfully merged"})
		}
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
	}
}

// view is the pull request as the provider's API returns it.
func (d *documentedForge) view() map[string]any {
	p := d.pr
	v := map[string]any{"id": 1000 + prNumber, "number": prNumber, "state": p.state(), "title": "Promote payments to v2.0.0 in prod",
		"merged": p.merged, "merged_at": nil, "merge_commit_sha": nil, "merged_by": nil, "mergeable": p.open}
	switch d.provider {
	case forge.Gitea:
		v["html_url"] = fmt.Sprintf("https://git.example/org/config/pulls/%d", prNumber)
		v["head"] = map[string]any{"label": p.head, "ref": p.head, "sha": p.sha, "repo_id": 1}
		v["base"] = map[string]any{"label": p.base, "ref": p.base, "sha": "5555555555555555555555555555555555555555", "repo_id": 1}
	case forge.GitHub:
		v["html_url"] = fmt.Sprintf("https://github.example/org/config/pull/%d", prNumber)
		v["head"] = map[string]any{"label": "org:" + p.head, "ref": p.head, "sha": p.sha}
		v["base"] = map[string]any{"label": "org:" + p.base, "ref": p.base, "sha": "5555555555555555555555555555555555555555"}
		v["mergeable_state"] = map[bool]string{true: "clean", false: "unknown"}[p.open]
	}
	if p.merged {
		v["merged_at"], v["merge_commit_sha"], v["merged_by"] = "2026-12-01T09:59:30Z", p.mergeSHA, map[string]any{"id": 2, "login": p.mergedBy}
	}
	return v
}

func (p forgePR) state() string {
	if p.open {
		return "open"
	}
	return "closed"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (d *documentedForge) snapshot() (forgePR, []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pr, append([]string(nil), d.calls...)
}

// prCase is one request as the forge reports it, with what the Promotion must decide.
type prCase struct {
	name  string
	merge string // spec.promotion.git.pullRequest.merge
	pr    forgePR
	// wantLanded: the Promotion takes the merge commit as its commit (recorded on the Stage), at
	// the step given (1: the first).
	wantLanded int
	// wantRejected is in the failed Promotion's message; wantClosed: Stagecoach closed it.
	wantRejected string
	wantClosed   bool
}

// stepPullRequest steps a Promotion whose pull request #7 was opened (its commit pushed) at
// pushedSHA, against a forge of provider reporting tc.pr, until it lands or fails (three steps at
// most).
func stepPullRequest(t *testing.T, provider string, tc prCase) {
	g := NewWithT(t)
	d := &documentedForge{provider: provider, token: forgeToken, pr: tc.pr}
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	api := srv.URL
	if provider == forge.GitHub {
		api += "/api/v3/"
	}
	spec := stagecoachv1.GitPromotion{URL: "https://git.example/org/config.git", Branch: "env/prod",
		Set: []stagecoachv1.GitFileEdit{{Path: gitValues, Key: "image.digest"}},
		PullRequest: &stagecoachv1.GitPullRequest{Provider: provider, APIURL: api, Merge: tc.merge,
			TokenSecretRef: stagecoachv1.LocalObjectReference{Name: "forge-token"}}}
	p := stepPromotion("p", stagecoachv1.ActionPromote, digestV2, func(p *stagecoachv1.Promotion) {
		running(nil, nil)(p)
		p.Status.PullRequest = &stagecoachv1.PullRequestReference{Number: prNumber, URL: "https://git.example/org/config/pulls/7",
			Branch: "stagecoach/prod/payments/p", HeadSHA: pushedSHA}
	})
	env := newGitStepEnv(t, spec, nil, p, map[string]map[string][]byte{"forge-token": {"token": []byte(forgeToken)}})

	for step := 1; step <= 3; step++ {
		_, err := env.run.progress(t.Context(), &env.run.promotions[0])
		g.Expect(err).NotTo(HaveOccurred())
		got := env.promotion(t, "p")
		if got.Status.Commit != nil || got.Status.Phase != stagecoachv1.PhaseRunning {
			g.Expect(step).To(Equal(max(tc.wantLanded, 1)), "decided at step %d: %s", step, got.Status.Message)
			break
		}
		env.run.now = env.run.now.Add(pullRequestMergeInterval)
	}
	got, stage := env.promotion(t, "p"), env.stage(t)
	pr, calls := d.snapshot()
	for _, call := range calls {
		if strings.Contains(call, "/merge") {
			g.Expect(call).To(HaveSuffix(" at "+pushedSHA), "a merge is only ever asked at the head Stagecoach pushed")
		}
	}
	if tc.wantLanded > 0 {
		g.Expect(got.Status.Phase).To(Equal(stagecoachv1.PhaseRunning), got.Status.Message)
		g.Expect(got.Status.Commit).To(Equal(&stagecoachv1.PushedCommit{SHA: pr.mergeSHA, Branch: "env/prod", Written: true}))
		g.Expect(stage.Status.LastCommit).To(Equal(&stagecoachv1.BranchCommit{SHA: pr.mergeSHA, URL: spec.URL, Branch: "env/prod"}))
		g.Expect(stage.Status.LastAppliedDigest).To(Equal(digestV2))
		return
	}
	g.Expect(got.Status.Phase).To(Equal(stagecoachv1.PhaseFailed))
	g.Expect(got.Status.Message).To(ContainSubstring(tc.wantRejected))
	verified := meta.FindStatusCondition(stage.Status.Conditions, stagecoachv1.ConditionVerified)
	g.Expect(verified).NotTo(BeNil())
	g.Expect(verified.Reason).To(Equal(stagecoachv1.ReasonPullRequestRejected))
	// Nothing is recorded as landed, or as written to the branch.
	g.Expect(got.Status.Commit).To(BeNil())
	g.Expect(got.Status.AppliedAt).To(BeNil())
	g.Expect(got.Status.LandedAt).To(BeNil())
	g.Expect(stage.Status.LastCommit).To(BeNil())
	g.Expect(stage.Status.LastAppliedDigest).To(BeEmpty())
	// Never merged by Stagecoach; closed when it was open, so that nobody merges it later.
	g.Expect(calls).NotTo(ContainElement(ContainSubstring("/merge")), "Stagecoach does not merge a rejected request")
	g.Expect(pr.merged).To(Equal(tc.pr.merged))
	closing := ContainElement("PATCH " + map[string]string{forge.Gitea: "/api/v1", forge.GitHub: "/api/v3"}[provider] + "/repos/org/config/pulls/7")
	if tc.wantClosed {
		g.Expect(calls).To(closing)
		g.Expect(pr.open).To(BeFalse())
		g.Expect(got.Status.Message).To(ContainSubstring("Stagecoach closed it"))
	} else {
		g.Expect(calls).NotTo(closing)
	}
}

// A request merged at a head Stagecoach did not push (someone pushed to its branch) is not the
// promotion: the Promotion fails and nothing of it is recorded as landed; merged at the head it
// pushed, its merge commit is the Promotion's commit.
func TestPullRequestMergedAtAHeadStagecoachDidNotPush(t *testing.T) {
	for _, provider := range []string{forge.Gitea, forge.GitHub} {
		t.Run(provider, func(t *testing.T) {
			for _, tc := range []prCase{
				{name: "merged by a person at the head Stagecoach pushed: landed", merge: stagecoachv1.PullRequestMergeManual, wantLanded: 1,
					pr: forgePR{head: "stagecoach/prod/payments/p", base: "env/prod", sha: pushedSHA, merged: true, mergeSHA: mergeSHA, mergedBy: "alice"}},
				{name: "merged by a person at another head: rejected", merge: stagecoachv1.PullRequestMergeManual,
					wantRejected: "was merged by mallory with commit 2222222 at its head, which Stagecoach did not push (it pushed 1111111)",
					pr:           forgePR{head: "stagecoach/prod/payments/p", base: "env/prod", sha: theirSHA, merged: true, mergeSHA: mergeSHA, mergedBy: "mallory"}},
				{name: "merged at another head while Stagecoach was to merge it: rejected", merge: stagecoachv1.PullRequestMergeAuto,
					wantRejected: "at its head, which Stagecoach did not push",
					pr:           forgePR{head: "stagecoach/prod/payments/p", base: "env/prod", sha: theirSHA, merged: true, mergeSHA: mergeSHA, mergedBy: "mallory"}},
				{name: "open at another head: closed, not merged", merge: stagecoachv1.PullRequestMergeAuto, wantClosed: true,
					wantRejected: "someone else pushed to pull request #7",
					pr:           forgePR{head: "stagecoach/prod/payments/p", base: "env/prod", sha: theirSHA, open: true}},
				{name: "open at the head Stagecoach pushed: merged at it, then landed", merge: stagecoachv1.PullRequestMergeAuto, wantLanded: 2,
					pr: forgePR{head: "stagecoach/prod/payments/p", base: "env/prod", sha: pushedSHA, open: true}},
			} {
				t.Run(tc.name, func(t *testing.T) { stepPullRequest(t, provider, tc) })
			}
		})
	}
}

// A request retargeted to another branch is not the promotion, whoever was to merge it and
// whatever its head: it is closed if open and never merged, and the Promotion fails.
func TestPullRequestRetargetedIsClosedNeverMerged(t *testing.T) {
	for _, provider := range []string{forge.Gitea, forge.GitHub} {
		t.Run(provider, func(t *testing.T) {
			for _, tc := range []prCase{
				{name: "open, Stagecoach merges (Auto)", merge: stagecoachv1.PullRequestMergeAuto, wantClosed: true,
					wantRejected: "pull request #7 (https://git.example/org/config/pulls/7) was retargeted to branch main, not env/prod",
					pr:           forgePR{head: "stagecoach/prod/payments/p", base: "main", sha: pushedSHA, open: true}},
				{name: "open, Stagecoach merges by default", wantClosed: true, wantRejected: "was retargeted to branch main, not env/prod",
					pr: forgePR{head: "stagecoach/prod/payments/p", base: "main", sha: pushedSHA, open: true}},
				{name: "open, a person merges (Manual)", merge: stagecoachv1.PullRequestMergeManual, wantClosed: true,
					wantRejected: "was retargeted to branch main, not env/prod",
					pr:           forgePR{head: "stagecoach/prod/payments/p", base: "main", sha: pushedSHA, open: true}},
				{name: "already merged into the other branch at the head Stagecoach pushed", merge: stagecoachv1.PullRequestMergeManual,
					wantRejected: "was retargeted to branch main, not env/prod",
					pr:           forgePR{head: "stagecoach/prod/payments/p", base: "main", sha: pushedSHA, merged: true, mergeSHA: mergeSHA, mergedBy: "alice"}},
			} {
				t.Run(tc.name, func(t *testing.T) { stepPullRequest(t, provider, tc) })
			}
		})
	}
}
