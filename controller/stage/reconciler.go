package stage

import (
	"context"
	"errors"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller/chart"
	"github.com/stagecoach-dev/stagecoach/controller/promotion"
	"github.com/stagecoach-dev/stagecoach/controller/records"
	"github.com/stagecoach-dev/stagecoach/internal/attest"
	"github.com/stagecoach-dev/stagecoach/internal/authz"
	"github.com/stagecoach-dev/stagecoach/internal/gitwrite"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
	gitsource "github.com/stagecoach-dev/stagecoach/internal/source/git"
	recordsource "github.com/stagecoach-dev/stagecoach/internal/source/records"
	"github.com/stagecoach-dev/stagecoach/internal/source/registry"
)

// Package stage is the Stage reconciler: it judges the Stage's applier (claim, scope, label,
// author, the engine's own rules, a chart's tag, a fleet's wave plan), chooses how versions reach
// what runs, hands the Stage's Promotions to package promotion and its records to package
// records, and writes the Stage's status (status.go, its one writer).
//
// Reconciler keeps a Stage's status and moves its Promotions.
type Reconciler struct {
	client.Client
	// Identity is the controller's user name, the requester of the Promotions automation creates.
	Identity string
	// APIReader reads live what is not cached; appliers fall back to it (see ApplierReader).
	APIReader  client.Reader
	RESTMapper meta.RESTMapper
	Events     events.EventRecorder
	// FluxEvents, when set, sends Flux events about Flux appliers to notification-controller.
	FluxEvents events.AnnotatedEventRecorder
	// ApplierRetryInterval is how soon a Stage whose applier cannot be read looks again.
	ApplierRetryInterval time.Duration
	// Clock tells the time (tests may fake it); the real clock when nil.
	Clock clock.PassiveClock
	// WatchNamespaces are the namespaces the cache watches (none: all); the controller must be
	// allowed to list and watch an applier's kind there.
	WatchNamespaces []string
	// ServerVersion reads the API server's version, for spec.prerequisites.kubernetesVersion.
	ServerVersion func(context.Context) (string, error)

	// Registry lists the tags of registry sources.
	Registry *registry.Lister
	// RegistryTransport reads signatures from registries (with deadlines: ociclient.NewTransport).
	RegistryTransport http.RoundTripper

	// ClusterFreezeNamespace is the one namespace whose Freezes may hold Stages of other
	// namespaces (spec.namespaceSelector).
	ClusterFreezeNamespace string

	// CheckPluginDir holds the check plugins Stages name.
	CheckPluginDir string
	// SigstoreTrustedRoot replaces the public Sigstore instance's trusted root shipped with
	// Stagecoach, for Stages without verify.trustedRoot (nil: the shipped one).
	SigstoreTrustedRoot []byte
	// Attestor signs promotion attestations (spec.attest); nil: none are written. Cluster names
	// this cluster in them (the records' cluster id; "" leaves it out).
	Attestor *attest.Signer
	Cluster  string
	// AllowInternalCheckTargets lets HTTP checks call loopback, link-local and cluster-internal targets.
	AllowInternalCheckTargets bool

	// Observer, when set, is told of Promotions that land or finish (metrics).
	Observer promotion.Observer

	// Recorder, when set, writes each Stage's signed record stream (controller/records).
	Recorder *records.Recorder
	// Follower reads upstreamRecords sources; nil until set up (records are then untrusted).
	Follower *recordsource.Source
	// GitSource reads git sources (one clone per repository); set up with the runner when nil.
	GitSource *gitsource.Source
	// GitWriter pushes promotions by commit (one clone per repository); made with the runner when nil.
	GitWriter *gitwrite.Writer
	// PolicyRecheckInterval is how long the answer to "are the admission policies installed" is kept.
	PolicyRecheckInterval time.Duration

	// Appliers reads appliers from the label-selected cache where that is safe (nil: live).
	Appliers *ApplierReader

	// secrets reads the Secrets the Stage names, as far as its author may (built with the runner).
	secrets *authz.Secrets
	// actAs creates what the controller makes for a Stage's author (check runs) as that author.
	actAs *authz.Impersonator
	// promotions moves the Stage's Promotions (built by SetupWithManager from the fields above).
	promotions  *promotion.Runner
	policies    *policyCheck
	schemas     schemaChecks
	chartChecks chartRechecks
	watcher     *applierWatcher
	fleet       *fleetWatches
	hookEvents  chan event.GenericEvent
	// authors answers whether a Stage's author may write its applier (kinds without a built-in observer).
	authors authz.Reviews
}

// +kubebuilder:rbac:groups=stagecoach.dev,resources=stages;promotions;approvals;freezes,verbs=get;list;watch
// +kubebuilder:rbac:groups=stagecoach.dev,resources=stages/status;promotions/status;approvals/status;freezes/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// Argo CD cluster Secrets name and label the clusters of fleet rollouts; the cache keeps only
// those (label argocd.argoproj.io/secret-type=cluster, see ClusterSecretCache).
// +kubebuilder:rbac:groups="",resources=secrets,verbs=list;watch
// +kubebuilder:rbac:groups=stagecoach.dev,resources=promotions,verbs=create
// +kubebuilder:rbac:groups=argoproj.io,resources=applications,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=argoproj.io,resources=applicationsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=ocirepositories,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=gitrepositories,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=kustomize.toolkit.fluxcd.io,resources=kustomizations,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=helm.toolkit.fluxcd.io,resources=helmreleases,verbs=get;list;watch;patch

// forgetStage drops what every per-Stage cache holds of a deleted Stage. This is the one list: a
// new cache keyed by Stage is forgotten by adding it here.
func (r *Reconciler) forgetStage(key client.ObjectKey) {
	r.promotions.ForgetStage(key) // metric series, attestation backoff, checks' runs
	r.schemas.forget(key)
	r.chartChecks.forget(key)
	if r.Follower != nil {
		r.Follower.Forget(key)
	}
	r.GitSource.Forget(key)
}

// Reconcile reads the Stage, checks its applier, moves its Promotions one step, and writes the
// Stage's status (once at the end, or earlier where a Promotion finishes).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	if req.Namespace == "" {
		// Stages are namespaced: a request without a namespace names no Stage, and must not be
		// taken for a deleted one (whose orphans would be Promotions of every namespace).
		ctrl.LoggerFrom(ctx).Error(errors.New("a Stage request without a namespace"), "ignored", "stage", req.Name)
		return ctrl.Result{}, nil
	}
	stage := &stagecoachv1.Stage{}
	if err := r.Get(ctx, req.NamespacedName, stage); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetStage(req.NamespacedName)
			return ctrl.Result{}, r.promotions.Orphans(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	if r.Observer != nil {
		r.Observer.Follow(stage) // an edit of spec.service or spec.environment relabels its series
	}
	// One status writer: whatever the steps below decide is patched by commit, and a changed
	// Ready becomes an event.
	writer := &stageStatusWriter{r: r, stage: stage, before: stage.DeepCopy()}
	defer func() {
		if err := writer.commit(ctx); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()

	// The applier must exist, be ours alone, and say so with its label.
	verdict, err := r.checkApplier(ctx, stage)
	if err != nil {
		setCondition(stage, stagecoachv1.ConditionReady, metav1.ConditionUnknown, stagecoachv1.ReasonApplierCheckFailed, err.Error())
		return ctrl.Result{}, err
	}
	var through *unstructured.Unstructured
	switch {
	case verdict.ready && stage.Spec.ApplyRef.Kustomization != "":
		// The Kustomization that applies the OCIRepository's artifact holds the landed proof.
		if through, err = r.checkThrough(ctx, stage, &verdict); err != nil {
			return ctrl.Result{}, err
		}
	case verdict.ready && stage.Spec.ApplyRef.Kind == gitRepositoryKind:
		// Every Kustomization labelled for the Stage that applies the GitRepository's artifact.
		if verdict.applying, err = r.kustomizationsApplying(ctx, stage); err != nil {
			return ctrl.Result{}, err
		}
	}
	if verdict.ready {
		// The engine's own rules: for Argo CD one OCI or Stagecoach-plugin source, automated sync.
		if err := r.chooseEngine(ctx, stage, through, &verdict); err != nil {
			return ctrl.Result{}, err
		}
	}
	if verdict.ready && len(stage.Spec.DependsOn) > 0 {
		if err := r.checkDependencyCycle(ctx, stage, &verdict); err != nil {
			return ctrl.Result{}, err
		}
	}
	verdict.apply(stage)
	r.applyGuarded(ctx, stage)
	rollout := verdict.rollout()
	if !verdict.ready || rollout == nil {
		result := ctrl.Result{}
		if verdict.retry {
			result.RequeueAfter = r.ApplierRetryInterval
		}
		// A Promotion already running still ends by its deadline, whatever became of the applier;
		// Abort, Freeze and Unfreeze need no applier and act at once.
		run := r.promotions.NewRun(stage, verdict.obj, nil, writer.commit)
		if err := run.Controls(ctx); err != nil {
			return result, err
		}
		expiresIn, err := run.ExpireRunning(ctx, verdict.message)
		if expiresIn > 0 && (result.RequeueAfter == 0 || expiresIn < result.RequeueAfter) {
			result.RequeueAfter = expiresIn
		}
		result.RequeueAfter = plan.Soonest(result.RequeueAfter, records.Steps(ctx, r.Recorder, r.Client, stage, writer.commit))
		return result, err
	}

	// Promotions: supersede, start, apply, observe, finish; then automation.
	run := r.promotions.NewRun(stage, verdict.obj, rollout, writer.commit)
	requeue, err := run.Reconcile(ctx)
	// Records follow what the Promotions did; writing them never holds the Promotions back.
	requeue = plan.Soonest(requeue, records.Steps(ctx, r.Recorder, r.Client, stage, writer.commit))
	records.FollowerStatus(r.Follower, stage)
	// A chart given by version: its tag is checked again while the version runs (chart.go).
	return ctrl.Result{RequeueAfter: plan.Soonest(requeue, verdict.recheck)}, err
}

// charts resolves chart tags where the engines pull them.
func (r *Reconciler) charts() chart.Resolver {
	return chart.Resolver{Live: r.APIReader, Secrets: r.secrets, Stages: r.Client, Registry: r.Registry}
}

func (r *Reconciler) clock() clock.PassiveClock {
	if r.Clock == nil {
		return clock.RealClock{}
	}
	return r.Clock
}
