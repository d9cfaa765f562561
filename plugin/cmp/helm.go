package cmp

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	commonutil "helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"helm.sh/helm/v4/pkg/strvals"
)

// renderHelm renders the chart in appDir the way `helm template --include-crds` does (which is how
// Argo CD renders Helm sources): release name ARGOCD_APP_NAME, namespace ARGOCD_APP_NAMESPACE,
// value files, then the values parameter, then helm-parameters; CRDs, templates and hooks.
func renderHelm(appDir, root string, env Environment) ([]document, error) {
	rel := relTo(root, appDir)
	if _, err := os.Stat(filepath.Join(appDir, "Chart.yaml")); err != nil {
		return nil, fmt.Errorf("%s has no Chart.yaml: the renderer is helm, so the app directory must be a chart (or set renderer in %s)", rel, ConfigFileName)
	}
	if env.AppName == "" {
		return nil, fmt.Errorf("%s is empty: the Helm release name comes from it", EnvAppName)
	}
	ch, err := loader.LoadDir(appDir)
	if err != nil {
		return nil, fmt.Errorf("failed to load the Helm chart %s: %s", rel, oneLine(err.Error()))
	}
	if err := checkChartDependencies(ch, rel); err != nil {
		return nil, err
	}
	vals, err := helmValues(appDir, root, env.Params)
	if err != nil {
		return nil, err
	}
	if err := chartutil.ProcessDependencies(ch, vals); err != nil {
		return nil, fmt.Errorf("failed to process the dependencies of chart %s: %s", rel, oneLine(err.Error()))
	}
	caps := common.DefaultCapabilities.Copy()
	if env.KubeVersion != "" {
		kv, err := common.ParseKubeVersion(env.KubeVersion)
		if err != nil {
			return nil, fmt.Errorf("%s %q is not a Kubernetes version: %w", EnvKubeVersion, env.KubeVersion, err)
		}
		caps.KubeVersion = *kv
	}
	caps.APIVersions = append(caps.APIVersions, env.APIVersions...)
	if ch.Metadata.KubeVersion != "" && !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, caps.KubeVersion.String()) {
		return nil, fmt.Errorf("chart %s requires kubeVersion %s, which Kubernetes %s does not satisfy", rel, ch.Metadata.KubeVersion, caps.KubeVersion.Version)
	}
	options := common.ReleaseOptions{Name: env.AppName, Namespace: env.AppNamespace, Revision: 1, IsInstall: true}
	renderValues, err := commonutil.ToRenderValuesWithSchemaValidation(ch, vals, options, caps, false)
	if err != nil {
		return nil, fmt.Errorf("values of chart %s: %s", rel, oneLine(err.Error()))
	}
	files, err := engine.Engine{}.Render(ch, renderValues)
	if err != nil {
		return nil, fmt.Errorf("failed to render the Helm chart %s: %s", rel, oneLine(err.Error()))
	}
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("chart %s rendered invalid YAML: %s", rel, oneLine(err.Error()))
	}
	// Names in the chart start with the chart name; show them from the app directory instead.
	source := func(name string) string {
		_, inChart, _ := strings.Cut(filepath.ToSlash(name), "/")
		return path.Join(rel, inChart)
	}
	var docs []document
	add := func(data, name string) error {
		found, err := parseManifests([]byte(data), source(name))
		docs = append(docs, found...)
		return err
	}
	for _, crd := range ch.CRDObjects() {
		if err := add(string(crd.File.Data), crd.Filename); err != nil {
			return nil, err
		}
	}
	for _, m := range manifests {
		if err := add(m.Content, m.Name); err != nil {
			return nil, err
		}
	}
	for _, h := range hooks {
		if err := add(h.Manifest, h.Path); err != nil {
			return nil, err
		}
	}
	return docs, nil
}

// checkChartDependencies refuses a chart whose dependencies are not vendored in charts/: fetching
// them would need the network.
func checkChartDependencies(ch *chart.Chart, rel string) error {
	present := map[string]bool{}
	for _, d := range ch.Dependencies() {
		present[d.Name()] = true
	}
	var missing []string
	for _, d := range ch.Metadata.Dependencies {
		if !present[d.Name] {
			missing = append(missing, d.Name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("chart %s depends on %s, missing from %s/charts: run `helm dependency build %s` and commit charts/", rel, strings.Join(missing, ", "), rel, rel)
	}
	return nil
}

// helmValues merges the value files, the values parameter and helm-parameters, in Argo CD's order.
func helmValues(appDir, root string, params Parameters) (map[string]any, error) {
	base := map[string]any{}
	for _, name := range params.ValuesFiles {
		if isURL(name) {
			return nil, fmt.Errorf("plugin parameter %s: %q is remote: the stagecoach plugin does not fetch from the network, commit the file to the repository", ParamValuesFiles, name)
		}
		path := filepath.Join(appDir, name)
		real, err := resolveInside(path, root)
		if err != nil {
			return nil, fmt.Errorf("plugin parameter %s: %w", ParamValuesFiles, err)
		}
		data, err := os.ReadFile(real)
		if err != nil {
			return nil, fmt.Errorf("plugin parameter %s: failed to read %s: %w", ParamValuesFiles, relTo(root, path), err)
		}
		current, err := common.ReadValues(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %s", relTo(root, path), oneLine(err.Error()))
		}
		base = loader.MergeMaps(base, current)
	}
	if strings.TrimSpace(params.Values) != "" {
		current, err := common.ReadValues([]byte(params.Values))
		if err != nil {
			return nil, fmt.Errorf("plugin parameter %s: %s", ParamValues, oneLine(err.Error()))
		}
		base = loader.MergeMaps(base, current)
	}
	keys := make([]string, 0, len(params.HelmParameters))
	for k := range params.HelmParameters {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := strvals.ParseInto(k+"="+escapeSetValue(params.HelmParameters[k]), base); err != nil {
			return nil, fmt.Errorf("plugin parameter %s: %q: %s", ParamHelmParameters, k, oneLine(err.Error()))
		}
	}
	return base, nil
}

// escapeSetValue escapes commas the way Argo CD does for --set, except in a {a,b} list.
func escapeSetValue(v string) string {
	if strings.HasPrefix(v, "{") && strings.HasSuffix(v, "}") {
		return v
	}
	var b strings.Builder
	for i, r := range v {
		if r == ',' && (i == 0 || v[i-1] != '\\') {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
