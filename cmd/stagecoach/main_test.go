package main

import (
	"bytes"
	"testing"

	. "github.com/onsi/gomega"
)

func run(args ...string) (string, error) {
	var out bytes.Buffer
	cmd := newRootCommand()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.Execute()
	return out.String(), err
}

func TestControllerHelpDocumentsEveryFlag(t *testing.T) {
	out, err := run("controller", "--help")
	g := NewWithT(t)
	g.Expect(err).NotTo(HaveOccurred())
	for _, flag := range []string{"--log-level", "--log-encoding", "--metrics-bind-address", "--health-probe-bind-address",
		"--leader-elect", "--watch-namespaces", "--events-addr", "--applier-retry-interval", "--check-plugin-dir", "--allow-internal-check-targets"} {
		t.Run(flag, func(t *testing.T) {
			NewWithT(t).Expect(out).To(MatchRegexp(`(?m)^\s+`+flag+`\b.*\S{3,}`), "flag without a description")
		})
	}
}

func TestControllerRefusesBadFlagsBeforeStarting(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "log level", args: []string{"--log-level=trace"}, wantErr: `invalid --log-level "trace"`},
		{name: "log encoding", args: []string{"--log-encoding=text"}, wantErr: `invalid --log-encoding "text"`},
		{name: "metrics address", args: []string{"--metrics-bind-address=:http"}, wantErr: `invalid --metrics-bind-address ":http"`},
		{name: "namespaces", args: []string{"--watch-namespaces=UPPER"}, wantErr: `invalid --watch-namespaces entry "UPPER"`},
		{name: "duration that does not parse", args: []string{"--applier-retry-interval=soon"}, wantErr: `invalid argument "soon" for "--applier-retry-interval"`},
		{name: "unknown flag", args: []string{"--log-levle=debug"}, wantErr: "unknown flag: --log-levle"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// KUBECONFIG points nowhere: reaching the cluster would be a different error.
			t.Setenv("KUBECONFIG", t.TempDir()+"/none")
			_, err := run(append([]string{"controller"}, tc.args...)...)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

func TestVersion(t *testing.T) {
	out, err := run("version")
	g := NewWithT(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal("stagecoach dev\n"))
}

func TestVersionJSON(t *testing.T) {
	out, err := run("version", "-o", "json")
	g := NewWithT(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(MatchJSON(`{"version": "dev"}`))
}

func TestPlanWithoutACluster(t *testing.T) {
	t.Setenv("KUBECONFIG", t.TempDir()+"/none")
	t.Setenv("HOME", t.TempDir())
	_, err := run("plan", "-A")
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("failed to load a kubeconfig")))
}
