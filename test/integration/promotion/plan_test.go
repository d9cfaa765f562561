package promotion

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/cli"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
)

// `stagecoach plan` explains, from the objects on the API server, what each Stage runs, what it
// is doing and what holds it back.
func TestPlanExplainsStages(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	stagingApp, _ := newPipeline(t, ns, nil, nil)
	startController(t, nil)
	promoteAndLand(t, ns, "staging", stagingApp, "staging-v1", 1)
	newPromotion(t, ns, "staging-v2", "staging", stagecoachv1.ActionPromote, digest(2), "v2.0.0")
	stagingApp.waitForRevision(digest(2), false)

	g.Eventually(func(g Gomega) {
		var out bytes.Buffer
		g.Expect(cli.Plan(t.Context(), env.Client, cli.PlanOptions{Namespace: ns}, &out, time.Now())).To(Succeed())
		text := out.String()
		g.Expect(text).To(ContainSubstring(ns + "/prod (payments, prod)"))
		g.Expect(text).To(ContainSubstring("candidate: v1.0.0 (sha256:000000000000)"))
		g.Expect(text).To(ContainSubstring("blocked by auto: automatic promotion is off for this Stage"))
		g.Expect(text).To(ContainSubstring(ns + "/staging (payments, staging)"))
		g.Expect(text).To(ContainSubstring("runs:      v1.0.0 (sha256:000000000000), verified"))
		g.Expect(text).To(ContainSubstring("promoting: Promotion staging-v2 applies v2.0.0 (sha256:000000000000): waiting for Argo CD to sync " + digest(2)))
	}, timeout, interval).Should(Succeed())

	var structured bytes.Buffer
	g.Expect(cli.Plan(t.Context(), env.Client, cli.PlanOptions{Namespace: ns, Stage: "prod", Output: "json"}, &structured, time.Now())).To(Succeed())
	var explained []plan.Explanation
	g.Expect(json.Unmarshal(structured.Bytes(), &explained)).To(Succeed(), structured.String())
	g.Expect(explained).To(HaveLen(1))
	g.Expect(explained[0].Name).To(Equal("prod"))
	g.Expect(explained[0].Candidate).NotTo(BeNil())
	g.Expect(explained[0].Candidate.Digest).To(Equal(digest(1)))
	g.Expect(explained[0].Candidate.BlockedBy).To(ContainElement(HaveField("Gate", stagecoachv1.GateAuto)))
	structured.Reset()
	g.Expect(cli.Plan(t.Context(), env.Client, cli.PlanOptions{Namespace: ns, Stage: "prod", Output: "yaml"}, &structured, time.Now())).To(Succeed())
	g.Expect(structured.String()).To(ContainSubstring("gate: auto"))
	g.Expect(cli.Plan(t.Context(), env.Client, cli.PlanOptions{Namespace: ns, Output: "xml"}, &structured, time.Now())).To(
		MatchError(`unknown output format "xml": use text, json or yaml`))

	var out bytes.Buffer
	err := cli.Plan(t.Context(), env.Client, cli.PlanOptions{Namespace: ns, Stage: "nope"}, &out, time.Now())
	g.Expect(err).To(MatchError(ContainSubstring(`stage "nope" not found in namespace "` + ns + `" (use -n NAMESPACE or -A)`)))
}
