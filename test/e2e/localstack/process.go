package localstack

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Process is one program the stack started. Its output goes to LogPath.
type Process struct {
	Name    string
	LogPath string
	// Grace is how long Stop waits after SIGTERM before SIGKILL.
	Grace time.Duration

	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error
	spec processSpec // to start it again (RestartAPIServer)
}

// processSpec says how to run a program.
type processSpec struct {
	name  string
	path  string
	args  []string
	env   []string // added to a minimal environment (PATH, HOME, TMPDIR, KUBECONFIG given by the stack)
	dir   string
	grace time.Duration
}

// startProcess starts a program with its output in logDir/<name>.log. The child is killed if the
// test binary dies (Pdeathsig), so no run leaves processes behind even when Stop is never reached.
func startProcess(logDir string, spec processSpec) (*Process, error) {
	logPath := filepath.Join(logDir, spec.name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(spec.path, spec.args...)
	cmd.Env = spec.env
	cmd.Dir = spec.dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	fmt.Fprintf(f, "### %s: %s %s\n", time.Now().Format(time.RFC3339Nano), spec.path, strings.Join(spec.args, " "))
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("failed to start %s (%s): %w", spec.name, spec.path, err)
	}
	grace := spec.grace
	if grace == 0 {
		grace = 10 * time.Second
	}
	p := &Process{Name: spec.name, LogPath: logPath, Grace: grace, cmd: cmd, log: f, done: make(chan struct{}), spec: spec}
	go func() {
		p.err = cmd.Wait()
		fmt.Fprintf(f, "### %s: exited: %v\n", time.Now().Format(time.RFC3339Nano), p.err)
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Stop sends SIGTERM, waits up to Grace, then SIGKILL; it signals only this process's pid.
func (p *Process) Stop() {
	if ended, _ := p.Exited(); ended {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(p.Grace):
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Kill ends the process at once (SIGKILL), as a crash would.
func (p *Process) Kill() {
	if ended, _ := p.Exited(); ended {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Pause freezes the process (SIGSTOP) without ending it: it keeps its connections and state but
// writes nothing until Resume, as an overloaded or descheduled controller would.
func (p *Process) Pause() error {
	if ended, _ := p.Exited(); ended {
		return fmt.Errorf("%s (pid %d) has exited: nothing to pause", p.Name, p.Pid())
	}
	return p.cmd.Process.Signal(syscall.SIGSTOP)
}

// Resume lets a paused process run again (SIGCONT).
func (p *Process) Resume() error { return p.cmd.Process.Signal(syscall.SIGCONT) }

// Tail returns the last n lines of the log.
func (p *Process) Tail(n int) string { return tailFile(p.LogPath, 0, n) }

// tailFile returns the last n lines of path from byte offset from on.
func tailFile(path string, from int64, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	if from > int64(len(data)) {
		from = 0
	}
	data = bytes.TrimRight(data[from:], "\n")
	lines := bytes.Split(data, []byte("\n"))
	if len(lines) > n {
		lines = append([][]byte{[]byte(fmt.Sprintf("... (%d earlier lines in %s)", len(lines)-n, path))}, lines[len(lines)-n:]...)
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// waitReady polls check until it succeeds, the process exits, or the timeout passes; the error
// carries the end of the process's log.
func (p *Process) waitReady(ctx context.Context, timeout time.Duration, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if ended, err := p.Exited(); ended {
			return fmt.Errorf("%s exited before it was ready (%v); end of %s:\n%s", p.Name, err, p.LogPath, p.Tail(30))
		}
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s was not ready within %s (%s: %v); end of %s:\n%s", p.Name, timeout, what, last, p.LogPath, p.Tail(30))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// tcpOpen succeeds once something listens on addr.
func tcpOpen(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	}
}

// httpOK succeeds once url answers 200.
func httpOK(client *http.Client, url string) func(context.Context) error {
	if client == nil {
		client = http.DefaultClient
	}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}

// fileExists succeeds once path exists.
func fileExists(path string) func(context.Context) error {
	return func(context.Context) error {
		_, err := os.Stat(path)
		return err
	}
}

// freePorts reserves n distinct loopback ports: each is listened on and closed, and none is
// handed out twice within a run.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("no free loopback port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
