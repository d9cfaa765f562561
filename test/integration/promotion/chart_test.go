package promotion

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// A Helm chart from an OCI chart registry is promoted by its chart version, which Argo CD
// resolves itself: the Stage says so, the digest behind the version goes beside it, and once the
// version landed its tag is resolved again. A version pushed again in between fails the
// Promotion, which rolls back to the version before.
func TestHelmChartPromotedByVersion(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := newTestRegistry(t)
	v1 := reg.push(t, "1.0.0")
	chartRepo, chart, _ := strings.Cut(reg.repo, "/")
	spec := ociSpec(ns)
	spec["source"] = map[string]any{"repoURL": chartRepo, "chart": chart, "targetRevision": "0.9.0"}
	app := newApplication(t, ns, "prod", spec)
	newStage(t, ns, "prod", func(s *stagecoachv1.Stage) {
		s.Spec.Source = stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: reg.repo}}
	})
	startController(t, nil)

	eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionMediated, metav1.ConditionTrue, stagecoachv1.ReasonMediatedByVersion,
		"is given the chart version, not the digest")
	newPromotion(t, ns, "prod-v1", "prod", stagecoachv1.ActionPromote, v1, "1.0.0")
	app.deploy(v1, false, "Succeeded", "Healthy")
	done := eventuallyPhase(t, ns, "prod-v1", stagecoachv1.PhaseSucceeded)
	g.Expect(done.Status.Message).To(ContainSubstring("Argo CD pins the chart version, not " + v1))
	live := app.get()
	rev, _, _ := unstructured.NestedString(live.Object, "spec", "source", "targetRevision")
	g.Expect(rev).To(Equal("1.0.0"))
	g.Expect(live.GetAnnotations()).To(HaveKeyWithValue("stagecoach.dev/digest", v1))
	s := eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionVerified, metav1.ConditionTrue, stagecoachv1.ReasonVerified, v1)
	g.Expect(s.Status.History[0].Digest).To(Equal(v1), "history records the digest, not only the version")

	// 1.1.0 is pushed again after it was promoted: Argo CD pulls the new chart under the same
	// version, and the landing check finds the tag moved.
	v2 := reg.push(t, "1.1.0")
	newPromotion(t, ns, "prod-v2", "prod", stagecoachv1.ActionPromote, v2, "1.1.0")
	app.waitForRevision(v2, false)
	repushed := reg.push(t, "1.1.0")
	app.deploy(v2, false, "Succeeded", "Healthy")
	failed := eventuallyPhase(t, ns, "prod-v2", stagecoachv1.PhaseFailed)
	g.Expect(failed.Status.Message).To(ContainSubstring(`landed, but tag "1.1.0" of ` + reg.repo + " now points at " + repushed + ", not the verified " + v2))
	eventuallyPhase(t, ns, "prod-v2-rollback", stagecoachv1.PhaseRunning)
	app.deploy(v1, false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, "prod-v2", stagecoachv1.PhaseRolledBack)
	s = eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionVerified, metav1.ConditionTrue, stagecoachv1.ReasonRolledBack, v1)
	g.Expect(s.Status.FailedDigests).To(ContainElement(v2))
}
