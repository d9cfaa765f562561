package localstack

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Helm charts in an OCI registry (issue 30), as `helm push` stores them: Argo CD's repo-server
// pulls them with the helm command (build/helm).

// The media types of a Helm chart in an OCI registry (helm's pkg/registry).
const (
	HelmConfigType types.MediaType = "application/vnd.cncf.helm.config.v1+json"
	HelmChartType  types.MediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

// rawManifest is a manifest pushed as it is (remote.Put).
type rawManifest struct {
	body      []byte
	mediaType types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.body, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mediaType, nil }

// PushChart pushes Helm chart chart at version (tag: version with "+" as "_", as helm pushes it)
// to repo/chart, its templates being files (name -> content under templates/), and returns the
// manifest digest. Other files give another digest for the same version (a version pushed again).
func (r *Registry) PushChart(ctx context.Context, repo, chart, version string, files map[string]string) (string, error) {
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	tw := tar.NewWriter(gz)
	all := map[string]string{chart + "/Chart.yaml": fmt.Sprintf("apiVersion: v2\nname: %s\nversion: %s\ntype: application\n", chart, version)}
	for n, c := range files {
		all[chart+"/templates/"+n] = c
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(all[n])), Typeflag: tar.TypeReg,
			ModTime: time.Unix(0, 0)}); err != nil {
			return "", err
		}
		if _, err := tw.Write([]byte(all[n])); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := gz.Close(); err != nil {
		return "", err
	}
	config, err := json.Marshal(map[string]string{"apiVersion": "v2", "name": chart, "version": version, "type": "application"})
	if err != nil {
		return "", err
	}
	repository, err := name.NewRepository(r.Repository(repo + "/" + chart))
	if err != nil {
		return "", err
	}
	var descs []v1.Descriptor
	for _, blob := range []struct {
		data []byte
		mt   types.MediaType
	}{{config, HelmConfigType}, {buf.Bytes(), HelmChartType}} {
		l := static.NewLayer(blob.data, blob.mt)
		if err := remote.WriteLayer(repository, l, remote.WithContext(ctx)); err != nil {
			return "", fmt.Errorf("failed to push a blob of chart %s %s: %w", chart, version, err)
		}
		d, _ := l.Digest()
		descs = append(descs, v1.Descriptor{MediaType: blob.mt, Size: int64(len(blob.data)), Digest: d})
	}
	body, err := json.Marshal(v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, Config: descs[0], Layers: descs[1:]})
	if err != nil {
		return "", err
	}
	ref := repository.Tag(strings.ReplaceAll(version, "+", "_"))
	if err := remote.Put(ref, rawManifest{body: body, mediaType: types.OCIManifestSchema1}, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("failed to push chart %s: %w", ref, err)
	}
	d, _, err := v1.SHA256(bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	return d.String(), nil
}

// HelmChartRepoURL is the repoURL of the charts under repo in an Argo CD Application (a Helm OCI
// repository is named without a scheme).
func (r *Registry) HelmChartRepoURL(repo string) string { return r.Repository(repo) }

// ArgoCDHelmOCIRepository registers the charts under repo of the stack's registry with Argo CD as
// a Helm OCI repository (plain HTTP).
func (s *Stack) ArgoCDHelmOCIRepository(ctx context.Context, repo string) error {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "helm-" + strings.NewReplacer("/", "-", ".", "-").Replace(repo), "namespace": ArgoCDNamespace,
			"labels": map[string]any{"argocd.argoproj.io/secret-type": "repository"}},
		"stringData": map[string]any{"type": "helm", "name": "helm-" + strings.ReplaceAll(repo, "/", "-"), "url": s.Registry.HelmChartRepoURL(repo),
			"enableOCI": "true", "insecureOCIForceHttp": "true"},
	}}
	return Apply(ctx, s.Client, u)
}

// HelmChartApplicationYAML is an automated Argo CD Application in namespace that installs chart
// from the Helm OCI repository repoURL at version into namespace target, carrying the
// stagecoach.dev/stage label of stage.
func HelmChartApplicationYAML(namespace, name, repoURL, chart, version, stage, target string) string {
	return fmt.Sprintf(`
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: %[2]s, namespace: %[1]s, labels: {stagecoach.dev/stage: %[6]s}}
spec:
  project: default
  source: {repoURL: %[3]q, chart: %[4]s, targetRevision: %[5]q}
  destination: {server: https://kubernetes.default.svc, namespace: %[7]s}
  syncPolicy:
    automated: {prune: true, selfHeal: true}
`, namespace, name, repoURL, chart, version, stage, target)
}
