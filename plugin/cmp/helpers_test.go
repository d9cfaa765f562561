package cmp

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

const (
	testDigest  = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	fixtureRepo = "testdata/repo"
)

// argoEnv is the environment Argo CD's repo-server gives the plugin for the app at appPath.
func argoEnv(appPath string, extra map[string]string) map[string]string {
	env := map[string]string{
		"ARGOCD_APP_NAME":                   "api",
		"ARGOCD_APP_NAMESPACE":              "api-prod",
		"ARGOCD_APP_PROJECT_NAME":           "default",
		"ARGOCD_APP_REVISION":               "0123456789abcdef0123456789abcdef01234567",
		"ARGOCD_APP_REVISION_SHORT":         "0123456",
		"ARGOCD_APP_SOURCE_REPO_URL":        "https://git.example/repo.git",
		"ARGOCD_APP_SOURCE_PATH":            appPath,
		"ARGOCD_APP_SOURCE_TARGET_REVISION": "main",
		"KUBE_VERSION":                      "1.35.4",
		"KUBE_API_VERSIONS":                 "v1,apps/v1,batch/v1",
	}
	for k, v := range extra {
		if v == "" {
			delete(env, k)
			continue
		}
		env[k] = v
	}
	return env
}

func lookup(env map[string]string) LookupEnv {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// object is one decoded output object.
type object map[string]any

func decodeObjects(t *testing.T, out []byte) []object {
	t.Helper()
	var objs []object
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var o map[string]any // not object: yaml.v3 would decode nested maps as object too
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("output is not a YAML stream: %v\n%s", err, out)
		}
		objs = append(objs, o)
	}
}

func (o object) get(path ...string) any {
	var v any = map[string]any(o)
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func (o object) id() string {
	name, _ := o.get("metadata", "name").(string)
	return o["kind"].(string) + "/" + name
}

func ids(objs []object) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.id())
	}
	return out
}

func byID(objs []object, id string) object {
	for _, o := range objs {
		if o.id() == id {
			return o
		}
	}
	return nil
}

// containerImages lists "name=image" of every container anywhere in the object.
func containerImages(o object) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, child := range t {
				if list, ok := child.([]any); ok && containerListKeys[k] {
					for _, c := range list {
						c := c.(map[string]any)
						out = append(out, c["name"].(string)+"="+c["image"].(string))
					}
				}
				walk(child)
			}
		case []any:
			for _, child := range t {
				walk(child)
			}
		}
	}
	walk(map[string]any(o))
	return out
}

// writeTree creates files under dir; a value starting with "->" makes a symlink to the rest.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
