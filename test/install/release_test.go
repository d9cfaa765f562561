package install

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// fakeImage writes what `make image` leaves in dist (an OCI layout and the tarball) for a small
// random image, so that the release step is tested without compiling the image's binary (hack/image
// has its own tests). It returns the image's digest.
func fakeImage(t *testing.T, dist string) string {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := layout.Write(filepath.Join(dist, "image"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag("stagecoach:v0.0.0-test")
	if err := tarball.WriteToFile(filepath.Join(dist, "stagecoach-image.tar"), tag, img); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	return d.String()
}

// TestMakeRelease runs `make release` (its image step taken as done: -o image) into a temporary
// dist and checks every file it lists.
func TestMakeRelease(t *testing.T) {
	dist := t.TempDir()
	digest := fakeImage(t, dist)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "-o", "image", "release", "VERSION=v0.0.0-test", "DIST="+dist, "REGISTRY=registry.example/team")
	cmd.Dir = repoRoot()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make release: %v\n%s", err, out)
	}
	image := "registry.example/team/stagecoach@" + digest
	read := func(g *WithT, file string) []*unstructured.Unstructured {
		data, err := os.ReadFile(filepath.Join(dist, file))
		g.Expect(err).NotTo(HaveOccurred())
		objs, err := parseDocs(data)
		g.Expect(err).NotTo(HaveOccurred(), "%s is not multi-document YAML", file)
		return objs
	}
	kinds := func(objs []*unstructured.Unstructured) []string {
		var out []string
		for _, o := range objs {
			out = append(out, o.GetKind())
		}
		return out
	}

	tests := []struct {
		name  string
		check func(g *WithT)
	}{
		{"every file is listed in the output and in checksums.txt, with its sha256", func(g *WithT) {
			files := []string{"install.yaml", "crds.yaml", "install-argocd.yaml", "install-flux.yaml", "stagecoach-image.tar"}
			sums, err := os.ReadFile(filepath.Join(dist, "checksums.txt"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(out)).To(ContainSubstring("checksums.txt"))
			lines := map[string]string{}
			sc := bufio.NewScanner(bytes.NewReader(sums))
			for sc.Scan() {
				sum, file, _ := strings.Cut(sc.Text(), "  ")
				lines[file] = sum
			}
			g.Expect(lines).To(HaveLen(len(files)))
			for _, f := range files {
				g.Expect(string(out)).To(ContainSubstring(f))
				data, err := os.ReadFile(filepath.Join(dist, f))
				g.Expect(err).NotTo(HaveOccurred())
				h := sha256.Sum256(data)
				g.Expect(lines).To(HaveKeyWithValue(f, hex.EncodeToString(h[:])))
			}
		}},
		{"install.yaml holds CRDs, RBAC, the controller and the policies, its image pinned by digest", func(g *WithT) {
			objs := read(g, "install.yaml")
			g.Expect(kinds(objs)).To(ContainElements("CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "Role",
				"RoleBinding", "Namespace", "ServiceAccount", "Service", "Deployment", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"))
			d := find(objs, "Deployment", "stagecoach-controller")
			g.Expect(container(d)["image"]).To(And(Equal(image), ContainSubstring("@sha256:")))
			g.Expect(d.GetLabels()).To(HaveKeyWithValue("app.kubernetes.io/version", "v0.0.0-test"))
		}},
		{"crds.yaml is the CRDs alone", func(g *WithT) {
			objs := read(g, "crds.yaml")
			g.Expect(objs).To(HaveLen(4))
			g.Expect(kinds(objs)).To(HaveEach("CustomResourceDefinition"))
		}},
		{"install-argocd.yaml adds the pinned plugin sidecar and the notifications, not the token Secret", func(g *WithT) {
			objs := read(g, "install-argocd.yaml")
			g.Expect(keys(objs)).To(ConsistOf("ConfigMap argocd/stagecoach-cmp-plugin", "ConfigMap argocd/argocd-notifications-cm", "Deployment argocd/argocd-repo-server",
				"ConfigMap argocd/argocd-cm", "ConfigMap argocd/argocd-cmd-params-cm", "ConfigMap argocd/argocd-rbac-cm", "Deployment argocd/argocd-server"))
			g.Expect(container(find(objs, "Deployment", "argocd-repo-server"))["image"]).To(Equal(image))
			data, _ := os.ReadFile(filepath.Join(dist, "install-argocd.yaml"))
			g.Expect(string(data)).To(ContainSubstring("#   stringData: {stagecoach-token: REPLACE-WITH-A-LONG-RANDOM-TOKEN}"))
			// The UI extension: the installer downloads this release's tarball; the proxy token is a template.
			g.Expect(string(data)).To(ContainSubstring("releases/download/v0.0.0-test/stagecoach-ui-extension.tar.gz"))
			g.Expect(string(data)).NotTo(ContainSubstring("releases/download/v0.1.0/"))
			g.Expect(string(data)).To(ContainSubstring("#   stringData:"))
			g.Expect(string(data)).To(ContainSubstring("#     stagecoach.proxy.token: Bearer CHANGE-ME"))
		}},
		{"install-flux.yaml has the Provider and Alert, and the Secret as a template only", func(g *WithT) {
			objs := read(g, "install-flux.yaml")
			g.Expect(keys(objs)).To(ConsistOf("Provider flux-system/stagecoach", "Alert flux-system/stagecoach"))
			data, _ := os.ReadFile(filepath.Join(dist, "install-flux.yaml"))
			g.Expect(string(data)).To(ContainSubstring("#   metadata: {name: stagecoach-hooks, namespace: stagecoach-system}"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.check(NewWithT(t)) })
	}
}
