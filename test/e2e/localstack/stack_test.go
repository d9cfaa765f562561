package localstack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"
)

func TestManifestsArtifact(t *testing.T) {
	cases := []struct {
		name      string
		a, b      map[string]string
		sameBytes bool
	}{
		{name: "same files give the same digest", a: map[string]string{"a.yaml": "x", "b.yaml": "y"},
			b: map[string]string{"b.yaml": "y", "a.yaml": "x"}, sameBytes: true},
		{name: "different contents give different digests", a: map[string]string{"a.yaml": "x"},
			b: map[string]string{"a.yaml": "z"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			a, err := ManifestsArtifact(tc.a)
			g.Expect(err).NotTo(HaveOccurred())
			b, err := ManifestsArtifact(tc.b)
			g.Expect(err).NotTo(HaveOccurred())
			da, _ := a.Digest()
			db, _ := b.Digest()
			g.Expect(da == db).To(Equal(tc.sameBytes))
			// Argo CD takes exactly one content layer of an accepted media type.
			layers, err := a.Layers()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(layers).To(HaveLen(1))
			mt, _ := layers[0].MediaType()
			g.Expect(mt).To(Equal(ManifestsLayerType))
		})
	}
}

func TestNamespaceFor(t *testing.T) {
	cases := []struct{ test, prefix string }{
		{"TestOCIPipeline", "testocipipeline-"},
		{"TestX/sub_case #1", "testx-sub-case-1-"},
		{strings.Repeat("A", 80), strings.Repeat("a", 50) + "-"},
	}
	for _, tc := range cases {
		t.Run(tc.test, func(t *testing.T) {
			g := NewWithT(t)
			ns := namespaceFor(tc.test)
			g.Expect(ns).To(HavePrefix(tc.prefix))
			g.Expect(len(ns)).To(BeNumerically("<=", 63))
			g.Expect(ns).To(MatchRegexp(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`))
		})
	}
}

func TestPKIAndKubeconfig(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	p, err := newPKI(filepath.Join(dir, "pki"))
	g.Expect(err).NotTo(HaveOccurred())
	tokens, err := os.ReadFile(p.tokens)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(tokens)).To(ContainSubstring(p.adminToken + ",admin,"))
	g.Expect(string(tokens)).To(ContainSubstring(p.controllerToken + "," + ControllerUser + ","))
	g.Expect(p.adminToken).NotTo(Equal(p.controllerToken))

	path := filepath.Join(dir, "kubeconfig")
	g.Expect(writeKubeconfig(path, "https://127.0.0.1:1", p.caPEM, AdminUser, p.adminToken)).To(Succeed())
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Host).To(Equal("https://127.0.0.1:1"))
	g.Expect(cfg.BearerToken).To(Equal(p.adminToken))
	g.Expect(cfg.CAData).To(Equal(p.caPEM))
}

func TestProcessStopEscalatesToKill(t *testing.T) {
	cases := []struct {
		name   string
		script string
	}{
		{name: "exits on SIGTERM", script: "exec sleep 60"},
		{name: "ignores SIGTERM and is killed after the grace", script: "trap '' TERM; while :; do sleep 0.05; done"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p, err := startProcess(t.TempDir(), processSpec{name: "sh", path: "/bin/sh", args: []string{"-c", tc.script},
				grace: 300 * time.Millisecond})
			g.Expect(err).NotTo(HaveOccurred())
			ended, _ := p.Exited()
			g.Expect(ended).To(BeFalse())
			p.Stop()
			ended, _ = p.Exited()
			g.Expect(ended).To(BeTrue())
		})
	}
}

func TestBinaryName(t *testing.T) {
	// go build -o DIR/ names each binary this way; Build renames them into the cache by it.
	cases := map[string]string{
		"github.com/argoproj/argo-cd/v3/cmd":         "cmd",
		"github.com/fluxcd/source-controller":        "source-controller",
		"./cmd/stagecoach":                           "stagecoach",
		"example.com/tool/v2":                        "tool",
		"example.com/versions/v2beta":                "v2beta",
		"github.com/fluxcd/notification-controller/": "notification-controller",
	}
	for pkg, want := range cases {
		t.Run(pkg, func(t *testing.T) {
			NewWithT(t).Expect(binaryName(pkg)).To(Equal(want))
		})
	}
}

// Build finds the module that builds the engines by path, and names their binaries by its go.sum:
// a move of the folder must fail here, not half an hour into a cold build.
func TestEnginesModuleDir(t *testing.T) {
	for _, file := range []string{"go.mod", "go.sum", "tools.go"} {
		t.Run(file, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(filepath.Join(enginesModuleDir(RepoRoot()), file)).To(BeARegularFile())
		})
	}
}
