// Command image builds Stagecoach's container image without Docker, and pushes it.
//
//	go run ./hack/image build -version v0.1.0 -revision <commit> -created <unix seconds> -out dist
//	go run ./hack/image push -layout dist/image -to registry.example/stagecoach:v0.1.0
//
// The image is the static stagecoach binary (CGO off, -trimpath, version stamped) at
// /usr/local/bin/stagecoach on an empty base, plus the build machine's CA certificates and an
// /etc/passwd naming the non-root user 65532. Every timestamp is -created and tar entries are
// sorted, so the same commit on the same machine gives the same digest. It serves both the
// controller and the Argo CD plugin sidecar (whose cmp-server runs `stagecoach cmp generate` from
// PATH). `build` writes an OCI layout (dist/image) and a tarball (dist/stagecoach-image.tar, which
// `docker load`, `podman load` and `crane push` read) and prints the digest.
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/stagecoach-dev/stagecoach/internal/imagesign"
)

const (
	// BinaryPath is where the image holds the binary (on PATH, for the plugin's generate command).
	BinaryPath = "/usr/local/bin/stagecoach"
	// User is the image's non-root user and group (distroless's "nonroot").
	User         = "65532:65532"
	versionVar   = "github.com/stagecoach-dev/stagecoach/internal/version.Version"
	defaultCerts = "/etc/ssl/certs/ca-certificates.crt"
	// TarballName and LayoutDir are the outputs of build, under -out.
	TarballName = "stagecoach-image.tar"
	LayoutDir   = "image"
)

// Options are the inputs of one build.
type Options struct {
	Version  string
	Revision string
	Source   string
	Created  time.Time
	Certs    string // CA bundle to ship; the build machine's by default
	Repo     string // the checkout holding cmd/stagecoach
	GOARCH   string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("say build or push (see hack/image/main.go)")
	}
	switch args[0] {
	case "build":
		fs := flag.NewFlagSet("build", flag.ContinueOnError)
		var o Options
		var created int64
		var out string
		fs.StringVar(&o.Version, "version", "dev", "version stamped into the binary and the labels")
		fs.StringVar(&o.Revision, "revision", "", "git commit (label org.opencontainers.image.revision)")
		fs.StringVar(&o.Source, "source", "https://github.com/stagecoach-dev/stagecoach", "label org.opencontainers.image.source")
		fs.Int64Var(&created, "created", 0, "every timestamp in the image, unix seconds (the commit's time keeps the digest per commit)")
		fs.StringVar(&o.Certs, "certs", defaultCerts, "CA certificate bundle to ship")
		fs.StringVar(&o.Repo, "repo", ".", "checkout holding cmd/stagecoach")
		fs.StringVar(&o.GOARCH, "arch", "amd64", "GOARCH of the image")
		fs.StringVar(&out, "out", "dist", "folder for the OCI layout (image/) and the tarball")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		o.Created = time.Unix(created, 0).UTC()
		img, err := Build(ctx, o)
		if err != nil {
			return err
		}
		digest, err := Write(img, out, "stagecoach:"+o.Version)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, digest)
		return err
	case "push":
		fs := flag.NewFlagSet("push", flag.ContinueOnError)
		from := fs.String("layout", "dist/"+LayoutDir, "OCI layout written by build")
		to := fs.String("to", "", "reference to push to, e.g. registry.example/stagecoach:v0.1.0")
		sig := fs.String("signature", "dist/image-signature", "cosign signature layout written by make release (pushed too when it exists)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *to == "" {
			return errors.New("push needs -to REGISTRY/stagecoach:TAG (make image-push REGISTRY=...)")
		}
		auth := remote.WithAuthFromKeychain(authn.DefaultKeychain)
		digest, err := Push(ctx, *from, *to, auth)
		if err != nil {
			return err
		}
		r, err := name.ParseReference(*to)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(stdout, "%s@%s\n", r.Context(), digest); err != nil {
			return err
		}
		if _, err := os.Stat(*sig); errors.Is(err, os.ErrNotExist) {
			return nil // unsigned: make release ran without COSIGN_KEY
		}
		pushed, err := imagesign.Push(ctx, *sig, r.Context().String(), digest, auth)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, pushed)
		return err
	}
	return fmt.Errorf("unknown command %q: say build or push", args[0])
}

// Build compiles the binary and assembles the image.
func Build(ctx context.Context, o Options) (v1.Image, error) {
	tmp, err := os.MkdirTemp("", "stagecoach-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "stagecoach")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w -X "+versionVar+"="+o.Version, "-o", bin, "./cmd/stagecoach")
	cmd.Dir = o.Repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+o.GOARCH)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go build ./cmd/stagecoach in %s: %w", o.Repo, err)
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	certs, err := os.ReadFile(o.Certs)
	if err != nil {
		return nil, fmt.Errorf("CA certificates: %w (install Debian's ca-certificates, or pass -certs)", err)
	}
	return Assemble(o, binary, certs)
}

type file struct {
	mode int64
	data []byte
	dir  bool
}

// Assemble puts binary and certs into an image; its digest depends on nothing else than the
// arguments.
func Assemble(o Options, binary, certs []byte) (v1.Image, error) {
	base := layerTar(o.Created, map[string]file{
		"etc":                               {dir: true, mode: 0o755},
		"etc/ssl":                           {dir: true, mode: 0o755},
		"etc/ssl/certs":                     {dir: true, mode: 0o755},
		"etc/ssl/certs/ca-certificates.crt": {mode: 0o644, data: certs},
		"etc/passwd":                        {mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		"etc/group":                         {mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		"home":                              {dir: true, mode: 0o755},
		"home/nonroot":                      {dir: true, mode: 0o700},
		"tmp":                               {dir: true, mode: 0o1777},
	})
	app := layerTar(o.Created, map[string]file{
		"usr":                      {dir: true, mode: 0o755},
		"usr/local":                {dir: true, mode: 0o755},
		"usr/local/bin":            {dir: true, mode: 0o755},
		"usr/local/bin/stagecoach": {mode: 0o755, data: binary},
	})
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, l := range []struct {
		tar     []byte
		comment string
	}{{base, "CA certificates, /etc/passwd (nonroot 65532), /tmp"}, {app, "stagecoach " + o.Version}} {
		data := l.tar
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(data)), nil
		}, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, err
		}
		img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
			Created: v1.Time{Time: o.Created}, CreatedBy: "hack/image", Comment: l.comment}})
		if err != nil {
			return nil, err
		}
	}
	labels := map[string]string{
		"org.opencontainers.image.source":   o.Source,
		"org.opencontainers.image.revision": o.Revision,
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.title":    "stagecoach",
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = o.GOARCH, "linux"
	cf.Created = v1.Time{Time: o.Created}
	cf.Config = v1.Config{
		User:       User,
		Entrypoint: []string{BinaryPath},
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
		WorkingDir: "/",
		Labels:     labels,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	img = mutate.Annotations(img, labels).(v1.Image)
	return img, nil
}

// layerTar writes files in sorted order with fixed owners and times.
func layerTar(mtime time.Time, files map[string]file) []byte {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		f := files[n]
		h := &tar.Header{Name: n, Mode: f.mode, ModTime: mtime, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(f.data))}
		if f.dir {
			h.Name, h.Typeflag, h.Size = n+"/", tar.TypeDir, 0
		}
		if n == "home/nonroot" {
			h.Uid, h.Gid = 65532, 65532
		}
		// Errors writing to a bytes.Buffer cannot happen.
		_ = tw.WriteHeader(h)
		_, _ = tw.Write(f.data)
	}
	_ = tw.Close()
	return buf.Bytes()
}

// Write stores img as an OCI layout under out/image (replacing one there) and as out's tarball,
// and returns its digest.
func Write(img v1.Image, out, tag string) (v1.Hash, error) {
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	dir := filepath.Join(out, LayoutDir)
	if err := os.RemoveAll(dir); err != nil {
		return v1.Hash{}, err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag})); err != nil {
		return v1.Hash{}, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("tag %q: %w", tag, err)
	}
	if err := tarball.WriteToFile(filepath.Join(out, TarballName), ref, img); err != nil {
		return v1.Hash{}, err
	}
	return digest, nil
}

// Load reads the one image of an OCI layout written by Write.
func Load(dir string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s (run make image first): %w", dir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("OCI layout %s holds %d images, want 1", dir, len(m.Manifests))
	}
	return idx.Image(m.Manifests[0].Digest)
}

// Push sends the layout's image to ref and returns its digest.
func Push(ctx context.Context, dir, ref string, opts ...remote.Option) (v1.Hash, error) {
	img, err := Load(dir)
	if err != nil {
		return v1.Hash{}, err
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("push to %q: %w", ref, err)
	}
	if err := remote.Write(r, img, append(opts, remote.WithContext(ctx))...); err != nil {
		return v1.Hash{}, fmt.Errorf("push to %s: %w", ref, err)
	}
	return img.Digest()
}
