package cmp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzReadEnvironment: Argo CD's environment (the digest and the parameters JSON) is either
// refused or read into values the renderer can trust.
func FuzzReadEnvironment(f *testing.F) {
	f.Add(testDigest, `[{"name":"values-files","array":["values-prod.yaml"]},{"name":"helm-parameters","map":{"a":"b"}}]`, "")
	f.Add("", `[{"name":"values","string":"replicas: 2"}]`, "")
	f.Add("sha256:1234", "", "x.yaml")
	f.Add("", "", "../../etc/passwd")
	f.Add("", `{"name":1}`, "")
	f.Fuzz(func(t *testing.T, digest, params, paramVar string) {
		env := map[string]string{EnvDigest: digest, EnvAppParameters: params, "PARAM_VALUES_FILES_0": paramVar}
		got, err := ReadEnvironment(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		if err != nil {
			return
		}
		if got.Digest != "" && !digestPattern.MatchString(got.Digest) {
			t.Fatalf("accepted digest %q", got.Digest)
		}
	})
}

// FuzzParseImage: an image reference is refused or gives a repository without tag or digest.
func FuzzParseImage(f *testing.F) {
	for _, s := range []string{"registry.example/payments", "registry.example:5000/a/b:1.2", "nginx", "a@sha256:" + strings.Repeat("0", 64), "", ":", "UPPER/case", "a//b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		img, err := parseImage(ref)
		if err != nil {
			return
		}
		if img.repository == "" || strings.Contains(img.repository, "@") {
			t.Fatalf("parseImage(%q) = %+v", ref, img)
		}
		if _, err := declaredImages([]string{ref}); (err == nil) != (img.tag == "" && img.digest == "") {
			t.Fatalf("declaredImages(%q) = %v, but it has tag %q and digest %q", ref, err, img.tag, img.digest)
		}
	})
}

// FuzzReadAppConfig: any .stagecoach.yaml is refused with an error naming the file, or has a
// stage, a known renderer and images that parse.
func FuzzReadAppConfig(f *testing.F) {
	f.Add("stage: payments\nimages: [registry.example/payments]\n")
	f.Add("stage: payments\nrenderer: helm\n")
	f.Add("stage: ''\n")
	f.Add("stage: a\nimages: [':bad']\n")
	f.Add("stage: a\nunknown: 1\n")
	f.Add("&a [*a]")
	f.Fuzz(func(t *testing.T, content string) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, ConfigFileName), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := readAppConfig(dir, ConfigFileName)
		if err != nil {
			if !strings.Contains(err.Error(), ConfigFileName) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if strings.TrimSpace(cfg.Stage) == "" {
			t.Fatalf("accepted an empty stage: %q", content)
		}
		for _, img := range cfg.Images {
			if _, err := parseImage(img); err != nil {
				t.Fatalf("accepted image %q that does not parse: %v", img, err)
			}
		}
	})
}
