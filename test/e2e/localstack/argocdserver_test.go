package localstack

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// writeTarball writes a .tar.gz of files (name → content; a name ending in / is a folder) and
// its .sha256 as `make ui-release` does, and returns its path.
func writeTarball(t *testing.T, files []string, corruptSum bool) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, name := range files {
		if name[len(name)-1] == '/' {
			NewWithT(t).Expect(tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755})).To(Succeed())
			continue
		}
		body := []byte("// " + name)
		NewWithT(t).Expect(tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))})).To(Succeed())
		_, _ = tw.Write(body)
	}
	NewWithT(t).Expect(tw.Close()).To(Succeed())
	NewWithT(t).Expect(gz.Close()).To(Succeed())
	path := filepath.Join(t.TempDir(), "ext.tar.gz")
	sum := sha256.Sum256(buf.Bytes())
	if corruptSum {
		sum[0] ^= 1
	}
	NewWithT(t).Expect(os.WriteFile(path, buf.Bytes(), 0o644)).To(Succeed())
	NewWithT(t).Expect(os.WriteFile(path+".sha256", []byte(hex.EncodeToString(sum[:])+"  ext.tar.gz\n"), 0o644)).To(Succeed())
	return path
}

func TestInstallExtension(t *testing.T) {
	cases := []struct {
		name       string
		files      []string
		corruptSum bool
		wantErr    string
		wantFiles  []string // relative to the extensions dir
	}{
		{name: "the release layout lands in resources/",
			files:     []string{"resources/", "resources/extension-stagecoach.js/", "resources/extension-stagecoach.js/extension-stagecoach.js"},
			wantFiles: []string{"resources/extension-stagecoach.js/extension-stagecoach.js"}},
		{name: "a checksum that does not match is refused", corruptSum: true,
			files: []string{"resources/extension-x.js"}, wantErr: "does not match"},
		{name: "files outside resources/ are refused",
			files: []string{"extension-x.js"}, wantErr: "outside a top-level resources/"},
		{name: "paths climbing out are refused",
			files: []string{"resources/../../etc/extension-x.js"}, wantErr: "outside a top-level resources/"},
		{name: "an empty resources/ is refused",
			files: []string{"resources/"}, wantErr: "nothing under resources/"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			dir := t.TempDir()
			// What a crashed run left behind is replaced, not merged.
			stale := filepath.Join(dir, "resources", "extension-stagecoach.js", "old.js")
			g.Expect(os.MkdirAll(filepath.Dir(stale), 0o755)).To(Succeed())
			g.Expect(os.WriteFile(stale, []byte("old"), 0o644)).To(Succeed())

			installed, err := installExtension(writeTarball(t, tc.files, tc.corruptSum), dir)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(installed).To(Equal([]string{filepath.Join(dir, "resources", "extension-stagecoach.js")}))
			for _, f := range tc.wantFiles {
				g.Expect(filepath.Join(dir, f)).To(BeARegularFile())
			}
			g.Expect(stale).NotTo(BeAnExistingFile())
		})
	}
}

func TestCachedArgoCDWebUI(t *testing.T) {
	cases := []struct {
		name       string
		files      map[string]string // relative to the cache folder
		wantErr    string
		wantCommit string
	}{
		{name: "not built: says why and how to build it", files: map[string]string{},
			wantErr: "make argocd-ui ARGO_UI_SRC=<path>"},
		{name: "a build that wrote no index.html is not a UI", files: map[string]string{"argocd-ui-" + ArgoCDVersion + "/main.js": ""},
			wantErr: "not built"},
		{name: "built, with the argo-ui commit recorded beside it",
			files: map[string]string{"argocd-ui-" + ArgoCDVersion + "/index.html": "<html>",
				"argocd-ui-" + ArgoCDVersion + ".argo-ui": "commit=ad616de8\nsource=/src\n"},
			wantCommit: "ad616de8"},
		{name: "built, without a record", files: map[string]string{"argocd-ui-" + ArgoCDVersion + "/index.html": "<html>"},
			wantCommit: "unknown"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			cache := t.TempDir()
			t.Setenv("STAGECOACH_CACHE", cache)
			for name, body := range tc.files {
				g.Expect(os.MkdirAll(filepath.Dir(filepath.Join(cache, name)), 0o755)).To(Succeed())
				g.Expect(os.WriteFile(filepath.Join(cache, name), []byte(body), 0o644)).To(Succeed())
			}
			web, err := CachedArgoCDWebUI()
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(web.Dir).To(Equal(filepath.Join(cache, "argocd-ui-"+ArgoCDVersion)))
			g.Expect(web.ArgoUICommit).To(Equal(tc.wantCommit))
		})
	}
}

func TestLinkTree(t *testing.T) {
	cases := []struct {
		name  string
		stale bool // the destination already holds an older copy
	}{
		{name: "into an empty folder"},
		{name: "over what an earlier start left", stale: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			from, to := t.TempDir(), t.TempDir()
			g.Expect(os.MkdirAll(filepath.Join(from, "assets", "fonts"), 0o755)).To(Succeed())
			g.Expect(os.WriteFile(filepath.Join(from, "index.html"), []byte("new"), 0o644)).To(Succeed())
			g.Expect(os.WriteFile(filepath.Join(from, "assets", "fonts", "a.woff2"), []byte("font"), 0o644)).To(Succeed())
			// The harness lives beside the UI and stays.
			g.Expect(os.MkdirAll(filepath.Join(to, "stagecoach-harness"), 0o755)).To(Succeed())
			g.Expect(os.WriteFile(filepath.Join(to, "stagecoach-harness", "h.html"), []byte("h"), 0o644)).To(Succeed())
			if tc.stale {
				g.Expect(os.WriteFile(filepath.Join(to, "index.html"), []byte("old"), 0o644)).To(Succeed())
			}
			g.Expect(linkTree(from, to)).To(Succeed())
			g.Expect(os.ReadFile(filepath.Join(to, "index.html"))).To(BeEquivalentTo("new"))
			g.Expect(os.ReadFile(filepath.Join(to, "assets", "fonts", "a.woff2"))).To(BeEquivalentTo("font"))
			g.Expect(filepath.Join(to, "stagecoach-harness", "h.html")).To(BeARegularFile())
			// The cache is never written through a link.
			g.Expect(os.ReadFile(filepath.Join(from, "index.html"))).To(BeEquivalentTo("new"))
		})
	}
}
