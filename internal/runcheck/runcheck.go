// Package runcheck runs a Stage's run checks (checks[].run): it renders the check's object
// template for the version, creates the object in the Stage's namespace as the Stage's author
// (impersonated, so that RBAC and admission judge the author), owned by the Promotion, reads it until its completion rules decide, and keeps
// only the newest runs of each check. Creating an object is a way to change what runs in the
// cluster, so the controller does it only as far as the author could have done it themselves.
package runcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/applier"
	"github.com/stagecoach-dev/stagecoach/internal/authz"
	"github.com/stagecoach-dev/stagecoach/internal/check"
	"github.com/stagecoach-dev/stagecoach/internal/subst"
)

// VerdictAnnotation on a run object is the verdict the controller read from it (passed, failed,
// timed-out), or abandoned for a run whose attempt ended without one (a restart): only runs with
// one are pruned.
const VerdictAnnotation = "stagecoach.dev/check-verdict"

// DefaultKeep is how many runs of a check are kept without spec keep.
const DefaultKeep = 3

// poll is how often a run is read while it has not completed.
const poll = 2 * time.Second

// maxGenerateName keeps generated names within 63 characters (a Job's name becomes a label value
// of its pods), with room for the five random characters the API server adds.
const maxGenerateName = 57

// Runs creates and judges run checks' objects (check.RunObjects).
type Runs struct {
	// Client creates, patches and deletes runs and asks SubjectAccessReviews; its RESTMapper maps
	// a template's kind to its resource.
	Client client.Client
	// Reader reads runs live: a run's kind is any kind, which the manager's cache does not watch.
	Reader client.Reader
	// Authors answers whether a Stage's author may create the run's kind.
	Authors *authz.Reviews
	// AsAuthor creates each run as the Stage's author (impersonation): a run is the author's act,
	// and admission must judge the author, not the controller (a Promotion created as a run names
	// its real requester; a kind whose admission trusts its creator trusts the author).
	AsAuthor *authz.Impersonator
}

var _ check.RunObjects = (*Runs)(nil)

// templateData is what a template's strings may use.
type templateData struct {
	Version, Digest, Revision, Stage, Namespace, Environment, Service, Promotion string
}

// Run creates the check's run for in and waits until its completion rules decide or timeout
// passes. Every attempt creates its own run and reads only that one: a run found by its labels is
// never taken as this attempt's, because anyone who may create the kind (and write its status)
// could make one that looks finished. A run of this Promotion's check left unjudged (the
// controller restarted while it ran; checks run again after a restart) is marked abandoned, so
// that pruning removes it.
func (r *Runs) Run(ctx context.Context, name string, spec *stagecoachv1.RunCheck, in check.Input, attempt int, timeout time.Duration) check.Outcome {
	permanent := func(format string, args ...any) check.Outcome {
		return check.Outcome{Permanent: true, Message: fmt.Sprintf(format, args...)}
	}
	obj, err := Render(spec.Template.Raw, in)
	if err != nil {
		return permanent("its run template does not render: %v; fix the check's run.template", err)
	}
	gvk := obj.GroupVersionKind()
	if err := validate(obj, in.Namespace); err != nil {
		return permanent("%v", err)
	}
	if errs := validation.IsValidLabelValue(name); len(errs) > 0 {
		return permanent("its name %q cannot label its runs (%s): rename the check", name, strings.Join(errs, "; "))
	}
	mapping, err := r.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return permanent("the cluster serves no %s of apiVersion %s: install its CRD, or fix the run template's apiVersion and kind",
				gvk.Kind, gvk.GroupVersion())
		}
		return check.Outcome{Message: fmt.Sprintf("failed to look up %s of apiVersion %s: %v", gvk.Kind, gvk.GroupVersion(), err)}
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return permanent("%s is cluster-scoped: a run is created in the Stage's namespace (%s), so its kind must be namespaced",
			gvk.Kind, in.Namespace)
	}
	rules := spec.Completion
	if rules == nil {
		rules = DefaultRules(gvk.GroupKind())
	}
	if rules == nil {
		return permanent("%s has no default completion rules (only batch Jobs and Tekton PipelineRuns and TaskRuns do): set the check's run.completion", gvk.Kind)
	}
	if out, ok := r.mayCreate(ctx, in, mapping.Resource); !ok {
		return out
	}

	boundJob(obj, timeout)
	if attempt == 1 {
		r.abandon(ctx, gvk, name, in)
	}
	deadline := time.Now().Add(timeout)
	run, err := r.create(ctx, obj, name, in, mapping.Resource)
	if err != nil {
		return check.Outcome{Message: err.Error(), Permanent: apierrors.IsForbidden(err) || apierrors.IsInvalid(err)}
	}
	out := r.wait(ctx, run, rules, deadline, timeout)
	r.prune(ctx, gvk, name, in, keepOf(spec), run.GetUID())
	return out
}

// boundJob gives a batch Job whose template sets no spec.activeDeadlineSeconds the check's
// timeout as its deadline: a run the check stopped reading must not keep running (the Job
// controller then fails it and stops its pods). Other kinds say their own deadline in their
// templates (a Tekton PipelineRun's spec.timeouts).
func boundJob(obj *unstructured.Unstructured, timeout time.Duration) {
	if gvk := obj.GroupVersionKind(); gvk.Group != "batch" || gvk.Kind != "Job" || timeout <= 0 {
		return
	}
	if _, set, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "activeDeadlineSeconds"); set {
		return
	}
	seconds := int64((timeout + time.Second - 1) / time.Second)
	_ = unstructured.SetNestedField(obj.Object, seconds, "spec", "activeDeadlineSeconds")
}

func keepOf(spec *stagecoachv1.RunCheck) int {
	if spec.Keep > 0 {
		return int(spec.Keep)
	}
	return DefaultKeep
}

// Render returns the template with {{.Version}}, {{.Digest}}, {{.Revision}}, {{.Stage}},
// {{.Namespace}}, {{.Environment}}, {{.Service}} and {{.Promotion}} substituted in every string
// value (keys are not templates). An unknown name or a malformed template is an error naming
// where in the template it is.
func Render(raw []byte, in check.Input) (*unstructured.Unstructured, error) {
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("it is not a JSON object: %w", err)
	}
	revision := in.Revision
	if revision == "" {
		// A Git commit's version is sha1:<SHA>: Git tools take the bare SHA.
		revision = strings.TrimPrefix(in.Digest, "sha1:")
	}
	data := templateData{Version: in.Version, Digest: in.Digest, Revision: revision, Stage: in.Stage, Namespace: in.Namespace,
		Environment: in.Environment, Service: in.Service, Promotion: in.Promotion}
	rendered, err := renderValue(doc, "", data)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: rendered.(map[string]any)}, nil
}

func renderValue(v any, path string, data templateData) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, item := range v {
			r, err := renderValue(item, joinPath(path, k), data)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, item := range v {
			r, err := renderValue(item, fmt.Sprintf("%s[%d]", path, i), data)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case string:
		if !strings.Contains(v, "{{") {
			return v, nil
		}
		const fields = "it may use .Version, .Digest, .Revision, .Stage, .Namespace, .Environment, .Service and .Promotion"
		tmpl, err := subst.Parse(path, v, fields)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out, err := tmpl.Execute(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w (%s)", path, err, fields)
		}
		return out, nil
	default:
		return v, nil
	}
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// validate refuses a template the controller cannot create as a run: no kind, a fixed name (each
// attempt is a new object), another namespace.
func validate(obj *unstructured.Unstructured, namespace string) error {
	gvk := obj.GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		return fmt.Errorf("its run template sets no apiVersion or kind: name the kind to create, for example apiVersion: batch/v1 and kind: Job")
	}
	if obj.GetName() != "" {
		return fmt.Errorf("its run template sets metadata.name %q, but every attempt creates a new run: remove it (metadata.generateName may set a prefix)", obj.GetName())
	}
	if ns := obj.GetNamespace(); ns != "" && ns != namespace {
		return fmt.Errorf("its run template sets metadata.namespace %q, but a run is created in the Stage's namespace (%s): remove it", ns, namespace)
	}
	if len(obj.GetOwnerReferences()) > 0 || len(obj.GetFinalizers()) > 0 {
		return fmt.Errorf("its run template sets metadata.ownerReferences or finalizers: remove them (a run is owned by its Promotion)")
	}
	return nil
}

// DefaultRules are the completion rules of kinds whose completion is well known: a batch Job
// (its Complete and Failed conditions) and a Tekton PipelineRun or TaskRun (Succeeded); nil for
// every other kind.
func DefaultRules(gk schema.GroupKind) *stagecoachv1.CompletionRules {
	condition := func(succeededType, succeeded, failedType, failed string) *stagecoachv1.CompletionRules {
		key := func(t string) string { return `status.conditions.#(type=="` + t + `").status` }
		return &stagecoachv1.CompletionRules{ObservedCompletion: &stagecoachv1.ObservedCompletion{
			Succeeded: &stagecoachv1.FieldMatch{Key: key(succeededType), Value: succeeded},
			Failed:    &stagecoachv1.FieldMatch{Key: key(failedType), Value: failed}}}
	}
	switch {
	case gk == schema.GroupKind{Group: "batch", Kind: "Job"}:
		return condition("Complete", "True", "Failed", "True")
	case gk.Group == "tekton.dev" && (gk.Kind == "PipelineRun" || gk.Kind == "TaskRun"):
		return condition("Succeeded", "True", "Succeeded", "False")
	}
	return nil
}

// mayCreate asks whether the Stage's author may create the run's kind in its namespace.
func (r *Runs) mayCreate(ctx context.Context, in check.Input, resource schema.GroupVersionResource) (check.Outcome, bool) {
	if in.Author == nil {
		return check.Outcome{Permanent: true, Message: fmt.Sprintf("Stage '%s' names no spec.author, and the controller creates a run (%s) only as "+
			"whoever wrote the Stage's checks, when they may create it themselves: set spec.author.user to your user name "+
			"(kubectl auth whoami; admission checks it is you)", in.Stage, resource.GroupResource())}, false
	}
	allowed, err := r.Authors.May(ctx, r.Client, time.Now(), in.Author, "create", resource, in.Namespace, "")
	if err != nil {
		return check.Outcome{Message: err.Error()}, false
	}
	if !allowed {
		return check.Outcome{Permanent: true, Message: fmt.Sprintf("the Stage's author %s may not create %s in namespace %s, so the controller "+
			"creates no run for them: grant %s create on %s there, or have someone who may re-apply the Stage with spec.author naming them",
			authz.Describe(in.Author), resource.GroupResource(), in.Namespace, in.Author.User, resource.GroupResource())}, false
	}
	return check.Outcome{}, true
}

func runLabels(name string, in check.Input) map[string]string {
	return map[string]string{
		stagecoachv1.PromotionStageLabel: in.Stage,
		stagecoachv1.RunCheckLabel:       name,
		stagecoachv1.RunPhaseLabel:       string(in.Phase),
	}
}

// list returns the check's runs of this phase (every Promotion's, or one's when uid is set),
// newest first.
func (r *Runs) list(ctx context.Context, gvk schema.GroupVersionKind, name string, in check.Input, uid string) ([]unstructured.Unstructured, error) {
	selector := runLabels(name, in)
	if uid != "" {
		selector[stagecoachv1.RunPromotionLabel] = uid
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := r.Reader.List(ctx, list, client.InNamespace(in.Namespace), client.MatchingLabels(selector)); err != nil {
		return nil, err
	}
	runs := list.Items
	slices.SortFunc(runs, func(a, b unstructured.Unstructured) int {
		if c := b.GetCreationTimestamp().Compare(a.GetCreationTimestamp().Time); c != 0 {
			return c
		}
		return strings.Compare(b.GetName(), a.GetName())
	})
	return runs, nil
}

// abandon marks this Promotion's runs of the check that no verdict was read from (made before a
// restart) as abandoned: their attempt is over, and pruning may delete them like judged ones.
func (r *Runs) abandon(ctx context.Context, gvk schema.GroupVersionKind, name string, in check.Input) {
	if in.PromotionUID == "" {
		return
	}
	runs, err := r.list(ctx, gvk, name, in, in.PromotionUID)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "failed to list a check's earlier runs", "check", name)
		return
	}
	for i := range runs {
		if _, judged := runs[i].GetAnnotations()[VerdictAnnotation]; !judged && runs[i].GetDeletionTimestamp() == nil {
			r.judge(ctx, &runs[i], "abandoned")
		}
	}
}

// create creates the run: generated name, the Stage's namespace, labels, owned by the Promotion.
func (r *Runs) create(ctx context.Context, obj *unstructured.Unstructured, name string, in check.Input, resource schema.GroupVersionResource) (*unstructured.Unstructured, error) {
	obj.SetNamespace(in.Namespace)
	prefix := obj.GetGenerateName()
	if prefix == "" {
		prefix = strings.ToLower(strings.ReplaceAll(in.Stage+"-"+name+"-", "_", "-"))
		prefix = strings.ReplaceAll(prefix, ".", "-")
	}
	if len(prefix) > maxGenerateName {
		prefix = prefix[:maxGenerateName]
	}
	obj.SetGenerateName(prefix)
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range runLabels(name, in) {
		labels[k] = v
	}
	if in.PromotionUID != "" {
		labels[stagecoachv1.RunPromotionLabel] = in.PromotionUID
		isController := true
		obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: stagecoachv1.GroupVersion.String(), Kind: "Promotion",
			Name: in.Promotion, UID: types.UID(in.PromotionUID), Controller: &isController}})
	}
	obj.SetLabels(labels)
	asAuthor, err := r.AsAuthor.AsAuthor(in.Author)
	if err != nil {
		return nil, err
	}
	if err := asAuthor.Create(ctx, obj, client.FieldOwner(applier.FieldManager)); err != nil {
		switch {
		case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "cannot impersonate"):
			return nil, fmt.Errorf("the controller may not act as the Stage's author %s to create the %s run (%w): a run is created as its author; "+
				"grant the controller's service account impersonate on users and groups (the install's ClusterRole has it)",
				authz.Describe(in.Author), obj.GetKind(), err)
		case apierrors.IsForbidden(err), apierrors.IsInvalid(err):
			// RBAC or an admission policy refused the author: the API server's words say which.
			return nil, fmt.Errorf("the %s run, created as the Stage's author %s in namespace %s, was refused: %w",
				obj.GetKind(), authz.Describe(in.Author), in.Namespace, err)
		}
		return nil, fmt.Errorf("failed to create the %s run in namespace %s: %w", obj.GetKind(), in.Namespace, err)
	}
	ctrl.LoggerFrom(ctx).Info("created a check's run", "kind", obj.GetKind(), "name", obj.GetName())
	return obj, nil
}

// wait reads the run until its rules decide, it is deleted, or the deadline passes.
func (r *Runs) wait(ctx context.Context, run *unstructured.Unstructured, rules *stagecoachv1.CompletionRules, deadline time.Time, timeout time.Duration) check.Outcome {
	described := fmt.Sprintf("%s %s/%s", run.GetKind(), run.GetNamespace(), run.GetName())
	key := client.ObjectKeyFromObject(run)
	last := "not read yet"
	for {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(run.GroupVersionKind())
		err := r.Reader.Get(ctx, key, live)
		switch {
		case apierrors.IsNotFound(err):
			return check.Outcome{Message: fmt.Sprintf("run %s was deleted before it completed", described)}
		case err != nil:
			last = fmt.Sprintf("failed to read it: %v", err)
		default:
			obs := applier.ObserveRun(described, rules, live)
			switch obs.Phase {
			case applier.Landed:
				r.judge(ctx, live, "passed")
				return check.Outcome{Passed: true, Message: obs.Message}
			case applier.Failed:
				r.judge(ctx, live, "failed")
				return check.Outcome{Message: obs.Message}
			}
			last = obs.Message
		}
		wait := min(poll, time.Until(deadline))
		if wait <= 0 {
			if err == nil {
				r.judge(ctx, live, "timed-out")
			}
			return check.Outcome{Message: fmt.Sprintf("run %s did not complete within %s: %s", described, timeout, last)}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return check.Outcome{Message: fmt.Sprintf("run %s: %s", described, last)}
		case <-t.C:
		}
	}
}

// judge marks the run with the verdict read from it; only marked runs are pruned.
func (r *Runs) judge(ctx context.Context, run *unstructured.Unstructured, verdict string) {
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, VerdictAnnotation, verdict)
	mark := &unstructured.Unstructured{}
	mark.SetGroupVersionKind(run.GroupVersionKind())
	mark.SetNamespace(run.GetNamespace())
	mark.SetName(run.GetName())
	if err := r.Client.Patch(ctx, mark, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
		ctrl.LoggerFrom(ctx).Error(err, "failed to mark a check's run with its verdict", "kind", run.GetKind(), "name", run.GetName())
	}
}

// prune deletes the check's judged runs of this phase beyond the newest keep (the current one
// always stays); a run still being read by another Promotion is never deleted.
func (r *Runs) prune(ctx context.Context, gvk schema.GroupVersionKind, name string, in check.Input, keep int, current types.UID) {
	runs, err := r.list(ctx, gvk, name, in, "")
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "failed to list a check's runs to prune them", "check", name)
		return
	}
	kept := 0
	for i := range runs {
		run := &runs[i]
		if run.GetUID() == current || kept < keep {
			kept++
			continue
		}
		if _, judged := run.GetAnnotations()[VerdictAnnotation]; !judged || run.GetDeletionTimestamp() != nil {
			continue
		}
		if err := r.Client.Delete(ctx, run, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
			ctrl.LoggerFrom(ctx).Error(err, "failed to delete an old run of a check", "kind", run.GetKind(), "name", run.GetName())
		}
	}
}
