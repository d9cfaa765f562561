package cmp

import (
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// TestRenderRefusesFixtures covers the refusals that the committed fixtures can show.
func TestRenderRefusesFixtures(t *testing.T) {
	cases := []struct {
		name    string
		app     string
		extra   map[string]string
		wantErr []string
	}{
		{name: "malformed YAML names the file and line", app: "apps/malformed",
			wantErr: []string{"apps/malformed/b-bad.yaml:12: mapping values are not allowed in this context"}},
		{name: "renderer helm without a chart", app: "apps/nochart",
			wantErr: []string{"apps/nochart has no Chart.yaml"}},
		{name: "chart dependency not vendored", app: "apps/missingdep",
			wantErr: []string{"chart apps/missingdep depends on redis, missing from apps/missingdep/charts", "helm dependency build"}},
		{name: "digest that is not sha256", app: "apps/plain", extra: map[string]string{"ARGOCD_ENV_STAGECOACH_DIGEST": "sha256:abc"},
			wantErr: []string{`ARGOCD_ENV_STAGECOACH_DIGEST "sha256:abc" is not a digest`}},
		{name: "digest in upper case", app: "apps/plain", extra: map[string]string{"ARGOCD_ENV_STAGECOACH_DIGEST": strings.ToUpper(testDigest)},
			wantErr: []string{"is not a digest"}},
		{name: "an image reference instead of a digest", app: "apps/plain", extra: map[string]string{"ARGOCD_ENV_STAGECOACH_DIGEST": "registry.example/payments@" + testDigest},
			wantErr: []string{"is not a digest"}},
		{name: "digest but no images declared", app: "apps/malformed", extra: map[string]string{"ARGOCD_ENV_STAGECOACH_DIGEST": testDigest},
			wantErr: []string{"apps/malformed/.stagecoach.yaml declares no images to pin it to"}},
		{name: "parameters that are not JSON", app: "apps/plain", extra: map[string]string{"ARGOCD_APP_PARAMETERS": "values-files=x"},
			wantErr: []string{"failed to parse ARGOCD_APP_PARAMETERS"}},
		{name: "values-files given as a string", app: "apps/helm", extra: map[string]string{"ARGOCD_APP_PARAMETERS": `[{"name":"values-files","string":"values-prod.yaml"}]`},
			wantErr: []string{`plugin parameter "values-files" must be given as ` + "`array:`"}},
		{name: "value file that does not exist", app: "apps/helm", extra: map[string]string{"ARGOCD_APP_PARAMETERS": `[{"name":"values-files","array":["values-staging.yaml"]}]`},
			wantErr: []string{"failed to read apps/helm/values-staging.yaml"}},
		{name: "remote value file", app: "apps/helm", extra: map[string]string{"ARGOCD_APP_PARAMETERS": `[{"name":"values-files","array":["https://values.example/prod.yaml"]}]`},
			wantErr: []string{`"https://values.example/prod.yaml" is remote`}},
		{name: "Helm without a release name", app: "apps/helm", extra: map[string]string{"ARGOCD_APP_NAME": ""},
			wantErr: []string{"ARGOCD_APP_NAME is empty"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			out, err := Render(t.Context(), Options{Dir: filepath.Join(fixtureRepo, tc.app), Env: lookup(argoEnv(tc.app, tc.extra))})
			g.Expect(out).To(BeEmpty())
			g.Expect(err).To(HaveOccurred())
			t.Log(err)
			for _, want := range tc.wantErr {
				g.Expect(err.Error()).To(ContainSubstring(want))
			}
			g.Expect(err.Error()).NotTo(ContainSubstring("\n"), "one line on stderr")
		})
	}
}

const (
	configMap = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\n"
	deploy    = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: app}\nspec:\n  template:\n    spec:\n      containers:\n        - {name: app, image: registry.example/app:1}\n"
	appConfig = "stage: app\nimages: [registry.example/app]\n"
)

// TestRenderRefusesTrees covers symlinks, paths out of the repository and bad configuration, on
// repositories built per test.
func TestRenderRefusesTrees(t *testing.T) {
	cases := []struct {
		name       string
		files      map[string]string // under <tmp>/repo; "->target" is a symlink
		outside    map[string]string // under <tmp>/outside
		app        string
		sourcePath string // ARGOCD_APP_SOURCE_PATH; "-" leaves it unset (the root is then found by .git)
		extra      map[string]string
		wantErr    []string
	}{
		{name: "app directory that is a symlink out of the repository",
			files:   map[string]string{".git/HEAD": "ref: refs/heads/main\n", "apps/web": "->../../outside/app"},
			outside: map[string]string{"app/" + ConfigFileName: appConfig, "app/cm.yaml": configMap},
			app:     "apps/web", wantErr: []string{"app directory", "outside the repository root"}},
		{name: "app directory that is a symlink out of the repository, root found by .git",
			files:   map[string]string{".git/HEAD": "ref: refs/heads/main\n", "apps/web": "->../../outside/app"},
			outside: map[string]string{"app/" + ConfigFileName: appConfig, "app/cm.yaml": configMap},
			app:     "apps/web", sourcePath: "-", wantErr: []string{"app directory", "outside the repository root"}},
		{name: "manifest that is a symlink out of the repository",
			files:   map[string]string{"apps/web/" + ConfigFileName: appConfig, "apps/web/deploy.yaml": deploy, "apps/web/secret.yaml": "->../../../outside/secret.yaml"},
			outside: map[string]string{"secret.yaml": configMap},
			app:     "apps/web", wantErr: []string{"apps/web/secret.yaml resolves to", "outside/secret.yaml, outside the repository root"}},
		{name: ".stagecoach.yaml that is a symlink out of the repository",
			files:   map[string]string{"apps/web/" + ConfigFileName: "->../../../outside/config.yaml", "apps/web/cm.yaml": configMap},
			outside: map[string]string{"config.yaml": appConfig},
			app:     "apps/web", wantErr: []string{"apps/web/.stagecoach.yaml resolves to", "outside the repository root"}},
		{name: "chart templates directory that is a symlink out of the repository",
			files: map[string]string{"apps/web/" + ConfigFileName: appConfig, "apps/web/Chart.yaml": "apiVersion: v2\nname: web\nversion: 0.1.0\n",
				"apps/web/templates": "->../../../outside/templates"},
			outside: map[string]string{"templates/deploy.yaml": deploy},
			app:     "apps/web", wantErr: []string{"apps/web/templates resolves to", "outside the repository root"}},
		{name: "symlink inside a kustomize base out of the repository",
			files: map[string]string{"apps/web/" + ConfigFileName: appConfig, "apps/web/kustomization.yaml": "resources: [../../base]\n",
				"base/kustomization.yaml": "resources: [deploy.yaml]\n", "base/deploy.yaml": "->../../outside/deploy.yaml"},
			outside: map[string]string{"deploy.yaml": deploy},
			app:     "apps/web", wantErr: []string{"kustomize build of apps/web failed", "base/deploy.yaml resolves to", "outside the repository root"}},
		{name: "kustomize base above the repository root",
			files:   map[string]string{"apps/web/" + ConfigFileName: appConfig, "apps/web/kustomization.yaml": "resources: [../../../outside/base]\n"},
			outside: map[string]string{"base/kustomization.yaml": "resources: [deploy.yaml]\n", "base/deploy.yaml": deploy},
			app:     "apps/web", wantErr: []string{"outside/base is outside the repository root"}},
		{name: "remote kustomize base over git",
			files: map[string]string{"apps/web/" + ConfigFileName: appConfig, "apps/web/kustomization.yaml": "resources:\n  - github.com/example/infra//base?ref=v1\n"},
			app:   "apps/web", wantErr: []string{`apps/web/kustomization.yaml: resources entry "github.com/example/infra//base?ref=v1" is not a file or directory in the repository`}},
		{name: "remote kustomize resource over https",
			files: map[string]string{"apps/web/" + ConfigFileName: appConfig, "apps/web/kustomization.yaml": "resources: [https://example.com/deploy.yaml]\n"},
			app:   "apps/web", wantErr: []string{`resources entry "https://example.com/deploy.yaml" is remote`}},
		{name: "value file outside the repository",
			files: map[string]string{"apps/web/" + ConfigFileName: appConfig, "apps/web/Chart.yaml": "apiVersion: v2\nname: web\nversion: 0.1.0\n",
				"apps/web/templates/deploy.yaml": deploy},
			outside: map[string]string{"values.yaml": "a: 1\n"},
			extra:   map[string]string{"ARGOCD_APP_PARAMETERS": `[{"name":"values-files","array":["../../../outside/values.yaml"]}]`},
			app:     "apps/web", wantErr: []string{"plugin parameter values-files", "outside the repository root"}},
		{name: "no .stagecoach.yaml",
			files: map[string]string{"apps/web/cm.yaml": configMap},
			app:   "apps/web", wantErr: []string{"apps/web/.stagecoach.yaml not found"}},
		{name: "unknown field in .stagecoach.yaml names the line",
			files: map[string]string{"apps/web/" + ConfigFileName: "stage: app\nimage: registry.example/app\n", "apps/web/cm.yaml": configMap},
			app:   "apps/web", wantErr: []string{"apps/web/.stagecoach.yaml:2: field image not found"}},
		{name: "declared image with a tag",
			files: map[string]string{"apps/web/" + ConfigFileName: "stage: app\nimages: [registry.example/app:1]\n", "apps/web/cm.yaml": configMap},
			app:   "apps/web", wantErr: []string{`image "registry.example/app:1" names a tag or digest`}},
		{name: "declared image that no container uses",
			files: map[string]string{"apps/web/" + ConfigFileName: "stage: app\nimages: [registry.example/other]\n", "apps/web/deploy.yaml": deploy},
			extra: map[string]string{"ARGOCD_ENV_STAGECOACH_DIGEST": testDigest},
			app:   "apps/web", wantErr: []string{"apps/web renders no container using registry.example/other"}},
		{name: "a document that is not a Kubernetes object",
			files: map[string]string{"apps/web/" + ConfigFileName: appConfig, "apps/web/cm.yaml": configMap + "---\n# notes\nowner: team-a\n"},
			app:   "apps/web", wantErr: []string{"apps/web/cm.yaml:6: not a Kubernetes object"}},
		{name: "duplicate keys",
			files: map[string]string{"apps/web/" + ConfigFileName: appConfig, "apps/web/cm.yaml": configMap + "data:\n  a: x\n  a: y\n"},
			app:   "apps/web", wantErr: []string{`apps/web/cm.yaml:6: mapping key "a" already defined at line 5`}},
		{name: "a directory without manifests",
			files: map[string]string{"apps/web/" + ConfigFileName: appConfig, "apps/web/README.md": "nothing\n"},
			app:   "apps/web", wantErr: []string{"apps/web holds no Kubernetes objects"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			tmp := t.TempDir()
			writeTree(t, filepath.Join(tmp, "repo"), tc.files)
			writeTree(t, filepath.Join(tmp, "outside"), tc.outside)
			sourcePath := tc.sourcePath
			if sourcePath == "" {
				sourcePath = tc.app
			}
			env := argoEnv(sourcePath, tc.extra)
			if sourcePath == "-" {
				delete(env, EnvAppSourcePath)
			}
			out, err := Render(t.Context(), Options{Dir: filepath.Join(tmp, "repo", tc.app), Env: lookup(env)})
			g.Expect(out).To(BeEmpty())
			g.Expect(err).To(HaveOccurred())
			t.Log(err)
			for _, want := range tc.wantErr {
				g.Expect(err.Error()).To(ContainSubstring(want))
			}
			g.Expect(err.Error()).NotTo(ContainSubstring("\n"), "one line on stderr")
		})
	}
}
