package cmp

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	yaml "go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

const installDir = "../../manifests/argocd/cmp"

// argoRepoServer is the part of Argo CD's argocd-repo-server Deployment the Component relies on
// (manifests/base/repo-server/argocd-repo-server-deployment.yaml in argoproj/argo-cd v3.6.1).
const argoRepoServer = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: argocd-repo-server
spec:
  template:
    spec:
      containers:
        - name: argocd-repo-server
          image: quay.io/argoproj/argocd:v3.6.1
      volumes:
        - name: var-files
          emptyDir: {}
        - name: plugins
          emptyDir: {}
`

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestInstallManifests(t *testing.T) {
	t.Run("the ConfigMap carries plugin/plugin.yaml unchanged", func(t *testing.T) {
		g := NewWithT(t)
		var cm struct {
			Data map[string]string `yaml:"data"`
		}
		readYAML(t, filepath.Join(installDir, "plugin-configmap.yaml"), &cm)
		want, err := os.ReadFile("../plugin.yaml")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cm.Data["plugin.yaml"]).To(Equal(string(want)))
	})

	t.Run("the Component adds the sidecar to Argo CD's repo-server", func(t *testing.T) {
		g := NewWithT(t)
		dir := t.TempDir()
		component, err := filepath.Abs(installDir)
		g.Expect(err).NotTo(HaveOccurred())
		rel, err := filepath.Rel(dir, component)
		g.Expect(err).NotTo(HaveOccurred())
		writeTree(t, dir, map[string]string{
			"repo-server.yaml":   argoRepoServer,
			"kustomization.yaml": "resources: [repo-server.yaml]\ncomponents: [" + rel + "]\n",
		})
		resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
		g.Expect(err).NotTo(HaveOccurred())
		out, err := resources.AsYaml()
		g.Expect(err).NotTo(HaveOccurred())
		objs := decodeObjects(t, out)
		g.Expect(ids(objs)).To(ConsistOf("Deployment/argocd-repo-server", "ConfigMap/stagecoach-cmp-plugin"))

		spec := byID(objs, "Deployment/argocd-repo-server").get("spec", "template", "spec").(map[string]any)
		var sidecar map[string]any
		for _, c := range spec["containers"].([]any) {
			if c.(map[string]any)["name"] == "stagecoach-cmp" {
				sidecar = c.(map[string]any)
			}
		}
		g.Expect(sidecar).NotTo(BeNil())
		g.Expect(spec["containers"]).To(HaveLen(2), "Argo CD's own container stays")
		g.Expect(sidecar["command"]).To(Equal([]any{"/var/run/argocd/argocd-cmp-server"}))
		g.Expect(sidecar["securityContext"]).To(HaveKeyWithValue("runAsUser", 999))
		g.Expect(sidecar["env"]).To(ContainElement(map[string]any{"name": "STAGECOACH_VERIFY_KEYS_DIR", "value": "/home/argocd/stagecoach/keys"}))
		mounts := map[string]string{}
		for _, m := range sidecar["volumeMounts"].([]any) {
			m := m.(map[string]any)
			mounts[m["mountPath"].(string)] = m["name"].(string)
		}
		g.Expect(mounts).To(Equal(map[string]string{
			"/var/run/argocd":                            "var-files",
			"/home/argocd/cmp-server/plugins":            "plugins",
			"/home/argocd/cmp-server/config/plugin.yaml": "stagecoach-cmp-plugin",
			"/tmp":                         "stagecoach-cmp-tmp",
			"/home/argocd/stagecoach/keys": "stagecoach-verify-keys",
		}))
		volumes := map[string]bool{}
		for _, v := range spec["volumes"].([]any) {
			volumes[v.(map[string]any)["name"].(string)] = true
		}
		for _, name := range mounts {
			g.Expect(volumes).To(HaveKey(name), "every mount has a volume")
		}
	})

	t.Run("the example Application names the plugin and carries the digest", func(t *testing.T) {
		g := NewWithT(t)
		var raw map[string]any
		readYAML(t, filepath.Join(installDir, "example", "application.yaml"), &raw)
		app := object(raw)
		g.Expect(app.get("metadata", "labels", "stagecoach.dev/stage")).To(Equal("payments"))
		g.Expect(app.get("spec", "source", "plugin", "name")).To(Equal("stagecoach-v1"))
		env, err := ReadEnvironment(func(k string) (string, bool) {
			for _, e := range app.get("spec", "source", "plugin", "env").([]any) {
				e := e.(map[string]any)
				if "ARGOCD_ENV_"+e["name"].(string) == k {
					return e["value"].(string), true
				}
			}
			return "", false
		})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(env.Digest).NotTo(BeEmpty())
		g.Expect(env.Version).To(Equal("v1.4.2"))
	})
}
