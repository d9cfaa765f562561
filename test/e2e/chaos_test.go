package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/e2e/localstack"
)

const (
	// chaosKills is how many times the controller is killed during the pipeline.
	chaosKills = 10
	// chaosMaxDelay bounds the random time the controller runs between two kills.
	chaosMaxDelay = 3 * time.Second
	// chaosReleases bounds the releases pushed; the pipeline runs them one after the other until
	// the kills are over (at least chaosMinReleases).
	chaosReleases, chaosMinReleases = 12, 3
	// chaosAPIRestarts are the kills after which kube-apiserver is killed and started again too,
	// while the controller runs.
	chaosAPIRestartAfter1, chaosAPIRestartAfter2 = 2, 6
	// hungWithin bounds how long the Stage listing the hung registry takes to say so, with the
	// controller's default registry deadlines (issue 14: within a minute).
	hungWithin = time.Minute
)

// The controller is killed (SIGKILL) ten times at random moments while releases flow through a
// three-Stage pipeline: dev (Flux OCIRepository + Kustomization, promoted by a person), staging and
// prod (Argo CD Applications following the Stage before, automatically). The delays come from a
// seed printed in a REPORT line (STAGECOACH_CHAOS_SEED replays one). Afterwards every Promotion
// has ended exactly once: Succeeded, its finishedAt written once and never changed (watched the
// whole time), at most one Promotion per Stage and digest (automation never created a second);
// and each Stage's history holds each of its finished Promotions exactly once.
// kube-apiserver is killed and restarted twice on the way (nothing may be double-applied or lost
// either), and a Stage in another namespace lists a registry that accepts connections and never
// answers: that Stage alone turns Ready=False RegistryUnreachable, the pipeline is not held up.
func TestRestartChaos(t *testing.T) {
	sc := env.Scenario(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("STAGECOACH_CHAOS_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		sc.G.Expect(err).NotTo(HaveOccurred(), "STAGECOACH_CHAOS_SEED must be a number")
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	delays := make([]time.Duration, chaosKills)
	for i := range delays {
		delays[i] = time.Duration(rng.Int64N(int64(chaosMaxDelay)))
	}
	report("chaos: seed %d (replay with STAGECOACH_CHAOS_SEED=%d), kill delays %v", seed, seed, delays)

	repo := sc.NS + "/payments"
	type release struct{ tag, digest string }
	var releases []release
	for i := range chaosReleases {
		tag := fmt.Sprintf("v%d.0.0", i)
		releases = append(releases, release{tag, sc.Push(repo, tag, map[string]string{"configmap.yaml": localstack.ConfigMap("payments", tag)})})
	}
	devNS, stagingNS, prodNS := sc.TargetNamespace("dev"), sc.TargetNamespace("staging"), sc.TargetNamespace("prod")
	sc.FluxOCISource("payments-dev", repo, releases[0].tag, "dev", devNS)
	sc.ArgoCDOCIApplication("payments-staging", repo, "", "staging", stagingNS)
	sc.ArgoCDOCIApplication("payments-prod", repo, "", "prod", prodNS)
	auto := func(s *stagecoachv1.Stage) { s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true} }
	sc.Stage("dev", "payments", "dev",
		stagecoachv1.ApplierReference{Kind: "OCIRepository", Name: "payments-dev", Kustomization: "payments-dev-apply"},
		stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "none"}}, nil)
	sc.Stage("staging", "payments", "staging", stagecoachv1.ApplierReference{Kind: "Application", Name: "payments-staging"},
		stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "dev"}}, auto)
	sc.Stage("prod", "payments", "prod", stagecoachv1.ApplierReference{Kind: "Application", Name: "payments-prod"},
		stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "staging"}}, auto)

	// The hung registry's Stage, in a namespace of its own, with a labelled Application.
	hung, err := localstack.StartHungRegistry()
	sc.G.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(hung.Close)
	hungNS := sc.TargetNamespace("hung-stage")
	sc.G.Expect(sc.ArgoCDOCIRepository(sc.Ctx(), repo)).To(Succeed())
	sc.Apply(localstack.ArgoCDOCIApplicationYAML(hungNS, "payments-hung", sc.Registry.OCIURL(repo), releases[0].tag, "hung", sc.TargetNamespace("hung")))
	hungStage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: hungNS, Name: "hung"},
		Spec: stagecoachv1.StageSpec{Service: "payments", Environment: "hung",
			ApplyRef:  stagecoachv1.ApplierReference{Kind: "Application", Name: "payments-hung"},
			Source:    stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: hung.Addr + "/deploy/payments"}},
			Promotion: &stagecoachv1.PromotionPolicy{Auto: true}}}
	sc.G.Expect(sc.Client.Create(sc.Ctx(), hungStage)).To(Succeed())
	hungCreated := time.Now()
	hungSaid := make(chan time.Time, 1) // when the hung Stage first said RegistryUnreachable
	go func() {
		for sc.Ctx().Err() == nil {
			s := &stagecoachv1.Stage{}
			if err := sc.Client.Get(sc.Ctx(), client.ObjectKeyFromObject(hungStage), s); err == nil {
				if c := meta.FindStatusCondition(s.Status.Conditions, stagecoachv1.ConditionReady); c != nil &&
					c.Status == metav1.ConditionFalse && c.Reason == stagecoachv1.ReasonRegistryUnreachable {
					hungSaid <- time.Now()
					return
				}
			}
			time.Sleep(250 * time.Millisecond)
		}
	}()

	finishes := &finishLog{finishedAt: map[string]map[string]bool{}, phases: map[string][]stagecoachv1.Phase{}}
	sc.Watch("stagecoach.dev/v1alpha1", "Promotion", func(_ time.Time, u *unstructured.Unstructured) { finishes.observe(u) })

	// The kills run beside the pipeline; only this goroutine restarts the controller.
	killerDone, killerExited := make(chan error, 1), make(chan struct{})
	var kills, apiRestarts []time.Duration
	start := time.Now()
	lastStart := start // the controller's last start (restart chaos): a killed controller lists again
	go func() {
		defer close(killerExited)
		killerDone <- func() error {
			for i, d := range delays {
				select {
				case <-sc.Ctx().Done():
					return sc.Ctx().Err()
				case <-time.After(d):
				}
				sc.KillController()
				kills = append(kills, time.Since(start))
				if err := sc.StartController(sc.Ctx()); err != nil {
					return fmt.Errorf("restart %d of the controller: %w", i+1, err)
				}
				lastStart = time.Now()
				if i == chaosAPIRestartAfter1 || i == chaosAPIRestartAfter2 {
					select {
					case <-sc.Ctx().Done():
						return sc.Ctx().Err()
					case <-time.After(d):
					}
					if err := sc.RestartAPIServer(sc.Ctx()); err != nil {
						return fmt.Errorf("restart of kube-apiserver after kill %d: %w", i+1, err)
					}
					apiRestarts = append(apiRestarts, time.Since(start))
				}
			}
			return nil
		}()
	}()
	t.Cleanup(func() {
		<-killerExited // the test's context is done: it stops at its next step
		// A failed test may leave the controller dead between a kill and its restart; the next
		// scenario needs one running.
		if ended, _ := sc.Controller.Exited(); ended {
			if err := sc.StartController(context.Background()); err != nil {
				t.Errorf("the controller did not come back after the chaos: %v", err)
			}
		}
	})

	var killErr error
	killing := true
	done := 0
	for i, rel := range releases {
		if !killing && i >= chaosMinReleases {
			break
		}
		created := time.Now()
		sc.Promote("dev", rel.tag, rel.digest)
		dev := sc.WaitVerified("dev", rel.digest, created)
		staging := sc.WaitVerified("staging", rel.digest, dev.Verified)
		sc.WaitVerified("prod", rel.digest, staging.Verified)
		done++
		select {
		case killErr = <-killerDone:
			killing = false
		default:
		}
	}
	if killing {
		killErr = <-killerDone // more kills than releases could cover: let them finish
	}
	sc.G.Expect(killErr).NotTo(HaveOccurred())
	elapsed := time.Since(start)
	last := releases[done-1]
	// The last restart may have come after prod verified: every Stage must still be settled.
	for _, stage := range []string{"dev", "staging", "prod"} {
		sc.WaitVerified(stage, last.digest, time.Time{})
	}

	// A Stage says Verified before its Promotion says Succeeded (the Stage's history is written
	// first, for crash safety): wait until every Promotion has ended.
	var list stagecoachv1.PromotionList
	sc.G.Eventually(func(g Gomega) {
		g.Expect(sc.Client.List(sc.Ctx(), &list, client.InNamespace(sc.NS))).To(Succeed())
		for _, p := range list.Items {
			g.Expect(p.Status.FinishedAt).NotTo(BeNil(), "Promotion %s has not ended (%s)", p.Name, p.Status.Phase)
		}
	}, localstack.WaitTimeout, time.Second/10).Should(Succeed())
	g := sc.G
	perStage := map[string]map[string]bool{} // Stage → its finished Promotions
	perDigest := map[string][]string{}       // Stage/digest → Promotions
	for _, p := range list.Items {
		g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhaseSucceeded), "Promotion %s: %s", p.Name, p.Status.Message)
		g.Expect(p.Status.FinishedAt).NotTo(BeNil(), "Promotion %s has no finishedAt", p.Name)
		if perStage[p.Spec.Stage] == nil {
			perStage[p.Spec.Stage] = map[string]bool{}
		}
		perStage[p.Spec.Stage][p.Name] = true
		key := p.Spec.Stage + "/" + p.Spec.Version.Digest
		perDigest[key] = append(perDigest[key], p.Name)
	}
	for key, names := range perDigest {
		g.Expect(names).To(HaveLen(1), "more than one Promotion of %s", key)
	}
	for _, stage := range []string{"dev", "staging", "prod"} {
		g.Expect(perStage[stage]).To(HaveLen(done), "Promotions of Stage %s", stage)
		var history []string
		for _, h := range sc.GetStage(g, stage).Status.History {
			history = append(history, h.Promotion)
		}
		g.Expect(history).To(ConsistOf(keys(perStage[stage])), "history of Stage %s (newest first) against its finished Promotions", stage)
	}
	g.Expect(finishes.problems()).To(BeEmpty(), "Promotions whose end was written more than once or undone")
	g.Expect(apiRestarts).To(HaveLen(2), "kube-apiserver restarts")

	// The hung registry held only its own Stage: it said so within a minute of its creation or of
	// the controller's last restart (a killed controller lists again), and nothing was promoted there.
	from := hungCreated
	if lastStart.After(from) {
		from = lastStart
	}
	var saidAt time.Time
	g.Eventually(hungSaid, max(hungWithin-time.Since(from), 0)+time.Second).Should(Receive(&saidAt),
		"Stage %s/hung did not turn Ready=False RegistryUnreachable within %s", hungNS, hungWithin)
	hungAfter := max(saidAt.Sub(from), 0)
	g.Expect(hungAfter).To(BeNumerically("<", hungWithin))
	g.Expect(hung.Accepted()).To(BeNumerically(">", 0), "the controller never called the hung registry")
	var hungPromotions stagecoachv1.PromotionList
	g.Expect(sc.Client.List(sc.Ctx(), &hungPromotions, client.InNamespace(hungNS))).To(Succeed())
	g.Expect(hungPromotions.Items).To(BeEmpty())
	report("chaos: %d kills at %v and kube-apiserver restarts at %v over %s; %d releases through dev→staging→prod, %d Promotions, each ended once and in its Stage's history once; the hung registry's Stage said RegistryUnreachable %s after its creation or the last restart",
		len(kills), roundAll(kills), roundAll(apiRestarts), elapsed.Round(100*time.Millisecond), done, len(list.Items), hungAfter.Round(100*time.Millisecond))
}

// finishLog follows every Promotion through a watch: the finishedAt values it ever had, and its
// phases in order.
type finishLog struct {
	mu         sync.Mutex
	finishedAt map[string]map[string]bool
	phases     map[string][]stagecoachv1.Phase
}

func (f *finishLog) observe(u *unstructured.Unstructured) {
	var p stagecoachv1.Promotion
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if p.Status.FinishedAt != nil {
		if f.finishedAt[p.Name] == nil {
			f.finishedAt[p.Name] = map[string]bool{}
		}
		f.finishedAt[p.Name][p.Status.FinishedAt.UTC().Format(time.RFC3339Nano)] = true
	}
	if ph := f.phases[p.Name]; p.Status.Phase != "" && (len(ph) == 0 || ph[len(ph)-1] != p.Status.Phase) {
		f.phases[p.Name] = append(ph, p.Status.Phase)
	}
}

// problems lists Promotions that got more than one finishedAt, or left a finished phase.
func (f *finishLog) problems() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for name, values := range f.finishedAt {
		if len(values) > 1 {
			out = append(out, fmt.Sprintf("%s finished at %v", name, keys(values)))
		}
	}
	for name, phases := range f.phases {
		for i, ph := range phases {
			finished := ph == stagecoachv1.PhaseSucceeded || ph == stagecoachv1.PhaseFailed || ph == stagecoachv1.PhaseAborted
			if finished && i < len(phases)-1 && phases[i+1] != stagecoachv1.PhaseRolledBack {
				out = append(out, fmt.Sprintf("%s went through phases %s", name, joinPhases(phases)))
				break
			}
		}
	}
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func joinPhases(phases []stagecoachv1.Phase) string {
	s := make([]string, len(phases))
	for i, p := range phases {
		s[i] = string(p)
	}
	return strings.Join(s, "→")
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(100 * time.Millisecond)
	}
	return out
}
