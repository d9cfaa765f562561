package check

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	plugincheck "github.com/stagecoach-dev/stagecoach/plugin/check"
)

// The plugin binaries are built once for the test binary, by TestMain, and only read after.
var (
	pluginDir string
	// pluginSHA256 maps a plugin's name to its checksum, hex.
	pluginSHA256 = map[string]string{}
)

// testPlugins are built into pluginDir under their map key, which is each package's last path
// element: the name `go build -o DIR/` gives its binary.
var testPlugins = map[string]string{
	"example":   "github.com/stagecoach-dev/stagecoach/plugin/check/example",
	"misbehave": "github.com/stagecoach-dev/stagecoach/plugin/check/internal/testplugins/misbehave",
}

func TestMain(m *testing.M) {
	flag.Parse()
	// A fuzz worker runs only the fuzz target, which needs no plugin: building them in each
	// worker would use up a short -fuzztime before the first input.
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		os.Exit(m.Run())
	}
	os.Exit(runWithPlugins(m))
}

func runWithPlugins(m *testing.M) int {
	dir, err := os.MkdirTemp("", "stagecoach-check-plugins-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "plugin dir:", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	// One go command for all plugins: their links run side by side (this is on make unit's
	// critical path).
	// -race, as the suites compile: the plugins' dependencies are built already.
	args := []string{"build", "-race", "-o", dir + string(filepath.Separator)}
	for _, pkg := range testPlugins {
		args = append(args, pkg)
	}
	cmd := exec.Command("go", args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "building the test plugins (%v): %v\n", slices.Sorted(maps.Values(testPlugins)), err)
		return 1
	}
	for name := range testPlugins {
		sum, err := fileSHA256(filepath.Join(dir, name))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		pluginSHA256[name] = hex.EncodeToString(sum)
	}
	pluginDir = dir
	return m.Run()
}

func pluginSpec(name string, config map[string]string) v1alpha1.Check {
	return v1alpha1.Check{Name: "gate", Plugin: &v1alpha1.PluginCheck{Name: name, SHA256: pluginSHA256[name], Config: config}}
}

func TestPluginCheck(t *testing.T) {
	in := testInput()
	otherSum := fmt.Sprintf("%x", sha256.Sum256([]byte("another build")))
	tests := []struct {
		name         string
		check        v1alpha1.Check
		pluginDir    string // pluginDir when empty
		wantPassed   bool
		wantAttempts int
		wantMessage  []string
	}{
		{
			name:         "example passes a digest not on the deny list",
			check:        pluginSpec("example", map[string]string{"deny": "sha256:" + strings.Repeat("00", 32)}),
			wantPassed:   true,
			wantAttempts: 1,
			wantMessage:  []string{`check "gate" passed: plugin "example": 1.4.2 (` + in.Digest + `) is not on the deny list`},
		},
		{
			name:         "example fails a denied digest, with its message",
			check:        pluginSpec("example", map[string]string{"deny": "sha256:" + strings.Repeat("00", 32) + "," + in.Digest}),
			wantAttempts: 1,
			wantMessage:  []string{`check "gate" failed: plugin "example": 1.4.2 (` + in.Digest + `) of payments is on the deny list`},
		},
		{
			name:         "example allow overrides the deny list",
			check:        pluginSpec("example", map[string]string{"allow": "true", "deny": in.Digest}),
			wantPassed:   true,
			wantAttempts: 1,
			wantMessage:  []string{"every version passes"},
		},
		{
			name:         "example refuses unknown config",
			check:        pluginSpec("example", map[string]string{"alow": "true"}),
			wantAttempts: 1,
			wantMessage:  []string{`plugin "example" could not run the check: unknown config key "alow"`},
		},
		{
			name: "checksum mismatch is refused, not retried",
			check: func() v1alpha1.Check {
				c := pluginSpec("example", nil)
				c.Plugin.SHA256 = otherSum
				c.Retries = 3
				return c
			}(),
			wantAttempts: 0,
			wantMessage: []string{`check "gate" cannot run: plugin "example" refused`, "has sha256 " + pluginSHA256["example"],
				"the check pins " + otherSum},
		},
		{
			name:         "missing binary",
			check:        v1alpha1.Check{Name: "gate", Plugin: &v1alpha1.PluginCheck{Name: "absent", SHA256: otherSum}},
			wantAttempts: 0,
			wantMessage:  []string{`plugin "absent" not found`, "install the plugin there"},
		},
		{
			name:         "a name that is a path is refused",
			check:        v1alpha1.Check{Name: "gate", Plugin: &v1alpha1.PluginCheck{Name: "../example", SHA256: pluginSHA256["example"]}},
			wantAttempts: 0,
			wantMessage:  []string{`plugin name "../example" is not a plain file name`},
		},
		{
			name:         "no plugin directory",
			check:        pluginSpec("example", nil),
			pluginDir:    "-",
			wantAttempts: 0,
			wantMessage:  []string{`plugin "example" cannot run: the controller has no plugin directory`},
		},
		{
			name:         "a panic is a failed check naming the plugin",
			check:        pluginSpec("misbehave", map[string]string{"mode": "panic"}),
			wantAttempts: 1,
			wantMessage:  []string{`check "gate" failed: plugin "misbehave" crashed during the check`, "panic: misbehave: told to panic"},
		},
		{
			name:         "an exit is a failed check naming the plugin",
			check:        pluginSpec("misbehave", map[string]string{"mode": "exit"}),
			wantAttempts: 1,
			wantMessage:  []string{`check "gate" failed: plugin "misbehave" crashed during the check`, "it wrote nothing to stderr"},
		},
		{
			name: "a plugin that never answers is stopped at the timeout",
			check: func() v1alpha1.Check {
				c := pluginSpec("misbehave", map[string]string{"mode": "hang"})
				c.Timeout = &metav1.Duration{Duration: 2 * time.Second}
				return c
			}(),
			wantAttempts: 1,
			wantMessage:  []string{`check "gate" failed: plugin "misbehave" gave no answer within 2s and was stopped`},
		},
		{
			name: "a plugin error is retried",
			check: func() v1alpha1.Check {
				c := pluginSpec("misbehave", map[string]string{"mode": "error"})
				c.Retries = 2
				return c
			}(),
			wantAttempts: 3,
			wantMessage:  []string{`check "gate" failed 3 attempts; last: plugin "misbehave" could not run the check: misbehave: told to fail`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r := &Runner{PluginDir: pluginDir, Backoff: noBackoff}
			if tt.pluginDir == "-" {
				r.PluginDir = ""
			}

			res := r.Run(t.Context(), tt.check, in)
			t.Log(res.Message)
			g.Expect(res.Name).To(Equal("gate"))
			g.Expect(res.Passed).To(Equal(tt.wantPassed), res.Message)
			g.Expect(res.Attempts).To(Equal(tt.wantAttempts), res.Message)
			for _, m := range tt.wantMessage {
				g.Expect(res.Message).To(ContainSubstring(m))
			}
		})
	}
}

// TestPluginSeesTheRequest runs the protocol end to end, through a real plugin process.
func TestPluginSeesTheRequest(t *testing.T) {
	g := NewWithT(t)
	in := testInput()
	in.Phase = plugincheck.PhasePreApply
	config := map[string]string{"mode": "echo", "threshold": "0.99"}

	res := (&Runner{PluginDir: pluginDir}).Run(t.Context(), pluginSpec("misbehave", config), in)
	g.Expect(res.Passed).To(BeTrue(), res.Message)
	echoed := strings.TrimPrefix(res.Message, `check "gate" passed: plugin "misbehave": `)
	var got plugincheck.Request
	g.Expect(json.Unmarshal([]byte(echoed), &got)).To(Succeed(), res.Message)
	g.Expect(got).To(Equal(plugincheck.Request{
		Stage: in.Stage, Namespace: in.Namespace, Environment: in.Environment, Service: in.Service,
		Version: in.Version, Digest: in.Digest, Phase: plugincheck.PhasePreApply, Config: config,
	}))
}

// TestPluginOutputIsLogged: what a plugin writes to stderr ends up in the controller's log,
// under the check's and the plugin's names.
func TestPluginOutputIsLogged(t *testing.T) {
	g := NewWithT(t)
	var mu sync.Mutex
	var lines []string
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{Verbosity: 1})
	ctx := log.IntoContext(t.Context(), logger)

	res := (&Runner{PluginDir: pluginDir}).Run(ctx, pluginSpec("misbehave", map[string]string{"mode": "log"}), testInput())
	g.Expect(res.Passed).To(BeTrue(), res.Message)

	mu.Lock()
	defer mu.Unlock()
	// Only what goes to the process's stderr (the log package, hclog, a panic) is certain to
	// arrive: os.Stderr writes after Serve travel over go-plugin's stdio stream, which may still
	// hold them when the plugin is stopped.
	g.Expect(lines).To(ContainElement(And(
		HavePrefix(`"level"=0 `), ContainSubstring(`"level"="warn"`),
		ContainSubstring(`"check"="gate"`), ContainSubstring(`"plugin"="misbehave"`),
		ContainSubstring(`"msg"="[WARN] misbehave: checking `+testInput().Digest))))
}

// BenchmarkPluginCheck measures one attempt: hash the binary, start it, handshake with mTLS,
// one Check, stop it.
func BenchmarkPluginCheck(b *testing.B) {
	r := &Runner{PluginDir: pluginDir}
	c := pluginSpec("example", map[string]string{"deny": "sha256:00"})
	in := testInput()
	for b.Loop() {
		if res := r.Run(b.Context(), c, in); !res.Passed {
			b.Fatal(res.Message)
		}
	}
}

// A plugin sees none of the controller's environment: no API server address, no proxy, nothing
// a Deployment sets.
func TestPluginRunsWithoutTheControllerEnvironment(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
	t.Setenv("STAGECOACH_TEST_SECRET", "hunter2")
	res := (&Runner{PluginDir: pluginDir}).Run(t.Context(), pluginSpec("misbehave", map[string]string{"mode": "env"}), testInput())
	g.Expect(res.Passed).To(BeTrue(), res.Message)
	g.Expect(res.Message).To(ContainSubstring("env: "))
	g.Expect(res.Message).NotTo(ContainSubstring("KUBERNETES_SERVICE_HOST"))
	g.Expect(res.Message).NotTo(ContainSubstring("STAGECOACH_TEST_SECRET"))
	g.Expect(res.Message).NotTo(ContainSubstring("PATH"))
}

// A plugin's message is bounded and carries no control characters into status and events.
func TestPluginMessagesAreBounded(t *testing.T) {
	g := NewWithT(t)
	res := (&Runner{PluginDir: pluginDir}).Run(t.Context(), pluginSpec("misbehave", map[string]string{"mode": "long"}), testInput())
	g.Expect(res.Passed).To(BeTrue(), res.Message)
	g.Expect(len(res.Message)).To(BeNumerically("<=", maxPluginMessage+100))
	g.Expect(res.Message).To(HaveSuffix("…"))
	g.Expect(strings.IndexFunc(res.Message, unicode.IsControl)).To(Equal(-1), "%q", res.Message)
}

func TestBoundMessage(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{name: "plain", in: "all good", want: "all good"},
		{name: "control characters", in: "a\x1b[31mb\r\nc\x00d", want: "a [31mb c d"},
		{name: "invalid UTF-8", in: "a\xffb", want: "a\uFFFDb"},
		{name: "line separators", in: "a\u2028b", want: "a b"},
		{name: "cut on a character", in: strings.Repeat("é", maxPluginMessage), want: strings.Repeat("é", maxPluginMessage/2) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(boundMessage(tc.in)).To(Equal(tc.want))
		})
	}
}

func FuzzBoundMessage(f *testing.F) {
	f.Add("all good")
	f.Add("a\x1b[31mb\r\nc\x00d")
	f.Add(strings.Repeat("é", 2*maxPluginMessage))
	f.Fuzz(func(t *testing.T, in string) {
		out := boundMessage(in)
		if len(out) > maxPluginMessage+len("…") || !utf8.ValidString(out) || strings.IndexFunc(out, unicode.IsControl) >= 0 {
			t.Fatalf("boundMessage(%q) = %q", in, out)
		}
	})
}
