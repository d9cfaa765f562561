// Package gittest serves Git repositories over smart HTTP on 127.0.0.1 for tests: real git
// (git http-backend), optionally behind basic authentication, with commits and tags made (and
// signed with OpenPGP or SSH keys) through go-git.
package gittest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/fluxcd/pkg/git/signature"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"golang.org/x/crypto/ssh"
)

// Server serves one repository, config.git.
type Server struct {
	// URL of the repository.
	URL string
	// Username and Password, when set, are required of every request.
	Username, Password string

	t    testing.TB
	repo *gogit.Repository
	wt   *gogit.Worktree
	work string
	now  time.Time
}

// Options of a Server.
type Options struct {
	Username, Password string
}

// NewServer starts a server until the test ends.
func NewServer(t testing.TB, opts Options) *Server {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skipf("git is not installed (apt-get install git): %v", err)
	}
	dir := t.TempDir()
	work, root := filepath.Join(dir, "work"), filepath.Join(dir, "root")
	repo, err := gogit.PlainInitWithOptions(work, &gogit.PlainInitOptions{
		InitOptions: gogit.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")}})
	must(t, err)
	must(t, os.MkdirAll(root, 0o755))
	must(t, os.Symlink(filepath.Join(work, ".git"), filepath.Join(root, "config.git")))
	wt, err := repo.Worktree()
	must(t, err)
	backend := &cgi.Handler{Path: git, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "HOME=" + dir,
			// Pushes are taken (promotion.git); one to the branch checked out here updates the
			// work tree too, so Commit goes on from what was pushed.
			"GIT_CONFIG_COUNT=2", "GIT_CONFIG_KEY_0=http.receivepack", "GIT_CONFIG_VALUE_0=true",
			"GIT_CONFIG_KEY_1=receive.denyCurrentBranch", "GIT_CONFIG_VALUE_1=updateInstead"}}
	s := &Server{Username: opts.Username, Password: opts.Password, t: t, repo: repo, wt: wt, work: work,
		now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.Username != "" {
			if u, p, ok := r.BasicAuth(); !ok || u != s.Username || p != s.Password {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL + "/config.git"
	return s
}

// Signer signs commits and tags.
type Signer struct {
	// PGP signs with an OpenPGP key; SSH with an SSH key.
	PGP *openpgp.Entity
	SSH gogit.Signer
	// Public is the trusted key as a verify Secret holds it: an armored OpenPGP key ring, or an
	// authorized_keys line.
	Public []byte
	// Private is the key as a signing Secret holds it: an armored OpenPGP private key (git.asc),
	// or an SSH private key in PEM (identity).
	Private []byte
}

// NewPGPSigner makes an OpenPGP key.
func NewPGPSigner(t testing.TB, name string) Signer {
	t.Helper()
	e, err := openpgp.NewEntity(name, "", name+"@example.dev", nil)
	must(t, err)
	var buf bytesBuffer
	w, err := armor.Encode(&buf, openpgp.PublicKeyType, nil)
	must(t, err)
	must(t, e.Serialize(w))
	must(t, w.Close())
	var private bytesBuffer
	w, err = armor.Encode(&private, openpgp.PrivateKeyType, nil)
	must(t, err)
	must(t, e.SerializePrivate(w, nil))
	must(t, w.Close())
	return Signer{PGP: e, Public: buf.b, Private: private.b}
}

// NewSSHSigner makes an ed25519 SSH key.
func NewSSHSigner(t testing.TB) Signer {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	must(t, err)
	block, err := ssh.MarshalPrivateKey(priv, "")
	must(t, err)
	signer, err := signature.NewSSHSigner(pem.EncodeToMemory(block), nil)
	must(t, err)
	sshPub, err := ssh.NewPublicKey(pub)
	must(t, err)
	return Signer{SSH: signer, Public: ssh.MarshalAuthorizedKey(sshPub), Private: pem.EncodeToMemory(block)}
}

// Commit writes files (a value "" deletes the file) and commits them on the current branch,
// signed when signer is not nil; it returns the commit's SHA.
func (s *Server) Commit(message string, files map[string]string, signer *Signer) string {
	s.t.Helper()
	for name, content := range files {
		path := filepath.Join(s.work, name)
		if content == "" {
			must(s.t, os.Remove(path))
			_, err := s.wt.Remove(name)
			must(s.t, err)
			continue
		}
		must(s.t, os.MkdirAll(filepath.Dir(path), 0o755))
		must(s.t, os.WriteFile(path, []byte(content), 0o644))
		_, err := s.wt.Add(name)
		must(s.t, err)
	}
	s.now = s.now.Add(time.Minute)
	opts := &gogit.CommitOptions{Author: &object.Signature{Name: "Dev", Email: "dev@example.dev", When: s.now}, AllowEmptyCommits: true}
	if signer != nil {
		opts.SignKey, opts.Signer = signer.PGP, signer.SSH
	}
	hash, err := s.wt.Commit(message, opts)
	must(s.t, err)
	return hash.String()
}

// Tag tags commit: annotated (and signed) when signer is not nil, else lightweight.
func (s *Server) Tag(name, commit string, signer *Signer) {
	s.t.Helper()
	var opts *gogit.CreateTagOptions
	if signer != nil {
		opts = &gogit.CreateTagOptions{Tagger: &object.Signature{Name: "Dev", Email: "dev@example.dev", When: s.now}, Message: "release " + name,
			SignKey: signer.PGP}
		if signer.SSH != nil {
			s.t.Fatal("gittest: go-git signs tags with OpenPGP keys only")
		}
	}
	_, err := s.repo.CreateTag(name, plumbing.NewHash(commit), opts)
	must(s.t, err)
}

// Reset moves the current branch to commit (a force-push, as the server sees it).
func (s *Server) Reset(commit string) {
	s.t.Helper()
	must(s.t, s.wt.Reset(&gogit.ResetOptions{Commit: plumbing.NewHash(commit), Mode: gogit.HardReset}))
}

// Branch creates branch at the current commit and switches to it.
func (s *Server) Branch(name string) {
	s.t.Helper()
	must(s.t, s.wt.Checkout(&gogit.CheckoutOptions{Branch: plumbing.NewBranchReferenceName(name), Create: true}))
	must(s.t, s.repo.CreateBranch(&config.Branch{Name: name, Merge: plumbing.NewBranchReferenceName(name)}))
}

// Checkout switches to an existing branch, its files as its head has them.
func (s *Server) Checkout(name string) {
	s.t.Helper()
	must(s.t, s.wt.Checkout(&gogit.CheckoutOptions{Branch: plumbing.NewBranchReferenceName(name), Force: true}))
}

// Head is the commit a branch points to.
func (s *Server) Head(branch string) string {
	s.t.Helper()
	ref, err := s.repo.Reference(plumbing.NewBranchReferenceName(branch), true)
	must(s.t, err)
	return ref.Hash().String()
}

// CommitObject reads a commit.
func (s *Server) CommitObject(sha string) *object.Commit {
	s.t.Helper()
	c, err := s.repo.CommitObject(plumbing.NewHash(sha))
	must(s.t, err)
	return c
}

// File is a file's content at a commit.
func (s *Server) File(commit, path string) string {
	s.t.Helper()
	f, err := s.CommitObject(commit).File(path)
	must(s.t, err)
	content, err := f.Contents()
	must(s.t, err)
	return content
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type bytesBuffer struct{ b []byte }

func (b *bytesBuffer) Write(p []byte) (int, error) { b.b = append(b.b, p...); return len(p), nil }
