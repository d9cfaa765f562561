package promotion

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/applier"
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

// chartApplication is an Application installing chart (host/path) from repoURL at version 0.9.0.
func chartApplication(t *testing.T, ns, name, repoURL, chart string) *fakeArgoCD {
	t.Helper()
	spec := ociSpec(ns)
	spec["source"] = map[string]any{"repoURL": repoURL, "chart": chart, "targetRevision": "0.9.0"}
	return newApplication(t, ns, name, spec)
}

// retag points tag at a digest already in the repository, as a push of that same chart does.
func (r *testRegistry) retag(t *testing.T, tag, digest string) {
	t.Helper()
	g := NewWithT(t)
	ref, err := name.NewDigest(r.repo + "@" + digest)
	g.Expect(err).NotTo(HaveOccurred())
	desc, err := remote.Get(ref, remote.WithContext(t.Context()))
	g.Expect(err).NotTo(HaveOccurred())
	to, err := name.NewTag(r.repo + ":" + tag)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(remote.Tag(to, desc, remote.WithContext(t.Context()))).To(Succeed())
}

// chartAt expects the Application to be given version at digest (Stagecoach's annotation).
func chartAt(g Gomega, app *fakeArgoCD, version, digest string) {
	live := app.get()
	rev, _, _ := unstructured.NestedString(live.Object, "spec", "source", "targetRevision")
	g.Expect(rev).To(Equal(version))
	g.Expect(live.GetAnnotations()[applier.DigestAnnotation]).To(Equal(digest))
}

// Issue 37 item 3: the tag is checked where the engine pulls it right before the write, for a
// Promotion and for a Rollback (which skips the gates) alike. A tag pushed again after its
// digest was judged (or pointed back and forth before landing) is refused with nothing written:
// the Promotion fails (TagMismatch), the Stage keeps what it runs, automation holds.
func TestHelmChartTagCheckedBeforeTheWrite(t *testing.T) {
	ns := newNamespace(t)
	reg := newTestRegistry(t)
	v1 := reg.push(t, "1.0.0")
	host, chart, _ := strings.Cut(reg.repo, "/")
	app := chartApplication(t, ns, "prod", host, chart)
	newStage(t, ns, "prod", func(s *stagecoachv1.Stage) {
		s.Spec.Source = stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: reg.repo}}
	})
	startController(t, nil)
	newPromotion(t, ns, "prod-v1", "prod", stagecoachv1.ActionPromote, v1, "1.0.0")
	app.deploy(v1, false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, "prod-v1", stagecoachv1.PhaseSucceeded)

	t.Run("a promote whose tag was pushed again is refused before the write", func(t *testing.T) {
		g := NewWithT(t)
		v2 := reg.push(t, "1.1.0")
		repushed := reg.push(t, "1.1.0")
		newPromotion(t, ns, "prod-v2", "prod", stagecoachv1.ActionPromote, v2, "1.1.0")
		refused := eventuallyPhase(t, ns, "prod-v2", stagecoachv1.PhaseFailed)
		g.Expect(refused.Status.Message).To(ContainSubstring(`not applied (TagMismatch): tag "1.1.0" of ` + reg.repo + " names " + repushed + ", not " + v2))
		g.Expect(refused.Status.AppliedAt).To(BeNil())
		chartAt(g, app, "1.0.0", v1)
		s := getStage(g, t.Context(), ns, "prod")
		g.Expect(s.Status.Current.Digest).To(Equal(v1))
		g.Expect(s.Status.Hold).NotTo(BeNil())
		g.Expect(s.Status.Hold.Reason).To(Equal(stagecoachv1.ReasonTagMismatch))
		g.Expect(promotionsOf(g, t, ns, "prod")).To(HaveLen(2), "nothing was written, so nothing rolls back")

		// What the tag names now is another version, with its own gates.
		newPromotion(t, ns, "prod-v2b", "prod", stagecoachv1.ActionPromote, repushed, "1.1.0")
		app.deploy(repushed, false, "Succeeded", "Healthy")
		eventuallyPhase(t, ns, "prod-v2b", stagecoachv1.PhaseSucceeded)
	})

	t.Run("a Rollback skips the gates, not the tag", func(t *testing.T) {
		g := NewWithT(t)
		moved := reg.push(t, "1.0.0")
		newPromotion(t, ns, "prod-back", "prod", stagecoachv1.ActionRollback, v1, "1.0.0")
		refused := eventuallyPhase(t, ns, "prod-back", stagecoachv1.PhaseFailed)
		g.Expect(refused.Status.Message).To(ContainSubstring(`not applied (TagMismatch): tag "1.0.0" of ` + reg.repo + " names " + moved + ", not " + v1))
		g.Consistently(func(g Gomega) { chartAt(g, app, "1.1.0", getStage(g, t.Context(), ns, "prod").Status.Current.Digest) }, time.Second, interval).Should(Succeed())

		// Pushed back to v1, the same Rollback goes through.
		reg.retag(t, "1.0.0", v1)
		newPromotion(t, ns, "prod-back-2", "prod", stagecoachv1.ActionRollback, v1, "1.0.0")
		app.deploy(v1, false, "Succeeded", "Healthy")
		eventuallyPhase(t, ns, "prod-back-2", stagecoachv1.PhaseSucceeded)
	})
}

// Issue 37 item 3: once verified, a version given by chart version is checked again while it
// runs, at least every registry interval (here 1s, default 1m): a tag pushed again turns the Stage
// Mediated=False TagMoved, naming the tag and both digests, and automation holds until the tag
// names the verified digest again.
func TestHelmChartTagRecheckedWhileItRuns(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := newTestRegistry(t)
	v1 := reg.push(t, "1.0.0")
	host, chart, _ := strings.Cut(reg.repo, "/")
	app := chartApplication(t, ns, "prod", host, chart)
	newStage(t, ns, "prod", func(s *stagecoachv1.Stage) {
		s.Spec.Source = stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: reg.repo,
			Interval: &metav1.Duration{Duration: time.Second}}}
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true}
	})
	startController(t, nil)
	app.deploy(v1, false, "Succeeded", "Healthy")
	eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionVerified, metav1.ConditionTrue, stagecoachv1.ReasonVerified, v1)
	eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionMediated, metav1.ConditionTrue, stagecoachv1.ReasonMediatedByVersion,
		"every 1s while it runs")

	moved := reg.push(t, "1.0.0")
	eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionMediated, metav1.ConditionFalse, stagecoachv1.ReasonTagMoved,
		`tag "1.0.0" of `+reg.repo+" named "+v1+" when it was verified and names "+moved+" now")

	// Automation holds: a newer version waits on the mediated gate.
	v2 := reg.push(t, "1.1.0")
	g.Eventually(func(g Gomega) {
		s := getStage(g, t.Context(), ns, "prod")
		g.Expect(s.Status.Candidate).NotTo(BeNil())
		g.Expect(s.Status.Candidate.Digest).To(Equal(v2))
		g.Expect(s.Status.Candidate.BlockedBy).To(ContainElement(And(HaveField("Gate", stagecoachv1.GateMediated),
			HaveField("Reason", stagecoachv1.ReasonTagMoved))))
	}, timeout, interval).Should(Succeed())
	g.Expect(promotionsOf(g, t, ns, "prod")).To(HaveLen(1))

	// The tag names the verified digest again: Mediated by version again, automation resumes.
	reg.retag(t, "1.0.0", v1)
	eventuallyCondition(t, ns, "prod", stagecoachv1.ConditionMediated, metav1.ConditionTrue, stagecoachv1.ReasonMediatedByVersion, "")
	g.Eventually(func(g Gomega) {
		g.Expect(promotionsOf(g, t, ns, "prod")).To(ContainElement(HaveField("Spec.Version.Digest", v2)))
	}, timeout, interval).Should(Succeed())
}

// Issue 37 items 3 and 4: a chart is Mediated by version only when it is pulled from the
// repository where the Stage's versions are judged; a chart from another repository, or from an
// HTTPS Helm repository (no digest behind a version), is Mediated=False with a reason naming both
// and what to change, and a Promotion by version through the latter is refused before the
// write. A Stage with no registry at the head of its upstream chain (it follows by hand or by
// records) resolves the tag in the chart's own repository, and refuses what it cannot tie.
func TestHelmChartFromElsewhere(t *testing.T) {
	ns := newNamespace(t)
	reg := newTestRegistry(t)
	v1 := reg.push(t, "1.0.0")
	host, chart, _ := strings.Cut(reg.repo, "/")
	registrySource := func(s *stagecoachv1.Stage) {
		s.Spec.Source = stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: reg.repo}}
	}
	other := chartApplication(t, ns, "other", host, "charts/payments")
	newStage(t, ns, "other", registrySource)
	https := chartApplication(t, ns, "https", "https://charts.example", "payments")
	newStage(t, ns, "https", registrySource)
	follower := chartApplication(t, ns, "follower", host, chart)
	newStage(t, ns, "follower", nil) // follows the placeholder, which has no registry source
	records := chartApplication(t, ns, "records", "https://charts.example", "payments")
	newStage(t, ns, "records", func(s *stagecoachv1.Stage) {
		s.Spec.Source = stagecoachv1.StageSource{UpstreamRecords: &stagecoachv1.UpstreamRecordsSource{
			Repository: host + "/delivery/streams", Stream: "payments-staging"}}
	})
	startController(t, nil)

	t.Run("a chart from another repository", func(t *testing.T) {
		g := NewWithT(t)
		s := eventuallyCondition(t, ns, "other", stagecoachv1.ConditionMediated, metav1.ConditionFalse, stagecoachv1.ReasonChartRepositoryMismatch,
			"pulls its chart from "+host+"/charts/payments")
		m := meta.FindStatusCondition(s.Status.Conditions, stagecoachv1.ConditionMediated)
		g.Expect(m.Message).To(ContainSubstring("but the Stage's versions are judged in " + reg.repo))
		g.Expect(m.Message).To(ContainSubstring("Point the chart at " + reg.repo))
		g.Expect(other.desiredRevision(other.get())).To(Equal("0.9.0"), "nothing promoted")
	})

	t.Run("a chart from an HTTPS Helm repository", func(t *testing.T) {
		g := NewWithT(t)
		eventuallyCondition(t, ns, "https", stagecoachv1.ConditionMediated, metav1.ConditionFalse, stagecoachv1.ReasonChartNotInRegistry,
			`takes the chart from spec.source repoURL "https://charts.example", chart "payments": an HTTPS Helm repository`)
		newPromotion(t, ns, "https-v1", "https", stagecoachv1.ActionPromote, v1, "1.0.0")
		refused := eventuallyPhase(t, ns, "https-v1", stagecoachv1.PhaseFailed)
		g.Expect(refused.Status.Message).To(ContainSubstring("not applied (ChartNotInRegistry)"))
		g.Expect(refused.Status.Message).To(ContainSubstring("promote by digest instead"))
		rev, _, _ := unstructured.NestedString(https.get().Object, "spec", "source", "targetRevision")
		g.Expect(rev).To(Equal("0.9.0"))
	})

	t.Run("no registry at the head of the chain: the chart's own repository", func(t *testing.T) {
		g := NewWithT(t)
		eventuallyCondition(t, ns, "follower", stagecoachv1.ConditionMediated, metav1.ConditionTrue, stagecoachv1.ReasonMediatedByVersion,
			"in the chart's own repository "+reg.repo+" (no registry source heads this Stage's upstream chain)")
		repushed := reg.push(t, "1.0.0")
		newPromotion(t, ns, "follower-v1", "follower", stagecoachv1.ActionPromote, v1, "1.0.0")
		refused := eventuallyPhase(t, ns, "follower-v1", stagecoachv1.PhaseFailed)
		g.Expect(refused.Status.Message).To(ContainSubstring(`not applied (TagMismatch): tag "1.0.0" of ` + reg.repo + " names " + repushed))
		newPromotion(t, ns, "follower-v1b", "follower", stagecoachv1.ActionPromote, repushed, "1.0.0")
		follower.deploy(repushed, false, "Succeeded", "Healthy")
		eventuallyPhase(t, ns, "follower-v1b", stagecoachv1.PhaseSucceeded)
	})

	t.Run("a records follower with a chart it cannot tie", func(t *testing.T) {
		eventuallyCondition(t, ns, "records", stagecoachv1.ConditionMediated, metav1.ConditionFalse, stagecoachv1.ReasonChartNotInRegistry,
			"refuses to promote by version here")
		_ = records
	})
}
