package cmp

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Options say what to render and how.
type Options struct {
	// Dir is the app directory; Argo CD runs the plugin in it.
	Dir string
	// RepoRoot bounds every file read. Empty derives it (see locate).
	RepoRoot string
	// Env reads Argo CD's environment (os.LookupEnv in the binary); nil reads nothing.
	Env LookupEnv
	// VerifyDigest, when set, checks the signature of each declared image at the promoted digest
	// (imageRef is "<repository>@sha256:...") before anything is rendered. nil renders unverified.
	VerifyDigest func(ctx context.Context, imageRef string) error
	// AllowUnverified is the explicit opt-out (EnvAllowUnverified): with VerifyDigest set and no
	// digest, render the app as it is instead of refusing.
	AllowUnverified bool
}

// EnvAllowUnverified, set to true in the plugin's sidecar, lets it render without verification
// where verification cannot happen (no digest yet, no keys). An Application cannot set it: Argo CD
// prefixes the plugin env an Application sets with ARGOCD_ENV_.
const EnvAllowUnverified = "STAGECOACH_ALLOW_UNVERIFIED"

// Generate renders the app and writes it to w only when the whole render succeeded, so Argo CD
// never reads half an app.
func Generate(ctx context.Context, opts Options, w io.Writer) error {
	out, err := Render(ctx, opts)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// Render renders the app directory to a YAML stream of Kubernetes objects: images declared in
// .stagecoach.yaml (or the images parameter) pinned to STAGECOACH_DIGEST, every object annotated
// with stagecoach.dev/stage and stagecoach.dev/version, in a deterministic order.
func Render(ctx context.Context, opts Options) ([]byte, error) {
	if opts.Env == nil {
		opts.Env = func(string) (string, bool) { return "", false }
	}
	env, err := ReadEnvironment(opts.Env)
	if err != nil {
		return nil, err
	}
	appDir, root, err := locate(opts.Dir, opts.RepoRoot, env.SourcePath)
	if err != nil {
		return nil, err
	}
	rel := relTo(root, appDir)
	if err := checkSymlinks(appDir, root); err != nil {
		return nil, err
	}
	cfg, err := readAppConfig(appDir, relTo(root, filepath.Join(appDir, ConfigFileName)))
	if err != nil {
		return nil, err
	}
	declared, err := declaredImages(append(append([]string{}, cfg.Images...), env.Params.Images...))
	if err != nil {
		return nil, fmt.Errorf("images of %s: %w", rel, err)
	}
	if env.Digest != "" && len(declared) == 0 {
		return nil, fmt.Errorf("%s is %s but %s declares no images to pin it to: list the repositories under images", EnvDigest, env.Digest, relTo(root, filepath.Join(appDir, ConfigFileName)))
	}
	if opts.VerifyDigest != nil && env.Digest == "" && !opts.AllowUnverified {
		// Without a digest nothing pins the images, so whatever the manifests name would run.
		return nil, fmt.Errorf("verification is configured but %s is empty: refusing to render unverified; set the Application's plugin env STAGECOACH_DIGEST (the controller does when it promotes) or, to render without it, set %s=true in the plugin's sidecar", EnvDigest, EnvAllowUnverified)
	}
	if err := verify(ctx, opts.VerifyDigest, declared, env.Digest); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var docs []document
	switch renderer := detect(cfg.Renderer, appDir); renderer {
	case RendererHelm:
		docs, err = renderHelm(appDir, root, env)
	case RendererKustomize:
		docs, err = renderKustomize(appDir, root)
	default:
		docs, err = renderPlain(appDir, root)
	}
	if err != nil {
		return nil, err
	}
	pinned := map[string]bool{}
	for _, d := range docs {
		if env.Digest != "" {
			if err := pinImages(d.node, declared, env.Digest, pinned); err != nil {
				return nil, fmt.Errorf("%s: %w", d.source, err)
			}
		}
		stamp(d.node, cfg.Stage, env.Version)
	}
	if env.Digest != "" {
		if missing := unpinned(declared, pinned); len(missing) > 0 {
			return nil, fmt.Errorf("%s renders no container using %s: pinning %s would change nothing; fix the images list in %s or the manifests", rel, strings.Join(missing, ", "), env.Digest, ConfigFileName)
		}
	}
	return encode(docs)
}

// verify asks the verifier about every declared image at the digest, in a stable order.
func verify(ctx context.Context, verifyDigest func(context.Context, string) error, declared map[string]string, digest string) error {
	if verifyDigest == nil || digest == "" {
		return nil
	}
	refs := make([]string, 0, len(declared))
	for _, name := range declared {
		ref, _ := parseImage(name)
		refs = append(refs, ref.repository+"@"+digest)
	}
	sort.Strings(refs)
	for _, ref := range refs {
		if err := verifyDigest(ctx, ref); err != nil {
			return fmt.Errorf("refusing to render %s: its signature does not verify: %s", ref, oneLine(err.Error()))
		}
	}
	return nil
}

func unpinned(declared map[string]string, pinned map[string]bool) []string {
	var missing []string
	for _, name := range declared {
		if !pinned[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	return missing
}

// detect picks the renderer: the one .stagecoach.yaml names, else a chart, else a
// kustomization, else plain manifests.
func detect(configured Renderer, appDir string) Renderer {
	if configured != "" {
		return configured
	}
	if _, err := os.Stat(filepath.Join(appDir, "Chart.yaml")); err == nil {
		return RendererHelm
	}
	if kustomizationFile(appDir) != "" {
		return RendererKustomize
	}
	return RendererPlain
}
