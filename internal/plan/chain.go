package plan

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// GateInputs are the facts the gates decide from. The controller gathers them (objects,
// signature verdicts, the clock); nothing in a gate reads the cluster, so the reconciler, the
// CLI and tests run the same chain on the same facts.
type GateInputs struct {
	Stage *stagecoachv1.Stage
	// Digest is the version the gates decide on.
	Digest string
	// BreakGlass passes the time windows (as it passes a Freeze).
	BreakGlass bool
	Now        time.Time
	// Signature is the verifier's verdict on Digest; needed when the Stage verifies signatures.
	Signature *SignatureVerdict
	// Attestations is the verdict on the attestations Digest carries; needed when the Stage
	// requires some (verify.attestations).
	Attestations *SignatureVerdict
	// Approvals are the Stage's Approvals (of any digest).
	Approvals []stagecoachv1.Approval
	// Promoters asked for Digest by hand, here or anywhere up the upstream chain: they cannot
	// approve it.
	Promoters []Promoter
	// Dependencies are the Stages spec.dependsOn names, by key, read live; a missing key is a
	// missing Stage.
	Dependencies map[types.NamespacedName]Dependency
	// KubernetesVersion is the API server's version (for spec.prerequisites.kubernetesVersion).
	KubernetesVersion string
	// MatchVersion compares a dependency's version with its constraint.
	MatchVersion VersionMatcher
	// Published is what a follower's upstream records, read afresh, say of Digest; needed when
	// the Stage follows upstreamRecords (ApplyGates).
	Published *PublishedVerdict
	// Checks is the verdict of the checks before apply; gathered only once every other gate of
	// ApplyGates passes (ChecksDue), as they call out.
	Checks *ChecksVerdict
	// Candidate is the version the source offers, when automation judges it (soak reads when it
	// was verified upstream or first seen).
	Candidate *Candidate
	// Automated: automation judges the candidate (AutomationBlocks); the gates used for a
	// person's Promotion too then hold rather than note (mediated).
	Automated bool
}

// ChecksVerdict is where the checks before apply stand for one promote.
type ChecksVerdict struct {
	// Done: every check has a verdict; until then they run.
	Done bool
	// Results are the checks' verdicts (GateCheckPrefix + name), once Done.
	Results []stagecoachv1.GateResult
}

// Failed joins the messages of the checks that failed ("" when none did).
func (v *ChecksVerdict) Failed() string {
	var failures []string
	for _, r := range v.Results {
		if !r.Passed {
			failures = append(failures, r.Message)
		}
	}
	return strings.Join(failures, "; ")
}

// SignatureVerdict is what the verifier said of a digest: Block is nil when a trusted key signed
// it, and Message says how.
type SignatureVerdict struct {
	Block   *stagecoachv1.GateBlock
	Message string
}

// PublishedVerdict is what a follower's upstream records, read afresh, say of a version about to
// be promoted.
type PublishedVerdict struct {
	// Block refuses the promote for now (NotPublished); nil when it may go.
	Block *stagecoachv1.GateBlock
	// Excluded: the records rule the version out for good (it failed, was rolled back or frozen
	// upstream).
	Excluded bool
	// Evidence, when it may go, cites the record it relied on.
	Evidence string
}

// Use says where a gate of Chain is asked.
type Use uint8

const (
	// UseAutomation: before automation promotes the candidate (status.candidate); a person's
	// Promotion passes it.
	UseAutomation Use = 1 << iota
	// UsePromote: on the candidate and on every promote when it starts, automatic or a person's.
	UsePromote
	// UseStart: only when a promote starts, because it reads afresh or calls out.
	UseStart
)

// Gate is one link of a chain of pure checks.
type Gate struct {
	Name string
	// Use says where the gate is asked (UseAutomation, UsePromote, UseStart, or several).
	Use Use
	// Asks reports whether the Stage asks for this gate at all (then its inputs are gathered).
	Asks func(stage *stagecoachv1.Stage) bool
	// Decide returns the blocks that hold the version (none: it passes) and what a pass says.
	Decide func(in GateInputs) (blocks []stagecoachv1.GateBlock, passed string)
	// Refuses, when set, says why the version is ruled out for good ("" when it is not): the
	// Promotion then fails instead of waiting (see Refusal).
	Refuses func(in GateInputs) string
	// Verdicts, when set and not empty, stand for the gate's one verdict (a verdict per check).
	Verdicts func(in GateInputs) []stagecoachv1.GateResult
}

// Chain is every gate, in the one order they are asked, each with where it applies: first what
// holds only automation (a version that failed here, suspend, a frozen Stage, a hold, soak,
// auto), then what every promote passes (signature, windows, approvals, dependencies,
// prerequisites; mediated holds automation only), then what is asked only when a promote starts (the follower's
// records read afresh, then the checks before apply, which call out and so come last: ChecksDue).
var Chain = []Gate{
	{Name: stagecoachv1.GateHistory, Use: UseAutomation, Asks: always, Decide: decideHistory},
	{Name: stagecoachv1.GateSuspend, Use: UseAutomation, Asks: always, Decide: decideSuspend},
	{Name: stagecoachv1.GateFreeze, Use: UseAutomation, Asks: always, Decide: decideStageFrozen},
	{Name: stagecoachv1.GateHold, Use: UseAutomation, Asks: always, Decide: decideHold},
	{Name: stagecoachv1.GateSoak, Use: UseAutomation, Asks: always, Decide: decideSoak},
	{Name: stagecoachv1.GateAuto, Use: UseAutomation, Asks: always, Decide: decideAuto},
	{Name: stagecoachv1.GateSignature, Use: UsePromote, Asks: asksSignature, Decide: decideSignature},
	{Name: stagecoachv1.GateAttestations, Use: UsePromote, Asks: asksAttestations, Decide: decideAttestations},
	{Name: stagecoachv1.GateWindow, Use: UsePromote, Asks: asksWindows, Decide: decideWindows},
	{Name: stagecoachv1.GateApprovals, Use: UsePromote, Asks: asksApprovals, Decide: decideApprovals},
	{Name: stagecoachv1.GateDependsOn, Use: UsePromote, Asks: asksDependencies, Decide: decideDependencies},
	{Name: stagecoachv1.GatePrereqs, Use: UsePromote, Asks: asksPrerequisites, Decide: decidePrerequisites},
	// Holds automation while something besides the digest decides what runs; never holds a
	// promote (automation already waits), and a person's Promotion records it.
	{Name: stagecoachv1.GateMediated, Use: UseAutomation | UsePromote, Asks: notMediated, Decide: decideMediated},
	{Name: stagecoachv1.GatePublished, Use: UseStart, Asks: asksPublished, Decide: decidePublished, Refuses: refusesPublished},
	{Name: stagecoachv1.GateChecks, Use: UseStart, Asks: asksChecks, Decide: decideChecks, Refuses: refusesChecks, Verdicts: checkVerdicts},
}

// ChainFor is the gates of Chain asked where use says, in Chain's order.
func ChainFor(use Use) []Gate {
	var out []Gate
	for _, g := range Chain {
		if g.Use&use != 0 {
			out = append(out, g)
		}
	}
	return out
}

var (
	// AutomationGates hold a candidate back from automatic promotion (a person's Promotion passes
	// them): AutomationBlocks runs them.
	AutomationGates = ChainFor(UseAutomation)
	// PromoteGates are what a version passes before it is applied, for automation and for a
	// person's Promotion alike: status.candidate is judged by them (and AutomationGates).
	PromoteGates = ChainFor(UsePromote)
	// ApplyGates are what a promote passes when it starts: PromoteGates, then those asked only
	// then. Automation's candidate came from the follower's records already (it offers only what
	// they show verified), so status.candidate is judged without them.
	ApplyGates = ChainFor(UsePromote | UseStart)
)

// CandidateGates are the gate names status.candidate.blockedBy may hold: the source's (it offers
// no version), then the gates a candidate is judged by (AutomationGates and PromoteGates, in
// Chain's order), then the published gate a record follower's source asks before it offers one.
func CandidateGates() []string {
	names := []string{stagecoachv1.GateSource}
	for _, g := range ChainFor(UseAutomation | UsePromote) {
		names = append(names, g.Name)
	}
	return append(names, stagecoachv1.GatePublished)
}

func always(*stagecoachv1.Stage) bool { return true }

// ChecksDue reports whether the checks before apply should run for a starting promote: the
// Stage has some and every gate before them passes. They call out (HTTP, plugins), so they are
// not started for a version another gate still holds or refuses.
func ChecksDue(in GateInputs) bool {
	if !asksChecks(in.Stage) {
		return false
	}
	// Every gate before them, found by name: not "all but the last", which holds only while they are.
	before := ApplyGates[:slices.IndexFunc(ApplyGates, func(g Gate) bool { return g.Name == stagecoachv1.GateChecks })]
	if Refusal(before, in) != "" {
		return false
	}
	blocks, _ := RunGates(before, in)
	return len(blocks) == 0
}

func notMediated(stage *stagecoachv1.Stage) bool {
	m := meta.FindStatusCondition(stage.Status.Conditions, stagecoachv1.ConditionMediated)
	return m != nil && m.Status == metav1.ConditionFalse
}

// Asks reports whether the Stage asks for the named gate of Chain (false for a name not in it).
func Asks(stage *stagecoachv1.Stage, gate string) bool {
	for _, g := range Chain {
		if g.Name == gate {
			return g.Asks(stage)
		}
	}
	return false
}

// RunGates runs a chain on the inputs: every block, and one verdict per gate the Stage asks for.
func RunGates(chain []Gate, in GateInputs) ([]stagecoachv1.GateBlock, []stagecoachv1.GateResult) {
	var blocks []stagecoachv1.GateBlock
	var results []stagecoachv1.GateResult
	for _, g := range chain {
		if !g.Asks(in.Stage) {
			continue
		}
		held, passed := g.Decide(in)
		blocks = append(blocks, held...)
		if g.Verdicts != nil {
			if own := g.Verdicts(in); len(own) > 0 {
				results = append(results, own...)
				continue
			}
		}
		if len(held) == 0 {
			results = append(results, stagecoachv1.GateResult{Gate: g.Name, Passed: true, Message: passed})
			continue
		}
		msgs := make([]string, 0, len(held))
		for _, b := range held {
			msgs = append(msgs, b.Message)
		}
		results = append(results, stagecoachv1.GateResult{Gate: g.Name, Message: strings.Join(msgs, "; ")})
	}
	return blocks, results
}

// Refusal is why a gate of the chain the Stage asks for rules the version out for good ("" when
// none does): the Promotion then fails, whatever the other gates say.
func Refusal(chain []Gate, in GateInputs) string {
	for _, g := range chain {
		if g.Refuses == nil || !g.Asks(in.Stage) {
			continue
		}
		if why := g.Refuses(in); why != "" {
			return why
		}
	}
	return ""
}

func asksSignature(stage *stagecoachv1.Stage) bool {
	if g := stage.Spec.Source.Git; g != nil {
		return g.Verify != nil
	}
	src := stage.Spec.Source.Registry
	return src != nil && src.Verify != nil
}

func decideSignature(in GateInputs) ([]stagecoachv1.GateBlock, string) {
	return decideVerdict(stagecoachv1.GateSignature, in.Signature, "the signature of "+in.Digest+" was not checked")
}

// AttestationRequirements are the attestations the Stage requires of each version: its registry
// source's verify.attestations, or its upstream source's.
func AttestationRequirements(stage *stagecoachv1.Stage) []stagecoachv1.AttestationRequirement {
	switch src := stage.Spec.Source; {
	case src.Registry != nil && src.Registry.Verify != nil:
		return src.Registry.Verify.Attestations
	case src.Upstream != nil && src.Upstream.Verify != nil:
		return src.Upstream.Verify.Attestations
	}
	return nil
}

func asksAttestations(stage *stagecoachv1.Stage) bool {
	return len(AttestationRequirements(stage)) > 0
}

func decideAttestations(in GateInputs) ([]stagecoachv1.GateBlock, string) {
	return decideVerdict(stagecoachv1.GateAttestations, in.Attestations, "the attestations of "+in.Digest+" were not checked")
}

// decideVerdict is a verifier's gate: held by the verdict's block, and never passed when nothing
// was checked.
func decideVerdict(gate string, v *SignatureVerdict, notChecked string) ([]stagecoachv1.GateBlock, string) {
	if v == nil {
		return []stagecoachv1.GateBlock{{Gate: gate, Reason: stagecoachv1.ReasonVerificationUnavailable, Message: notChecked}}, ""
	}
	if b := v.Block; b != nil {
		held := *b
		held.Gate = gate
		return []stagecoachv1.GateBlock{held}, ""
	}
	return nil, v.Message
}

func asksWindows(stage *stagecoachv1.Stage) bool {
	return stage.Spec.Promotion != nil && len(stage.Spec.Promotion.Windows) > 0
}

func decideWindows(in GateInputs) ([]stagecoachv1.GateBlock, string) {
	if in.BreakGlass {
		return nil, "passed with break-glass"
	}
	return asList(windowBlock(in.Stage.Spec.Promotion.Windows, in.Now)), "inside the promotion windows"
}

func asksApprovals(stage *stagecoachv1.Stage) bool {
	p := stage.Spec.Promotion
	return p != nil && p.Approvals != nil && p.Approvals.Required > 0
}

func decideApprovals(in GateInputs) ([]stagecoachv1.GateBlock, string) {
	return asList(approvalBlock(in.Stage, in.Digest, in.Approvals, in.Promoters)),
		fmt.Sprintf("approved by %d", in.Stage.Spec.Promotion.Approvals.Required)
}

func asksDependencies(stage *stagecoachv1.Stage) bool {
	return len(stage.Spec.DependsOn) > 0
}

func decideDependencies(in GateInputs) ([]stagecoachv1.GateBlock, string) {
	return dependsOnBlocks(in.Stage, in.Dependencies, in.MatchVersion), "every dependency is Verified at a matching version and settled"
}

func asksPrerequisites(stage *stagecoachv1.Stage) bool {
	p := stage.Spec.Prerequisites
	return p != nil && p.KubernetesVersion != ""
}

func decidePrerequisites(in GateInputs) ([]stagecoachv1.GateBlock, string) {
	want := in.Stage.Spec.Prerequisites.KubernetesVersion
	block := func(format string, args ...any) []stagecoachv1.GateBlock {
		return []stagecoachv1.GateBlock{{Gate: stagecoachv1.GatePrereqs, Reason: stagecoachv1.ReasonKubernetesVersion,
			Message: fmt.Sprintf(format, args...)}}
	}
	if in.KubernetesVersion == "" {
		return block("the API server's version is unknown, so spec.prerequisites.kubernetesVersion %q cannot be checked", want), ""
	}
	ok, err := in.MatchVersion(want, in.KubernetesVersion)
	switch {
	case err != nil:
		return block("cannot compare the API server's version %s with spec.prerequisites.kubernetesVersion %q: %v", in.KubernetesVersion, want, err), ""
	case !ok:
		return block("the API server runs Kubernetes %s, which does not meet spec.prerequisites.kubernetesVersion %q: upgrade the cluster or change the constraint",
			in.KubernetesVersion, want), ""
	}
	return nil, fmt.Sprintf("Kubernetes %s meets %q", in.KubernetesVersion, want)
}

func asksPublished(stage *stagecoachv1.Stage) bool {
	return stage.Spec.Source.UpstreamRecords != nil
}

func decidePublished(in GateInputs) ([]stagecoachv1.GateBlock, string) {
	if in.Published == nil {
		// Never pass a version nobody checked against the records.
		return []stagecoachv1.GateBlock{{Gate: stagecoachv1.GatePublished, Reason: stagecoachv1.ReasonNotPublished,
			Message: in.Digest + " was not checked against the upstream's records"}}, ""
	}
	if b := in.Published.Block; b != nil {
		held := *b
		held.Gate = stagecoachv1.GatePublished
		return []stagecoachv1.GateBlock{held}, ""
	}
	return nil, in.Published.Evidence
}

// refusesPublished: a version the upstream's records exclude (it failed, was rolled back or
// frozen there) is never taken, so waiting would not help.
func refusesPublished(in GateInputs) string {
	if v := in.Published; v != nil && v.Excluded && v.Block != nil {
		return v.Block.Reason + ": " + v.Block.Message
	}
	return ""
}

func asksChecks(stage *stagecoachv1.Stage) bool {
	return len(stage.GetPreApplyChecks()) > 0
}

func decideChecks(in GateInputs) ([]stagecoachv1.GateBlock, string) {
	v := in.Checks
	if v == nil || !v.Done {
		names := make([]string, 0, len(in.Stage.GetPreApplyChecks()))
		for _, c := range in.Stage.GetPreApplyChecks() {
			names = append(names, c.Name)
		}
		return []stagecoachv1.GateBlock{{Gate: stagecoachv1.GateChecks, Reason: stagecoachv1.ReasonChecksRunning,
			Message: "running the checks before apply (" + strings.Join(names, ", ") + ")"}}, ""
	}
	if failed := v.Failed(); failed != "" {
		return []stagecoachv1.GateBlock{{Gate: stagecoachv1.GateChecks, Reason: stagecoachv1.ReasonCheckFailed, Message: failed}}, ""
	}
	return nil, "every check before apply passed"
}

// refusesChecks: a check that failed before apply fails the Promotion (its verdict is final for
// this run; a new Promotion runs the checks again).
func refusesChecks(in GateInputs) string {
	if v := in.Checks; v != nil && v.Done {
		return v.Failed()
	}
	return ""
}

func checkVerdicts(in GateInputs) []stagecoachv1.GateResult {
	if v := in.Checks; v != nil && v.Done {
		return v.Results
	}
	return nil
}

func asList(b *stagecoachv1.GateBlock) []stagecoachv1.GateBlock {
	if b == nil {
		return nil
	}
	return []stagecoachv1.GateBlock{*b}
}
