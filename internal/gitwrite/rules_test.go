package gitwrite_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	fluxsig "github.com/fluxcd/pkg/git/signature"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	. "github.com/onsi/gomega"

	"github.com/stagecoach-dev/stagecoach/internal/gitwrite"
	gitsource "github.com/stagecoach-dev/stagecoach/internal/source/git"
	"github.com/stagecoach-dev/stagecoach/internal/source/git/gittest"
)

// Issue 50 item 6: each rule of what a write decides, with the input and the decision, so that a
// one-line change to the rule fails a test.

// A controller that restarted has a fresh clone: the last commit Stagecoach wrote is not in it
// when the branch was rewritten meanwhile (force-pushed without it), and the write must stop as on
// a rewritten branch instead of committing on whatever the branch holds now.
func TestWriteAfterARestartFreezesARewrittenBranch(t *testing.T) {
	for _, tc := range []struct {
		name string
		// meanwhile changes env/staging (checked out) after Stagecoach wrote its commit.
		meanwhile     func(srv *gittest.Server, written string)
		wantRewritten bool
	}{
		{name: "force-pushed back to the commit before Stagecoach's", wantRewritten: true, meanwhile: func(srv *gittest.Server, written string) {
			srv.Reset(srv.CommitObject(written).ParentHashes[0].String())
		}},
		{name: "force-pushed with another commit instead of Stagecoach's", wantRewritten: true, meanwhile: func(srv *gittest.Server, written string) {
			srv.Reset(srv.CommitObject(written).ParentHashes[0].String())
			srv.Commit("rewritten", map[string]string{"README.md": "again\n"}, nil)
		}},
		{name: "Stagecoach's commit amended (same files, another commit)", wantRewritten: true, meanwhile: func(srv *gittest.Server, written string) {
			content := srv.File(written, "overlays/staging/kustomization.yaml")
			srv.Reset(srv.CommitObject(written).ParentHashes[0].String())
			srv.Commit("Promote web to 1.1 in staging (amended)", map[string]string{"overlays/staging/kustomization.yaml": content}, nil)
		}},
		{name: "not rewritten: a commit on another file on top", meanwhile: func(srv *gittest.Server, _ string) {
			srv.Commit("docs", map[string]string{"README.md": "staging\n"}, nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := envRepo(t, gittest.Options{})
			first, err := gitwrite.New().Write(t.Context(), request(srv, setImage(digest)))
			g.Expect(err).NotTo(HaveOccurred())
			srv.Checkout("env/staging")
			tc.meanwhile(srv, first.Commit)
			srv.Checkout("main")
			before := srv.Head("env/staging")

			// The controller restarted: a new Writer, whose clone never held first.Commit.
			req := request(srv, setImage("sha256:"+strings.Repeat("4", 64)))
			req.LastCommit = first.Commit
			res, err := gitwrite.New().Write(t.Context(), req)
			if !tc.wantRewritten {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(res.Written).To(BeTrue())
				g.Expect(srv.CommitObject(res.Commit).ParentHashes[0].String()).To(Equal(before))
				return
			}
			var foreign *gitwrite.ForeignCommitError
			g.Expect(errors.As(err, &foreign)).To(BeTrue(), "a rewritten branch is foreign, got %v", err)
			g.Expect(foreign.Rewritten).To(BeTrue())
			g.Expect(foreign.SHA).To(Equal(before))
			g.Expect(err.Error()).To(ContainSubstring("no longer contains " + first.Commit))
			g.Expect(res.Written).To(BeFalse())
			g.Expect(srv.Head("env/staging")).To(Equal(before), "nothing is written over it")
		})
	}
}

// A Stage that merges (promotion.git.merge) writes the whole tree: every commit on the branch
// after its last one is foreign unless it is Stagecoach's, whatever files it touches.
func TestWriteMergeJudgesEveryCommit(t *testing.T) {
	for _, tc := range []struct {
		name        string
		meanwhile   func(srv *gittest.Server) string
		wantForeign bool
	}{
		{name: "a person's commit to a file no promotion touches", wantForeign: true, meanwhile: func(srv *gittest.Server) string {
			return srv.Commit("hotfix", map[string]string{"README.md": "hotfix\n"}, nil)
		}},
		{name: "a person's commit to the promoted files", wantForeign: true, meanwhile: func(srv *gittest.Server) string {
			return srv.Commit("pin", map[string]string{"app/config.yaml": "version: pinned\n"}, nil)
		}},
		{name: "a person's empty commit", wantForeign: true, meanwhile: func(srv *gittest.Server) string {
			return srv.Commit("nothing", nil, nil)
		}},
		{name: "Stagecoach's own commit (the Stage's trailer)", meanwhile: func(srv *gittest.Server) string {
			return srv.Commit("Promote web to two in prod\n\nStagecoach-Stage: team/staging\n", map[string]string{"app/extra.yaml": "x: 1\n"}, nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := gittest.NewServer(t, gittest.Options{})
			srv.Commit("one", map[string]string{"app/config.yaml": "version: one\n"}, nil)
			srv.Branch("env/prod")
			srv.Checkout("main")
			c2 := srv.Commit("two", map[string]string{"app/config.yaml": "version: two\n"}, nil)
			w := gitwrite.New()
			merge := func(commit, last string) (gitwrite.Result, error) {
				req := request(srv, nil)
				req.Branch, req.Merge, req.LastCommit = "env/prod", commit, last
				return w.Write(t.Context(), req)
			}
			first, err := merge(c2, "")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(first.Commit).To(Equal(c2), "a fast-forward")

			srv.Checkout("env/prod")
			theirs := tc.meanwhile(srv)
			srv.Checkout("main")
			c3 := srv.Commit("three", map[string]string{"app/config.yaml": "version: three\n"}, nil)

			res, err := merge(c3, first.Commit)
			if !tc.wantForeign {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(srv.CommitObject(res.Commit).ParentHashes).To(HaveLen(2))
				g.Expect(srv.CommitObject(res.Commit).ParentHashes[0].String()).To(Equal(theirs))
				return
			}
			var foreign *gitwrite.ForeignCommitError
			g.Expect(errors.As(err, &foreign)).To(BeTrue(), "every commit is judged on a merged branch, got %v", err)
			g.Expect(foreign.SHA).To(Equal(theirs))
			g.Expect(foreign.Rewritten).To(BeFalse())
			g.Expect(foreign.Author).To(Equal("Dev <dev@example.dev>"))
			g.Expect(srv.Head("env/prod")).To(Equal(theirs), "nothing is written over it")
		})
	}
}

// The commits a merge makes (onto a branch with its own commits, or back to an older commit: a
// revert) are signed with the key given, as set commits are.
func TestWriteSignsMergesAndReverts(t *testing.T) {
	pgp := func(t *testing.T) (gitwrite.Request, gitsource.Keys) {
		s := gittest.NewPGPSigner(t, "stagecoach")
		signer, err := fluxsig.NewOpenPGPSigner(s.PGP)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		return gitwrite.Request{Signer: signer}, gitsource.Keys{PGP: []string{string(s.Public)}}
	}
	sshKey := func(t *testing.T) (gitwrite.Request, gitsource.Keys) {
		s := gittest.NewSSHSigner(t)
		return gitwrite.Request{Signer: s.SSH}, gitsource.Keys{SSH: []string{string(s.Public)}}
	}
	for _, tc := range []struct {
		name        string
		key         func(t *testing.T) (gitwrite.Request, gitsource.Keys)
		revert      bool
		wantParents int
	}{
		{name: "a merge commit, OpenPGP", key: pgp, wantParents: 2},
		{name: "a merge commit, SSH", key: sshKey, wantParents: 2},
		{name: "a revert to an older commit, OpenPGP", key: pgp, revert: true, wantParents: 1},
		{name: "a revert to an older commit, SSH", key: sshKey, revert: true, wantParents: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := gittest.NewServer(t, gittest.Options{})
			c1 := srv.Commit("one", map[string]string{"app/config.yaml": "version: one\n"}, nil)
			var promoted string
			if tc.revert {
				srv.Commit("two", map[string]string{"app/config.yaml": "version: two\n"}, nil)
				srv.Branch("env/prod") // at two; one is in its history
				srv.Checkout("main")
				promoted = c1
			} else {
				srv.Branch("env/prod")
				srv.Commit("prod only", map[string]string{"prod.yaml": "replicas: 3\n"}, nil)
				srv.Checkout("main")
				promoted = srv.Commit("two", map[string]string{"app/config.yaml": "version: two\n"}, nil)
			}
			before := srv.Head("env/prod")
			signing, trusted := tc.key(t)
			req := request(srv, nil)
			req.Branch, req.Merge, req.Signer = "env/prod", promoted, signing.Signer
			res, err := gitwrite.New().Write(t.Context(), req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Written).To(BeTrue())
			c := srv.CommitObject(srv.Head("env/prod"))
			g.Expect(c.Hash.String()).To(Equal(res.Commit))
			g.Expect(c.ParentHashes).To(HaveLen(tc.wantParents))
			g.Expect(c.ParentHashes[0].String()).To(Equal(before))
			g.Expect(c.TreeHash).To(Equal(srv.CommitObject(promoted).TreeHash))
			_, err = gitsource.SignedBy(c, trusted)
			g.Expect(err).NotTo(HaveOccurred(), "the commit is signed with the Stage's key")
		})
	}
}

// A push the server refuses because the branch moved after the fetch (a concurrent update: git's
// receive-pack says "failed to update ref", a forge may say "fetch first") is fetched and written
// again, not failed; a push refused for another reason is not tried again.
func TestWriteRetriesAPushRefusedAsMoved(t *testing.T) {
	for _, tc := range []struct {
		name string
		// refusal is what the server answers the first push with; "" forwards it to git, which
		// refuses it itself (the branch moved between its advertisement and the push).
		refusal      string
		wantAttempts int
		wantErr      string
	}{
		{name: "git refuses: failed to update ref", wantAttempts: 2},
		{name: "a forge refuses: failed to update ref", refusal: "failed to update ref", wantAttempts: 2},
		{name: "a forge refuses: fetch first", refusal: "fetch first", wantAttempts: 2},
		{name: "a forge refuses: non-fast-forward", refusal: "non-fast-forward", wantAttempts: 2},
		{name: "a hook refuses: not moved, not tried again", refusal: "pre-receive hook declined", wantAttempts: 1, wantErr: "pre-receive hook declined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := envRepo(t, gittest.Options{})
			upstream, err := url.Parse(strings.TrimSuffix(srv.URL, "/config.git"))
			g.Expect(err).NotTo(HaveOccurred())
			forward := httputil.NewSingleHostReverseProxy(upstream)
			var mu sync.Mutex
			pushes := 0
			var theirs string
			proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
					forward.ServeHTTP(w, r)
					return
				}
				mu.Lock()
				pushes++
				first := pushes == 1
				mu.Unlock()
				if !first {
					forward.ServeHTTP(w, r)
					return
				}
				// Someone pushes to the branch after the writer's fetch and its ref advertisement.
				srv.Checkout("env/staging")
				mu.Lock()
				theirs = srv.Commit("someone else's change", map[string]string{"overlays/staging/other.yaml": "theirs\n"}, nil)
				mu.Unlock()
				srv.Checkout("main")
				if tc.refusal == "" {
					forward.ServeHTTP(w, r)
					return
				}
				_, _ = io.Copy(io.Discard, r.Body)
				report := &packp.ReportStatus{UnpackStatus: "ok", CommandStatuses: []*packp.CommandStatus{
					{ReferenceName: plumbing.NewBranchReferenceName("env/staging"), Status: tc.refusal}}}
				w.Header().Set("Content-Type", "application/x-git-receive-pack-result")
				_ = report.Encode(w)
			}))
			t.Cleanup(proxy.Close)

			req := request(srv, setImage(digest))
			req.URL, req.Key = proxy.URL+"/config.git", proxy.URL
			res, err := gitwrite.New().Write(t.Context(), req)
			mu.Lock()
			defer mu.Unlock()
			g.Expect(pushes).To(Equal(tc.wantAttempts))
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				g.Expect(errors.Is(err, gitwrite.ErrMoving)).To(BeFalse())
				g.Expect(srv.Head("env/staging")).To(Equal(theirs))
				return
			}
			g.Expect(err).NotTo(HaveOccurred(), "a push refused as moved is tried again")
			g.Expect(res.Attempts).To(Equal(tc.wantAttempts))
			g.Expect(srv.Head("env/staging")).To(Equal(res.Commit))
			g.Expect(srv.CommitObject(res.Commit).ParentHashes[0].String()).To(Equal(theirs), "written on top of the other push")
			g.Expect(srv.File(res.Commit, "overlays/staging/other.yaml")).To(Equal("theirs\n"))
			g.Expect(srv.File(res.Commit, "overlays/staging/kustomization.yaml")).To(ContainSubstring(digest))
		})
	}
}
