package promotion

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

const valuesCommit = "0123456789abcdef0123456789abcdef01234567"

// multiSourceSpec is an automated Application rendering an OCI chart (the promoted source, named
// chart) with value files from Git at valuesRevision.
func multiSourceSpec(ns, valuesRevision string) map[string]any {
	return map[string]any{
		"project": "default",
		"sources": []any{
			map[string]any{"name": "chart", "repoURL": "oci://registry.example/charts/payments", "targetRevision": "",
				"helm": map[string]any{"valueFiles": []any{"$values/prod/values.yaml"}}},
			map[string]any{"repoURL": "https://git.example/config.git", "targetRevision": valuesRevision, "ref": "values"},
		},
		"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": ns},
		"syncPolicy":  map[string]any{"automated": map[string]any{"prune": true}},
	}
}

// A multi-source Application is promoted through the source applyRef.source names: Mediated
// while every other source is pinned to a commit, the digest written to that source only, landed
// on the revisions Argo CD reports at its index, and a failed sync rolls back there too.
func TestMultiSourceApplication(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	app := newApplication(t, ns, "prod", multiSourceSpec(ns, valuesCommit))
	newStage(t, ns, "prod", func(s *stagecoachv1.Stage) { s.Spec.ApplyRef.Source = "chart" })
	startController(t, nil)

	eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionMediated, metav1.ConditionTrue, stagecoachv1.ReasonMediated, "")
	promoteAndLand(t, ns, "prod", app, "prod-v1", 1)
	s := eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionVerified, metav1.ConditionTrue, stagecoachv1.ReasonVerified, digest(1))
	g.Expect(s.Status.Current.Digest).To(Equal(digest(1)))
	sources, _, _ := unstructured.NestedSlice(app.get().Object, "spec", "sources")
	g.Expect(sources[0]).To(HaveKeyWithValue("targetRevision", digest(1)))
	g.Expect(sources[1]).To(HaveKeyWithValue("targetRevision", valuesCommit), "the values source is not Stagecoach's to move")

	// v2's sync fails: the Promotion fails and v1 goes back into the chart source.
	newPromotion(t, ns, "prod-v2", "prod", stagecoachv1.ActionPromote, digest(2), tag(2))
	app.deploy(digest(2), false, "Failed", "")
	rollback := eventuallyPhase(t, ns, "prod-v2-rollback", stagecoachv1.PhaseRunning)
	g.Expect(rollback.Spec.Version.Digest).To(Equal(digest(1)))
	app.deploy(digest(1), false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, "prod-v2-rollback", stagecoachv1.PhaseSucceeded)
	eventuallyPhase(t, ns, "prod-v2", stagecoachv1.PhaseRolledBack)

	// The values move to a branch: something besides the digest decides what runs, and the Stage
	// names the source and the fix.
	app.update(func(u *unstructured.Unstructured) {
		sources, _, _ := unstructured.NestedSlice(u.Object, "spec", "sources")
		sources[1].(map[string]any)["targetRevision"] = "main"
		g.Expect(unstructured.SetNestedSlice(u.Object, sources, "spec", "sources")).To(Succeed())
	})
	eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionMediated, metav1.ConditionFalse, stagecoachv1.ReasonSourceUnpinned,
		`spec.sources[1] "https://git.example/config.git" at "main" (a Git source is pinned only by a 40-hex commit SHA) besides the promoted spec.sources[0]: pin each (a Git source to a commit SHA, an OCI source to a digest)`)
}

// Without applyRef.source a multi-source Application cannot be promoted, and the Stage says how
// to name the source; a name that matches none is refused the same way.
func TestMultiSourceApplicationNeedsItsSourceNamed(t *testing.T) {
	for _, tc := range []struct {
		name, source, reason, message string
	}{
		{name: "no applyRef.source", reason: stagecoachv1.ReasonApplierMultiSource,
			message: "has 2 entries in spec.sources (\"chart\" (oci://registry.example/charts/payments), \"https://git.example/config.git\"): set applyRef.source"},
		{name: "a name of no source", source: "app", reason: stagecoachv1.ReasonApplierSourceNotFound,
			message: `applyRef.source "app" names none of the sources`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			newApplication(t, ns, "prod", multiSourceSpec(ns, valuesCommit))
			newStage(t, ns, "prod", func(s *stagecoachv1.Stage) { s.Spec.ApplyRef.Source = tc.source })
			startController(t, nil)
			eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionReady, metav1.ConditionFalse, tc.reason, tc.message)
		})
	}
}
