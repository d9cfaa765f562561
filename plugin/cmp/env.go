package cmp

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Environment variables Argo CD's repo-server sends to a config management plugin
// (reposerver/repository/repository.go newEnv, getPluginEnvs, getPluginParamEnvs).
const (
	EnvAppName        = "ARGOCD_APP_NAME"
	EnvAppNamespace   = "ARGOCD_APP_NAMESPACE"
	EnvAppRevision    = "ARGOCD_APP_REVISION"
	EnvAppSourcePath  = "ARGOCD_APP_SOURCE_PATH"
	EnvAppParameters  = "ARGOCD_APP_PARAMETERS"
	EnvKubeVersion    = "KUBE_VERSION"
	EnvKubeAPIVersion = "KUBE_API_VERSIONS"
	// EnvDigest and EnvVersion are the Application's spec.source.plugin.env entries
	// STAGECOACH_DIGEST and STAGECOACH_VERSION, which Argo CD prefixes with ARGOCD_ENV_.
	EnvDigest  = "ARGOCD_ENV_STAGECOACH_DIGEST"
	EnvVersion = "ARGOCD_ENV_STAGECOACH_VERSION"
)

// Plugin parameters (spec.source.plugin.parameters) the renderer understands. plugin/plugin.yaml
// announces the same names.
const (
	ParamValuesFiles    = "values-files"    // array: Helm value files, relative to the app directory
	ParamHelmParameters = "helm-parameters" // map: Helm --set pairs
	ParamValues         = "values"          // string: a YAML document of Helm values
	ParamImages         = "images"          // array: images to pin besides those in .stagecoach.yaml
)

// LookupEnv reads one environment variable; os.LookupEnv in the binary, a map in tests.
type LookupEnv func(name string) (string, bool)

// Environment is what Argo CD told the plugin about the Application being rendered.
type Environment struct {
	AppName      string
	AppNamespace string
	Revision     string
	SourcePath   string
	// Digest is the promoted image digest (sha256:<64 hex>), empty before the first promotion.
	Digest string
	// Version is what the stagecoach.dev/version annotation says: STAGECOACH_VERSION, else Digest.
	Version     string
	KubeVersion string
	APIVersions []string
	Params      Parameters
}

// Parameters are the plugin parameters the renderer understands.
type Parameters struct {
	ValuesFiles    []string
	HelmParameters map[string]string
	Values         string
	Images         []string
}

var digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ReadEnvironment reads and validates Argo CD's environment.
func ReadEnvironment(lookup LookupEnv) (Environment, error) {
	get := func(name string) string { v, _ := lookup(name); return strings.TrimSpace(v) }
	env := Environment{
		AppName:      get(EnvAppName),
		AppNamespace: get(EnvAppNamespace),
		Revision:     get(EnvAppRevision),
		SourcePath:   get(EnvAppSourcePath),
		Digest:       get(EnvDigest),
		Version:      get(EnvVersion),
		KubeVersion:  get(EnvKubeVersion),
	}
	if env.Digest != "" && !digestPattern.MatchString(env.Digest) {
		return Environment{}, fmt.Errorf("%s %q is not a digest: set the Application's plugin env STAGECOACH_DIGEST to sha256:<64 lower-case hex digits>", EnvDigest, env.Digest)
	}
	if env.Version == "" {
		env.Version = env.Digest
	}
	if v := get(EnvKubeAPIVersion); v != "" {
		env.APIVersions = strings.Split(v, ",")
	}
	params, err := readParameters(lookup)
	if err != nil {
		return Environment{}, err
	}
	env.Params = params
	return env, nil
}

// parameter is one entry of ARGOCD_APP_PARAMETERS (Argo CD's ApplicationSourcePluginParameter).
type parameter struct {
	Name   string            `json:"name"`
	String *string           `json:"string,omitempty"`
	Array  []string          `json:"array,omitempty"`
	Map    map[string]string `json:"map,omitempty"`
}

// readParameters reads ARGOCD_APP_PARAMETERS and falls back to the PARAM_* variables when it is
// absent (e.g. when the plugin is run by hand). PARAM_* cannot carry a map (its keys arrive
// upper-cased), so helm-parameters is only read from ARGOCD_APP_PARAMETERS.
func readParameters(lookup LookupEnv) (Parameters, error) {
	raw, ok := lookup(EnvAppParameters)
	if !ok || strings.TrimSpace(raw) == "" {
		return readParamVars(lookup), nil
	}
	var list []parameter
	if err := json.Unmarshal([]byte(raw), &list); err != nil {
		return Parameters{}, fmt.Errorf("failed to parse %s as a JSON array of plugin parameters: %w", EnvAppParameters, err)
	}
	var p Parameters
	for _, param := range list {
		kind := func(want string) error {
			return fmt.Errorf("plugin parameter %q must be given as `%s:` in spec.source.plugin.parameters", param.Name, want)
		}
		switch param.Name {
		case ParamValuesFiles:
			if param.Array == nil && param.String != nil {
				return Parameters{}, kind("array")
			}
			p.ValuesFiles = param.Array
		case ParamImages:
			if param.Array == nil && param.String != nil {
				return Parameters{}, kind("array")
			}
			p.Images = param.Array
		case ParamHelmParameters:
			if param.Map == nil && (param.String != nil || param.Array != nil) {
				return Parameters{}, kind("map")
			}
			p.HelmParameters = param.Map
		case ParamValues:
			if param.String == nil && (param.Array != nil || param.Map != nil) {
				return Parameters{}, kind("string")
			}
			if param.String != nil {
				p.Values = *param.String
			}
		}
	}
	return p, nil
}

func readParamVars(lookup LookupEnv) Parameters {
	var p Parameters
	p.Values, _ = lookup(paramVar(ParamValues))
	p.ValuesFiles = readParamArray(lookup, ParamValuesFiles)
	p.Images = readParamArray(lookup, ParamImages)
	return p
}

func readParamArray(lookup LookupEnv, name string) []string {
	var out []string
	for i := 0; ; i++ {
		v, ok := lookup(paramVar(name) + "_" + strconv.Itoa(i))
		if !ok {
			return out
		}
		out = append(out, v)
	}
}

var paramVarUnsafe = regexp.MustCompile(`[^A-Z0-9_]`)

// paramVar is the PARAM_* name Argo CD derives from a parameter name.
func paramVar(name string) string {
	return "PARAM_" + paramVarUnsafe.ReplaceAllString(strings.ToUpper(name), "_")
}
