package localstack

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// ManifestsLayerType is the layer media type of a plain-manifests artifact. Argo CD's repo-server
// accepts it by default (--oci-layer-media-types); Flux's OCIRepository selects it with
// spec.layerSelector.mediaType.
const ManifestsLayerType types.MediaType = "application/vnd.oci.image.layer.v1.tar+gzip"

// server is an HTTP server of the test process on a loopback port.
type server struct {
	srv  *http.Server
	Addr string // host:port
}

func serve(handler http.Handler, logTo *os.File) (*server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &server{srv: &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: log.New(logTo, "", log.LstdFlags)}, Addr: l.Addr().String()}
	go func() {
		if err := s.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(logTo, "server on %s stopped: %v\n", s.Addr, err)
		}
	}()
	return s, nil
}

// close waits (briefly) for requests in flight before it closes: a git CGI request still running
// writes to the fixtures' log, which the stack closes next (a data race under -race otherwise).
func (s *server) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
}

// Registry is an in-memory OCI registry (go-containerregistry's pkg/registry) on loopback, plain HTTP.
type Registry struct {
	*server
}

func startRegistry(logTo *os.File) (*Registry, error) {
	s, err := serve(registry.New(registry.Logger(log.New(logTo, "registry ", log.LstdFlags))), logTo)
	if err != nil {
		return nil, err
	}
	return &Registry{server: s}, nil
}

// Repository is the registry-qualified name of repo, for example 127.0.0.1:41234/deploy/payments.
func (r *Registry) Repository(repo string) string { return r.Addr + "/" + repo }

// OCIURL is repo as an oci:// URL (Argo CD repoURL, Flux OCIRepository url).
func (r *Registry) OCIURL(repo string) string { return "oci://" + r.Repository(repo) }

// PushManifests pushes files (name -> content) as a single-layer plain-manifests artifact tagged
// tag and returns its manifest digest. The same files always give the same digest.
func (r *Registry) PushManifests(ctx context.Context, repo, tag string, files map[string]string) (string, error) {
	img, err := ManifestsArtifact(files)
	if err != nil {
		return "", err
	}
	ref, err := name.ParseReference(r.Repository(repo) + ":" + tag)
	if err != nil {
		return "", err
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("failed to push %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return d.String(), nil
}

// ManifestsArtifact builds an OCI image manifest with one gzipped tar layer holding files.
func ManifestsArtifact(files map[string]string) (v1.Image, error) {
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		// Zero times and fixed modes keep the digest a function of the contents alone.
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg,
			ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(files[n])); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	return mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(buf.Bytes(), ManifestsLayerType), MediaType: ManifestsLayerType})
}

// GitServer serves bare repositories over smart HTTP (git http-backend through CGI), read-only;
// scenarios commit with Commit, which pushes through the file system.
type GitServer struct {
	*server
	root, work string
	git        string
}

func startGitServer(dir string, logTo *os.File) (*GitServer, error) {
	git, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("git is not installed (Argo CD's repo-server and the git fixture need it): apt-get install git: %w", err)
	}
	g := &GitServer{root: filepath.Join(dir, "repos"), work: filepath.Join(dir, "work"), git: git}
	for _, d := range []string{g.root, g.work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	h := &cgi.Handler{Path: git, Args: []string{"http-backend"}, Stderr: logTo,
		Env: []string{"GIT_PROJECT_ROOT=" + g.root, "GIT_HTTP_EXPORT_ALL=1"}}
	g.server, err = serve(h, logTo)
	if err != nil {
		return nil, err
	}
	return g, nil
}

// URL of repository name (created by Commit).
func (g *GitServer) URL(name string) string { return "http://" + g.Addr + "/" + name + ".git" }

// Commit writes files (name -> content; an empty content deletes the file) into repository name on
// branch main, creating the repository on first use, and returns the commit's SHA.
func (g *GitServer) Commit(ctx context.Context, name, message string, files map[string]string) (string, error) {
	bare := filepath.Join(g.root, name+".git")
	work := filepath.Join(g.work, name)
	if _, err := os.Stat(bare); errors.Is(err, os.ErrNotExist) {
		if _, err := g.run(ctx, "", "init", "--quiet", "--bare", "--initial-branch=main", bare); err != nil {
			return "", err
		}
		if _, err := g.run(ctx, "", "init", "--quiet", "--initial-branch=main", work); err != nil {
			return "", err
		}
	}
	for n, content := range files {
		p := filepath.Join(work, n)
		if content == "" {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return "", err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	for _, args := range [][]string{{"add", "-A"}, {"-c", "user.name=e2e", "-c", "user.email=e2e@stagecoach.dev", "commit", "--quiet", "--allow-empty", "-m", message},
		{"push", "--quiet", bare, "HEAD:main"}} {
		if _, err := g.run(ctx, work, args...); err != nil {
			return "", err
		}
	}
	sha, err := g.run(ctx, work, "rev-parse", "HEAD")
	return strings.TrimSpace(sha), err
}

func (g *GitServer) run(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, g.git, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
