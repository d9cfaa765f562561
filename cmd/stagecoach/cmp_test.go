package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/cobra"
)

const cmpTestDigest = "sha256:89abcdef0123456789abcdef0123456789abcdef0123456789abcdef01234567"

// argoCDEnv sets what Argo CD's repo-server gives the plugin (reposerver/repository/repository.go)
// for the fixture app at appPath, plus extra.
func argoCDEnv(t *testing.T, appPath string, extra map[string]string) {
	t.Helper()
	env := map[string]string{
		"ARGOCD_APP_NAME": "payments", "ARGOCD_APP_NAMESPACE": "payments-prod", "ARGOCD_APP_PROJECT_NAME": "default",
		"ARGOCD_APP_REVISION": "0123456789abcdef0123456789abcdef01234567", "ARGOCD_APP_REVISION_SHORT": "0123456",
		"ARGOCD_APP_SOURCE_REPO_URL": "https://git.example/repo.git", "ARGOCD_APP_SOURCE_PATH": appPath,
		"ARGOCD_APP_SOURCE_TARGET_REVISION": "main", "KUBE_VERSION": "1.35.4", "KUBE_API_VERSIONS": "v1,apps/v1",
		"ARGOCD_ENV_STAGECOACH_DIGEST": "", "ARGOCD_ENV_STAGECOACH_VERSION": "", "ARGOCD_APP_PARAMETERS": "",
		verifyKeysDirEnv: "", "STAGECOACH_ALLOW_UNVERIFIED": "",
	}
	for k, v := range extra {
		env[k] = v
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// runCMPGenerate runs `stagecoach cmp generate` in dir; newVerifier nil uses the binary's own root command.
func runCMPGenerate(t *testing.T, dir string, newVerifier digestVerifierFactory, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	t.Chdir(dir)
	root := newRootCommand()
	if newVerifier != nil {
		root = &cobra.Command{Use: "stagecoach", SilenceUsage: true, SilenceErrors: true}
		root.AddCommand(newCMPCommand(newVerifier))
	}
	var out, errOut bytes.Buffer
	root.SetArgs(append([]string{"cmp", "generate"}, args...))
	root.SetOut(&out)
	root.SetErr(&errOut)
	err = root.ExecuteContext(t.Context())
	return out.String(), errOut.String(), err
}

func fixtureApp(t *testing.T, app string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "plugin", "cmp", "testdata", "repo", app))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCMPGenerate(t *testing.T) {
	refuse := func(keysDir string) (func(context.Context, string) error, error) {
		return func(_ context.Context, ref string) error { return errors.New("no signature found under " + keysDir) }, nil
	}
	accept := func(string) (func(context.Context, string) error, error) {
		return func(context.Context, string) error { return nil }, nil
	}
	cases := []struct {
		name        string
		app         string
		extra       map[string]string
		newVerifier digestVerifierFactory
		args        []string
		wantOut     []string
		wantErr     string
	}{
		{name: "plain", app: "apps/plain",
			extra:   map[string]string{"ARGOCD_ENV_STAGECOACH_DIGEST": cmpTestDigest, "ARGOCD_ENV_STAGECOACH_VERSION": "v2.0.0"},
			wantOut: []string{"image: registry.example/payments@" + cmpTestDigest, "image: registry.example/envoy:1.30", "stagecoach.dev/stage: payments", "stagecoach.dev/version: v2.0.0"}},
		{name: "Kustomize", app: "apps/kustomize",
			extra:   map[string]string{"ARGOCD_ENV_STAGECOACH_DIGEST": cmpTestDigest},
			wantOut: []string{"image: registry.example/payments@" + cmpTestDigest, "image: redis:7.2", "stagecoach.dev/version: " + cmpTestDigest}},
		{name: "Helm with parameters", app: "apps/helm",
			extra: map[string]string{"ARGOCD_ENV_STAGECOACH_DIGEST": cmpTestDigest,
				"ARGOCD_APP_PARAMETERS": `[{"name":"values-files","array":["values-prod.yaml"]},{"name":"helm-parameters","map":{"greeting":"hi, prod"}}]`},
			wantOut: []string{"name: payments-settings", "namespace: payments-prod", "replicas: 4", `greeting: "hi, prod"`, "image: registry.example/api@" + cmpTestDigest}},
		{name: "PARAM_* variables", app: "apps/helm",
			extra:   map[string]string{"PARAM_VALUES_FILES_0": "values-prod.yaml"},
			wantOut: []string{"replicas: 4"}},
		{name: "malformed YAML", app: "apps/malformed",
			wantErr: "apps/malformed/b-bad.yaml:12: mapping values are not allowed in this context"},
		{name: "bad digest", app: "apps/plain", extra: map[string]string{"ARGOCD_ENV_STAGECOACH_DIGEST": "sha256:1234"},
			wantErr: `ARGOCD_ENV_STAGECOACH_DIGEST "sha256:1234" is not a digest`},
		{name: "keys directory by flag that does not exist", app: "apps/plain", args: []string{"--verify-keys-dir=/no-keys"},
			extra:   map[string]string{"ARGOCD_ENV_STAGECOACH_DIGEST": cmpTestDigest},
			wantErr: "failed to load the verification keys in /no-keys: open /no-keys: no such file or directory"},
		{name: "keys directory by env that does not exist", app: "apps/plain",
			extra:   map[string]string{"ARGOCD_ENV_STAGECOACH_DIGEST": cmpTestDigest, verifyKeysDirEnv: "/no-keys"},
			wantErr: "failed to load the verification keys in /no-keys"},
		{name: "unsigned digest refused", app: "apps/plain", newVerifier: refuse,
			extra:   map[string]string{"ARGOCD_ENV_STAGECOACH_DIGEST": cmpTestDigest, verifyKeysDirEnv: "/keys"},
			wantErr: "refusing to render registry.example/payments@" + cmpTestDigest + ": its signature does not verify: no signature found under /keys"},
		{name: "the flag wins over the env", app: "apps/plain", newVerifier: refuse, args: []string{"--verify-keys-dir=/flag-keys"},
			extra:   map[string]string{"ARGOCD_ENV_STAGECOACH_DIGEST": cmpTestDigest, verifyKeysDirEnv: "/keys"},
			wantErr: "no signature found under /flag-keys"},
		{name: "verified digest renders", app: "apps/plain", newVerifier: accept,
			extra:   map[string]string{"ARGOCD_ENV_STAGECOACH_DIGEST": cmpTestDigest, verifyKeysDirEnv: "/keys"},
			wantOut: []string{"image: registry.example/payments@" + cmpTestDigest}},
		{name: "keys that do not load", app: "apps/plain",
			newVerifier: func(dir string) (func(context.Context, string) error, error) {
				return nil, errors.New("no keys in " + dir)
			},
			extra:   map[string]string{"ARGOCD_ENV_STAGECOACH_DIGEST": cmpTestDigest, verifyKeysDirEnv: "/keys"},
			wantErr: "failed to load the verification keys in /keys: no keys in /keys"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			argoCDEnv(t, tc.app, tc.extra)
			out, errOut, err := runCMPGenerate(t, fixtureApp(t, tc.app), tc.newVerifier, tc.args...)
			g.Expect(errOut).To(BeEmpty())
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				g.Expect(err.Error()).NotTo(ContainSubstring("\n"), "main prints it as one line on stderr")
				g.Expect(out).To(BeEmpty(), "nothing on stdout when the render fails")
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			for _, want := range tc.wantOut {
				g.Expect(out).To(ContainSubstring(want))
			}
		})
	}
}

func TestCMPGenerateRefusesAnAppDirectoryThatEscapes(t *testing.T) {
	g := NewWithT(t)
	tmp := t.TempDir()
	outside := filepath.Join(tmp, "outside")
	g.Expect(os.MkdirAll(outside, 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(outside, ".stagecoach.yaml"), []byte("stage: x\n"), 0o644)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(outside, "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"), 0o644)).To(Succeed())
	g.Expect(os.MkdirAll(filepath.Join(tmp, "repo", "apps"), 0o755)).To(Succeed())
	g.Expect(os.Symlink("../../outside", filepath.Join(tmp, "repo", "apps", "web"))).To(Succeed())

	argoCDEnv(t, "apps/web", nil)
	out, _, err := runCMPGenerate(t, filepath.Join(tmp, "repo", "apps", "web"), nil)
	g.Expect(err).To(MatchError(ContainSubstring("outside the repository root " + filepath.Join(tmp, "repo"))))
	g.Expect(out).To(BeEmpty())
	g.Expect(strings.Count(err.Error(), "\n")).To(BeZero())
}

// With verification configured, a render without a digest or without keys is refused in one line,
// unless the sidecar explicitly allows rendering unverified.
func TestCMPGenerateNeverRendersUnverifiedByAccident(t *testing.T) {
	withKey := t.TempDir()
	NewWithT(t).Expect(os.WriteFile(filepath.Join(withKey, "release.pub"), []byte("not read by the fake verifier"), 0o600)).To(Succeed())
	noKeys := t.TempDir()
	NewWithT(t).Expect(os.MkdirAll(filepath.Join(noKeys, "..data"), 0o700)).To(Succeed()) // an empty mounted Secret
	NewWithT(t).Expect(os.WriteFile(filepath.Join(noKeys, "README"), []byte("x"), 0o600)).To(Succeed())
	for _, tc := range []struct {
		name, keysDir, digest, allow string
		args                         []string
		// real uses the binary's cosign verifier instead of the fake.
		real         bool
		wantErr      []string
		wantVerified bool
	}{
		{name: "keys and a digest verify", keysDir: withKey, digest: cmpTestDigest, wantVerified: true},
		{name: "keys and no digest is refused", keysDir: withKey,
			wantErr: []string{"verification is configured but ARGOCD_ENV_STAGECOACH_DIGEST is empty: refusing to render unverified", "STAGECOACH_ALLOW_UNVERIFIED=true"}},
		{name: "keys and no digest renders when explicitly allowed", keysDir: withKey, allow: "true"},
		{name: "the flag allows it too", keysDir: withKey, args: []string{"--allow-unverified"}},
		{name: "a keys directory without keys is refused", keysDir: noKeys, digest: cmpTestDigest, real: true,
			wantErr: []string{"verification keys directory " + noKeys + " holds no public keys (*.pub): refusing to render unverified", "STAGECOACH_ALLOW_UNVERIFIED=true"}},
		{name: "a keys directory without keys renders when explicitly allowed", keysDir: noKeys, digest: cmpTestDigest, allow: "true", real: true},
		{name: "a missing keys directory is refused", keysDir: filepath.Join(noKeys, "absent"), digest: cmpTestDigest, real: true,
			wantErr: []string{"failed to load the verification keys in"}},
		{name: "allow must be a boolean", keysDir: withKey, allow: "yes", wantErr: []string{`STAGECOACH_ALLOW_UNVERIFIED="yes" is not true or false`}},
		{name: "allow=false is no opt-out", keysDir: withKey, allow: "false", wantErr: []string{"refusing to render unverified"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			argoCDEnv(t, "apps/plain", map[string]string{"ARGOCD_ENV_STAGECOACH_DIGEST": tc.digest,
				verifyKeysDirEnv: tc.keysDir, "STAGECOACH_ALLOW_UNVERIFIED": tc.allow})
			var verified []string
			fake := func(string) (func(context.Context, string) error, error) {
				return func(_ context.Context, ref string) error { verified = append(verified, ref); return nil }, nil
			}
			factory := digestVerifierFactory(fake)
			if tc.real {
				factory = nil // the root command's cosign verifier
			}
			out, _, err := runCMPGenerate(t, fixtureApp(t, "apps/plain"), factory, tc.args...)
			if tc.wantErr != nil {
				for _, m := range tc.wantErr {
					g.Expect(err).To(MatchError(ContainSubstring(m)))
				}
				g.Expect(err.Error()).NotTo(ContainSubstring("\n"))
				g.Expect(out).To(BeEmpty())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(ContainSubstring("kind:"))
			g.Expect(len(verified) > 0).To(Equal(tc.wantVerified), "verified %v", verified)
		})
	}
}
