package main

import (
	"bytes"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestSummary(t *testing.T) {
	cases := []struct {
		name       string
		input      string
		wantFailed bool
		wantLines  []string
	}{
		{
			name: "passing tests are counted and their output dropped",
			input: `{"Action":"output","Package":"p","Test":"TestA","Output":"noise\n"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Test":"TestA/sub"}
{"Action":"pass","Package":"p","Elapsed":1.5}`,
			wantLines: []string{"ok  \tp\t1.5s", "2 passed, 0 failed, 0 skipped"},
		},
		{
			name: "a failed test prints its output and fails the run",
			input: `{"Action":"output","Package":"p","Test":"TestB","Output":"expected 1, got 2\n"}
{"Action":"fail","Package":"p","Test":"TestB"}
{"Action":"fail","Package":"p","Elapsed":0.2}`,
			wantFailed: true,
			wantLines:  []string{"--- FAIL: p TestB", "expected 1, got 2", "FAIL\tp\t0.2s", "failed packages: p", "0 passed, 1 failed, 0 skipped"},
		},
		{
			name: "a package that fails outside any test fails the run",
			input: `# p
p/x.go:3:1: syntax error
{"Action":"output","Package":"p","Output":"panic: boom\n"}
{"Action":"fail","Package":"p","Elapsed":0.1}`,
			wantFailed: true,
			wantLines:  []string{"p/x.go:3:1: syntax error", "panic: boom", "0 passed, 0 failed, 0 skipped"},
		},
		{
			name: "report lines of passing tests are printed",
			input: `{"Action":"output","Package":"p","Test":"TestD","Output":"REPORT: dev lead time 4.2s\n"}
{"Action":"output","Package":"p","Test":"TestD","Output":"other noise\n"}
{"Action":"pass","Package":"p","Test":"TestD"}`,
			wantLines: []string{"REPORT: dev lead time 4.2s", "1 passed, 0 failed, 0 skipped"},
		},
		{
			name: "skips are counted with their reason",
			input: `{"Action":"output","Package":"p","Test":"TestC","Output":"    x_test.go:9: needs kubectl\n"}
{"Action":"output","Package":"p","Test":"TestC","Output":"--- SKIP: TestC (0.00s)\n"}
{"Action":"skip","Package":"p","Test":"TestC"}`,
			wantLines: []string{"SKIP\tp TestC: x_test.go:9: needs kubectl", "0 passed, 0 failed, 1 skipped"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var out bytes.Buffer
			s := &summary{output: map[string][]string{}, out: &out}
			g.Expect(s.read(strings.NewReader(tc.input))).To(Succeed())
			g.Expect(s.finish()).To(Equal(tc.wantFailed))
			for _, line := range tc.wantLines {
				g.Expect(out.String()).To(ContainSubstring(line))
			}
		})
	}
}
