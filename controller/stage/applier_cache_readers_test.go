package stage

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/applier"
	"github.com/stagecoach-dev/stagecoach/internal/metrics"
	"github.com/stagecoach-dev/stagecoach/internal/waves"
)

const (
	cacheDigest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	oldDigest   = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

// engineObject decodes a fixture as the API client does (integers as int64).
func engineObject(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatalf("bad fixture: %v", err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		t.Fatalf("bad fixture: %v", err)
	}
	return u
}

// fleetApplication is an Application of ApplicationSet "fleet" as Argo CD writes it: with the
// status no Stagecoach reader reads (resources, history, summary, conditions) beside the rest.
func fleetApplication(t *testing.T, source, status string) *unstructured.Unstructured {
	t.Helper()
	return engineObject(t, `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: payments-eu
  namespace: argocd
  generation: 4
  labels: {stagecoach.dev/stage: prod}
  annotations:
    stagecoach.dev/applied-at: "2026-11-30T09:59:50Z"
    kubectl.kubernetes.io/last-applied-configuration: '{"kind":"Application"}'
  ownerReferences: [{apiVersion: argoproj.io/v1alpha1, kind: ApplicationSet, name: fleet, uid: u1}]
  managedFields: [{manager: argocd-application-controller, operation: Update}]
spec:
  project: default
  source: `+source+`
  destination: {server: "https://kubernetes.default.svc", namespace: payments}
  syncPolicy: {automated: {prune: true}}
status:
  resources: [{kind: Deployment, name: payments, status: Synced, health: {status: Healthy}}]
  history: [{id: 3, revision: "`+oldDigest+`", deployedAt: "2026-11-29T10:00:00Z"}]
  summary: {images: ["registry.example/payments@`+cacheDigest+`"]}
  conditions: [{type: SyncError, message: "an old one"}]
  sourceType: Kustomize
`+status)
}

// Every reader of the cached engine objects outside internal/applier (whose observers' own
// tables run through the slim) reads of an object as the caches hold it (SlimCached) what it
// reads of the object as the API server has it.
func TestCachedObjectsReadAsTheirOwners(t *testing.T) {
	oci := `{repoURL: "oci://registry.example/payments", targetRevision: "` + cacheDigest + `"}`
	plugin := `{repoURL: "https://git.example/payments.git", targetRevision: main, plugin: {name: stagecoach, env: [{name: STAGECOACH_DIGEST, value: "` + cacheDigest + `"}]}}`
	landed := `  sync: {status: Synced, revision: "` + cacheDigest + `", comparedTo: {source: {repoURL: "oci://registry.example/payments"}}}
  health: {status: Healthy, message: ok, lastTransitionTime: "2026-11-30T10:00:01Z"}
  reconciledAt: "2026-11-30T10:00:02Z"
  operationState: {phase: Succeeded, message: synced, startedAt: "2026-11-30T09:59:58Z", finishedAt: "2026-11-30T10:00:00Z",
    operation: {sync: {revision: "` + cacheDigest + `"}, initiatedBy: {automated: true}},
    syncResult: {revision: "` + cacheDigest + `", resources: [{kind: Deployment, name: payments, message: configured}]}}
`
	objects := map[string]*unstructured.Unstructured{
		"an Application landed": fleetApplication(t, oci, landed),
		"an Application syncing": fleetApplication(t, oci, `  sync: {status: OutOfSync, revision: "`+cacheDigest+`"}
  operationState: {phase: Running, startedAt: "2026-11-30T09:59:58Z", operation: {sync: {revision: "`+cacheDigest+`"}}}
`),
		"an Application whose sync failed": fleetApplication(t, oci, `  operationState: {phase: Failed, message: boom, finishedAt: "2026-11-30T10:00:00Z",
    operation: {sync: {revision: "`+cacheDigest+`"}}, syncResult: {revision: "`+cacheDigest+`"}}
`),
		"an Application degraded after the sync": fleetApplication(t, oci, `  sync: {status: Synced, revision: "`+cacheDigest+`"}
  health: {status: Degraded, message: crashloop}
  reconciledAt: "2026-11-30T10:00:03Z"
  operationState: {phase: Succeeded, finishedAt: "2026-11-30T10:00:00Z", syncResult: {revision: "`+cacheDigest+`"}}
`),
		"an Application found already running it": fleetApplication(t, oci, `  sync: {status: Synced, revision: "`+cacheDigest+`"}
  health: {status: Healthy}
  reconciledAt: "2026-11-30T10:00:03Z"
  operationState: {phase: Failed, finishedAt: "2026-11-30T09:59:00Z", operation: {sync: {revision: "`+oldDigest+`"}}}
`),
		"a plugin Application landed": fleetApplication(t, plugin, `  sync: {status: Synced, revision: 0a1b2c, comparedTo: {source: {plugin: {env: [{name: STAGECOACH_DIGEST, value: "`+cacheDigest+`"}]}}}}
  health: {status: Healthy}
  reconciledAt: "2026-11-30T10:00:01Z"
  operationState: {phase: Succeeded, finishedAt: "2026-11-30T10:00:00Z", syncResult: {revision: 0a1b2c, source: {plugin: {env: [{name: STAGECOACH_DIGEST, value: "`+cacheDigest+`"}]}}}}
`),
		"an Application never reconciled": fleetApplication(t, oci, `  conditions: [{type: ComparisonError, message: "no repo"}]
`),
		"a Kustomization": engineObject(t, `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: payments, namespace: dev, generation: 2, labels: {stagecoach.dev/stage: prod}, managedFields: [{manager: kustomize-controller}]}
spec: {suspend: false}
status: {observedGeneration: 2, lastAppliedRevision: "v1@`+cacheDigest+`", inventory: {entries: [{id: x, v: v1}]},
  conditions: [{type: Ready, status: "True", reason: ReconciliationSucceeded, lastTransitionTime: "2026-11-30T10:00:04Z"}]}
`),
		"a HelmRelease": engineObject(t, `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: payments, namespace: dev, labels: {stagecoach.dev/stage: other}}
spec: {values: {image: {digest: "`+cacheDigest+`"}}}
status: {observedGeneration: 1, history: [{version: 2, status: deployed}], conditions: [{type: Ready, status: "False", lastTransitionTime: "2026-11-30T10:00:04Z"}]}
`),
	}
	appSet := engineObject(t, `apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {name: fleet, namespace: argocd, uid: u1}
`)
	now := time.Date(2026, 11, 30, 10, 0, 30, 0, time.UTC)
	readers := map[string]func(*unstructured.Unstructured) any{
		// The fleet rollout (controller/promotion/waves.go), with and without a grace period running.
		"waves.ObserveTarget": func(u *unstructured.Unstructured) any {
			return waves.ObserveTarget(u, cacheDigest, now, 0, time.Minute)
		},
		"waves.ObserveTarget in the grace period": func(u *unstructured.Unstructured) any {
			return waves.ObserveTarget(u, cacheDigest, now, time.Minute, time.Hour)
		},
		"waves.ResolveTargets": func(u *unstructured.Unstructured) any {
			targets, problems := waves.ResolveTargets(appSet, []unstructured.Unstructured{*u}, nil)
			return []any{targets, problems}
		},
		"unlabelledTargets": func(u *unstructured.Unstructured) any {
			return unlabelledTargets("prod", "fleet", []*unstructured.Unstructured{u})
		},
		"applicationSetOwners": func(u *unstructured.Unstructured) any { return applicationSetOwners(u) },
		"labelProblem":         func(u *unstructured.Unstructured) any { return labelProblem(u, "prod", "it") },
		// The engine reaction time of a landed Promotion (metrics.Observer reads appliers through ApplierReader).
		"metrics.EngineSignalAt": func(u *unstructured.Unstructured) any {
			at, ok := metrics.EngineSignalAt(u)
			return []any{at, ok}
		},
		"checkThrough's spec.suspend": func(u *unstructured.Unstructured) any {
			suspended, found, err := unstructured.NestedBool(u.Object, "spec", "suspend")
			return []any{suspended, found, err}
		},
	}
	for name, obj := range objects {
		for reader, read := range readers {
			t.Run(name+"/"+reader, func(t *testing.T) {
				g := NewWithT(t)
				out, err := SlimCached(obj.DeepCopy())
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(read(out.(*unstructured.Unstructured))).To(Equal(read(obj.DeepCopy())))
			})
		}
	}
}

// A Stage's completion rules read its applier live when they read what the cache of appliers
// drops, and from the cache otherwise; either way they say what they say of the object as the
// API server has it.
func TestCompletionRulesReadTheirApplierWhole(t *testing.T) {
	app := fleetApplication(t, `{repoURL: "oci://registry.example/payments", targetRevision: "registry.example/payments@`+cacheDigest+`"}`,
		`  health: {status: Healthy}
`)
	widget := engineObject(t, `apiVersion: example.dev/v1
kind: Widget
metadata: {name: payments-eu, namespace: argocd, generation: 2, annotations: {kubectl.kubernetes.io/last-applied-configuration: "{}"},
  managedFields: [{manager: kubectl, operation: Apply}]}
spec: {image: "registry.example/payments@`+cacheDigest+`"}
status: {observedGeneration: 2, manager: kubectl, conditions: [{type: Ready, status: "True"}]}
`)
	matches := func(in, out string) *stagecoachv1.CompletionRules {
		return &stagecoachv1.CompletionRules{ObservedMatches: []stagecoachv1.ObservedMatch{{Input: in, Output: out}}}
	}
	ready := &stagecoachv1.CompletionRules{ObservedCompletion: &stagecoachv1.ObservedCompletion{
		Succeeded: &stagecoachv1.FieldMatch{Key: `status.conditions.#(type=="Ready").status`, Value: "True"}}}
	for _, tc := range []struct {
		name  string
		obj   *unstructured.Unstructured
		rules *stagecoachv1.CompletionRules
		from  string
		phase applier.Phase
	}{
		{name: "an Application without rules", obj: app, from: "cache", phase: applier.Landed},
		{name: "an Application's summary, which the cache drops", obj: app, rules: matches("spec.source.targetRevision", "status.summary.images.0"),
			from: "live", phase: applier.Landed},
		{name: "an Application's health, which the cache keeps", obj: app, rules: matches("status.health.status", "status.health.status"),
			from: "cache", phase: applier.Landed},
		{name: "a Widget's status, which the cache keeps whole", obj: widget, rules: ready, from: "cache", phase: applier.Landed},
		{name: "a Widget's managedFields, which the cache drops", obj: widget, rules: matches("metadata.managedFields.0.manager", "status.manager"),
			from: "live", phase: applier.Landed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			whole := tc.obj.DeepCopy()
			whole.SetAnnotations(map[string]string{"read-from": "live"})
			inCache, err := SlimCached(tc.obj.DeepCopy())
			g.Expect(err).NotTo(HaveOccurred())
			cachedObj := inCache.(*unstructured.Unstructured)
			cachedObj.SetAnnotations(map[string]string{"read-from": "cache"})
			live := &stubReader{obj: whole}
			r := &Reconciler{APIReader: live, Appliers: &ApplierReader{cache: &fakeApplierCache{obj: cachedObj, synced: true}, live: live}}
			gvk := tc.obj.GroupVersionKind()
			r.Appliers.watch(gvk)
			stage := &stagecoachv1.Stage{Spec: stagecoachv1.StageSpec{Completion: tc.rules}}

			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(gvk)
			g.Expect(r.readerFor(stage, gvk).Get(t.Context(), client.ObjectKeyFromObject(tc.obj), got)).To(Succeed())
			g.Expect(got.GetAnnotations()["read-from"]).To(Equal(tc.from))
			obs := applier.ObserveCompletion("prod", tc.rules, got)
			g.Expect(obs).To(Equal(applier.ObserveCompletion("prod", tc.rules, whole)))
			g.Expect(obs.Phase).To(Equal(tc.phase), obs.Message)
		})
	}
}
