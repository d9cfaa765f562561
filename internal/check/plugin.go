package check

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"github.com/hashicorp/go-plugin"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	plugincheck "github.com/stagecoach-dev/stagecoach/plugin/check"
)

// pluginNamePattern repeats the API's validation of spec.plugin.name: a plain file name, so a
// check can never name a path outside the plugin directory.
var pluginNamePattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]*$`)

// pluginCheck is a plugin check ready to run: binary found and its checksum matching the spec.
type pluginCheck struct {
	name     string // the plugin's name, for messages and logs
	check    string // the check's name, for logs
	path     string
	checksum []byte
	request  plugincheck.Request
	runner   *Runner // starts the process in its sandbox
}

func (r *Runner) preparePlugin(checkName string, spec *v1alpha1.PluginCheck, in Input) (*pluginCheck, error) {
	if !pluginNamePattern.MatchString(spec.Name) {
		return nil, fmt.Errorf("plugin name %q is not a plain file name: name a binary in the plugin directory", spec.Name)
	}
	if r.PluginDir == "" {
		return nil, fmt.Errorf("plugin %q cannot run: the controller has no plugin directory; start it with one", spec.Name)
	}
	want, err := hex.DecodeString(strings.ToLower(spec.SHA256))
	if err != nil || len(want) != sha256.Size {
		return nil, fmt.Errorf("plugin %q: sha256 %q is not 64 hex digits; pin the binary with the output of sha256sum", spec.Name, spec.SHA256)
	}
	path := filepath.Join(r.PluginDir, spec.Name)
	got, err := fileSHA256(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("plugin %q not found: no file %s; install the plugin there or fix spec.plugin.name", spec.Name, path)
	}
	if err != nil {
		return nil, fmt.Errorf("plugin %q: reading %s: %v", spec.Name, path, err)
	}
	if !bytes.Equal(got, want) {
		return nil, fmt.Errorf("plugin %q refused: %s has sha256 %x, the check pins %x; "+
			"if this binary is trusted, set spec.plugin.sha256 to %x, else reinstall the pinned one",
			spec.Name, path, got, want, got)
	}
	return &pluginCheck{
		name:     spec.Name,
		check:    checkName,
		path:     path,
		checksum: want,
		runner:   r,
		request: plugincheck.Request{
			Stage: in.Stage, Namespace: in.Namespace, Environment: in.Environment, Service: in.Service,
			Version: in.Version, Digest: in.Digest, Phase: in.Phase, Config: spec.Config,
		},
	}, nil
}

// try starts the plugin, asks it once and stops it, whatever happens.
func (p *pluginCheck) try(ctx context.Context, timeout time.Duration) attempt {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	logger := log.FromContext(ctx).WithValues("check", p.check, "plugin", p.name)
	stderr := &tailWriter{max: 4096}

	// The plugin's own temporary directory, made before the sandbox lists what it may read: a
	// directory that exists then is readable whole, while a file the plugin creates later directly
	// in a directory the sandbox splits (/tmp, when a denied path lies beneath it) is not, and
	// go-plugin's socket is such a file. It also keeps the socket out of other plugins' sight.
	tmp, err := os.MkdirTemp("", "stagecoach-plugin-")
	if err != nil {
		return attempt{message: fmt.Sprintf("plugin %q did not start: no temporary directory for it: %v", p.name, err)}
	}
	defer func() { _ = os.RemoveAll(tmp) }()

	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  plugincheck.HandshakeConfig(),
		VersionedPlugins: plugincheck.PluginSets(nil),
		// The plugin gets none of the controller's environment (KUBERNETES_SERVICE_HOST, proxy
		// settings, anything a Deployment sets): only its TMPDIR and what go-plugin passes.
		Cmd:         pluginCommand(p.path, tmp),
		SkipHostEnv: true,
		// go-plugin hashes the file again right before it runs it: a binary swapped since
		// preparePlugin is refused too.
		SecureConfig:     &plugin.SecureConfig{Checksum: p.checksum, Hash: sha256.New()},
		AutoMTLS:         true,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		StartTimeout:     timeout,
		Logger:           newHCLogger(logger),
		Stderr:           stderr,
		SyncStdout:       &lineLogger{log: logger, stream: "stdout"},
		SyncStderr:       &lineLogger{log: logger, stream: "stderr"},
	})
	// Kill waits for the process to exit and for its stderr to be read, so the tail is whole
	// once it returns.
	killed := false
	kill := func() {
		if !killed {
			client.Kill()
			killed = true
		}
	}
	defer kill()

	// Client starts the process, from the calling thread: it must run in the sandbox.
	var rpc plugin.ClientProtocol
	err = p.runner.sandboxed(ctx, func() error {
		var err error
		rpc, err = client.Client()
		return err
	})
	if err != nil {
		kill()
		if errors.Is(err, plugin.ErrChecksumsDoNotMatch) {
			return attempt{message: fmt.Sprintf("plugin %q refused: %s changed since its checksum was read, it no longer has sha256 %x", p.name, p.path, p.checksum), permanent: true}
		}
		return attempt{message: fmt.Sprintf("plugin %q did not start: %v%s", p.name, err, stderr.said())}
	}
	raw, err := rpc.Dispense(plugincheck.PluginName)
	if err != nil {
		return attempt{message: fmt.Sprintf("plugin %q does not serve a check (protocol version %d): %v", p.name, plugincheck.ProtocolVersion, err)}
	}
	checker, ok := raw.(plugincheck.Checker)
	if !ok {
		return attempt{message: fmt.Sprintf("plugin %q dispensed %T, not a checker", p.name, raw)}
	}

	res, err := checker.Check(ctx, p.request)
	if err == nil {
		msg := boundMessage(res.Message)
		if msg == "" {
			msg = "no message"
		}
		return attempt{passed: res.Passed, message: fmt.Sprintf("plugin %q: %s", p.name, msg)}
	}
	kill()
	var checkErr *plugincheck.Error
	switch {
	case errors.As(err, &checkErr):
		return attempt{message: fmt.Sprintf("plugin %q could not run the check: %s", p.name, boundMessage(checkErr.Message))}
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return attempt{message: fmt.Sprintf("plugin %q gave no answer within %s and was stopped", p.name, timeout)}
	case ctx.Err() != nil:
		return attempt{message: fmt.Sprintf("plugin %q was stopped: %v", p.name, context.Cause(ctx))}
	default:
		return attempt{message: fmt.Sprintf("plugin %q crashed during the check (%v)%s", p.name, err, stderr.said())}
	}
}

func fileSHA256(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// tailWriter keeps the end of what a plugin wrote to its stderr, to quote it when the plugin
// dies: a panic's first line says more than any exit status.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (w *tailWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	if over := len(w.buf) - w.max; over > 0 {
		w.buf = w.buf[over:]
	}
	return len(b), nil
}

// said returns the line worth quoting, as ": <line>" — the panic or fatal error if there is
// one, else the last line — or "" when the plugin said nothing.
func (w *tailWriter) said() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var last string
	for l := range strings.Lines(string(w.buf)) {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: "):
			return ": " + boundMessage(l)
		case l == "" || strings.HasPrefix(l, `{"@`):
			// go-plugin's own JSON log lines (already logged) say nothing about the crash.
		default:
			last = l
		}
	}
	if last != "" {
		return ": " + boundMessage(last)
	}
	return "; it wrote nothing to stderr"
}

// lineLogger logs what the plugin writes to os.Stdout/os.Stderr after it started (go-plugin
// forwards those over gRPC), one log entry per line.
type lineLogger struct {
	log    logr.Logger
	stream string
	mu     sync.Mutex
	rest   []byte
}

func (w *lineLogger) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rest = append(w.rest, b...)
	for {
		i := bytes.IndexByte(w.rest, '\n')
		if i < 0 {
			break
		}
		if line := strings.TrimRight(string(w.rest[:i]), "\r"); line != "" {
			w.log.Info(line, "stream", w.stream)
		}
		w.rest = w.rest[i+1:]
	}
	return len(b), nil
}

// pluginCommand runs the plugin with an environment of its TMPDIR alone (go-plugin adds its own
// variables).
func pluginCommand(path, tmpDir string) *exec.Cmd {
	cmd := exec.Command(path)
	cmd.Env = []string{"TMPDIR=" + tmpDir}
	return cmd
}

// MaxPluginMessage bounds what a plugin's message adds to a check's message (and so to status
// and events).
const maxPluginMessage = 1024

// boundMessage makes a plugin's text safe to show: control characters become spaces, runs of
// spaces one, and it is cut at MaxPluginMessage bytes on a character boundary.
func boundMessage(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	space := false
	for _, r := range s {
		if unicode.IsControl(r) || unicode.IsSpace(r) || r == '\u2028' || r == '\u2029' {
			if !space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = true
			continue
		}
		if b.Len()+utf8.RuneLen(r) > maxPluginMessage {
			return strings.TrimSpace(b.String()) + "…"
		}
		space = false
		b.WriteRune(r)
	}
	return strings.TrimSpace(b.String())
}
