package check

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// A plugin cannot read what the runner denies (the service-account token in a pod), whichever
// path leads there, and still reads the rest; the controller itself still reads it after.
func TestPluginCannotReadDeniedPaths(t *testing.T) {
	// Under the temporary directory, so that the sandbox splits it: the plugin's socket, created
	// after the split, must still be readable to it (its own TMPDIR is made before).
	dir, err := filepath.EvalSymlinks(t.TempDir())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	secrets := filepath.Join(dir, "secrets")
	other := filepath.Join(dir, "other")
	for _, d := range []string{secrets, other} {
		NewWithT(t).Expect(os.Mkdir(d, 0o700)).To(Succeed())
		NewWithT(t).Expect(os.WriteFile(filepath.Join(d, "token"), []byte("hunter2"), 0o600)).To(Succeed())
	}
	link := filepath.Join(dir, "link")
	NewWithT(t).Expect(os.Symlink(secrets, link)).To(Succeed())
	// The runner's own temporary directory, to see that each plugin's is removed after its run.
	runnerTmp := filepath.Join(dir, "tmp")
	NewWithT(t).Expect(os.Mkdir(runnerTmp, 0o700)).To(Succeed())
	t.Setenv("TMPDIR", runnerTmp)

	tests := []struct {
		name     string
		deny     []string
		read     string
		wantPath string // what the plugin says of the path it was told to read
	}{
		{name: "a denied file is refused", deny: []string{secrets}, read: filepath.Join(secrets, "token"), wantPath: "permission denied"},
		{name: "through a symlink to a denied directory", deny: []string{secrets}, read: filepath.Join(link, "token"), wantPath: "permission denied"},
		{name: "denied through a symlink, read by its real path", deny: []string{link}, read: filepath.Join(secrets, "token"), wantPath: "permission denied"},
		{name: "a missing denied path denies nothing else", deny: []string{secrets, filepath.Join(dir, "absent")}, read: filepath.Join(other, "token"), wantPath: "path: ok"},
		{name: "a file beside the denied directory is read", deny: []string{secrets}, read: filepath.Join(other, "token"), wantPath: "path: ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r := &Runner{PluginDir: pluginDir, PluginDenyRead: tt.deny}

			res := r.Run(t.Context(), pluginSpec("misbehave", map[string]string{"mode": "read", "path": tt.read}), testInput())
			t.Log(res.Message)
			g.Expect(res.Passed).To(BeTrue(), res.Message)
			g.Expect(res.Message).To(ContainSubstring(tt.wantPath))
			g.Expect(res.Message).To(ContainSubstring("self: ok; etc: ok"))
			g.Expect(r.PluginSandbox()).To(Succeed())
			g.Expect(os.ReadDir(runnerTmp)).To(BeEmpty(), "the plugin's temporary directory is left behind")

			// The restriction stayed with the plugin: the controller's goroutines, on whatever
			// thread, still read the file.
			var wg sync.WaitGroup
			for range 16 {
				wg.Go(func() {
					_, err := os.ReadFile(filepath.Join(secrets, "token"))
					g.Expect(err).NotTo(HaveOccurred())
				})
			}
			wg.Wait()
		})
	}
}

// Without Landlock a plugin runs as before, the check is not failed for it, and the runner
// says so: once in the log and through PluginSandbox.
func TestPluginRunsWithoutLandlock(t *testing.T) {
	for _, tc := range []struct {
		name  string
		errno unix.Errno
	}{
		{name: "no landlock syscall", errno: unix.ENOSYS},
		{name: "landlock disabled", errno: unix.EOPNOTSUPP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			orig := landlockABI
			landlockABI = func() (int, error) { return 0, tc.errno }
			t.Cleanup(func() { landlockABI = orig })
			secrets := t.TempDir()
			token := filepath.Join(secrets, "token")
			g.Expect(os.WriteFile(token, []byte("hunter2"), 0o600)).To(Succeed())
			var mu sync.Mutex
			var lines []string
			ctx := log.IntoContext(t.Context(), funcr.New(func(_, args string) {
				mu.Lock()
				defer mu.Unlock()
				lines = append(lines, args)
			}, funcr.Options{}))
			r := &Runner{PluginDir: pluginDir, PluginDenyRead: []string{secrets}, Backoff: noBackoff}

			for range 2 {
				res := r.Run(ctx, pluginSpec("misbehave", map[string]string{"mode": "read", "path": token}), testInput())
				g.Expect(res.Passed).To(BeTrue(), res.Message)
				g.Expect(res.Message).To(ContainSubstring("path: ok; self: ok; etc: ok"))
			}
			g.Expect(r.PluginSandbox()).To(MatchError(ContainSubstring("the kernel has no Landlock")))
			mu.Lock()
			defer mu.Unlock()
			g.Expect(lines).To(ConsistOf(ContainSubstring("check plugins run without a read sandbox")))
		})
	}
}

// What the sandbox allows never reaches into, nor holds, a denied path, the defaults included
// (/var/run is a link to /run on most systems).
func TestReadablePathsLeaveOutTheDenied(t *testing.T) {
	for _, tc := range []struct {
		name string
		deny []string
	}{
		{name: "service-account credentials", deny: defaultPluginDenyRead},
		{name: "a temporary directory", deny: []string{t.TempDir()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			allowed, err := readablePaths(tc.deny)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(allowed).To(ContainElement("/etc"))
			for _, d := range tc.deny {
				real, err := resolve(d)
				g.Expect(err).NotTo(HaveOccurred())
				for _, p := range allowed {
					g.Expect(p == real || strings.HasPrefix(p, real+"/") || strings.HasPrefix(real, p+"/")).To(BeFalse(),
						"%s allowed, %s denied", p, real)
				}
			}
		})
	}
}
