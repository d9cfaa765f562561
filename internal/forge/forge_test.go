package forge_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/stagecoach-dev/stagecoach/internal/forge"
)

// The GitHub and GitLab clients against servers that answer as the forges' REST API references
// document (GitHub: docs.github.com/rest/pulls; GitLab: docs.gitlab.com/api/merge_requests): the
// paths, query parameters, bodies and status codes each call sends and gets. Gitea is proven end
// to end against a real Gitea (test/e2e).

// documented is one repository's pull requests on a forge that speaks one provider's API.
type documented struct {
	mu       sync.Mutex
	token    string
	prs      map[int64]*pr
	next     int64
	requests []string
}

type pr struct {
	head, base, title, body, sha, state, mergedBy, mergeSHA string
	conflicting                                             bool
}

func (d *documented) authorized(w http.ResponseWriter, r *http.Request, header, prefix string) bool {
	if r.Header.Get(header) != prefix+d.token {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"message":"Bad credentials"}`))
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// github serves /repos/org/config/pulls... as docs.github.com/rest/pulls/pulls documents.
func (d *documented) github(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.requests = append(d.requests, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
	if !d.authorized(w, r, "Authorization", "Bearer ") {
		return
	}
	view := func(n int64, p *pr) map[string]any {
		v := map[string]any{"number": n, "html_url": fmt.Sprintf("https://github.example/org/config/pull/%d", n), "state": p.state,
			"merged": p.mergeSHA != "", "head": map[string]any{"ref": p.head, "sha": p.sha}, "base": map[string]any{"ref": p.base},
			"mergeable": !p.conflicting, "mergeable_state": map[bool]string{true: "dirty", false: "clean"}[p.conflicting]}
		if p.mergeSHA != "" {
			v["merge_commit_sha"], v["merged_by"] = p.mergeSHA, map[string]any{"login": p.mergedBy}
		}
		return v
	}
	const prefix = "/api/v3/repos/org/config/pulls"
	rest := strings.TrimPrefix(r.URL.Path, prefix)
	switch {
	case r.Method == http.MethodGet && rest == "":
		out := []any{}
		for n, p := range d.prs {
			if p.state == r.URL.Query().Get("state") && "org:"+p.head == r.URL.Query().Get("head") && p.base == r.URL.Query().Get("base") {
				out = append(out, view(n, p))
			}
		}
		writeJSON(w, http.StatusOK, out)
	case r.Method == http.MethodPost && rest == "":
		var body struct{ Title, Head, Base, Body string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		d.next++
		d.prs[d.next] = &pr{head: body.Head, base: body.Base, title: body.Title, body: body.Body, sha: "headsha", state: "open"}
		writeJSON(w, http.StatusCreated, view(d.next, d.prs[d.next]))
	case r.Method == http.MethodGet:
		n, _ := strconv.ParseInt(strings.TrimPrefix(rest, "/"), 10, 64)
		if p := d.prs[n]; p != nil {
			writeJSON(w, http.StatusOK, view(n, p))
			return
		}
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
	case r.Method == http.MethodPatch:
		n, _ := strconv.ParseInt(strings.TrimPrefix(rest, "/"), 10, 64)
		var body struct {
			State string `json:"state"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		d.prs[n].state = body.State
		writeJSON(w, http.StatusOK, view(n, d.prs[n]))
	case r.Method == http.MethodPut && strings.HasSuffix(rest, "/merge"):
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(rest, "/"), "/merge"), 10, 64)
		var body struct{ SHA, MergeMethod string }
		_ = json.NewDecoder(r.Body).Decode(&struct {
			SHA         *string `json:"sha"`
			MergeMethod *string `json:"merge_method"`
		}{&body.SHA, &body.MergeMethod})
		p := d.prs[n]
		switch {
		case p.sha != body.SHA:
			writeJSON(w, http.StatusConflict, map[string]any{"message": "Head branch was modified. Review and try the merge again."})
		case p.conflicting:
			writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"message": "Pull Request is not mergeable"})
		default:
			p.state, p.mergeSHA, p.mergedBy = "closed", "mergesha-"+body.MergeMethod, "stagecoach-bot"
			writeJSON(w, http.StatusOK, map[string]any{"sha": p.mergeSHA, "merged": true, "message": "Pull Request successfully merged"})
		}
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// gitlab serves /api/v4/projects/org%2Fconfig/merge_requests... as docs.gitlab.com/api/merge_requests documents.
func (d *documented) gitlab(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.requests = append(d.requests, r.Method+" "+r.URL.EscapedPath()+"?"+r.URL.RawQuery)
	if !d.authorized(w, r, "Private-Token", "") {
		return
	}
	view := func(n int64, p *pr) map[string]any {
		v := map[string]any{"iid": n, "web_url": fmt.Sprintf("https://gitlab.example/org/config/-/merge_requests/%d", n), "state": p.state,
			"source_branch": p.head, "target_branch": p.base, "sha": p.sha, "has_conflicts": p.conflicting,
			"detailed_merge_status": map[bool]string{true: "conflict", false: "mergeable"}[p.conflicting]}
		if p.mergeSHA != "" {
			v["merge_commit_sha"], v["merged_by"] = p.mergeSHA, map[string]any{"username": p.mergedBy}
		}
		return v
	}
	const prefix = "/api/v4/projects/org%2Fconfig/merge_requests"
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), prefix)
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	switch {
	case r.Method == http.MethodGet && rest == "":
		out := []any{}
		q := r.URL.Query()
		for n, p := range d.prs {
			if p.state == q.Get("state") && p.head == q.Get("source_branch") && p.base == q.Get("target_branch") {
				out = append(out, view(n, p))
			}
		}
		writeJSON(w, http.StatusOK, out)
	case r.Method == http.MethodPost && rest == "":
		var body struct {
			Title        string `json:"title"`
			Description  string `json:"description"`
			SourceBranch string `json:"source_branch"`
			TargetBranch string `json:"target_branch"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		d.next++
		d.prs[d.next] = &pr{head: body.SourceBranch, base: body.TargetBranch, title: body.Title, body: body.Description, sha: "headsha", state: "opened"}
		writeJSON(w, http.StatusCreated, view(d.next, d.prs[d.next]))
	case r.Method == http.MethodGet:
		n, _ := strconv.ParseInt(strings.TrimPrefix(rest, "/"), 10, 64)
		if p := d.prs[n]; p != nil {
			writeJSON(w, http.StatusOK, view(n, p))
			return
		}
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "404 Not found"})
	case r.Method == http.MethodPut && !strings.HasSuffix(rest, "/merge"):
		n, _ := strconv.ParseInt(strings.TrimPrefix(rest, "/"), 10, 64)
		var body struct {
			StateEvent string `json:"state_event"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		if body.StateEvent == "close" {
			d.prs[n].state = "closed"
		}
		writeJSON(w, http.StatusOK, view(n, d.prs[n]))
	case r.Method == http.MethodPut && strings.HasSuffix(rest, "/merge"):
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(rest, "/"), "/merge"), 10, 64)
		var body struct {
			SHA                      string `json:"sha"`
			Squash                   bool   `json:"squash"`
			ShouldRemoveSourceBranch bool   `json:"should_remove_source_branch"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		p := d.prs[n]
		switch {
		case p.sha != body.SHA:
			writeJSON(w, http.StatusConflict, map[string]any{"message": "SHA does not match HEAD of source branch"})
		case p.conflicting:
			writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"message": "405 Method Not Allowed"})
		default:
			p.state, p.mergeSHA, p.mergedBy = "merged", fmt.Sprintf("mergesha-squash=%v-remove=%v", body.Squash, body.ShouldRemoveSourceBranch), "stagecoach-bot"
			writeJSON(w, http.StatusOK, view(n, p))
		}
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func TestDocumentedForges(t *testing.T) {
	for _, tc := range []struct {
		provider string
		handler  func(d *documented) http.HandlerFunc
		repoURL  func(srv string) string
		style    string
	}{
		{provider: forge.GitHub, handler: func(d *documented) http.HandlerFunc { return d.github },
			repoURL: func(srv string) string { return srv + "/org/config.git" }, style: "rebase"},
		{provider: forge.GitLab, handler: func(d *documented) http.HandlerFunc { return d.gitlab },
			repoURL: func(srv string) string { return srv + "/org/config.git" }, style: "squash"},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			d := &documented{token: "t0ken", prs: map[int64]*pr{}}
			srv := httptest.NewServer(tc.handler(d))
			t.Cleanup(srv.Close)
			newForge := func(token string) forge.Forge {
				f, err := forge.New(forge.Options{Provider: tc.provider, RepositoryURL: tc.repoURL(srv.URL), Token: token})
				NewWithT(t).Expect(err).NotTo(HaveOccurred())
				return f
			}
			f := newForge("t0ken")

			t.Run("open, find, merge at the head it opened", func(t *testing.T) {
				g := NewWithT(t)
				none, err := f.Find(t.Context(), "stagecoach/staging/p1", "env/staging")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(none).To(BeNil())
				opened, err := f.Open(t.Context(), "stagecoach/staging/p1", "env/staging", "Promote web to v1 in staging", "the body")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(opened).To(And(HaveField("Number", int64(1)), HaveField("Open", true), HaveField("Merged", false), HaveField("HeadSHA", "headsha")))
				g.Expect(opened.URL).To(HaveSuffix("/1"))
				g.Expect(d.prs[1].title).To(Equal("Promote web to v1 in staging"))
				g.Expect(d.prs[1].body).To(Equal("the body"))
				found, err := f.Find(t.Context(), "stagecoach/staging/p1", "env/staging")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(found).To(Equal(opened))

				// A head moved since it was opened (someone pushed to its branch) is not merged.
				g.Expect(f.Merge(t.Context(), 1, "othersha", tc.style)).To(MatchError(ContainSubstring("409")))
				g.Expect(f.Merge(t.Context(), 1, "headsha", tc.style)).To(Succeed())
				merged, err := f.Get(t.Context(), 1)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(merged).To(And(HaveField("Open", false), HaveField("Merged", true), HaveField("MergedBy", "stagecoach-bot")))
				g.Expect(merged.MergeCommit).To(HavePrefix("mergesha-"))
				g.Expect(merged.MergeCommit).To(ContainSubstring(map[string]string{forge.GitHub: "rebase", forge.GitLab: "squash=true-remove=true"}[tc.provider]))
				g.Expect(merged.Base).To(Equal("env/staging"))
			})
			t.Run("a conflicting request", func(t *testing.T) {
				g := NewWithT(t)
				opened, err := f.Open(t.Context(), "stagecoach/staging/p2", "env/staging", "t", "b")
				g.Expect(err).NotTo(HaveOccurred())
				d.mu.Lock()
				d.prs[opened.Number].conflicting = true
				d.mu.Unlock()
				got, err := f.Get(t.Context(), opened.Number)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got.Conflicting).To(BeTrue())
				g.Expect(f.Merge(t.Context(), opened.Number, "headsha", tc.style)).To(MatchError(ContainSubstring("405")))
			})
			t.Run("closed without merging", func(t *testing.T) {
				g := NewWithT(t)
				opened, err := f.Open(t.Context(), "stagecoach/staging/p3", "env/staging", "t", "b")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(f.Close(t.Context(), opened.Number)).To(Succeed())
				got, err := f.Get(t.Context(), opened.Number)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got).To(And(HaveField("Open", false), HaveField("Merged", false)))
			})
			t.Run("a token the forge refuses", func(t *testing.T) {
				g := NewWithT(t)
				_, err := newForge("wrong").Get(t.Context(), 1)
				g.Expect(err).To(MatchError(forge.ErrUnauthorized))
			})
		})
	}
}

func TestNewFindsTheAPI(t *testing.T) {
	for _, tc := range []struct {
		name, provider, url, wantErr string
	}{
		{name: "GitHub", provider: forge.GitHub, url: "https://github.com/org/config.git"},
		{name: "GitHub Enterprise over SSH", provider: forge.GitHub, url: "ssh://git@github.example/org/config.git"},
		{name: "GitLab subgroups", provider: forge.GitLab, url: "https://gitlab.com/group/sub/config.git"},
		{name: "Gitea", provider: forge.Gitea, url: "http://127.0.0.1:3000/org/config.git"},
		{name: "no owner", provider: forge.Gitea, url: "http://127.0.0.1:3000/config.git", wantErr: "names no owner/repository"},
		{name: "another forge", provider: "Bitbucket", url: "https://bitbucket.org/org/config.git", wantErr: `no forge "Bitbucket"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f, err := forge.New(forge.Options{Provider: tc.provider, RepositoryURL: tc.url, Token: "x"})
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(f).NotTo(BeNil())
		})
	}
}
