package main

import (
	"archive/tar"
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	. "github.com/onsi/gomega"

	"github.com/stagecoach-dev/stagecoach/internal/imagesign"
	"github.com/stagecoach-dev/stagecoach/internal/verify"
	"github.com/stagecoach-dev/stagecoach/internal/verify/verifytest"
)

var testCreated = time.Unix(1764547200, 0).UTC()

func testOptions() Options {
	return Options{Version: "v9.8.7-test", Revision: "0123456789abcdef", Source: "https://example.invalid/stagecoach",
		Created: testCreated, Certs: defaultCerts, Repo: filepath.Join("..", ".."), GOARCH: "amd64"}
}

// files lists every tar entry of the image's layers with its header.
func files(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*tar.Header{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		var prev string
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Name < prev {
				t.Errorf("tar entries out of order: %s after %s", h.Name, prev)
			}
			prev = h.Name
			out[h.Name] = h
		}
		rc.Close()
	}
	return out
}

// extract writes the image's file at path (without the leading slash) to dst.
func extract(t *testing.T, img v1.Image, path, dst string) {
	t.Helper()
	layers, _ := img.Layers()
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			if h.Name == path {
				data, err := io.ReadAll(tr)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(dst, data, 0o755); err != nil {
					t.Fatal(err)
				}
				rc.Close()
				return
			}
		}
		rc.Close()
	}
	t.Fatalf("%s is not in the image", path)
}

func TestBuild(t *testing.T) {
	if _, err := os.Stat(defaultCerts); err != nil {
		t.Skipf("no CA bundle at %s on this machine", defaultCerts)
	}
	ctx := t.Context()
	img, err := Build(ctx, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name  string
		check func(g *WithT, t *testing.T)
	}{
		{"built again from the same commit, the digest and the tarball are the same", func(g *WithT, t *testing.T) {
			again, err := Build(ctx, testOptions())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(again.Digest()).To(Equal(digest))
			a, b := t.TempDir(), t.TempDir()
			g.Expect(Write(img, a, "stagecoach:v9.8.7-test")).To(Equal(digest))
			g.Expect(Write(again, b, "stagecoach:v9.8.7-test")).To(Equal(digest))
			ta, _ := os.ReadFile(filepath.Join(a, TarballName))
			tb, _ := os.ReadFile(filepath.Join(b, TarballName))
			g.Expect(ta).NotTo(BeEmpty())
			g.Expect(bytes.Equal(ta, tb)).To(BeTrue(), "the tarballs differ")
		}},
		{"another version or revision is another digest", func(g *WithT, t *testing.T) {
			digests := map[v1.Hash]bool{}
			for _, change := range []func(*Options){func(*Options) {}, func(o *Options) { o.Version = "v9.8.8" }, func(o *Options) { o.Revision = "fedcba" },
				func(o *Options) { o.Created = o.Created.Add(time.Second) }} {
				o := testOptions()
				change(&o)
				img, err := Assemble(o, []byte("binary"), []byte("certs"))
				g.Expect(err).NotTo(HaveOccurred())
				d, err := img.Digest()
				g.Expect(err).NotTo(HaveOccurred())
				digests[d] = true
			}
			g.Expect(digests).To(HaveLen(4))
		}},
		{"the config names the non-root user, the entrypoint and the OCI labels", func(g *WithT, t *testing.T) {
			cf, err := img.ConfigFile()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cf.Config.User).To(Equal("65532:65532"))
			g.Expect(cf.Config.Entrypoint).To(Equal([]string{"/usr/local/bin/stagecoach"}))
			g.Expect(cf.Config.Env).To(ContainElement(HavePrefix("PATH=/usr/local/bin:")))
			g.Expect(cf.Config.Labels).To(And(
				HaveKeyWithValue("org.opencontainers.image.source", "https://example.invalid/stagecoach"),
				HaveKeyWithValue("org.opencontainers.image.revision", "0123456789abcdef"),
				HaveKeyWithValue("org.opencontainers.image.version", "v9.8.7-test")))
			g.Expect(cf.OS).To(Equal("linux"))
			g.Expect(cf.Architecture).To(Equal("amd64"))
			g.Expect(cf.Created.Time).To(BeTemporally("==", testCreated))
			for _, h := range cf.History {
				g.Expect(h.Created.Time).To(BeTemporally("==", testCreated))
			}
			m, err := img.Manifest()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(m.MediaType)).To(Equal("application/vnd.oci.image.manifest.v1+json"))
			g.Expect(m.Annotations).To(HaveKeyWithValue("org.opencontainers.image.revision", "0123456789abcdef"))
		}},
		{"the image holds the binary, the build machine's CA bundle and nothing with a wall-clock time", func(g *WithT, t *testing.T) {
			fs := files(t, img)
			g.Expect(fs).To(HaveKey("usr/local/bin/stagecoach"))
			g.Expect(fs).To(HaveKey("etc/passwd"))
			ca, ok := fs["etc/ssl/certs/ca-certificates.crt"]
			g.Expect(ok).To(BeTrue())
			want, _ := os.Stat(defaultCerts)
			g.Expect(ca.Size).To(Equal(want.Size()))
			for n, h := range fs {
				g.Expect(h.ModTime).To(BeTemporally("==", testCreated), n)
				g.Expect(h.Uname).To(BeEmpty(), n)
			}
		}},
		{"the binary taken out of the image prints the stamped version and is static", func(g *WithT, t *testing.T) {
			bin := filepath.Join(t.TempDir(), "stagecoach")
			extract(t, img, "usr/local/bin/stagecoach", bin)
			out, err := exec.CommandContext(ctx, bin, "version").CombinedOutput()
			g.Expect(err).NotTo(HaveOccurred(), string(out))
			g.Expect(strings.TrimSpace(string(out))).To(Equal("stagecoach v9.8.7-test"))
			// A static binary has no program interpreter (ld-linux) to load.
			file, err := os.ReadFile(bin)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(bytes.Contains(file[:4096], []byte("ld-linux"))).To(BeFalse(), "the binary is dynamically linked")
		}},
		{"the tarball and the layout load back as the same image", func(g *WithT, t *testing.T) {
			dir := t.TempDir()
			g.Expect(Write(img, dir, "stagecoach:v9.8.7-test")).To(Equal(digest))
			tag, _ := name.NewTag("stagecoach:v9.8.7-test")
			loaded, err := tarball.ImageFromPath(filepath.Join(dir, TarballName), &tag)
			g.Expect(err).NotTo(HaveOccurred())
			// A docker-archive tarball keeps the config and layers, not the OCI manifest: compare those.
			want, _ := img.ConfigName()
			g.Expect(loaded.ConfigName()).To(Equal(want))
			lc, _ := loaded.ConfigFile()
			ic, _ := img.ConfigFile()
			g.Expect(lc.RootFS.DiffIDs).To(Equal(ic.RootFS.DiffIDs))
			fromLayout, err := Load(filepath.Join(dir, LayoutDir))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(fromLayout.Digest()).To(Equal(digest))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.check(NewWithT(t), t) })
	}
}

func TestPush(t *testing.T) {
	img, err := Assemble(testOptions(), []byte("#!/bin/sh\necho stagecoach\n"), []byte("certs"))
	if err != nil {
		t.Fatal(err)
	}
	digest, _ := img.Digest()
	dir := t.TempDir()
	if _, err := Write(img, dir, "stagecoach:v9.8.7-test"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")

	tests := []struct {
		name    string
		layout  string
		to      string
		wantErr string
	}{
		{name: "pushes the layout's image under the tag", layout: filepath.Join(dir, LayoutDir), to: host + "/stagecoach:v9.8.7-test"},
		{name: "a missing layout says to build first", layout: filepath.Join(dir, "nope"), to: host + "/stagecoach:x", wantErr: "run make image first"},
		{name: "a bad reference is named", layout: filepath.Join(dir, LayoutDir), to: host + "/Stagecoach:UPPER:x", wantErr: "Stagecoach"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := Push(t.Context(), tt.layout, tt.to)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(digest))
			ref, _ := name.ParseReference(tt.to)
			desc, err := remote.Get(ref, remote.WithContext(t.Context()))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(desc.Digest).To(Equal(digest))
		})
	}
}

// `make image-push` pushes the cosign signature `make release` wrote beside the image (and none
// when there is none); a signature of another image is refused.
func TestRunPushPushesTheSignature(t *testing.T) {
	img, err := Assemble(testOptions(), []byte("#!/bin/sh\necho stagecoach\n"), []byte("certs"))
	if err != nil {
		t.Fatal(err)
	}
	digest, _ := img.Digest()
	dir := t.TempDir()
	if _, err := Write(img, dir, "stagecoach:v9.8.7-test"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	repo := strings.TrimPrefix(srv.URL, "http://") + "/team/stagecoach"
	key := verifytest.NewKeyPair(t)
	signed := func(d v1.Hash) string {
		sig, err := imagesign.Sign(key.Signer, repo, d)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "image-signature")
		if err := imagesign.WriteLayout(out, sig); err != nil {
			t.Fatal(err)
		}
		return out
	}
	other, _ := v1.NewHash("sha256:" + strings.Repeat("0", 64))
	tests := []struct {
		name      string
		signature string
		wantSig   bool
		wantErr   string
	}{
		{name: "with the release's signature", signature: signed(digest), wantSig: true},
		{name: "without one", signature: filepath.Join(dir, "none")},
		{name: "another image's signature", signature: signed(other), wantErr: "run make release again"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			sigTag, err := name.NewTag(repo + ":" + imagesign.Tag(digest))
			g.Expect(err).NotTo(HaveOccurred())
			_ = remote.Delete(sigTag, remote.WithContext(t.Context())) // from an earlier case
			var out bytes.Buffer
			err = run(t.Context(), []string{"push", "-layout", filepath.Join(dir, LayoutDir), "-signature", tt.signature, "-to", repo + ":v9.8.7-test"}, &out)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out.String()).To(HavePrefix(repo + "@" + digest.String() + "\n"))
			_, err = remote.Head(sigTag, remote.WithContext(t.Context()))
			if !tt.wantSig {
				g.Expect(err).To(HaveOccurred(), "a signature was pushed")
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out.String()).To(ContainSubstring(sigTag.String()))
			v, err := verify.New(verify.Options{Keys: [][]byte{key.PublicPEM}})
			g.Expect(err).NotTo(HaveOccurred())
			verdict, err := v.Verify(t.Context(), repo+"@"+digest.String())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(verdict.Verified).To(BeTrue(), verdict.Message)
		})
	}
}
