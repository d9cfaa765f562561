package stage

import (
	"context"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/applier"
)

// chooseEngine picks the applier of a readable, labelled object: a built-in one (with the Stage's
// completion rules on top when it has any), or the generic one of spec.applyRef.set. A kind that
// Stagecoach cannot apply turns the verdict not ready: a Stage that can do nothing is never Ready.
func (r *Reconciler) chooseEngine(ctx context.Context, stage *stagecoachv1.Stage, through *unstructured.Unstructured, v *applierVerdict) error {
	ref := stage.Spec.ApplyRef
	described := fmt.Sprintf("%s '%s/%s'", ref.Kind, stage.Namespace, ref.Name)
	opts := applier.Options{Image: ref.Image, ValuesKey: ref.ValuesKey, Source: ref.Source, Through: through, Applying: v.applying}
	offers, known := r.versionKindOf(ctx, stage)
	opts.Commits = known && offers == applier.GitCommits
	v.commits = opts.Commits
	byCommit := stage.Spec.Promotion != nil && stage.Spec.Promotion.Git != nil
	if byCommit {
		// Promotion by commit: whatever the version, the applier runs the commits pushed, and is
		// only read (git.go).
		opts.Commits, known = true, false
	}
	mismatch := func(takes applier.VersionKind) bool {
		return known && versionKindMismatch(stage, offers, takes, described, v)
	}
	switch app := applier.For(v.gvk.GroupKind(), opts); {
	case app != nil && mismatch(app.Takes(v.obj)):
		return nil
	case v.gvk.GroupKind() == applicationSetGVK.GroupKind() && mismatch(applier.OCIDigests):
		return nil
	case app != nil:
		if stage.Spec.Completion != nil {
			app = applier.WithCompletion{Applier: app, Stage: stage.Name, Rules: stage.Spec.Completion}
		}
		v.engine = app
		v.checkEngine(stage)
		if byCommit {
			return r.checkGitPromotion(ctx, stage, v) // git.go
		}
		if err := r.checkGenerator(ctx, stage, v); err != nil { // an Application's ApplicationSet (appset.go)
			return err
		}
		return r.checkChart(ctx, stage, v) // a chart given by version (chart.go)
	case v.gvk.GroupKind() == applicationSetGVK.GroupKind():
		// A fleet: its Applications are promoted wave by wave (fleet.go).
		return r.chooseFleet(ctx, stage, v)
	case ref.Builtin():
		v.ready, v.reason, v.stalled = false, stagecoachv1.ReasonApplierNotSupported, true
		v.message = fmt.Sprintf("%s cannot be promoted: Stagecoach does not apply kind %s in this version; point spec.applyRef at another kind",
			described, ref.Kind)
		return nil
	case len(ref.Set) == 0:
		v.ready, v.reason, v.stalled = false, stagecoachv1.ReasonApplierNotSupported, true
		v.message = fmt.Sprintf("%s has no built-in applier: list the fields that carry the version in spec.applyRef.set", described)
		return nil
	}
	repo, problem := r.repositoryOf(ctx, stage)
	generic := applier.Generic{Stage: stage.Name, Set: ref.Set, Completion: stage.Spec.Completion, Repository: repo}
	v.engine, v.generic = generic, true
	if problem != "" && generic.RendersRepository() {
		v.ready, v.reason, v.message = false, stagecoachv1.ReasonUpstreamRepositoryMismatch, problem
		return nil
	}
	v.checkEngine(stage)
	if !v.ready {
		v.stalled = v.reason == stagecoachv1.ReasonApplierSetInvalid
		return nil
	}
	problem, err := r.schemas.check(ctx, r.Client, stage, v.obj, generic)
	if err != nil {
		return err
	}
	if problem != "" {
		v.ready, v.reason, v.stalled = false, stagecoachv1.ReasonApplierSetInvalid, true
		v.message = fmt.Sprintf("%s cannot take spec.applyRef.set: %s; fix spec.applyRef.set", described, problem)
		return nil
	}
	v.message = fmt.Sprintf("%s is readable and labelled for this Stage; spec.applyRef.set applies to it", described)
	return nil
}

// schemaChecks remembers, per Stage, whether its spec.applyRef.set fits the applier's schema, so
// that the dry run is made once per change of the Stage or of the object, not on every reconcile.
type schemaChecks struct {
	mu   sync.Mutex
	seen map[types.NamespacedName]schemaCheck
}

type schemaCheck struct {
	stageGeneration  int64
	objectUID        types.UID
	objectGeneration int64
	problem          string
}

// check server-side applies the fields for a sample version as a strict dry run: the API server
// refuses a path its schema does not have, before any Promotion runs.
func (s *schemaChecks) check(ctx context.Context, c client.Client, stage *stagecoachv1.Stage, obj *unstructured.Unstructured, g applier.Generic) (string, error) {
	key := types.NamespacedName{Namespace: stage.Namespace, Name: stage.Name}
	want := schemaCheck{stageGeneration: stage.Generation, objectUID: obj.GetUID(), objectGeneration: obj.GetGeneration()}
	s.mu.Lock()
	if s.seen == nil {
		s.seen = map[types.NamespacedName]schemaCheck{}
	}
	got, ok := s.seen[key]
	s.mu.Unlock()
	if ok && got.stageGeneration == want.stageGeneration && got.objectUID == want.objectUID && got.objectGeneration == want.objectGeneration {
		return got.problem, nil
	}
	cfg, err := g.ApplyConfiguration(obj, applier.Version{Digest: applier.SampleDigest, Tag: "v0.0.0"})
	if err != nil {
		want.problem = err.Error()
	} else if err := c.Patch(ctx, cfg, client.Apply, client.FieldOwner(applier.FieldManager), client.ForceOwnership,
		client.FieldValidation("Strict"), client.DryRunAll); err != nil {
		switch {
		case apierrors.IsBadRequest(err), apierrors.IsInvalid(err),
			// The API server answers an apply of an undeclared field as an internal error.
			apierrors.IsInternalError(err) && strings.Contains(err.Error(), "not declared in schema"):
			want.problem = "the API server refuses it: " + strings.TrimSpace(err.Error())
		case apierrors.IsForbidden(err):
			want.problem = "the controller may not patch it: grant its service account patch on " + obj.GroupVersionKind().GroupKind().String()
		default:
			return "", fmt.Errorf("failed to check spec.applyRef.set of Stage %q against %s %q: %w", stage.Name, obj.GetKind(), obj.GetName(), err)
		}
	}
	s.mu.Lock()
	s.seen[key] = want
	s.mu.Unlock()
	return want.problem, nil
}

// forget drops a deleted Stage's remembered check.
func (s *schemaChecks) forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.seen, key)
}

// versionKindMismatch turns the verdict not ready when the applier takes another kind of version
// than the Stage's source offers (offers: versionKindOf) (a Flux GitRepository for OCI digests, an OCIRepository for Git
// commits): every promote would fail at the write.
func versionKindMismatch(stage *stagecoachv1.Stage, offers, takes applier.VersionKind, described string, v *applierVerdict) bool {
	if takes == applier.AnyVersion || takes == offers {
		return false
	}
	v.ready, v.reason, v.stalled = false, stagecoachv1.ReasonVersionKindMismatch, true
	fix := "point spec.applyRef at an applier of Git commits (a Flux GitRepository, an Argo CD Application on a Git source, or any kind through spec.applyRef.set with {{ .Revision }})"
	if offers == applier.OCIDigests {
		fix = "point spec.applyRef at an applier of OCI digests, or take versions from a git source"
	}
	v.message = fmt.Sprintf("Stage %s takes %s from its source, and %s takes %s: %s", stage.Name, offers, described, takes, fix)
	return true
}
