package stage

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller/promotion"
	"github.com/stagecoach-dev/stagecoach/internal/applier"
)

// The applier step of a Stage's reconcile: resolve spec.applyRef, tell whether the Stage may
// apply through it (claim, scope, watch rights, label, author), and put the verdict on the Stage.

// applierVerdict is what checking the applier found, as it will appear on the Stage.
type applierVerdict struct {
	ready   bool
	reason  string
	message string
	// stalled means only a change to the Stage's spec can help.
	stalled bool
	// retry means the cause may go away without any event reaching us (a CRD installed, RBAC granted).
	retry   bool
	applier *stagecoachv1.ObjectReference

	gvk schema.GroupVersionKind
	obj *unstructured.Unstructured
	// engine is the built-in or generic applier of one object; fleet an ApplicationSet's
	// Applications with waves (fleet.go). At most one is set.
	engine applier.Applier
	fleet  *promotion.Fleet
	// mediated is nil when unknown (no built-in applier), else whether only the digest decides.
	unmediated *applier.Problem
	// generic is set for a kind without a built-in applier (spec.applyRef.set).
	generic bool
	// byVersion says how a chart given by version is checked (chart.go); recheck is when
	// to check the running version's tag again (0: no need).
	byVersion string
	recheck   time.Duration
	// applying are the Kustomizations labelled for the Stage that apply its GitRepository's
	// artifact (when applyRef.kustomization names none).
	applying []*unstructured.Unstructured
	// git is set when the Stage promotes by commit to the branch the applier syncs.
	git *stagecoachv1.GitPromotion
	// commits: the Stage's versions are Git commits (a git source, here or up its chain).
	commits bool
}

// checkEngine applies the engine's own rules to a readable, labelled applier.
func (v *applierVerdict) checkEngine(stage *stagecoachv1.Stage) {
	blocking, unmediated := v.engine.Validate(v.obj)
	if blocking != nil {
		v.ready, v.reason, v.message = false, blocking.Reason, blocking.Message
		if blocking.Reason == stagecoachv1.ReasonApplierMultiSource {
			// More than one source decides what runs: say so on Mediated too, not just on Ready.
			unmediated = blocking
		}
	}
	v.unmediated = unmediated
}

// rollout is how the Stage's Promotions reach what runs through this applier; nil when none can.
func (v *applierVerdict) rollout() promotion.Rollout {
	switch {
	case v.fleet != nil:
		return v.fleet
	case v.engine != nil && v.git != nil:
		return promotion.GitRollout(v.engine, *v.git)
	case v.engine != nil:
		return promotion.ApplierRollout(v.engine)
	}
	return nil
}

func (v applierVerdict) apply(stage *stagecoachv1.Stage) {
	stage.Status.Applier = v.applier
	switch {
	case v.generic:
		// What else decides what an arbitrary kind runs is not known: no Mediated either way.
		meta.RemoveStatusCondition(&stage.Status.Conditions, stagecoachv1.ConditionMediated)
	case v.unmediated != nil:
		setCondition(stage, stagecoachv1.ConditionMediated, metav1.ConditionFalse, v.unmediated.Reason, v.unmediated.Message)
	case v.rollout() == nil || !v.ready:
		meta.RemoveStatusCondition(&stage.Status.Conditions, stagecoachv1.ConditionMediated)
	case v.git != nil && v.git.Merge:
		setCondition(stage, stagecoachv1.ConditionMediated, metav1.ConditionTrue, stagecoachv1.ReasonMediated,
			fmt.Sprintf("%s '%s/%s' runs what branch %s of %s holds, and Stagecoach merges each promoted commit there; a commit by someone else on the branch freezes the Stage (protect the branch so that only Stagecoach's key may push)",
				v.gvk.Kind, stage.Namespace, stage.Spec.ApplyRef.Name, v.git.Branch, v.git.URL))
	case v.git != nil:
		// Only the files spec.promotion.git.set edits are judged: the applier syncs the whole
		// path, so a commit by someone else to any other file runs unjudged (issue 50 item 4).
		setCondition(stage, stagecoachv1.ConditionMediated, metav1.ConditionTrue, stagecoachv1.ReasonMediated,
			fmt.Sprintf("%s '%s/%s' runs what branch %s of %s holds, and Stagecoach writes the version into %s there; a commit by someone else to those files freezes the Stage, "+
				"but a commit to any other file the applier syncs runs without any gate: protect the branch so that only Stagecoach's key may push",
				v.gvk.Kind, stage.Namespace, stage.Spec.ApplyRef.Name, v.git.Branch, v.git.URL, gitFiles(v.git)))
	case v.engine != nil && v.engine.PinsTag(v.obj) && v.byVersion != "":
		setCondition(stage, stagecoachv1.ConditionMediated, metav1.ConditionTrue, stagecoachv1.ReasonMediatedByVersion, v.byVersion)
	case v.engine != nil && v.engine.PinsTag(v.obj):
		setCondition(stage, stagecoachv1.ConditionMediated, metav1.ConditionTrue, stagecoachv1.ReasonMediatedByVersion,
			fmt.Sprintf("%s '%s/%s' is given the chart version, not the digest: the engine resolves the version itself, so Stagecoach checks the digest behind it before it writes and again when it lands (a version pushed again fails the Promotion, which rolls back)",
				v.gvk.Kind, stage.Namespace, stage.Spec.ApplyRef.Name))
	default:
		promoted := "digest"
		if v.commits {
			promoted = "commit"
		}
		setCondition(stage, stagecoachv1.ConditionMediated, metav1.ConditionTrue, stagecoachv1.ReasonMediated,
			fmt.Sprintf("%s '%s/%s': only the promoted %s decides what it runs", v.gvk.Kind, stage.Namespace, stage.Spec.ApplyRef.Name, promoted))
	}
	if v.ready {
		setCondition(stage, stagecoachv1.ConditionReady, metav1.ConditionTrue, v.reason, v.message)
	} else {
		setCondition(stage, stagecoachv1.ConditionReady, metav1.ConditionFalse, v.reason, v.message)
	}
	if v.stalled {
		setCondition(stage, stagecoachv1.ConditionStalled, metav1.ConditionTrue, v.reason, v.message)
	} else {
		// A hold's Stalled comes back in the status writer's summary (summarizeHold), with its time.
		meta.RemoveStatusCondition(&stage.Status.Conditions, stagecoachv1.ConditionStalled)
	}
}

// checkApplier resolves spec.applyRef and tells whether the Stage may apply through it. Errors
// are transient failures (the API server did not answer); everything a person must fix is a verdict.
func (r *Reconciler) checkApplier(ctx context.Context, stage *stagecoachv1.Stage) (applierVerdict, error) {
	ref := stage.Spec.ApplyRef
	gvk, err := ref.GroupVersionKind()
	if err != nil {
		return applierVerdict{reason: stagecoachv1.ReasonApplierUnreadable, stalled: true,
			message: fmt.Sprintf("Stage '%s' names applyRef %s '%s' without a usable apiVersion (%v): set spec.applyRef.apiVersion",
				stage.Name, ref.Kind, ref.Name, err)}, nil
	}
	described := fmt.Sprintf("%s '%s/%s'", ref.Kind, stage.Namespace, ref.Name)

	// The oldest Stage naming an applier holds it; the others wait until it lets go.
	holder, err := r.claimHolder(ctx, stage)
	if err != nil {
		return applierVerdict{}, err
	}
	if holder != stage.Name {
		return applierVerdict{reason: stagecoachv1.ReasonApplierClaimed,
			message: fmt.Sprintf("%s is already claimed by Stage '%s', which is older: point spec.applyRef at another object or delete one of the two Stages",
				described, holder)}, nil
	}

	mapping, err := r.RESTMapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return applierVerdict{reason: stagecoachv1.ReasonApplierUnreadable, retry: true,
				message: fmt.Sprintf("%s cannot be read: the CRD for kind %s in %s is not installed in this cluster; install it or point spec.applyRef at another kind",
					described, gvk.Kind, gvk.GroupVersion())}, nil
		}
		return applierVerdict{}, fmt.Errorf("failed to look up kind %s for Stage %q: %w", gvk, stage.Name, err)
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		// A cluster-scoped object belongs to no tenant: a Stage of one namespace must not write it,
		// and its events would carry no namespace to find the Stage by.
		return applierVerdict{reason: stagecoachv1.ReasonApplierClusterScoped, stalled: true,
			message: fmt.Sprintf("Stage '%s' names %s '%s', which is cluster-scoped: a Stage applies only objects of its own namespace (%s); point spec.applyRef at a namespaced kind",
				stage.Name, ref.Kind, ref.Name, stage.Namespace)}, nil
	}
	if !ref.Builtin() {
		// The install grants the built-in kinds; any other kind is the operator's to grant. A
		// watch the API server refuses would never sync (and keep /readyz failing), so ask first.
		denied, err := r.watcher.denied(ctx, r.Client, mapping.Resource)
		if err != nil {
			return applierVerdict{}, fmt.Errorf("failed to check whether the controller may watch %s for Stage %q: %w", gvk.GroupKind(), stage.Name, err)
		}
		if denied != "" {
			return applierVerdict{reason: stagecoachv1.ReasonApplierUnreadable, retry: true,
				message: fmt.Sprintf("%s cannot be watched: the controller may not %s %s; grant its service account get, list and watch on %s (and patch, to promote)",
					described, denied, mapping.Resource.GroupResource(), mapping.Resource.GroupResource())}, nil
		}
	}
	if err := r.watcher.ensure(gvk); err != nil {
		return applierVerdict{}, err
	}

	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	err = r.readerFor(stage, gvk).Get(ctx, client.ObjectKey{Namespace: stage.Namespace, Name: ref.Name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return applierVerdict{reason: stagecoachv1.ReasonApplierUnreadable, retry: true,
			message: fmt.Sprintf("%s is missing: create it in the Stage's namespace or fix spec.applyRef.name", described)}, nil
	case apierrors.IsForbidden(err):
		return applierVerdict{reason: stagecoachv1.ReasonApplierUnreadable, retry: true,
			message: fmt.Sprintf("%s is not readable: the controller is forbidden to get it; grant its service account get, list and watch on %s",
				described, gvk.GroupKind())}, nil
	case err != nil:
		return applierVerdict{}, fmt.Errorf("failed to get %s for Stage %q: %w", described, stage.Name, err)
	}

	applier := &stagecoachv1.ObjectReference{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind,
		Name: obj.GetName(), Namespace: obj.GetNamespace()}
	if msg := labelProblem(obj, stage.Name, described); msg != "" {
		return applierVerdict{reason: stagecoachv1.ReasonApplierUnlabelled, message: msg, applier: applier}, nil
	}
	if !ref.Builtin() {
		v, err := r.checkAuthor(ctx, stage, mapping.Resource, described, applier)
		if err != nil {
			return applierVerdict{}, err
		}
		if v != nil {
			return *v, nil
		}
	}
	return applierVerdict{ready: true, reason: stagecoachv1.ReasonApplierReady, applier: applier, gvk: gvk, obj: obj,
		message: fmt.Sprintf("%s is readable and labelled for this Stage", described)}, nil
}

// applierReader reads appliers: from the label-selected cache when it is fresh enough, else live
// (a live read is what tells Forbidden from missing; see ApplierReader).
func (r *Reconciler) applierReader() client.Reader {
	if r.Appliers == nil {
		return r.APIReader
	}
	return r.Appliers
}

// readerFor reads a Stage's applier: live when the Stage's completion rules read a field the cache
// of appliers drops (applier.SlimKeeps: an Application's status beyond what the built-in observer
// reads), else through applierReader. The cache stays slim for the thousands of objects no rule
// reads, and what it keeps cannot follow the rules of Stages created later; a Stage with such
// rules pays one GET per reconcile.
func (r *Reconciler) readerFor(stage *stagecoachv1.Stage, gvk schema.GroupVersionKind) client.Reader {
	if !applier.SlimKeeps(gvk.GroupKind(), stage.Spec.Completion) {
		return r.APIReader
	}
	return r.applierReader()
}

// kustomizationGVK is the kind of spec.applyRef.kustomization.
var kustomizationGVK = schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}

// checkThrough reads the Kustomization named in spec.applyRef.kustomization: it must exist, carry
// the Stage's label and not be suspended, or the verdict turns not ready.
func (r *Reconciler) checkThrough(ctx context.Context, stage *stagecoachv1.Stage, v *applierVerdict) (*unstructured.Unstructured, error) {
	described := fmt.Sprintf("Kustomization '%s/%s' (spec.applyRef.kustomization)", stage.Namespace, stage.Spec.ApplyRef.Kustomization)
	notReady := func(reason, message string) (*unstructured.Unstructured, error) {
		v.ready, v.reason, v.message, v.retry = false, reason, message, true
		return nil, nil
	}
	if _, err := r.RESTMapper.RESTMapping(kustomizationGVK.GroupKind(), kustomizationGVK.Version); err != nil {
		if meta.IsNoMatchError(err) {
			return notReady(stagecoachv1.ReasonApplierUnreadable, described+" cannot be read: Flux's Kustomization CRD is not installed")
		}
		return nil, fmt.Errorf("failed to look up kind %s for Stage %q: %w", kustomizationGVK, stage.Name, err)
	}
	if err := r.watcher.ensure(kustomizationGVK); err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(kustomizationGVK)
	err := r.applierReader().Get(ctx, client.ObjectKey{Namespace: stage.Namespace, Name: stage.Spec.ApplyRef.Kustomization}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return notReady(stagecoachv1.ReasonApplierUnreadable, described+" is missing: create it or fix spec.applyRef.kustomization")
	case apierrors.IsForbidden(err):
		return notReady(stagecoachv1.ReasonApplierUnreadable, described+" is not readable: grant the controller get, list and watch on kustomizations")
	case err != nil:
		return nil, fmt.Errorf("failed to get %s for Stage %q: %w", described, stage.Name, err)
	}
	// Its events must reach the Stage: the label maps them.
	if msg := labelProblem(obj, stage.Name, described); msg != "" {
		return notReady(stagecoachv1.ReasonApplierUnlabelled, msg)
	}
	if suspended, _, _ := unstructured.NestedBool(obj.Object, "spec", "suspend"); suspended {
		return notReady(stagecoachv1.ReasonApplierSuspended, described+" is suspended, so it applies nothing: set spec.suspend to false (flux resume)")
	}
	return obj, nil
}

// gitRepositoryKind is the built-in applier of Git commits, whose artifact Kustomizations apply.
const gitRepositoryKind = "GitRepository"

// kustomizationsApplying reads the Kustomizations of the Stage's namespace labelled for it whose
// spec.sourceRef is its GitRepository: each must have applied a commit before it has landed. The
// label makes their events wake the Stage. None when Flux's Kustomization CRD is not installed.
func (r *Reconciler) kustomizationsApplying(ctx context.Context, stage *stagecoachv1.Stage) ([]*unstructured.Unstructured, error) {
	if _, err := r.RESTMapper.RESTMapping(kustomizationGVK.GroupKind(), kustomizationGVK.Version); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("failed to look up kind %s for Stage %q: %w", kustomizationGVK, stage.Name, err)
	}
	if err := r.watcher.ensure(kustomizationGVK); err != nil {
		return nil, err
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(kustomizationGVK.GroupVersion().WithKind(kustomizationGVK.Kind + "List"))
	if err := r.applierReader().List(ctx, list, client.InNamespace(stage.Namespace),
		client.MatchingLabels{stagecoachv1.StageLabel: stage.Name}); err != nil {
		if apierrors.IsForbidden(err) {
			return nil, nil // checkApplier reports what the controller may not read
		}
		return nil, fmt.Errorf("failed to list the Kustomizations of Stage %q: %w", stage.Name, err)
	}
	var out []*unstructured.Unstructured
	for i := range list.Items {
		k := &list.Items[i]
		str := func(path ...string) string { v, _, _ := unstructured.NestedString(k.Object, path...); return v }
		if str("spec", "sourceRef", "kind") == gitRepositoryKind && str("spec", "sourceRef", "name") == stage.Spec.ApplyRef.Name &&
			(str("spec", "sourceRef", "namespace") == "" || str("spec", "sourceRef", "namespace") == stage.Namespace) {
			out = append(out, k)
		}
	}
	return out, nil
}

// labelProblem says what is wrong with the applier's stagecoach.dev/stage label, or "" when it
// names the Stage.
func labelProblem(obj client.Object, stageName, described string) string {
	value, ok := obj.GetLabels()[stagecoachv1.StageLabel]
	switch {
	case !ok:
		return fmt.Sprintf("%s lacks the label %s=%s: add it to mark the object as applied by this Stage",
			described, stagecoachv1.StageLabel, stageName)
	case value != stageName:
		return fmt.Sprintf("%s is labelled %s=%s, not %s: set the label to this Stage's name",
			described, stagecoachv1.StageLabel, value, stageName)
	}
	return ""
}

// claimHolder returns the name of the Stage that holds the applier the given Stage names.
func (r *Reconciler) claimHolder(ctx context.Context, stage *stagecoachv1.Stage) (string, error) {
	var stages stagecoachv1.StageList
	if err := r.List(ctx, &stages, client.InNamespace(stage.Namespace),
		client.MatchingFields{applierIndexKey: stageApplierKey(stage)}); err != nil {
		return "", fmt.Errorf("failed to list the Stages sharing the applier of Stage %q: %w", stage.Name, err)
	}
	return oldestStage(append(stages.Items, *stage)), nil
}

// oldestStage returns the name of the Stage created first (ties broken by name), ignoring Stages
// being deleted, which give up their claim.
func oldestStage(stages []stagecoachv1.Stage) string {
	live := make([]stagecoachv1.Stage, 0, len(stages))
	for _, s := range stages {
		if s.DeletionTimestamp == nil {
			live = append(live, s)
		}
	}
	if len(live) == 0 {
		return ""
	}
	sort.Slice(live, func(i, j int) bool {
		ti, tj := live[i].CreationTimestamp, live[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return live[i].Name < live[j].Name
	})
	return live[0].Name
}

// gitFiles names the files a promotion by commit edits, for people.
func gitFiles(spec *stagecoachv1.GitPromotion) string {
	var files []string
	for _, e := range spec.Set {
		if !slices.Contains(files, e.Path) {
			files = append(files, e.Path)
		}
	}
	if len(files) == 0 {
		return "no file"
	}
	return strings.Join(files, ", ")
}
