package hack_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// toolsWithout returns a folder of symlinks to every program on PATH except those named, as a
// stand-in for a fresh machine that lacks them.
func toolsWithout(t *testing.T, except ...string) string {
	t.Helper()
	dir := t.TempDir()
	skip := map[string]bool{}
	for _, e := range except {
		skip[e] = true
	}
	for _, p := range filepath.SplitList(os.Getenv("PATH")) {
		entries, err := os.ReadDir(p)
		if err != nil {
			continue
		}
		for _, e := range entries {
			link := filepath.Join(dir, e.Name())
			if skip[e.Name()] || e.IsDir() {
				continue
			}
			if _, err := os.Lstat(link); err == nil {
				continue // the first on PATH wins, as for the shell
			}
			if err := os.Symlink(filepath.Join(p, e.Name()), link); err != nil {
				t.Fatalf("symlink %s: %v", link, err)
			}
		}
	}
	return dir
}

func writeScript(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
}

// fakeAptGet puts an apt-get on PATH that records its arguments in aptLog; its "install" puts a
// stub redis-server beside it.
func fakeAptGet(t *testing.T, bin, aptLog string) {
	t.Helper()
	writeScript(t, filepath.Join(bin, "apt-get"), `echo "$*" >> `+aptLog+`
case "$1" in install) printf '#!/bin/sh\nexit 0\n' > `+bin+`/redis-server; chmod +x `+bin+`/redis-server ;; esac
`)
}

func TestPrereqs(t *testing.T) {
	script, err := filepath.Abs("prereqs.sh")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		// makeTarget, when set, runs `make TARGET` in the checkout instead of the script.
		makeTarget string
		args       []string
		env        []string
		rootOnly   bool
		// setup prepares the tools folder (already without redis-server and apt-get).
		setup   func(t *testing.T, bin, aptLog string)
		wantRC  int
		wantOut []string
		wantApt []string
	}{
		{
			name:    "without redis-server it stops at once naming the install command",
			wantRC:  1,
			wantOut: []string{"missing redis-server", "apt-get update -qq && apt-get install -y -qq redis-server", "hack/prereqs.sh --install"},
		},
		{
			name:       "make demo on a machine without redis-server stops before building anything",
			makeTarget: "demo",
			wantRC:     2,
			wantOut:    []string{"missing redis-server", "apt-get install -y -qq redis-server", "Error 1"},
		},
		{
			name:       "make test checks first too",
			makeTarget: "test",
			wantRC:     2,
			wantOut:    []string{"missing redis-server", "apt-get install -y -qq redis-server"},
		},
		{
			name: "with every tool and room in the cache it says ok",
			setup: func(t *testing.T, bin, _ string) {
				writeScript(t, filepath.Join(bin, "redis-server"), "exit 0\n")
			},
			wantOut: []string{"prereqs: ok", "redis-server"},
		},
		{
			name: "too little free disk for the cache stops and says how to move it",
			env:  []string{"STAGECOACH_MIN_FREE_GIB=100000000"},
			setup: func(t *testing.T, bin, _ string) {
				writeScript(t, filepath.Join(bin, "redis-server"), "exit 0\n")
			},
			wantRC:  1,
			wantOut: []string{"GiB free under", "STAGECOACH_CACHE"},
		},
		{
			name:     "the installer variant installs redis-server with apt-get and goes on",
			args:     []string{"--install"},
			rootOnly: true,
			setup: func(t *testing.T, bin, aptLog string) {
				fakeAptGet(t, bin, aptLog)
			},
			wantOut: []string{"installing redis-server from Debian", "prereqs: ok"},
			wantApt: []string{"update -qq", "install -y -qq redis-server"},
		},
		{
			name:     "as root with apt-get, make test's check installs what is missing and says so",
			env:      []string{"STAGECOACH_INSTALL_PREREQS="},
			rootOnly: true,
			setup: func(t *testing.T, bin, aptLog string) {
				fakeAptGet(t, bin, aptLog)
			},
			wantOut: []string{"installing redis-server from Debian as root (STAGECOACH_INSTALL_PREREQS=0 refuses)", "prereqs: ok"},
			wantApt: []string{"update -qq", "install -y -qq redis-server"},
		},
		{
			name:     "STAGECOACH_INSTALL_PREREQS=0 refuses to install, even as root",
			rootOnly: true,
			setup: func(t *testing.T, bin, aptLog string) {
				writeScript(t, filepath.Join(bin, "apt-get"), `echo "$*" >> `+aptLog+"\n")
			},
			wantRC:  1,
			wantOut: []string{"missing redis-server", "apt-get install -y -qq redis-server"},
		},
		{
			name: "make demo's check needs no browser and no Node.js",
			args: []string{"--for", "demo"},
			setup: func(t *testing.T, bin, _ string) {
				writeScript(t, filepath.Join(bin, "redis-server"), "exit 0\n")
				for _, tool := range []string{"chromium", "node", "npm"} {
					_ = os.Remove(filepath.Join(bin, tool))
				}
			},
			wantOut: []string{"prereqs: ok"},
		},
		{
			name: "make test's check wants the browser",
			setup: func(t *testing.T, bin, _ string) {
				writeScript(t, filepath.Join(bin, "redis-server"), "exit 0\n")
				_ = os.Remove(filepath.Join(bin, "chromium"))
			},
			wantRC:  1,
			wantOut: []string{"missing chromium"},
		},
		{
			name:    "an unknown purpose is refused",
			args:    []string{"--for", "prod"},
			wantRC:  2,
			wantOut: []string{"--for takes test, demo or demo-ui, not 'prod'"},
		},
		{
			name:     "STAGECOACH_INSTALL_PREREQS=1 is the installer variant too",
			env:      []string{"STAGECOACH_INSTALL_PREREQS=1"},
			rootOnly: true,
			setup: func(t *testing.T, bin, aptLog string) {
				fakeAptGet(t, bin, aptLog)
			},
			wantOut: []string{"prereqs: ok"},
			wantApt: []string{"update -qq", "install -y -qq redis-server"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			if tt.rootOnly && os.Geteuid() != 0 {
				t.Skip("the installer variant runs only as root")
			}
			bin := toolsWithout(t, "redis-server", "apt-get")
			aptLog := filepath.Join(t.TempDir(), "apt.log")
			if tt.setup != nil {
				tt.setup(t, bin, aptLog)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, script, tt.args...)
			if tt.makeTarget != "" {
				cmd = exec.CommandContext(ctx, "make", "-C", filepath.Dir(filepath.Dir(script)), tt.makeTarget)
			}
			cmd.Env = append(os.Environ(), "PATH="+bin, "STAGECOACH_CACHE="+filepath.Join(t.TempDir(), "cache"), "STAGECOACH_INSTALL_PREREQS=0")
			cmd.Env = append(cmd.Env, tt.env...)
			// Its own process group, killed whole at the deadline: a regression that starts the
			// builds must fail this test, not leave them running.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
			cmd.WaitDelay = 5 * time.Second
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			start := time.Now()
			err := cmd.Run()
			took := time.Since(start)

			rc := 0
			if exitErr, ok := err.(*exec.ExitError); ok {
				rc = exitErr.ExitCode()
			} else {
				g.Expect(err).NotTo(HaveOccurred())
			}
			g.Expect(rc).To(Equal(tt.wantRC), out.String())
			g.Expect(took).To(BeNumerically("<", 5*time.Second), "the check must answer in its first seconds")
			for _, w := range tt.wantOut {
				g.Expect(out.String()).To(ContainSubstring(w))
			}
			apt, _ := os.ReadFile(aptLog)
			if tt.wantApt == nil {
				g.Expect(apt).To(BeEmpty(), "apt-get must not run without the installer variant")
			}
			for _, w := range tt.wantApt {
				g.Expect(strings.Split(strings.TrimSpace(string(apt)), "\n")).To(ContainElement(w))
			}
		})
	}
}
