// Command testsum reads `go test -json` on stdin and prints what a person needs: the output of
// failed tests, lines tests print starting with "REPORT: " (measurements, printed as they come),
// one line per package, and a closing "N passed, N failed, N skipped" line. It exits
// non-zero when a test or a package failed, so it can end a pipeline whose exit status matters.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// event is one line of `go test -json` (see `go doc test2json`).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

// reportPrefix marks output a person wants even from passing tests (the end-to-end suite's lead
// times and latencies).
const reportPrefix = "REPORT: "

// summary counts test results and keeps the output of each test until its verdict is known.
type summary struct {
	passed, failed, skipped int
	failedPackages          []string
	output                  map[string][]string
	out                     io.Writer
}

func main() {
	s := &summary{output: map[string][]string{}, out: os.Stdout}
	if err := s.read(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "testsum:", err)
		os.Exit(2)
	}
	if s.finish() {
		os.Exit(1)
	}
}

func (s *summary) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Build errors and other non-JSON lines are printed as they come.
			fmt.Fprintln(s.out, string(line))
			continue
		}
		s.add(e)
	}
	return sc.Err()
}

func (s *summary) add(e event) {
	key := e.Package + " " + e.Test
	switch e.Action {
	case "output":
		if strings.HasPrefix(e.Output, reportPrefix) {
			fmt.Fprint(s.out, e.Output)
		}
		s.output[key] = append(s.output[key], e.Output)
		return
	case "pass":
		if e.Test != "" {
			s.passed++
		} else {
			fmt.Fprintf(s.out, "ok  \t%s\t%.1fs\n", e.Package, e.Elapsed)
		}
	case "skip":
		if e.Test != "" {
			s.skipped++
			fmt.Fprintf(s.out, "SKIP\t%s %s: %s", e.Package, e.Test, lastLine(s.output[key]))
		} else {
			fmt.Fprintf(s.out, "?   \t%s\t[no test files]\n", e.Package)
		}
	case "fail":
		if e.Test != "" {
			s.failed++
			fmt.Fprintf(s.out, "--- FAIL: %s %s\n%s", e.Package, e.Test, strings.Join(s.output[key], ""))
		} else {
			s.failedPackages = append(s.failedPackages, e.Package)
			// Output outside any test (a panic in TestMain, a failed build) explains a package failure.
			fmt.Fprintf(s.out, "FAIL\t%s\t%.1fs\n%s", e.Package, e.Elapsed, strings.Join(s.output[key], ""))
		}
	default:
		return
	}
	delete(s.output, key)
}

// finish prints the closing line and reports whether anything failed.
func (s *summary) finish() bool {
	if len(s.failedPackages) > 0 {
		fmt.Fprintf(s.out, "failed packages: %s\n", strings.Join(s.failedPackages, ", "))
	}
	fmt.Fprintf(s.out, "%d passed, %d failed, %d skipped\n", s.passed, s.failed, s.skipped)
	return s.failed > 0 || len(s.failedPackages) > 0
}

func lastLine(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		if t := strings.TrimSpace(lines[i]); t != "" && !strings.HasPrefix(t, "---") {
			return t + "\n"
		}
	}
	return "\n"
}
