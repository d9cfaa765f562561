package controller

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"

	"github.com/stagecoach-dev/stagecoach/internal/verify"
)

func TestOptionsValidate(t *testing.T) {
	dir := t.TempDir()
	publicRoot, notARoot := filepath.Join(dir, "trusted_root.json"), filepath.Join(dir, "other.json")
	NewWithT(t).Expect(os.WriteFile(publicRoot, verify.PublicGoodTrustedRoot(), 0o600)).To(Succeed())
	NewWithT(t).Expect(os.WriteFile(notARoot, []byte(`{"mediaType": "nothing"}`), 0o600)).To(Succeed())
	cases := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "defaults are valid"},
		{name: "debug console logs", args: []string{"--log-level=debug", "--log-encoding=console"}},
		{name: "disabled endpoints", args: []string{"--metrics-bind-address=0", "--health-probe-bind-address=0"}},
		{name: "namespaces and events", args: []string{"--watch-namespaces=prod,staging", "--events-addr=http://nc.flux-system/"}},
		{name: "unknown log level", args: []string{"--log-level=verbose"}, wantErr: `invalid --log-level "verbose": must be info or debug`},
		{name: "unknown log encoding", args: []string{"--log-encoding=xml"}, wantErr: `invalid --log-encoding "xml": must be json or console`},
		{name: "metrics address without port", args: []string{"--metrics-bind-address=localhost"}, wantErr: `invalid --metrics-bind-address "localhost": must be host:port`},
		{name: "probe port out of range", args: []string{"--health-probe-bind-address=:70000"}, wantErr: `invalid --health-probe-bind-address ":70000": port "70000" must be a number from 0 to 65535`},
		{name: "bad namespace", args: []string{"--watch-namespaces=prod,Not_A_Namespace"}, wantErr: `invalid --watch-namespaces entry "Not_A_Namespace"`},
		{name: "events address not a URL", args: []string{"--events-addr=notification-controller:9090"}, wantErr: `invalid --events-addr "notification-controller:9090": must be an http(s) URL`},
		{name: "leader election without id", args: []string{"--leader-elect", "--leader-election-id="}, wantErr: "invalid --leader-election-id"},
		{name: "workers and deadlines", args: []string{"--concurrency=8", "--reconcile-timeout=1m", "--registry-timeout=5s", "--cluster-freeze-namespace=platform"}},
		{name: "no worker", args: []string{"--concurrency=0"}, wantErr: "invalid --concurrency 0: must be at least 1"},
		{name: "non-positive retry", args: []string{"--applier-retry-interval=0s"}, wantErr: "invalid --applier-retry-interval 0s: must be positive"},
		{name: "TLS certificate without key", args: []string{"--hooks-tls-cert-file=/tls/tls.crt"}, wantErr: "set both or neither"},
		{name: "API with a token", args: []string{"--api-bind-address=:8083", "--api-proxy-token-file=/token/token"}},
		{name: "API without a token", args: []string{"--api-bind-address=:8083"}, wantErr: `--api-bind-address ":8083" needs --api-proxy-token-file`},
		{name: "API address without port", args: []string{"--api-bind-address=localhost", "--api-proxy-token-file=/t"}, wantErr: `invalid --api-bind-address "localhost"`},
		{name: "API TLS certificate without key", args: []string{"--api-tls-cert-file=/tls/tls.crt"}, wantErr: "invalid --api-tls-cert-file"},
		{name: "records with a key", args: []string{"--records-repository=registry.example/delivery/streams", "--records-key-secret=stagecoach-system/recorder-key", "--records-cluster=prod-eu"}},
		{name: "records without a key", args: []string{"--records-repository=registry.example/delivery/streams"}, wantErr: `invalid --records-key-secret ""`},
		{name: "records cluster not a label", args: []string{"--records-cluster=Prod_EU"}, wantErr: `invalid --records-cluster "Prod_EU"`},
		{name: "follower with trust", args: []string{"--upstream-trust=/etc/stagecoach/trust.yaml", "--upstream-records-interval=10s"}},
		{name: "follower with a trust ConfigMap", args: []string{"--upstream-trust=configmap:stagecoach-system/upstream-trust", "--upstream-trust-recheck=5s"}},
		{name: "trust ConfigMap without a namespace", args: []string{"--upstream-trust=configmap:upstream-trust"}, wantErr: `invalid --upstream-trust "configmap:upstream-trust": must be configmap:NAMESPACE/NAME of a ConfigMap with key upstream-trust.yaml`},
		{name: "non-positive trust recheck", args: []string{"--upstream-trust-recheck=0s"}, wantErr: "invalid --upstream-trust-recheck 0s"},
		{name: "non-positive records interval", args: []string{"--upstream-records-interval=0s"}, wantErr: "invalid --upstream-records-interval 0s"},
		{name: "profiles on loopback", args: []string{"--pprof-bind-address=127.0.0.1:6060"}},
		{name: "profiles address without port", args: []string{"--pprof-bind-address=localhost"}, wantErr: `invalid --pprof-bind-address "localhost"`},
		{name: "TLS key without certificate", args: []string{"--hooks-tls-key-file=/tls/tls.key"}, wantErr: "set both or neither"},
		{name: "a Sigstore trusted root", args: []string{"--sigstore-trusted-root=" + publicRoot}},
		{name: "a Sigstore trusted root that is missing", args: []string{"--sigstore-trusted-root=/nowhere/trusted_root.json"},
			wantErr: "invalid --sigstore-trusted-root: open /nowhere/trusted_root.json"},
		{name: "a Sigstore trusted root that is not one", args: []string{"--sigstore-trusted-root=" + notARoot},
			wantErr: `invalid --sigstore-trusted-root "` + notARoot + `"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			opts := DefaultOptions()
			fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
			opts.BindFlags(fs)
			g.Expect(fs.Parse(tc.args)).To(Succeed())
			err := opts.Validate()
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

func TestDefaultConcurrency(t *testing.T) {
	for _, tc := range []struct {
		cores, want int
	}{
		{cores: 1, want: 16},
		{cores: 2, want: 16},
		{cores: 4, want: 32},
		{cores: 16, want: 128},
	} {
		t.Run(fmt.Sprintf("%d cores", tc.cores), func(t *testing.T) {
			NewWithT(t).Expect(defaultConcurrency(tc.cores)).To(Equal(tc.want))
		})
	}
}
