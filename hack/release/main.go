// Command release writes a release's install files into dist/, beside the image that
// `make image` put there (dist/image, dist/stagecoach-image.tar):
//
//	install.yaml         manifests/ (CRDs, RBAC, controller, admission policies), image pinned by digest
//	crds.yaml            the CRDs alone
//	install-argocd.yaml  the plugin's ConfigMap and the argocd-repo-server sidecar (namespace argocd)
//	                     and the notifications wiring, for `kubectl apply --server-side` onto Argo CD
//	install-flux.yaml    the notification Provider and Alert (flux-system), the hook Secret as a template
//	checksums.txt        sha256 of every file above and of the image tarball (`sha256sum -c`)
//	image-signature/     with -cosign-key (COSIGN_KEY; password in COSIGN_PASSWORD): the image's cosign
//	                     signature (tag sha256-<hex>.sig) as an OCI layout; make image-push pushes it
//
// Run by `make release VERSION=v0.x.y`.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/stagecoach-dev/stagecoach/internal/imagesign"
)

// Options are one release's inputs.
type Options struct {
	Version string
	Image   string // repository the image is pushed to, without tag or digest
	Dist    string // holds image/ from `make image`; the files are written here
	Repo    string // the checkout (manifests/ is read from it)
	// CosignKey is a cosign private key file; when set the image is signed into
	// Dist/image-signature. CosignPassword decrypts it.
	CosignKey      string
	CosignPassword []byte
}

// SignatureDir is where, under Dist, the image's signature is written.
const SignatureDir = "image-signature"

func main() {
	var o Options
	flag.StringVar(&o.Version, "version", "", "release version, v0.x.y")
	flag.StringVar(&o.Image, "image", "ghcr.io/stagecoach-dev/stagecoach", "image repository the manifests pin (push there with make image-push)")
	flag.StringVar(&o.Dist, "dist", "dist", "folder holding image/ (make image); the release files are written here")
	flag.StringVar(&o.Repo, "repo", ".", "the checkout")
	flag.StringVar(&o.CosignKey, "cosign-key", os.Getenv("COSIGN_KEY"), "cosign private key to sign the image with (password in COSIGN_PASSWORD); none: unsigned")
	flag.Parse()
	o.CosignPassword = []byte(os.Getenv("COSIGN_PASSWORD"))
	files, err := Release(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	for _, f := range files {
		st, _ := os.Stat(filepath.Join(o.Dist, f))
		fmt.Printf("%-26s %9d bytes\n", filepath.Join(o.Dist, f), st.Size())
	}
	if o.CosignKey != "" {
		fmt.Printf("%-26s cosign signature of the image (pushed by make image-push)\n", filepath.Join(o.Dist, SignatureDir))
	}
}

// Release writes the files and returns their names in dist, checksums.txt last.
func Release(_ context.Context, o Options) ([]string, error) {
	if o.Version == "" {
		return nil, errors.New("no version: run make release VERSION=v0.x.y")
	}
	digest, err := imageDigest(filepath.Join(o.Dist, "image"))
	if err != nil {
		return nil, err
	}
	// A signature of an earlier build must not be pushed with this one.
	if err := os.RemoveAll(filepath.Join(o.Dist, SignatureDir)); err != nil {
		return nil, err
	}
	if o.CosignKey != "" {
		if err := sign(o, digest); err != nil {
			return nil, err
		}
	}
	manifests, err := filepath.Abs(filepath.Join(o.Repo, "manifests"))
	if err != nil {
		return nil, err
	}
	pinned := fmt.Sprintf("images:\n- {name: stagecoach, newName: %s, digest: %q}\n", o.Image, digest)
	label := fmt.Sprintf("labels:\n- pairs: {app.kubernetes.io/part-of: stagecoach, app.kubernetes.io/version: %q}\n", o.Version)

	install, err := kustomize(fmt.Sprintf("resources: [@%s]\n", manifests) + pinned + label)
	if err != nil {
		return nil, fmt.Errorf("install.yaml from %s: %w", manifests, err)
	}
	// kustomize takes no globs: list the CRD files.
	crdFiles, _ := filepath.Glob(filepath.Join(manifests, "crds", "*.yaml"))
	sort.Strings(crdFiles)
	crds, err := kustomize("resources:\n- @" + strings.Join(crdFiles, "\n- @") + "\n" + label)
	if err != nil {
		return nil, fmt.Errorf("crds.yaml: %w", err)
	}
	argocd, err := kustomize(fmt.Sprintf(`namespace: argocd
resources:
- @%[1]s/argocd/cmp/plugin-configmap.yaml
- @%[1]s/argocd/cmp/repo-server-sidecar.yaml
- @%[1]s/argocd/notifications/argocd-notifications-cm.yaml
- @%[1]s/argocd/extension/argocd/argocd-cm.yaml
- @%[1]s/argocd/extension/argocd/argocd-cmd-params-cm.yaml
- @%[1]s/argocd/extension/argocd/argocd-rbac-cm.yaml
- @%[1]s/argocd/extension/argocd/argocd-server.yaml
patches:
# The token is the user's to make: the Secret is a template (at the top of this file), not applied.
- patch: '{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "argocd-notifications-secret", "namespace": "argocd"}, "$patch": "delete"}'
`, manifests) + pinned + label)
	if err != nil {
		return nil, fmt.Errorf("install-argocd.yaml: %w", err)
	}
	flux, err := kustomize(fmt.Sprintf("resources: [@%s]\n", filepath.Join(manifests, "flux")) + label)
	if err != nil {
		return nil, fmt.Errorf("install-flux.yaml: %w", err)
	}
	argoSecret, err := secretTemplate(filepath.Join(manifests, "argocd", "notifications", "argocd-notifications-cm.yaml"), "argocd-notifications-secret")
	if err != nil {
		return nil, err
	}
	proxySecret, err := secretTemplate(filepath.Join(manifests, "argocd", "extension", "argocd", "argocd-secret.yaml"), "argocd-secret")
	if err != nil {
		return nil, err
	}
	// The UI extension's installer downloads this release's bundle.
	argocd = uiReleaseURL.ReplaceAll(argocd, []byte("${1}/"+o.Version+"/${2}"))
	fluxSecret, err := os.ReadFile(filepath.Join(manifests, "flux", "secret.yaml"))
	if err != nil {
		return nil, err
	}

	head := fmt.Sprintf("# Stagecoach %s (image %s@%s).\n", o.Version, o.Image, digest)
	files := []struct {
		name string
		data []byte
	}{
		{"install.yaml", join(head+"# CRDs, RBAC, the controller and the admission policies: kubectl apply --server-side -f install.yaml\n", install)},
		{"crds.yaml", join(head+"# The CRDs alone.\n", crds)},
		{"install-argocd.yaml", join(head+
			"# Onto an installed Argo CD (namespace argocd), as a server-side apply that merges into its objects:\n"+
			"#   kubectl apply --server-side --field-manager=stagecoach -f install-argocd.yaml\n"+
			"# It adds the stagecoach-cmp sidecar to argocd-repo-server (create the Secret\n"+
			"# argocd/stagecoach-verify-keys with the cosign public keys first) and the notifications\n"+
			"# wiring to argocd-notifications-cm. Then create the token Secret from this template:\n"+
			comment(argoSecret)+
			"# It also installs the UI extension (argocd-server's extension installer downloads this release's\n"+
			"# stagecoach-ui-extension.tar.gz; restart argocd-server after the first apply) and its proxy to the\n"+
			"# controller's HTTP API: run the controller with --api-bind-address and --api-proxy-token-file (see\n"+
			"# manifests/argocd/extension/stagecoach), and merge the proxy token into argocd-secret:\n"+
			comment(proxySecret), argocd)},
		{"install-flux.yaml", join(head+
			"# Onto an installed Flux (namespace flux-system): the notification Provider and Alert (edit the\n"+
			"# Alert's eventSources to your Stages' namespaces). Then create the token Secrets from this\n"+
			"# template, the same long random token in both (openssl rand -hex 32):\n"+
			comment(fluxSecret), flux)},
	}
	if err := os.MkdirAll(o.Dist, 0o755); err != nil {
		return nil, err
	}
	names := []string{}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(o.Dist, f.name), f.data, 0o644); err != nil {
			return nil, err
		}
		names = append(names, f.name)
	}
	names = append(names, "stagecoach-image.tar")
	var sums bytes.Buffer
	for _, n := range names {
		sum, err := sha256File(filepath.Join(o.Dist, n))
		if err != nil {
			return nil, fmt.Errorf("checksum of %s (run make image first): %w", n, err)
		}
		fmt.Fprintf(&sums, "%s  %s\n", sum, n)
	}
	if err := os.WriteFile(filepath.Join(o.Dist, "checksums.txt"), sums.Bytes(), 0o644); err != nil {
		return nil, err
	}
	return append(names, "checksums.txt"), nil
}

// sign writes the cosign signature of o.Image@digest into Dist/image-signature.
func sign(o Options, digest string) error {
	signer, err := imagesign.LoadKeyFile(o.CosignKey, o.CosignPassword)
	if err != nil {
		return err
	}
	h, err := v1.NewHash(digest)
	if err != nil {
		return err
	}
	sig, err := imagesign.Sign(signer, o.Image, h)
	if err != nil {
		return err
	}
	return imagesign.WriteLayout(filepath.Join(o.Dist, SignatureDir), sig)
}

// kustomize builds a kustomization given as text whose resources are named as "@/abs/path" (kustomize
// refuses absolute bases: they are made relative to the temporary folder it is built in).
func kustomize(kustomization string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "stagecoach-release-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	for {
		i := strings.Index(kustomization, "@/")
		if i < 0 {
			break
		}
		end := i + strings.IndexAny(kustomization[i:], "\n],")
		rel, err := filepath.Rel(dir, kustomization[i+1:end])
		if err != nil {
			return nil, err
		}
		kustomization = kustomization[:i] + rel + kustomization[end:]
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		return nil, err
	}
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = types.LoadRestrictionsNone
	rm, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, err
	}
	return rm.AsYaml()
}

func imageDigest(dir string) (string, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return "", fmt.Errorf("no image at %s: run make image first: %w", dir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return "", err
	}
	if len(m.Manifests) != 1 {
		return "", fmt.Errorf("%s holds %d images, want the one make image writes", dir, len(m.Manifests))
	}
	return m.Manifests[0].Digest.String(), nil
}

// secretTemplate returns the YAML document of the Secret named in file.
func secretTemplate(file, name string) ([]byte, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		if strings.Contains(doc, "kind: Secret") && strings.Contains(doc, "name: "+name) {
			return []byte(doc), nil
		}
	}
	return nil, fmt.Errorf("%s holds no Secret %s", file, name)
}

// uiReleaseURL is the UI extension tarball's download URL in the installer settings, with the
// release version as its second-to-last path element.
var uiReleaseURL = regexp.MustCompile(`(https://github\.com/stagecoach-dev/stagecoach/releases/download)/[^/\s]+/(stagecoach-ui-extension\.tar\.gz(?:\.sha256)?)`)

func comment(yaml []byte) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(string(yaml), "\n"), "\n") {
		b.WriteString("#   " + l + "\n")
	}
	return b.String()
}

func join(header string, body []byte) []byte { return append([]byte(header+"---\n"), body...) }

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
