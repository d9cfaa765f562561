package gitwrite_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	fluxsig "github.com/fluxcd/pkg/git/signature"
	"github.com/go-git/go-git/v5/plumbing/object"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	. "github.com/onsi/gomega"

	"github.com/stagecoach-dev/stagecoach/internal/gitedit"
	"github.com/stagecoach-dev/stagecoach/internal/gitwrite"
	gitsource "github.com/stagecoach-dev/stagecoach/internal/source/git"
	"github.com/stagecoach-dev/stagecoach/internal/source/git/gittest"
)

const kustomization = `# staging overlay
resources:
  - ../../base
images:
  - name: registry.example/web # the web image
    newTag: "1.0"
`

const digest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"

// envRepo is a repository whose branch env/staging holds an overlay, with main checked out.
func envRepo(t *testing.T, opts gittest.Options) *gittest.Server {
	srv := gittest.NewServer(t, opts)
	srv.Commit("base", map[string]string{"base/kustomization.yaml": "resources: []\n"}, nil)
	srv.Branch("env/staging")
	srv.Commit("staging overlay", map[string]string{"overlays/staging/kustomization.yaml": kustomization}, nil)
	srv.Checkout("main")
	return srv
}

func setImage(d string) []gitwrite.Edit {
	return []gitwrite.Edit{{Path: "overlays/staging/kustomization.yaml", Apply: func(b []byte) ([]byte, error) {
		return gitedit.KustomizationImage(b, "registry.example/web", d)
	}}}
}

func request(srv *gittest.Server, edits []gitwrite.Edit) gitwrite.Request {
	return gitwrite.Request{Key: srv.URL, URL: srv.URL, Branch: "env/staging", Edits: edits,
		Message: "Promote web to 1.1 in staging\n\nStagecoach-Stage: team/staging\n", Author: gitwrite.Author{Name: "Stagecoach", Email: "stagecoach@example.dev"},
		Now:  time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC),
		Ours: func(c *object.Commit) bool { return strings.Contains(c.Message, "Stagecoach-Stage: team/staging") }}
}

func TestWriteSetsFilesSignsAndPushes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		signer  func(t *testing.T) gittest.Signer
		trusted func(s gittest.Signer) gitsource.Keys
	}{
		{name: "OpenPGP", signer: func(t *testing.T) gittest.Signer { return gittest.NewPGPSigner(t, "stagecoach") },
			trusted: func(s gittest.Signer) gitsource.Keys { return gitsource.Keys{PGP: []string{string(s.Public)}} }},
		{name: "SSH", signer: func(t *testing.T) gittest.Signer { return gittest.NewSSHSigner(t) },
			trusted: func(s gittest.Signer) gitsource.Keys { return gitsource.Keys{SSH: []string{string(s.Public)}} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := envRepo(t, gittest.Options{})
			before := srv.Head("env/staging")
			signer := tc.signer(t)
			req := request(srv, setImage(digest))
			if signer.PGP != nil {
				s, err := fluxsig.NewOpenPGPSigner(signer.PGP)
				g.Expect(err).NotTo(HaveOccurred())
				req.Signer = s
			} else {
				req.Signer = signer.SSH
			}
			w := gitwrite.New()
			res, err := w.Write(t.Context(), req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Written).To(BeTrue())
			g.Expect(res.Attempts).To(Equal(1))
			g.Expect(srv.Head("env/staging")).To(Equal(res.Commit))

			c := srv.CommitObject(res.Commit)
			g.Expect(c.ParentHashes).To(HaveLen(1))
			g.Expect(c.ParentHashes[0].String()).To(Equal(before))
			g.Expect(c.Author.Name).To(Equal("Stagecoach"))
			g.Expect(c.Message).To(HavePrefix("Promote web to 1.1 in staging"))
			_, err = gitsource.SignedBy(c, tc.trusted(signer))
			g.Expect(err).NotTo(HaveOccurred(), "the commit is signed with the key given")

			g.Expect(res.Base).To(Equal(before))
			g.Expect(res.Diff).To(ContainSubstring("--- a/overlays/staging/kustomization.yaml\n+++ b/overlays/staging/kustomization.yaml\n"))
			g.Expect(res.Diff).To(ContainSubstring("-    newTag: \"1.0\"\n"))
			g.Expect(res.Diff).To(ContainSubstring("+    digest: " + digest + "\n"))
			file := srv.File(res.Commit, "overlays/staging/kustomization.yaml")
			g.Expect(file).To(ContainSubstring("# staging overlay"))
			g.Expect(file).To(ContainSubstring("# the web image"))
			g.Expect(file).To(ContainSubstring("digest: " + digest))
			g.Expect(file).NotTo(ContainSubstring("newTag"))

			// Written again (a restart before the Promotion saved the commit): nothing to commit.
			req.LastCommit = res.Commit
			again, err := w.Write(t.Context(), req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(again).To(Equal(gitwrite.Result{Commit: res.Commit, Attempts: 1}))
			g.Expect(srv.Head("env/staging")).To(Equal(res.Commit))
			g.Expect(w.Clones()).To(Equal(1))
		})
	}
}

func TestWriteRetriesWhenTheBranchMoves(t *testing.T) {
	g := NewWithT(t)
	srv := envRepo(t, gittest.Options{})
	moved := 0
	edits := []gitwrite.Edit{{Path: "overlays/staging/kustomization.yaml", Apply: func(b []byte) ([]byte, error) {
		if moved < 2 { // someone pushes to the branch between our fetch and our push, twice
			moved++
			srv.Checkout("env/staging")
			srv.Commit("someone else's change", map[string]string{"overlays/staging/other.yaml": strings.Repeat("x", moved) + "\n"}, nil)
			srv.Checkout("main")
		}
		return gitedit.KustomizationImage(b, "registry.example/web", digest)
	}}}
	res, err := gitwrite.New().Write(t.Context(), request(srv, edits))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Attempts).To(Equal(3))
	g.Expect(srv.Head("env/staging")).To(Equal(res.Commit))
	// Written on top of what the others pushed, not over it.
	g.Expect(srv.File(res.Commit, "overlays/staging/other.yaml")).To(Equal("xx\n"))
	g.Expect(srv.File(res.Commit, "overlays/staging/kustomization.yaml")).To(ContainSubstring(digest))

	t.Run("a branch that never stops moving", func(t *testing.T) {
		g := NewWithT(t)
		n := 0
		edits := []gitwrite.Edit{{Path: "overlays/staging/kustomization.yaml", Apply: func(b []byte) ([]byte, error) {
			n++
			srv.Checkout("env/staging")
			srv.Commit("busy", map[string]string{"overlays/staging/other.yaml": strings.Repeat("y", n) + "\n"}, nil)
			srv.Checkout("main")
			return gitedit.KustomizationImage(b, "registry.example/web", "sha256:"+strings.Repeat("2", 64))
		}}}
		_, err := gitwrite.New().Write(t.Context(), request(srv, edits))
		g.Expect(err).To(MatchError(gitwrite.ErrMoving))
		g.Expect(n).To(Equal(gitwrite.MaxAttempts))
	})
}

func TestTwoWritesToOneBranchBothLand(t *testing.T) {
	g := NewWithT(t)
	srv := envRepo(t, gittest.Options{})
	w := gitwrite.New()
	var wg sync.WaitGroup
	results := make([]gitwrite.Result, 2)
	errs := make([]error, 2)
	for i, key := range []string{"app.version", "db.version"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := request(srv, []gitwrite.Edit{{Path: "overlays/staging/values.yaml", Apply: func(b []byte) ([]byte, error) {
				return gitedit.Value(b, key, "v"+key)
			}}})
			results[i], errs[i] = w.Write(t.Context(), req)
		}()
	}
	wg.Wait()
	// The file is not on the branch yet: both fail, naming it, and nothing is written.
	for _, err := range errs {
		g.Expect(err).To(MatchError(gitwrite.ErrCannotWrite))
		g.Expect(err).To(MatchError(ContainSubstring("overlays/staging/values.yaml is not on branch env/staging")))
	}

	srv.Checkout("env/staging")
	srv.Commit("values", map[string]string{"overlays/staging/values.yaml": "# values\napp: {}\n"}, nil)
	srv.Checkout("main")
	for i, key := range []string{"app.version", "db.version"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := request(srv, []gitwrite.Edit{{Path: "overlays/staging/values.yaml", Apply: func(b []byte) ([]byte, error) {
				return gitedit.Value(b, key, "v-"+key)
			}}})
			results[i], errs[i] = w.Write(t.Context(), req)
		}()
	}
	wg.Wait()
	g.Expect(errs).To(HaveEach(BeNil()))
	g.Expect(results[0].Commit).NotTo(Equal(results[1].Commit))
	values := srv.File(srv.Head("env/staging"), "overlays/staging/values.yaml")
	g.Expect(values).To(ContainSubstring("v-app.version"))
	g.Expect(values).To(ContainSubstring("v-db.version"))
	g.Expect(values).To(HavePrefix("# values"))
	g.Expect(w.Clones()).To(Equal(1))
}

func TestWriteFindsForeignCommits(t *testing.T) {
	for _, tc := range []struct {
		name        string
		meanwhile   func(srv *gittest.Server) string
		wantForeign bool
		rewritten   bool
		// sameVersion writes the version already there: nothing to commit, still judged.
		sameVersion bool
	}{
		{name: "a person's commit on the written file", wantForeign: true, meanwhile: func(srv *gittest.Server) string {
			return srv.Commit("hotfix tag", map[string]string{"overlays/staging/kustomization.yaml": kustomization + "# hotfix\n"}, nil)
		}},
		{name: "a commit on another file", meanwhile: func(srv *gittest.Server) string {
			return srv.Commit("docs", map[string]string{"README.md": "staging\n"}, nil)
		}},
		{name: "a person's commit on the written file that keeps the digest", wantForeign: true, sameVersion: true, meanwhile: func(srv *gittest.Server) string {
			return srv.Commit("tune", map[string]string{"overlays/staging/kustomization.yaml": strings.Replace(
				srv.File(srv.Head("env/staging"), "overlays/staging/kustomization.yaml"), "# staging overlay", "# staging overlay, tuned", 1)}, nil)
		}},
		{name: "the branch rewritten", wantForeign: true, rewritten: true, meanwhile: func(srv *gittest.Server) string {
			srv.Reset(srv.CommitObject(srv.Head("env/staging")).ParentHashes[0].String())
			return srv.Commit("rewritten", map[string]string{"README.md": "again\n"}, nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := envRepo(t, gittest.Options{})
			w := gitwrite.New()
			first, err := w.Write(t.Context(), request(srv, setImage(digest)))
			g.Expect(err).NotTo(HaveOccurred())
			srv.Checkout("env/staging")
			theirs := tc.meanwhile(srv)
			srv.Checkout("main")

			req := request(srv, setImage("sha256:"+strings.Repeat("3", 64)))
			if tc.sameVersion {
				req = request(srv, setImage(digest))
			}
			req.LastCommit = first.Commit
			res, err := w.Write(t.Context(), req)
			if !tc.wantForeign {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(srv.CommitObject(res.Commit).ParentHashes[0].String()).To(Equal(theirs))
				return
			}
			var foreign *gitwrite.ForeignCommitError
			g.Expect(errors.As(err, &foreign)).To(BeTrue(), "%v", err)
			g.Expect(foreign.SHA).To(Equal(theirs))
			g.Expect(foreign.Rewritten).To(Equal(tc.rewritten))
			if !tc.rewritten {
				g.Expect(foreign.Author).To(Equal("Dev <dev@example.dev>"))
				g.Expect(err.Error()).To(ContainSubstring(srv.CommitObject(theirs).Message[:4]))
			}
			g.Expect(srv.Head("env/staging")).To(Equal(theirs), "nothing is written over it")
		})
	}
}

func TestWriteMerges(t *testing.T) {
	g := NewWithT(t)
	srv := gittest.NewServer(t, gittest.Options{})
	c1 := srv.Commit("one", map[string]string{"app/config.yaml": "version: one\n"}, nil)
	srv.Branch("env/prod") // at c1
	srv.Checkout("main")
	c2 := srv.Commit("two", map[string]string{"app/config.yaml": "version: two\n"}, nil)
	w := gitwrite.New()
	merge := func(commit string) (gitwrite.Result, error) {
		req := request(srv, nil)
		req.Branch, req.Merge = "env/prod", commit
		return w.Write(t.Context(), req)
	}

	t.Run("fast-forward", func(t *testing.T) {
		g := NewWithT(t)
		res, err := merge(c2)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(And(HaveField("Commit", c2), HaveField("Written", true), HaveField("Attempts", 1), HaveField("Base", c1),
			HaveField("Diff", ContainSubstring("-version: one\n+version: two\n"))))
		g.Expect(srv.Head("env/prod")).To(Equal(c2))
	})
	t.Run("back to an older commit is a revert", func(t *testing.T) {
		g := NewWithT(t)
		res, err := merge(c1)
		g.Expect(err).NotTo(HaveOccurred())
		c := srv.CommitObject(res.Commit)
		g.Expect(c.ParentHashes).To(HaveLen(1))
		g.Expect(c.ParentHashes[0].String()).To(Equal(c2))
		g.Expect(c.TreeHash).To(Equal(srv.CommitObject(c1).TreeHash))
		g.Expect(srv.File(res.Commit, "app/config.yaml")).To(Equal("version: one\n"))
	})
	t.Run("onto a branch with its own commits", func(t *testing.T) {
		g := NewWithT(t)
		c3 := srv.Commit("three", map[string]string{"app/config.yaml": "version: three\n"}, nil)
		head := srv.Head("env/prod")
		res, err := merge(c3)
		g.Expect(err).NotTo(HaveOccurred())
		c := srv.CommitObject(res.Commit)
		g.Expect(c.ParentHashes).To(HaveLen(2))
		g.Expect(c.ParentHashes[0].String()).To(Equal(head))
		g.Expect(c.ParentHashes[1].String()).To(Equal(c3))
		g.Expect(c.TreeHash).To(Equal(srv.CommitObject(c3).TreeHash))
		again, err := merge(c3)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(again.Written).To(BeFalse())
	})
	t.Run("a commit of no branch", func(t *testing.T) {
		_, err := merge(strings.Repeat("a", 40))
		NewWithT(t).Expect(err).To(MatchError(gitwrite.ErrCannotWrite))
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("is on no branch")))
	})
	g.Expect(w.Clones()).To(Equal(1))
}

func TestWriteErrors(t *testing.T) {
	srv := envRepo(t, gittest.Options{Username: "bot", Password: "s3cret"})
	for _, tc := range []struct {
		name    string
		req     func(gitwrite.Request) gitwrite.Request
		wantErr error
	}{
		{name: "no credentials", wantErr: gitsource.ErrUnauthorized, req: func(r gitwrite.Request) gitwrite.Request { return r }},
		{name: "wrong password", wantErr: gitsource.ErrUnauthorized, req: func(r gitwrite.Request) gitwrite.Request {
			r.Credentials.Auth = &githttp.BasicAuth{Username: "bot", Password: "wrong"}
			return r
		}},
		{name: "no such branch", wantErr: gitsource.ErrRefNotFound, req: func(r gitwrite.Request) gitwrite.Request {
			r.Credentials.Auth = &githttp.BasicAuth{Username: "bot", Password: "s3cret"}
			r.Branch = "env/nope"
			return r
		}},
		{name: "unreachable", wantErr: gitsource.ErrUnreachable, req: func(r gitwrite.Request) gitwrite.Request {
			r.URL, r.Key = "http://127.0.0.1:1/config.git", "unreachable"
			return r
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			before := srv.Head("env/staging")
			_, err := gitwrite.New().Write(t.Context(), tc.req(request(srv, setImage(digest))))
			g.Expect(err).To(MatchError(tc.wantErr))
			g.Expect(srv.Head("env/staging")).To(Equal(before), "nothing written")
		})
	}
}

// A pull request's commit goes to a branch of its own, made on the environment's head, which
// itself does not move; pushing again (a retry after a restart) writes over that branch.
func TestWriteToAPullRequestBranch(t *testing.T) {
	g := NewWithT(t)
	srv := envRepo(t, gittest.Options{})
	before := srv.Head("env/staging")
	w := gitwrite.New()
	req := request(srv, setImage(digest))
	req.PushBranch = "stagecoach/staging/p1"
	res, err := w.Write(t.Context(), req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Written).To(BeTrue())
	g.Expect(res.Base).To(Equal(before))
	g.Expect(srv.Head("env/staging")).To(Equal(before), "the environment's branch is left to the merge")
	g.Expect(srv.Head("stagecoach/staging/p1")).To(Equal(res.Commit))
	g.Expect(srv.CommitObject(res.Commit).ParentHashes[0].String()).To(Equal(before))

	req.Now = req.Now.Add(time.Minute) // another commit
	again, err := w.Write(t.Context(), req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Commit).NotTo(Equal(res.Commit))
	g.Expect(srv.Head("stagecoach/staging/p1")).To(Equal(again.Commit), "the request's branch is Stagecoach's to write over")
}

// What the engine synced holds a promotion's commit when it is that commit or a later one of the
// branch that left the written files as they were.
func TestHolds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after func(srv *gittest.Server, written string) string // returns the synced commit
		want  bool
	}{
		{name: "the commit itself", want: true, after: func(_ *gittest.Server, written string) string { return written }},
		{name: "a later commit to another file", want: true, after: func(srv *gittest.Server, _ string) string {
			return srv.Commit("api", map[string]string{"overlays/api/values.yaml": "v: 2\n"}, nil)
		}},
		{name: "a later commit to the written file", after: func(srv *gittest.Server, _ string) string {
			return srv.Commit("hand edit", map[string]string{"overlays/staging/kustomization.yaml": kustomization}, nil)
		}},
		{name: "a commit before it", after: func(srv *gittest.Server, written string) string {
			return srv.CommitObject(written).ParentHashes[0].String()
		}},
		{name: "a commit of no branch fetched", after: func(_ *gittest.Server, _ string) string { return strings.Repeat("b", 40) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := envRepo(t, gittest.Options{})
			w := gitwrite.New()
			req := request(srv, setImage(digest))
			res, err := w.Write(t.Context(), req)
			g.Expect(err).NotTo(HaveOccurred())
			srv.Checkout("env/staging")
			synced := tc.after(srv, res.Commit)
			srv.Checkout("main")
			holds, err := w.Holds(t.Context(), req, synced, res.Commit)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(holds).To(Equal(tc.want))
		})
	}
}

// A commit made on the forge (a pull request's merge) after the clone's last fetch is fetched
// before it is judged.
func TestHoldsFetchesWhatTheCloneLacks(t *testing.T) {
	g := NewWithT(t)
	srv := envRepo(t, gittest.Options{})
	w := gitwrite.New()
	req := request(srv, setImage(digest))
	req.PushBranch = "stagecoach/team/staging/p1"
	res, err := w.Write(t.Context(), req)
	g.Expect(err).NotTo(HaveOccurred())
	// The forge merges it: a commit the clone has never seen, then another Stage's on top.
	srv.Checkout("env/staging")
	srv.Reset(res.Commit)
	merged := srv.Commit("Merge pull request #1", map[string]string{"README.md": "merged\n"}, nil)
	later := srv.Commit("api", map[string]string{"overlays/api/values.yaml": "v: 2\n"}, nil)
	srv.Checkout("main")
	holds, err := w.Holds(t.Context(), req, later, merged)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(holds).To(BeTrue())
}
