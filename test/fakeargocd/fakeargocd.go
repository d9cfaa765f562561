// Package fakeargocd plays argocd-application-controller's writes to one Application, for envtest
// suites and benchmarks where the real controller does not run. It writes the way Argo CD does:
// the Application CRD has no status subresource, so every write is an UPDATE of the whole object;
// times have one-second resolution (RFC 3339); a refresh compares the desired revision (which moves
// status.sync.revision at once, while the old version still runs) and removes the refresh
// annotation; an automated, OutOfSync app gets a sync operation that runs (Running, then
// Succeeded/Failed/Error with syncResult and finishedAt); health is assessed after, with reconciledAt.
// A multi-source Application (spec.sources) gets lists instead, one entry per source in spec order:
// sync.revisions, comparedTo.sources, operation.sync.revisions, syncResult.revisions and sources.
package fakeargocd

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RefreshAnnotation is the annotation Stagecoach sets to ask for a comparison.
const RefreshAnnotation = "argocd.argoproj.io/refresh"

// App is one Application the fake controller owns.
type App struct {
	Client client.Client
	Key    client.ObjectKey
	// BeforeWrite, when set, is called just before each write is sent (after the read it
	// changes), for a benchmark that times from the write.
	BeforeWrite func()
}

// Create creates an Application labelled for the Stage of the same name, and returns its fake.
func Create(ctx context.Context, c client.Client, namespace, name string, spec map[string]any) (*App, error) {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion("argoproj.io/v1alpha1")
	u.SetKind("Application")
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetLabels(map[string]string{"stagecoach.dev/stage": name})
	if err := c.Create(ctx, u); err != nil {
		return nil, fmt.Errorf("failed to create Application %s/%s: %w", namespace, name, err)
	}
	return &App{Client: c, Key: client.ObjectKeyFromObject(u)}, nil
}

// OCISpec is an automated Application with one OCI source.
func OCISpec(destinationNamespace string) map[string]any {
	return map[string]any{
		"project":     "default",
		"source":      map[string]any{"repoURL": "oci://registry.example/deploy/payments", "path": ".", "targetRevision": ""},
		"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": destinationNamespace},
		"syncPolicy":  map[string]any{"automated": map[string]any{"prune": true}},
	}
}

// Get reads the Application.
func (a *App) Get(ctx context.Context) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("argoproj.io/v1alpha1")
	u.SetKind("Application")
	if err := a.Client.Get(ctx, a.Key, u); err != nil {
		return nil, fmt.Errorf("failed to get Application %s: %w", a.Key, err)
	}
	return u, nil
}

// Update writes the whole object, as the application-controller does.
func (a *App) Update(ctx context.Context, mutate func(app *unstructured.Unstructured)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		app, err := a.Get(ctx)
		if err != nil {
			return err
		}
		mutate(app)
		if a.BeforeWrite != nil {
			a.BeforeWrite()
		}
		return a.Client.Update(ctx, app)
	})
}

// Stamp formats a time as Argo CD does.
func Stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// DesiredRevision is spec.source.targetRevision (of a multi-source Application: its first
// source's).
func DesiredRevision(app *unstructured.Unstructured) string {
	if sources, multi := multiSource(app); multi {
		rev, _, _ := unstructured.NestedString(sources[0].(map[string]any), "targetRevision")
		return rev
	}
	rev, _, _ := unstructured.NestedString(app.Object, "spec", "source", "targetRevision")
	return rev
}

// multiSource returns spec.sources when the Application has them.
func multiSource(app *unstructured.Unstructured) ([]any, bool) {
	sources, _, _ := unstructured.NestedSlice(app.Object, "spec", "sources")
	return sources, len(sources) > 0
}

// desiredRevisions are the targetRevisions of a multi-source Application's sources, in order.
func desiredRevisions(sources []any) []any {
	revs := make([]any, 0, len(sources))
	for _, s := range sources {
		rev, _, _ := unstructured.NestedString(s.(map[string]any), "targetRevision")
		revs = append(revs, rev)
	}
	return revs
}

// revisionFields are what a comparison or a sync result records of the revision: revision, or
// for a multi-source Application revisions.
func revisionFields(app *unstructured.Unstructured) map[string]any {
	if sources, multi := multiSource(app); multi {
		return map[string]any{"revisions": desiredRevisions(sources)}
	}
	return map[string]any{"revision": DesiredRevision(app)}
}

// Applied reports whether Stagecoach has written the digest (to targetRevision, to the plugin
// env, or beside a Helm chart's version) and asked for a refresh.
func Applied(app *unstructured.Unstructured, digest string) bool {
	if _, ok := app.GetAnnotations()[RefreshAnnotation]; !ok {
		return false
	}
	sources, multi := multiSource(app)
	if !multi {
		source, _, _ := unstructured.NestedMap(app.Object, "spec", "source")
		sources = []any{source}
	}
	for _, s := range sources {
		source, _ := s.(map[string]any)
		if chart, _ := source["chart"].(string); chart != "" {
			// A Helm chart is given its version; the digest goes beside it.
			if app.GetAnnotations()["stagecoach.dev/digest"] == digest {
				return true
			}
			continue
		}
		if env, ok, _ := unstructured.NestedSlice(source, "plugin", "env"); ok {
			for _, e := range env {
				if m, _ := e.(map[string]any); m["name"] == "STAGECOACH_DIGEST" && m["value"] == digest {
					return true
				}
			}
			continue
		}
		if rev, _, _ := unstructured.NestedString(source, "targetRevision"); rev == digest {
			return true
		}
	}
	return false
}

// comparedTo is what Argo CD records it compared against: the source and the destination.
func comparedTo(app *unstructured.Unstructured) map[string]any {
	destination, _, _ := unstructured.NestedMap(app.Object, "spec", "destination")
	if sources, multi := multiSource(app); multi {
		return map[string]any{"sources": sources, "destination": destination}
	}
	source, _, _ := unstructured.NestedMap(app.Object, "spec", "source")
	return map[string]any{"source": source, "destination": destination}
}

// syncStatus is status.sync: a comparison's verdict at the desired revision(s).
func syncStatus(app *unstructured.Unstructured, status string) map[string]any {
	out := revisionFields(app)
	out["status"], out["comparedTo"] = status, comparedTo(app)
	return out
}

// Refresh compares: sync.revision moves to the desired revision, sync is OutOfSync, health stays
// what it was, the refresh annotation goes.
func (a *App) Refresh(ctx context.Context, now time.Time) error {
	return a.Update(ctx, func(app *unstructured.Unstructured) {
		annotations := app.GetAnnotations()
		delete(annotations, RefreshAnnotation)
		app.SetAnnotations(annotations)
		_ = unstructured.SetNestedMap(app.Object, syncStatus(app, "OutOfSync"), "status", "sync")
		_ = unstructured.SetNestedField(app.Object, Stamp(now), "status", "reconciledAt")
	})
}

// Sync runs the automated sync operation of the desired revision and ends it in phase.
func (a *App) Sync(ctx context.Context, phase, message string, started, finished time.Time) error {
	app, err := a.Get(ctx)
	if err != nil {
		return err
	}
	result := revisionFields(app)
	if sources, multi := multiSource(app); multi {
		// The CRD requires syncResult.revision; Argo CD leaves it empty beside revisions.
		result["sources"], result["revision"] = sources, ""
	} else {
		result["source"], _, _ = unstructured.NestedMap(app.Object, "spec", "source")
	}
	operation := map[string]any{"sync": revisionFields(app), "initiatedBy": map[string]any{"automated": true}}
	if err := a.Update(ctx, func(app *unstructured.Unstructured) {
		_ = unstructured.SetNestedMap(app.Object, map[string]any{
			"phase": "Running", "message": "syncing", "startedAt": Stamp(started), "operation": operation,
		}, "status", "operationState")
	}); err != nil {
		return err
	}
	return a.Update(ctx, func(app *unstructured.Unstructured) {
		_ = unstructured.SetNestedMap(app.Object, map[string]any{
			"phase": phase, "message": message, "startedAt": Stamp(started), "finishedAt": Stamp(finished), "operation": operation,
			"syncResult": result,
		}, "status", "operationState")
	})
}

// Assess reports health after a comparison at reconciledAt, Synced at the desired revision.
func (a *App) Assess(ctx context.Context, health string, reconciledAt time.Time) error {
	return a.Update(ctx, func(app *unstructured.Unstructured) {
		old, _, _ := unstructured.NestedString(app.Object, "status", "health", "status")
		transition, _, _ := unstructured.NestedString(app.Object, "status", "health", "lastTransitionTime")
		if old != health {
			transition = Stamp(reconciledAt)
		}
		_ = unstructured.SetNestedMap(app.Object, map[string]any{"status": health, "lastTransitionTime": transition, "message": "assessed " + health},
			"status", "health")
		_ = unstructured.SetNestedMap(app.Object, syncStatus(app, "Synced"), "status", "sync")
		_ = unstructured.SetNestedField(app.Object, Stamp(reconciledAt), "status", "reconciledAt")
	})
}

// Deploy plays a whole automated sync of what Stagecoach wrote: refresh, sync ending in phase,
// and (when it succeeded) health. It does not wait for the write: see Applied.
func (a *App) Deploy(ctx context.Context, phase, health string) error {
	now := time.Now()
	if err := a.Refresh(ctx, now); err != nil {
		return err
	}
	if err := a.Sync(ctx, phase, "sync "+phase, now, now); err != nil {
		return err
	}
	if phase != "Succeeded" {
		return nil
	}
	return a.Assess(ctx, health, now)
}
