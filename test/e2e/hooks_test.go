package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
)

// Releases of the hook scenario after the first (which only puts the environments in place):
// the first hooksOnReleases with the engines' notifications wired to the controller, the rest
// without, to compare.
const (
	hooksOnReleases  = 5
	hooksOffReleases = 4
)

// The engines' notifiers post to the controller's hooks: Flux's notification-controller through a
// generic-hmac Provider and Alert, Argo CD's argocd-notifications through the stagecoach webhook
// of manifests/argocd/notifications. Three Stages: dev (Flux OCIRepository + Kustomization,
// promoted by a person), staging and prod (Argo CD Applications, each following the one before,
// automatically, grace 0). For every release the test watches the engine's landed signal (dev's
// Kustomization Ready at the digest; staging's Application sync Succeeded, Synced and Healthy at
// the digest) and the next Stage's applier patch (the downstream Application's targetRevision
// becoming the digest), and the hook deliveries in between. Each hook must reach the controller,
// pass its signature or token check and wake the Stage that applies through the object; after the
// Alert is suspended and the subscription removed, no more hooks come and promotion still flows.
//
// The controller also watches every applier, so a hook is a second, slower path: the latencies
// with and without hooks are reported side by side (REPORT lines), not asserted.
func TestHookReactionLatency(t *testing.T) {
	sc := env.Scenario(t)
	rec := sc.HookRecorder()
	sc.G.Expect(sc.StartArgoCDNotifications(sc.Ctx(), rec.URL())).To(Succeed())
	sc.FluxHookAlert(rec.URL())

	repo := sc.NS + "/payments"
	type release struct{ tag, digest string }
	var releases []release
	for i := range 1 + hooksOnReleases + hooksOffReleases {
		tag := fmt.Sprintf("v%d.0.0", i)
		releases = append(releases, release{tag, sc.Push(repo, tag, map[string]string{"configmap.yaml": localstack.ConfigMap("payments", tag)})})
	}

	devNS, stagingNS, prodNS := sc.TargetNamespace("dev"), sc.TargetNamespace("staging"), sc.TargetNamespace("prod")
	sc.FluxOCISource("payments-dev", repo, releases[0].tag, "dev", devNS)
	sc.G.Expect(sc.ArgoCDOCIRepository(sc.Ctx(), repo)).To(Succeed())
	for _, app := range []struct{ name, stage, target, annotations string }{
		{"payments-staging", "staging", stagingNS, `annotations: {notifications.argoproj.io/subscribe.on-stagecoach-deployed.stagecoach: ""}`},
		{"payments-prod", "prod", prodNS, ""},
	} {
		sc.Apply(fmt.Sprintf(`
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: %[1]s
  labels: {stagecoach.dev/stage: %[2]s}
  %[5]s
spec:
  project: default
  source: {repoURL: %[3]s, path: ., targetRevision: ""}
  destination: {server: https://kubernetes.default.svc, namespace: %[4]s}
  syncPolicy:
    automated: {prune: true, selfHeal: true}
`, app.name, app.stage, sc.Registry.OCIURL(repo), app.target, app.annotations))
	}
	noGrace := func(s *stagecoachv1.Stage) {
		s.Spec.Verification = &stagecoachv1.VerificationPolicy{Grace: &metav1.Duration{}}
	}
	auto := func(s *stagecoachv1.Stage) {
		noGrace(s)
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true}
	}
	sc.Stage("dev", "payments", "dev",
		stagecoachv1.ApplierReference{Kind: "OCIRepository", Name: "payments-dev", Kustomization: "payments-dev-apply"},
		stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "none"}}, noGrace)
	sc.Stage("staging", "payments", "staging", stagecoachv1.ApplierReference{Kind: "Application", Name: "payments-staging"},
		stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "dev"}}, auto)
	sc.Stage("prod", "payments", "prod", stagecoachv1.ApplierReference{Kind: "Application", Name: "payments-prod"},
		stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "staging"}}, auto)

	seen := &firstSeen{at: map[string]time.Time{}}
	sc.Watch("kustomize.toolkit.fluxcd.io/v1", "Kustomization", func(at time.Time, u *unstructured.Unstructured) {
		if u.GetName() == "payments-dev-apply" && readyTrue(u) {
			seen.mark("flux-landed", revisionDigest(localstack.Field(u, "status", "lastAppliedRevision")), at)
		}
	})
	sc.Watch("argoproj.io/v1alpha1", "Application", func(at time.Time, u *unstructured.Unstructured) {
		seen.mark("patched/"+u.GetName(), localstack.Field(u, "spec", "source", "targetRevision"), at)
		rev := localstack.Field(u, "status", "operationState", "syncResult", "revision")
		if localstack.Field(u, "status", "operationState", "phase") == "Succeeded" && localstack.Field(u, "status", "sync", "status") == "Synced" &&
			localstack.Field(u, "status", "sync", "revision") == rev && localstack.Field(u, "status", "health", "status") == "Healthy" {
			seen.mark("argocd-landed/"+u.GetName(), rev, at)
		}
	})

	// Forged notifications are turned away by the real binary.
	for _, path := range []string{"/hooks/flux", "/hooks/argocd"} {
		resp, err := http.Post(rec.URL()+path, "application/json", strings.NewReader(`{"app":"payments-prod","namespace":"`+sc.NS+`"}`))
		sc.G.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		sc.G.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), "unsigned POST %s", path)
	}

	var fluxHook, fluxReact, argoHook, argoReact [2][]time.Duration // [0] without hooks, [1] with
	for i, rel := range releases {
		hooksOn := i <= hooksOnReleases
		if i == hooksOnReleases+1 {
			sc.MergePatch("notification.toolkit.fluxcd.io/v1beta3", "Alert", "stagecoach", `{"spec":{"suspend":true}}`)
			sc.MergePatch("argoproj.io/v1alpha1", "Application", "payments-staging",
				`{"metadata":{"annotations":{"notifications.argoproj.io/subscribe.on-stagecoach-deployed.stagecoach":null}}}`)
		}
		created := time.Now()
		sc.Promote("dev", rel.tag, rel.digest)
		dev := sc.WaitVerified("dev", rel.digest, created)
		staging := sc.WaitVerified("staging", rel.digest, dev.Verified)
		sc.WaitVerified("prod", rel.digest, staging.Verified)

		fluxLanded, stagingPatched := seen.get(sc.G, "flux-landed", rel.digest), seen.get(sc.G, "patched/payments-staging", rel.digest)
		argoLanded, prodPatched := seen.get(sc.G, "argocd-landed/payments-staging", rel.digest), seen.get(sc.G, "patched/payments-prod", rel.digest)
		var fluxDelivered, argoDelivered time.Time
		if hooksOn {
			// The notifiers may post after the watch already moved the pipeline on.
			sc.G.Eventually(func(g Gomega) {
				fluxDelivered = firstDelivery(g, rec.Deliveries(), "/hooks/flux", rel.digest, isKustomizationEvent("payments-dev-apply"))
				argoDelivered = firstDelivery(g, rec.Deliveries(), "/hooks/argocd", rel.digest, isArgoCDEvent("payments-staging"))
			}, 30*time.Second, 100*time.Millisecond).Should(Succeed(), "hooks of %s", rel.tag)
		}
		t.Logf("%s: flux landed %s → staging patched %s; argocd landed %s → prod patched %s; hooks %v (flux %s, argocd %s)",
			rel.tag, fluxLanded.Format(time.StampMilli), stagingPatched.Format(time.StampMilli), argoLanded.Format(time.StampMilli),
			prodPatched.Format(time.StampMilli), hooksOn, fluxDelivered.Format(time.StampMilli), argoDelivered.Format(time.StampMilli))
		if i == 0 {
			continue // the first release creates the Promotions' watches and caches; not measured
		}
		on := 0
		if hooksOn {
			on = 1
			fluxHook[on] = append(fluxHook[on], fluxDelivered.Sub(fluxLanded))
			argoHook[on] = append(argoHook[on], argoDelivered.Sub(argoLanded))
		}
		fluxReact[on] = append(fluxReact[on], stagingPatched.Sub(fluxLanded))
		argoReact[on] = append(argoReact[on], prodPatched.Sub(argoLanded))
	}

	// Without hooks, nothing was posted for the later releases.
	for _, rel := range releases[hooksOnReleases+1:] {
		for _, d := range rec.Deliveries() {
			if d.Path == "/hooks/argocd" || isKustomizationEvent("payments-dev-apply")(d) {
				sc.G.Expect(string(d.Body)).NotTo(ContainSubstring(rel.digest), "a hook for %s after the hooks were turned off", rel.tag)
			}
		}
	}

	// Negative: the first hook naming the digest arrived before this test's watch saw the landed
	// status. kustomize-controller sends the apply's change-set event before its deferred status
	// patch; argocd-notifications and this test watch the same write, and either may see it first.
	// A hook that early wakes the Stage on a status not yet written: one reason hooks do not make
	// the reaction faster than the controller's own watch.
	report("hooks: Flux Kustomization Ready → /hooks/flux delivered          %s", percentiles(fluxHook[1]))
	report("hooks: Argo CD Application Succeeded+Healthy → /hooks/argocd delivered %s", percentiles(argoHook[1]))
	report("hooks: Flux landed → next Stage's Application patched, with hooks    %s", percentiles(fluxReact[1]))
	report("hooks: Flux landed → next Stage's Application patched, without hooks %s", percentiles(fluxReact[0]))
	report("hooks: Argo CD landed → next Stage's Application patched, with hooks    %s", percentiles(argoReact[1]))
	report("hooks: Argo CD landed → next Stage's Application patched, without hooks %s", percentiles(argoReact[0]))
}

// firstSeen keeps, per signal and digest, when the watch first saw it.
type firstSeen struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (f *firstSeen) mark(signal, digest string, at time.Time) {
	if digest == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.at[signal+"@"+digest]; !ok {
		f.at[signal+"@"+digest] = at
	}
}

func (f *firstSeen) get(g Gomega, signal, digest string) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	at, ok := f.at[signal+"@"+digest]
	g.Expect(ok).To(BeTrue(), "the watch never saw %s for %s", signal, digest)
	return at
}

func readyTrue(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// revisionDigest is the digest of a Flux revision such as v1.0.0@sha256:….
func revisionDigest(rev string) string {
	if i := strings.LastIndex(rev, "@"); i >= 0 {
		return rev[i+1:]
	}
	return rev
}

// isKustomizationEvent matches Flux events that kustomize-controller reported about name.
func isKustomizationEvent(name string) func(localstack.HookDelivery) bool {
	return func(d localstack.HookDelivery) bool {
		var e struct {
			InvolvedObject      struct{ Kind, Name string } `json:"involvedObject"`
			ReportingController string                      `json:"reportingController"`
		}
		return d.Path == "/hooks/flux" && json.Unmarshal(d.Body, &e) == nil &&
			e.InvolvedObject.Kind == "Kustomization" && e.InvolvedObject.Name == name && e.ReportingController == "kustomize-controller"
	}
}

// isArgoCDEvent matches the stagecoach-event template's notifications about app.
func isArgoCDEvent(app string) func(localstack.HookDelivery) bool {
	return func(d localstack.HookDelivery) bool {
		var e struct{ App string }
		return json.Unmarshal(d.Body, &e) == nil && e.App == app
	}
}

// firstDelivery is when the first hook on path mentioning digest and matching arrived; it must
// have been accepted and woken a Stage.
func firstDelivery(g Gomega, deliveries []localstack.HookDelivery, path, digest string, match func(localstack.HookDelivery) bool) time.Time {
	for _, d := range deliveries {
		if d.Path != path || !strings.Contains(string(d.Body), digest) || !match(d) {
			continue
		}
		g.Expect(d.Status).To(Equal(http.StatusAccepted), "hook %s answered %d: %s", path, d.Status, d.Answer)
		g.Expect(d.Answer).To(HavePrefix("woke 1 Stage(s)"), "hook %s", path)
		return d.At
	}
	g.Expect(false).To(BeTrue(), "no hook on %s for %s yet (%d deliveries)", path, digest, len(deliveries))
	return time.Time{}
}

// percentiles formats the p50 and p99 (nearest rank) of samples.
func percentiles(samples []time.Duration) string {
	if len(samples) == 0 {
		return "no samples"
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return fmt.Sprintf("p50 %6s  p99 %6s  (n=%d, min %s, max %s)", rank(0.50).Round(time.Millisecond), rank(0.99).Round(time.Millisecond),
		len(s), s[0].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}
