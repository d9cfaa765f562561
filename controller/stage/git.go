package stage

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller/promotion"
	"github.com/stagecoach-dev/stagecoach/internal/authz"
)

// checkGitPromotion judges a Stage that promotes by commit (spec.promotion.git). Who may push
// through it: the controller pushes with the credentials, signs with the key and opens and merges
// pull requests with the forge token of Secrets in the Stage's namespace only as the Stage's
// author, when they may read those Secrets themselves (and so could do all that with them
// anyway); a Stage without spec.author that names such a Secret pushes nothing.
// What runs: the applier must sync that repository's branch, or what is pushed would never run.
func (r *Reconciler) checkGitPromotion(ctx context.Context, stage *stagecoachv1.Stage, v *applierVerdict) error {
	if !v.ready {
		return nil
	}
	spec := stage.Spec.Promotion.Git
	if problem := syncsBranch(v.obj, stage.Spec.ApplyRef.Source, spec); problem != "" {
		v.ready, v.reason, v.stalled = false, stagecoachv1.ReasonApplierNotOnBranch, true
		v.message = fmt.Sprintf("%s %s: Stagecoach pushes to branch %s of %s (spec.promotion.git), so what it pushes would never run; point the applier at that branch, or fix spec.promotion.git",
			v.gvk.Kind, describeObj(v.obj), spec.Branch, spec.URL) + " (" + problem + ")"
		return nil
	}
	for _, e := range spec.Set {
		if _, err := promotion.RenderValue(e.Value, stage.Name, &stagecoachv1.VersionReference{Digest: sampleDigest, Tag: "v0.0.0"}); e.Key != "" && err != nil {
			v.ready, v.reason, v.stalled = false, stagecoachv1.ReasonGitWriteFailed, true
			v.message = fmt.Sprintf("spec.promotion.git.set %s: %v", e.Path, err)
			return nil
		}
	}
	var secrets []string
	refs := []*stagecoachv1.LocalObjectReference{spec.SecretRef, spec.SigningKeyRef}
	if spec.PullRequest != nil {
		refs = append(refs, &spec.PullRequest.TokenSecretRef)
	}
	for _, ref := range refs {
		if ref != nil && !slices.Contains(secrets, ref.Name) {
			secrets = append(secrets, ref.Name)
		}
	}
	for _, name := range secrets {
		refusal, err := r.secrets.MayRead(ctx, stage, name, "spec.promotion.git")
		if err != nil {
			return err
		}
		if refusal != nil {
			// AuthorMissing waits for a person to name an author; a right granted counts at the
			// next look.
			v.ready, v.reason, v.retry = false, refusal.Reason, refusal.Reason == stagecoachv1.ReasonAuthorForbidden
			v.message = refusal.Message
			return nil
		}
	}
	v.git = spec
	v.message = fmt.Sprintf("%s syncs branch %s of %s, where Stagecoach commits each promotion", describeObj(v.obj), spec.Branch, spec.URL)
	return nil
}

// authorMayRead says why the controller may not fetch a Git source (source.git, the GitRepository
// it follows, upstreamRecords.gitRepository) with a credentials Secret, or "": only as the Stage's
// author, when they may get it themselves (a SubjectAccessReview), since whoever sets the source
// sends the credentials to the URL it names.
func (r *Reconciler) authorMayRead(ctx context.Context, stage *stagecoachv1.Stage, secret, field string) (*authz.Refusal, error) {
	return r.secrets.MayRead(ctx, stage, secret, field)
}

// upstreamCommit says whether a commit a Stage's upstream records offer is on a branch of its
// spec.source.upstreamRecords.gitRepository (credentials as far as its author may: authorMayRead).
func (r *Reconciler) upstreamCommit(ctx context.Context, stage *stagecoachv1.Stage, digest string) (string, error) {
	return r.GitSource.HasCommit(ctx, stage, stage.Spec.Source.UpstreamRecords.GitRepository, "spec.source.upstreamRecords.gitRepository", digest)
}

// sampleDigest renders the value templates when a Stage is checked, before any version exists.
const sampleDigest = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

func describeObj(obj *unstructured.Unstructured) string {
	return fmt.Sprintf("'%s/%s'", obj.GetNamespace(), obj.GetName())
}

// syncsBranch says why obj does not sync branch of the repository at url ("" when it does): an
// Argo CD Application's promoted Git source (applyRef.source of a multi-source one) or a Flux
// GitRepository following the branch (no commit, tag or semver pinned beside it).
func syncsBranch(obj *unstructured.Unstructured, source string, spec *stagecoachv1.GitPromotion) string {
	str := func(m map[string]any, path ...string) string {
		s, _, _ := unstructured.NestedString(m, path...)
		return s
	}
	var url, revision string
	switch obj.GetKind() {
	case "Application":
		src, found := applicationSource(obj, source)
		if !found {
			return "it has no source named by spec.applyRef.source"
		}
		if _, plugin := src["plugin"]; plugin || str(src, "chart") != "" {
			return "its source is rendered by a plugin or is a chart: use a plain Git source, whose commits are what Argo CD syncs"
		}
		url, revision = str(src, "repoURL"), strings.TrimPrefix(str(src, "targetRevision"), "refs/heads/")
		if revision == "" {
			revision = "HEAD"
		}
	case "GitRepository":
		spec := obj.Object["spec"]
		m, _ := spec.(map[string]any)
		url, revision = str(m, "url"), str(m, "ref", "branch")
		for _, pinned := range []string{"commit", "tag", "semver", "name"} {
			if v := str(m, "ref", pinned); v != "" {
				return fmt.Sprintf("its spec.ref.%s is %q: remove it, so that it follows the branch", pinned, v)
			}
		}
	default:
		return "it is not an Argo CD Application or a Flux GitRepository"
	}
	// Compared as written, as the application-create-guard policy compares them.
	if url != spec.URL {
		return fmt.Sprintf("it fetches %s", url)
	}
	if revision != spec.Branch {
		return fmt.Sprintf("it follows %q", revision)
	}
	return ""
}

// applicationSource is the Application's source that Stagecoach promotes: spec.source, or the
// one of spec.sources named (or of the repoURL) source.
func applicationSource(obj *unstructured.Unstructured, source string) (map[string]any, bool) {
	if src, ok, _ := unstructured.NestedMap(obj.Object, "spec", "source"); ok && source == "" {
		return src, true
	}
	sources, _, _ := unstructured.NestedSlice(obj.Object, "spec", "sources")
	for _, s := range sources {
		m, _ := s.(map[string]any)
		if m != nil && (m["name"] == source || m["repoURL"] == source) {
			return m, true
		}
	}
	return nil, false
}
