// Package cmpserver drives `stagecoach cmp generate` through Argo CD's real cmp-server: the gRPC
// service argocd-cmp-server runs in the repo-server sidecar, configured with plugin/plugin.yaml,
// fed a repository the way the repo-server streams it. It lives in the module that builds the
// stack's engines (Argo CD among them), so that Argo CD and its replace block stay out of Stagecoach's go.mod and
// the test compiles the very packages (same versions, same flags) that build already compiled.
package cmpserver

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/argoproj/argo-cd/v3/cmpserver"
	"github.com/argoproj/argo-cd/v3/cmpserver/apiclient"
	"github.com/argoproj/argo-cd/v3/cmpserver/plugin"
	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/argo-cd/v3/util/cmp"
	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/types/known/emptypb"
)

const digest = "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

// repoRoot is Stagecoach's checkout: this package is test/e2e/localstack/build/engines/cmpserver.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", "..", "..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// buildStagecoach builds the binary the sidecar runs, with the race detector (the Stagecoach code
// under test runs in it, not in this process), and puts it first on PATH, where the cmp-server's
// generate command (plugin.yaml) finds it.
func buildStagecoach(t *testing.T) {
	t.Helper()
	bin := t.TempDir()
	build := exec.CommandContext(t.Context(), "go", "build", "-race", "-o", filepath.Join(bin, "stagecoach"), "./cmd/stagecoach")
	build.Dir = repoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/stagecoach failed: %v\n%s", err, out)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// startCMPServer serves plugin/plugin.yaml on a unix socket in-process, as argocd-cmp-server does
// (without Run, which traps signals and exits the process), and returns a client.
func startCMPServer(t *testing.T) (apiclient.ConfigManagementPluginServiceClient, *plugin.PluginConfig) {
	t.Helper()
	g := NewWithT(t)
	t.Setenv("ARGOCD_PLUGINSOCKFILEPATH", t.TempDir())
	t.Setenv("ARGOCD_CMP_WORKDIR", t.TempDir())
	cfg, err := plugin.ReadPluginConfig(filepath.Join(repoRoot(t), "plugin"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plugin.ValidatePluginConfig(*cfg)).To(Succeed())
	srv, err := cmpserver.NewServer(plugin.CMPServerInitConstants{PluginConfig: *cfg})
	g.Expect(err).NotTo(HaveOccurred())
	grpcServer, err := srv.CreateGRPC()
	g.Expect(err).NotTo(HaveOccurred())
	lis, err := net.Listen("unix", cfg.Address())
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = grpcServer.Serve(lis) }()
	t.Cleanup(grpcServer.Stop)
	closer, client, err := apiclient.NewConfigManagementPluginClientSet(cfg.Address()).NewConfigManagementPluginClient()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = closer.Close() })
	return client, cfg
}

// repoServerEnv is the environment the repo-server sends for an Application at appPath
// (reposerver/repository/repository.go newEnv, getPluginEnvs, getPluginParamEnvs).
func repoServerEnv(t *testing.T, appPath string, pluginEnv map[string]string, params v1alpha1.ApplicationSourcePluginParameters) []string {
	t.Helper()
	env := []string{
		"ARGOCD_APP_NAME=api", "ARGOCD_APP_NAMESPACE=api-prod", "ARGOCD_APP_PROJECT_NAME=default",
		"ARGOCD_APP_REVISION=0123456789abcdef0123456789abcdef01234567", "ARGOCD_APP_REVISION_SHORT=0123456",
		"ARGOCD_APP_REVISION_SHORT_8=01234567", "ARGOCD_APP_SOURCE_REPO_URL=https://git.example/repo.git",
		"ARGOCD_APP_SOURCE_PATH=" + appPath, "ARGOCD_APP_SOURCE_TARGET_REVISION=main",
		"KUBE_VERSION=1.35.4", "KUBE_API_VERSIONS=v1,apps/v1,batch/v1",
	}
	for k, v := range pluginEnv {
		env = append(env, "ARGOCD_ENV_"+k+"="+v)
	}
	paramEnv, err := params.Environ()
	if err != nil {
		t.Fatal(err)
	}
	return append(env, paramEnv...)
}

func TestGenerateThroughTheCMPServer(t *testing.T) {
	buildStagecoach(t)
	client, cfg := startCMPServer(t)
	fixtures := filepath.Join(repoRoot(t), "plugin", "cmp", "testdata", "repo")

	t.Run("plugin configuration", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(filepath.Base(cfg.Address())).To(Equal("stagecoach-v1.sock"), "Applications name the plugin stagecoach-v1")
		resp, err := client.CheckPluginConfiguration(t.Context(), &emptypb.Empty{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.IsDiscoveryConfigured).To(BeTrue())
		g.Expect(resp.ProvideGitCreds).To(BeFalse())
	})

	t.Run("discovery", func(t *testing.T) {
		for app, want := range map[string]bool{"apps/kustomize": true, "bases/web": false} {
			t.Run(app, func(t *testing.T) {
				g := NewWithT(t)
				stream, err := client.MatchRepository(t.Context())
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(cmp.SendRepoStream(t.Context(), filepath.Join(fixtures, app), fixtures, stream, nil, nil)).To(Succeed())
				resp, err := stream.CloseAndRecv()
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(resp.IsSupported).To(Equal(want))
			})
		}
	})

	cases := []struct {
		name      string
		app       string
		pluginEnv map[string]string
		params    v1alpha1.ApplicationSourcePluginParameters
		check     func(g Gomega, objs map[string]map[string]any)
		wantErr   string
	}{
		{
			name:      "Kustomize overlay with a base elsewhere in the repository",
			app:       "apps/kustomize",
			pluginEnv: map[string]string{"STAGECOACH_DIGEST": digest, "STAGECOACH_VERSION": "v2.0.0"},
			check: func(g Gomega, objs map[string]map[string]any) {
				g.Expect(objs).To(HaveKey("Deployment/web"))
				g.Expect(objs).To(HaveKey("CronJob/report"))
				g.Expect(objs).To(HaveKey("Namespace/web-prod"))
				containers := dig(objs["Deployment/web"], "spec", "template", "spec", "containers").([]any)
				g.Expect(containers[0].(map[string]any)["image"]).To(Equal("registry.example/payments@" + digest))
				g.Expect(containers[1].(map[string]any)["image"]).To(Equal("redis:7.2"))
				for id, o := range objs {
					g.Expect(dig(o, "metadata", "annotations")).To(And(
						HaveKeyWithValue("stagecoach.dev/stage", "web"), HaveKeyWithValue("stagecoach.dev/version", "v2.0.0")), id)
				}
			},
		},
		{
			name:      "Helm chart with value files and parameters",
			app:       "apps/helm",
			pluginEnv: map[string]string{"STAGECOACH_DIGEST": digest},
			params: v1alpha1.ApplicationSourcePluginParameters{
				{Name: "values-files", OptionalArray: &v1alpha1.OptionalArray{Array: []string{"values-prod.yaml"}}},
				{Name: "helm-parameters", OptionalMap: &v1alpha1.OptionalMap{Map: map[string]string{"greeting": "through the cmp-server"}}},
			},
			check: func(g Gomega, objs map[string]map[string]any) {
				g.Expect(dig(objs["Deployment/api"], "spec", "replicas")).To(BeEquivalentTo(4))
				g.Expect(dig(objs["ConfigMap/api-settings"], "data", "greeting")).To(Equal("through the cmp-server"))
				containers := dig(objs["Deployment/api"], "spec", "template", "spec", "containers").([]any)
				g.Expect(containers[0].(map[string]any)["image"]).To(Equal("registry.example/api@" + digest))
				g.Expect(dig(objs["Job/api-migrate"], "metadata", "annotations", "stagecoach.dev/version")).To(Equal(digest))
			},
		},
		{
			name:      "a digest that is not one fails the generation with the plugin's message",
			app:       "apps/kustomize",
			pluginEnv: map[string]string{"STAGECOACH_DIGEST": "latest"},
			wantErr:   `ARGOCD_ENV_STAGECOACH_DIGEST "latest" is not a digest`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			stream, err := client.GenerateManifest(t.Context())
			g.Expect(err).NotTo(HaveOccurred())
			env := repoServerEnv(t, tc.app, tc.pluginEnv, tc.params)
			g.Expect(cmp.SendRepoStream(t.Context(), filepath.Join(fixtures, tc.app), fixtures, stream, env, nil)).To(Succeed())
			resp, err := stream.CloseAndRecv()
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			objs := map[string]map[string]any{}
			for _, m := range resp.Manifests {
				var o map[string]any
				g.Expect(json.Unmarshal([]byte(m), &o)).To(Succeed(), m)
				objs[o["kind"].(string)+"/"+dig(o, "metadata", "name").(string)] = o
			}
			tc.check(g, objs)
		})
	}
}

func dig(o map[string]any, path ...string) any {
	var v any = o
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}
