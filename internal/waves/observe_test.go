package waves

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/applier"
)

// app is an OCI Application told to run rev, with Argo CD's status after a sync ending in
// opPhase at finished and an assessment of health at reconciled ("" leaves that part out).
func app(rev, opPhase, health string, finished, reconciled time.Time, appliedAt string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"source": map[string]any{"repoURL": "oci://r.example/x", "targetRevision": rev}},
	}}
	if appliedAt != "" {
		u.SetAnnotations(map[string]string{v1alpha1.AppliedAtAnnotation: appliedAt})
	}
	stamp := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	if opPhase != "" {
		_ = unstructured.SetNestedMap(u.Object, map[string]any{
			"phase": opPhase, "finishedAt": stamp(finished), "operation": map[string]any{"sync": map[string]any{"revision": rev}},
			"syncResult": map[string]any{"revision": rev},
		}, "status", "operationState")
	}
	if health != "" {
		_ = unstructured.SetNestedMap(u.Object, map[string]any{"status": health}, "status", "health")
		_ = unstructured.SetNestedMap(u.Object, map[string]any{"status": "Synced", "revision": rev,
			"comparedTo": map[string]any{"destination": map[string]any{"server": "https://c1.example"}}}, "status", "sync")
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"kind": "ConfigMap", "name": "x", "status": "Synced"}}, "status", "resources")
		_ = unstructured.SetNestedField(u.Object, stamp(reconciled), "status", "reconciledAt")
	}
	return u
}

// rolledBack is an OCI Application told to run rev again (Stagecoach wrote it at written) after
// Argo CD's sync of other ended in opPhase without changing the cluster (admission refused it):
// Argo CD compared it at reconciled and found the cluster Synced at rev, so it starts no sync.
func rolledBack(rev, other, opPhase string, written, reconciled time.Time, refreshPending bool) *unstructured.Unstructured {
	stamp := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	u := app(other, opPhase, "Healthy", written.Add(-10*time.Second), reconciled, stamp(written))
	_ = unstructured.SetNestedField(u.Object, rev, "spec", "source", "targetRevision")
	_ = unstructured.SetNestedField(u.Object, rev, "status", "sync", "revision")
	if refreshPending {
		a := u.GetAnnotations()
		a["argocd.argoproj.io/refresh"] = "normal"
		u.SetAnnotations(a)
	}
	return u
}

func TestObserveTarget(t *testing.T) {
	now := t0.Add(time.Minute)
	cases := []struct {
		name        string
		app         *unstructured.Unstructured
		grace       time.Duration
		deadline    time.Duration
		want        v1alpha1.Phase
		wantRecheck time.Time
	}{
		{name: "another digest is pending", app: app(d1, "Succeeded", "Healthy", t0, t0, ""), want: v1alpha1.PhasePending},
		{name: "written, not synced yet", app: app(d2, "", "", t0, t0, ""), want: v1alpha1.PhaseRunning},
		{name: "sync of the digest failed", app: app(d2, "Failed", "", t0, t0, ""), want: v1alpha1.PhaseFailed},
		{name: "degraded after the sync", app: app(d2, "Succeeded", "Degraded", t0, t0, ""), want: v1alpha1.PhaseFailed},
		{name: "landed, no grace", app: app(d2, "Succeeded", "Healthy", t0, t0, ""), want: v1alpha1.PhaseSucceeded},
		{name: "landed, grace over", app: app(d2, "Succeeded", "Healthy", t0, t0, ""), grace: 30 * time.Second, want: v1alpha1.PhaseSucceeded},
		{name: "landed within grace waits", app: app(d2, "Succeeded", "Healthy", now, now, ""), grace: 30 * time.Second,
			want: v1alpha1.PhaseRunning, wantRecheck: now.Add(31 * time.Second)},
		{name: "stale health is not landed", app: app(d2, "Succeeded", "Healthy", now, t0, ""), want: v1alpha1.PhaseRunning},
		{name: "back on a digest the cluster still runs after a refused sync: done without a sync",
			app: rolledBack(d2, "sha256:3333", "Failed", t0, t0.Add(time.Second), false), want: v1alpha1.PhaseSucceeded},
		{name: "back on a digest the cluster still runs, grace counted from the comparison",
			app: rolledBack(d2, "sha256:3333", "Failed", now, now, false), grace: 30 * time.Second,
			want: v1alpha1.PhaseRunning, wantRecheck: now.Add(31 * time.Second)},
		{name: "back on a digest: the refresh Stagecoach asked for is not done yet",
			app: rolledBack(d2, "sha256:3333", "Failed", t0, t0.Add(time.Second), true), want: v1alpha1.PhaseRunning},
		{name: "back on a digest: compared before Stagecoach wrote it",
			app: rolledBack(d2, "sha256:3333", "Failed", t0, t0.Add(-time.Second), false), want: v1alpha1.PhaseRunning},
		{name: "back on a digest: the other revision's sync still runs",
			app: rolledBack(d2, "sha256:3333", "Running", t0, t0.Add(time.Second), false), want: v1alpha1.PhaseRunning},
		{name: "past its own deadline fails", app: app(d2, "", "", t0, t0, t0.Format(time.RFC3339)), deadline: 30 * time.Second, want: v1alpha1.PhaseFailed},
		{name: "within its own deadline syncs", app: app(d2, "", "", t0, t0, t0.Format(time.RFC3339)), deadline: 2 * time.Minute,
			want: v1alpha1.PhaseRunning, wantRecheck: t0.Add(2*time.Minute + time.Second)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := ObserveTarget(tc.app.DeepCopy(), d2, now, tc.grace, tc.deadline)
			g.Expect(got.Phase).To(Equal(tc.want), got.Message)
			g.Expect(got.Recheck).To(Equal(tc.wantRecheck))
			// The cache holds Applications slimmed (applier.Slim): what it keeps must decide alike.
			cached := tc.app.DeepCopy()
			cached.SetAPIVersion("argoproj.io/v1alpha1")
			cached.SetKind("Application")
			slim, err := applier.Slim(cached)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ObserveTarget(slim.(*unstructured.Unstructured), d2, now, tc.grace, tc.deadline)).To(Equal(got))
		})
	}
}
