package localstack

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"code.gitea.io/sdk/gitea"
)

// GiteaVersion is the Gitea the stack runs as its forge (pull requests opened, reviewed and merged
// for real): the newest on the Go module proxy, built from its module (its go.mod declares the
// path gitea.dev, so it is built in its own module folder, with its own go.mod and replaces).
// Without the bindata tag its web UI's assets are missing; the REST API and Git over HTTP, all
// Stagecoach uses, do not need them. Since v1.27 its SQLite driver is pure Go (no cgo, no tags).
const GiteaVersion = "v1.27.3"

const giteaModule = "code.gitea.io/gitea"

// Gitea is a Gitea server on 127.0.0.1, started on first use (StartGitea) and stopped with the
// stack. Its admin (Admin) owns the scenarios' repositories and is the identity Stagecoach pushes,
// opens and merges as; Reviewer is a second person (Gitea refuses approving one's own request).
type Gitea struct {
	URL string
	// Admin and Reviewer with their passwords and API tokens (scopes: all).
	Admin, AdminPassword, AdminToken          string
	Reviewer, ReviewerPassword, ReviewerToken string

	proc *Process
}

// gitea holds the stack's Gitea once started.
type giteaOnce struct {
	once sync.Once
	g    *Gitea
	err  error
}

// StartGitea starts the stack's Gitea the first time it is asked for (the scenarios that use it
// pay its start, about 5 s, the others not) and returns it.
func (s *Stack) StartGitea(ctx context.Context) (*Gitea, error) {
	s.gitea.once.Do(func() { s.gitea.g, s.gitea.err = s.startGitea(ctx) })
	return s.gitea.g, s.gitea.err
}

func (s *Stack) startGitea(ctx context.Context) (*Gitea, error) {
	if s.Bin.Gitea == "" || s.Bin.GiteaAssets == "" {
		return nil, fmt.Errorf("the stack was built without Gitea")
	}
	start := time.Now()
	if s.Bin.giteaPending != nil {
		fmt.Fprintln(s.progress, "stack: waiting for Gitea's build, which started beside the first scenarios")
		if err := s.Bin.giteaPending.wait(ctx); err != nil {
			return nil, fmt.Errorf("gitea's build: %w", err)
		}
		fmt.Fprintf(s.progress, "stack: Gitea's build done after %s of waiting\n", time.Since(start).Round(time.Second))
	}
	dir := filepath.Join(s.Dir, "gitea")
	if err := os.MkdirAll(filepath.Join(dir, "custom", "conf"), 0o755); err != nil {
		return nil, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	config := filepath.Join(dir, "custom", "conf", "app.ini")
	// Gitea refuses to run as root unless told; the CI machines run the suite as root (a loopback
	// test server with nothing to protect).
	asRoot := ""
	if os.Geteuid() == 0 {
		asRoot = "I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true"
	}
	ini := fmt.Sprintf(`APP_NAME = Stagecoach e2e
RUN_MODE = prod
WORK_PATH = %[1]s
%[4]s

[database]
DB_TYPE = sqlite3
PATH = %[1]s/data/gitea.db
SQLITE_JOURNAL_MODE = WAL

[repository]
ROOT = %[1]s/repositories
DEFAULT_BRANCH = main

[server]
PROTOCOL = http
HTTP_ADDR = 127.0.0.1
HTTP_PORT = %[2]d
ROOT_URL = %[3]s/
; Built without bindata: the locales, licences and templates are read from the module's folder.
STATIC_ROOT_PATH = %[5]s
DISABLE_SSH = true
START_SSH_SERVER = false
OFFLINE_MODE = true
LFS_START_SERVER = false
APP_DATA_PATH = %[1]s/data

[security]
INSTALL_LOCK = true
PASSWORD_COMPLEXITY = off
MIN_PASSWORD_LENGTH = 8

[service]
DISABLE_REGISTRATION = true
REQUIRE_SIGNIN_VIEW = false
DEFAULT_KEEP_EMAIL_PRIVATE = false

[session]
PROVIDER = memory

[cache]
ADAPTER = memory

[mailer]
ENABLED = false

[cron]
ENABLED = false

[indexer]
REPO_INDEXER_ENABLED = false

[log]
MODE = console
LEVEL = Warn
`, dir, ports[0], url, asRoot, s.Bin.GiteaAssets)
	if err := os.WriteFile(config, []byte(ini), 0o644); err != nil {
		return nil, err
	}
	args := []string{"--config", config, "--work-path", dir}
	p, err := s.start(processSpec{name: "gitea", path: s.Bin.Gitea, args: append([]string{"web"}, args...), dir: dir,
		env: []string{"GITEA_WORK_DIR=" + dir, "USER=gitea"}})
	if err != nil {
		return nil, err
	}
	if err := p.waitReady(ctx, 2*time.Minute, "Gitea", httpOK(http.DefaultClient, url+"/api/v1/version")); err != nil {
		return nil, err
	}
	g := &Gitea{URL: url, proc: p, Admin: "stagecoach", AdminPassword: "stagecoach-e2e-admin", Reviewer: "reviewer", ReviewerPassword: "reviewer-e2e-pass"}
	for _, u := range []struct {
		name, password string
		token          *string
		admin          bool
	}{{g.Admin, g.AdminPassword, &g.AdminToken, true}, {g.Reviewer, g.ReviewerPassword, &g.ReviewerToken, false}} {
		create := append([]string{"admin", "user", "create", "--username", u.name, "--password", u.password,
			"--email", u.name + "@stagecoach.dev", "--must-change-password=false"}, args...)
		if u.admin {
			create = append(create, "--admin")
		}
		if _, err := s.giteaCLI(ctx, dir, create...); err != nil {
			return nil, err
		}
		token, err := s.giteaCLI(ctx, dir, append([]string{"admin", "user", "generate-access-token", "--username", u.name,
			"--token-name", "e2e", "--scopes", "all", "--raw"}, args...)...)
		if err != nil {
			return nil, err
		}
		*u.token = strings.TrimSpace(token)
	}
	s.step("Gitea %s ready at %s in %s", GiteaVersion, url, time.Since(start).Round(time.Millisecond))
	return g, nil
}

func (s *Stack) giteaCLI(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, s.Bin.Gitea, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GITEA_WORK_DIR=" + dir, "USER=gitea"}
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if exit, ok := err.(*exec.ExitError); ok {
			stderr = string(exit.Stderr)
		}
		return "", fmt.Errorf("gitea %s: %w: %s", strings.Join(args[:3], " "), err, stderr)
	}
	return string(out), nil
}

// Client is an API client as user (token).
func (g *Gitea) Client(ctx context.Context, token string) (*gitea.Client, error) {
	return gitea.NewClient(g.URL, gitea.SetContext(ctx), gitea.SetToken(token), gitea.SetGiteaVersion(""))
}

// GiteaRepo is a repository of the admin's on the stack's Gitea.
type GiteaRepo struct {
	g           *Gitea
	admin       *gitea.Client
	Owner, Name string
	// URL is its Git URL (anonymous reads, the admin's password for pushes).
	URL string
}

// CreateRepo creates a public repository whose main branch holds a README, with the reviewer as
// a collaborator who may write (and so approve and merge).
func (g *Gitea) CreateRepo(ctx context.Context, name string) (*GiteaRepo, error) {
	c, err := g.Client(ctx, g.AdminToken)
	if err != nil {
		return nil, err
	}
	repo, _, err := c.CreateRepo(gitea.CreateRepoOption{Name: name, DefaultBranch: "main", AutoInit: true, Readme: "Default"})
	if err != nil {
		return nil, fmt.Errorf("creating Gitea repository %s: %w", name, err)
	}
	write := gitea.AccessModeWrite
	if _, err := c.AddCollaborator(g.Admin, name, g.Reviewer, gitea.AddCollaboratorOption{Permission: &write}); err != nil {
		return nil, fmt.Errorf("adding %s to %s: %w", g.Reviewer, name, err)
	}
	return &GiteaRepo{g: g, admin: c, Owner: g.Admin, Name: name, URL: repo.CloneURL}, nil
}

// Commit writes a file on branch (created from main when new) as the admin and returns the commit.
func (r *GiteaRepo) Commit(branch, message, path, content string) (string, error) {
	opts := gitea.FileOptions{Message: message, BranchName: branch}
	if _, resp, err := r.admin.GetRepoBranch(r.Owner, r.Name, branch); err != nil {
		if resp == nil || resp.StatusCode != http.StatusNotFound {
			return "", err
		}
		opts.BranchName, opts.NewBranchName = "main", branch
	}
	encoded := base64.StdEncoding.EncodeToString([]byte(content))
	var file *gitea.FileResponse
	existing, resp, err := r.admin.GetContents(r.Owner, r.Name, opts.BranchName, path)
	switch {
	case err != nil && resp != nil && resp.StatusCode == http.StatusNotFound:
		file, _, err = r.admin.CreateFile(r.Owner, r.Name, path, gitea.CreateFileOptions{FileOptions: opts, Content: encoded})
	case err != nil:
		return "", err
	default:
		file, _, err = r.admin.UpdateFile(r.Owner, r.Name, path, gitea.UpdateFileOptions{FileOptions: opts, SHA: existing.SHA, Content: encoded})
	}
	if err != nil {
		return "", fmt.Errorf("committing %s to %s of %s: %w", path, branch, r.Name, err)
	}
	return file.Commit.SHA, nil
}

// Head is the commit branch points to.
func (r *GiteaRepo) Head(branch string) (string, error) {
	b, _, err := r.admin.GetRepoBranch(r.Owner, r.Name, branch)
	if err != nil {
		return "", err
	}
	return b.Commit.ID, nil
}

// File is a file's content at ref.
func (r *GiteaRepo) File(ref, path string) (string, error) {
	data, _, err := r.admin.GetFile(r.Owner, r.Name, ref, path)
	return string(data), err
}
