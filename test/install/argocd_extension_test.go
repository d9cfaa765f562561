package install

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// buildWith builds a kustomization of resources plus components (paths relative to the repo
// root) in a temporary folder that also holds files.
func buildWith(t *testing.T, resources, components []string, files map[string]string) []*unstructured.Unstructured {
	t.Helper()
	dir := t.TempDir()
	rel := func(paths []string) []string {
		out := make([]string, 0, len(paths))
		for _, p := range paths {
			if _, local := files[p]; local {
				out = append(out, p)
				continue
			}
			r, err := filepath.Rel(dir, filepath.Join(repoRoot(), p)) // kustomize refuses absolute paths
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
		return out
	}
	k, err := yaml.Marshal(map[string]any{"resources": rel(resources), "components": rel(components)})
	if err != nil {
		t.Fatal(err)
	}
	files["kustomization.yaml"] = string(k)
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return kustomizeBuild(t, dir)
}

// A stand-in for the Argo CD install the component patches, with settings of its own that the
// patches must keep.
const argoCDBase = `apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-cm, namespace: argocd}
data: {url: "https://argocd.example"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-cmd-params-cm, namespace: argocd}
data: {server.insecure: "false"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-rbac-cm, namespace: argocd}
data: {policy.csv: "g, ops, role:admin"}
---
apiVersion: v1
kind: Secret
metadata: {name: argocd-secret, namespace: argocd}
stringData: {server.secretkey: keep-me}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: argocd-server, namespace: argocd}
spec:
  selector: {matchLabels: {app.kubernetes.io/name: argocd-server}}
  template:
    metadata: {labels: {app.kubernetes.io/name: argocd-server}}
    spec:
      containers:
      - name: argocd-server
        image: quay.io/argoproj/argocd:v3.6.1
        volumeMounts: [{name: tmp, mountPath: /tmp}]
      volumes: [{name: tmp, emptyDir: {}}]
`

// The manifests of manifests/argocd/extension: the Stagecoach side serves the API on the port
// the Service and argocd-cm name, with the token Secret mounted where the flag reads it; the Argo
// CD side enables the proxy, points it at that Service with the token, lets users invoke it,
// and installs the bundle, keeping the settings already there.
func TestArgoCDExtensionManifests(t *testing.T) {
	stagecoach := buildWith(t, []string{"manifests"}, []string{"manifests/argocd/extension/stagecoach"}, map[string]string{})
	argocd := buildWith(t, []string{"argocd.yaml"}, []string{"manifests/argocd/extension/argocd"}, map[string]string{"argocd.yaml": argoCDBase})

	t.Run("the controller serves the API with the token", func(t *testing.T) {
		g := NewWithT(t)
		deploy := find(stagecoach, "Deployment", "stagecoach-controller")
		g.Expect(deploy).NotTo(BeNil())
		containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
		c := containers[0].(map[string]any)
		g.Expect(c["args"]).To(ContainElements("--api-bind-address=:8083", "--api-proxy-token-file=/etc/stagecoach/api/token"))
		g.Expect(c["ports"]).To(ContainElement(map[string]any{"name": "api", "containerPort": float64(8083)}))
		g.Expect(c["volumeMounts"]).To(ContainElement(map[string]any{"name": "api-token", "mountPath": "/etc/stagecoach/api", "readOnly": true}))
		volumes, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "volumes")
		g.Expect(volumes).To(ContainElement(map[string]any{"name": "api-token", "secret": map[string]any{"secretName": "stagecoach-api-token"}}))
		secret := find(stagecoach, "Secret", "stagecoach-api-token")
		g.Expect(secret).NotTo(BeNil())
		g.Expect(secret.GetNamespace()).To(Equal("stagecoach-system"))
		g.Expect(secret.Object).To(HaveKeyWithValue("stringData", HaveKey("token")))
		svc := find(stagecoach, "Service", "stagecoach-api")
		g.Expect(svc).NotTo(BeNil())
		g.Expect(svc.GetNamespace()).To(Equal("stagecoach-system"))
		selector, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
		g.Expect(deploy.GetLabels()).To(Equal(selector))
		ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		g.Expect(ports).To(ConsistOf(map[string]any{"name": "api", "port": float64(8083), "targetPort": "api", "protocol": "TCP"}))
	})
	t.Run("argocd-cm proxies to the API with the token", func(t *testing.T) {
		g := NewWithT(t)
		cm := find(argocd, "ConfigMap", "argocd-cm")
		data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
		g.Expect(data).To(HaveKeyWithValue("url", "https://argocd.example"))
		// Strict, with every field Argo CD's ExtensionConfig knows: a misspelt key fails here.
		var ext struct {
			ConnectionTimeout     string `json:"connectionTimeout"`
			KeepAlive             string `json:"keepAlive"`
			IdleConnectionTimeout string `json:"idleConnectionTimeout"`
			MaxIdleConnections    int    `json:"maxIdleConnections"`
			Services              []struct {
				URL     string `json:"url"`
				Headers []struct{ Name, Value string }
			} `json:"services"`
		}
		g.Expect(yaml.UnmarshalStrict([]byte(data["extension.config.stagecoach"]), &ext)).To(Succeed())
		g.Expect(ext.Services).To(HaveLen(1))
		g.Expect(ext.Services[0].URL).To(Equal("http://stagecoach-api.stagecoach-system.svc:8083"))
		g.Expect(ext.Services[0].Headers).To(ConsistOf(struct{ Name, Value string }{"Authorization", "$stagecoach.proxy.token"}))
	})
	t.Run("argocd-secret holds the token the header names", func(t *testing.T) {
		g := NewWithT(t)
		secret := find(argocd, "Secret", "argocd-secret")
		data, _, _ := unstructured.NestedStringMap(secret.Object, "stringData")
		g.Expect(data).To(HaveKeyWithValue("server.secretkey", "keep-me"))
		g.Expect(data).To(HaveKeyWithValue("stagecoach.proxy.token", HavePrefix("Bearer ")))
	})
	t.Run("the proxy is enabled and users may invoke it", func(t *testing.T) {
		g := NewWithT(t)
		params, _, _ := unstructured.NestedStringMap(find(argocd, "ConfigMap", "argocd-cmd-params-cm").Object, "data")
		g.Expect(params).To(Equal(map[string]string{"server.insecure": "false", "server.enable.proxy.extension": "true"}))
		rbac, _, _ := unstructured.NestedStringMap(find(argocd, "ConfigMap", "argocd-rbac-cm").Object, "data")
		g.Expect(rbac).To(HaveKeyWithValue("policy.csv", "g, ops, role:admin"))
		var lines []string
		for _, l := range strings.Split(rbac["policy.stagecoach.csv"], "\n") {
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, strings.Join(strings.Fields(strings.ReplaceAll(l, ",", " ")), ","))
			}
		}
		g.Expect(lines).To(ConsistOf("p,role:readonly,extensions,invoke,stagecoach,allow"))
	})
	t.Run("argocd-server installs the bundle from a release tarball", func(t *testing.T) {
		g := NewWithT(t)
		spec, _, _ := unstructured.NestedMap(find(argocd, "Deployment", "argocd-server").Object, "spec", "template", "spec")
		inits := spec["initContainers"].([]any)
		g.Expect(inits).To(HaveLen(1))
		installer := inits[0].(map[string]any)
		g.Expect(installer["image"]).To(HavePrefix("quay.io/argoprojlabs/argocd-extension-installer:"))
		env := map[string]string{}
		for _, e := range installer["env"].([]any) {
			env[e.(map[string]any)["name"].(string)] = e.(map[string]any)["value"].(string)
		}
		g.Expect(env["EXTENSION_URL"]).To(MatchRegexp(`^https://.*/releases/download/v[0-9.]+/stagecoach-ui-extension\.tar\.gz$`))
		g.Expect(env).To(HaveKeyWithValue("EXTENSION_NAME", "stagecoach"))
		mount := map[string]any{"name": "extensions", "mountPath": "/tmp/extensions/"}
		g.Expect(installer["volumeMounts"]).To(ContainElement(mount))
		server := spec["containers"].([]any)[0].(map[string]any)
		g.Expect(server["volumeMounts"]).To(ConsistOf(map[string]any{"name": "tmp", "mountPath": "/tmp"}, mount))
		g.Expect(spec["volumes"]).To(ContainElement(map[string]any{"name": "extensions", "emptyDir": map[string]any{}}))
	})
}
