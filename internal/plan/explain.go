package plan

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// Explanation is what a Stage runs, what it is doing, and why nothing else moves: the same facts
// the reconciler decided from. It is what `stagecoach plan -o json|yaml` prints.
type Explanation struct {
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	Service     string `json:"service"`
	Environment string `json:"environment"`
	// NotReady says why the Stage is not Ready ("not reconciled yet" before its first reconcile).
	NotReady string `json:"notReady,omitempty"`
	// Takes says, for a Stage of Git commits, where they come from (a Stage of OCI digests says
	// nothing: that is the default).
	Takes string `json:"takes,omitempty"`
	// Writes says, for a Stage that promotes through Git, where its commits or pull requests go.
	Writes string `json:"writes,omitempty"`
	// Requires names the attestations each version must carry (verify.attestations); Attests
	// says that the Stage attaches a promotion attestation to what it verifies (spec.attest).
	Requires string `json:"requires,omitempty"`
	Attests  string `json:"attests,omitempty"`
	// Runs is the verified version running, if any.
	Runs *stagecoachv1.CurrentVersion `json:"runs,omitempty"`
	// Promoting is the running Promotion; Waiting the next one to start.
	Promoting *PromotionSummary `json:"promoting,omitempty"`
	Waiting   *PromotionSummary `json:"waiting,omitempty"`
	Frozen    string            `json:"frozen,omitempty"`
	Held      string            `json:"held,omitempty"`
	// Unguarded says which admission policies the Stage relies on are not enforced.
	Unguarded string `json:"unguarded,omitempty"`
	// Unmediated says what besides the digest decides what runs (automation waits meanwhile).
	Unmediated string `json:"unmediated,omitempty"`
	// Candidate is the next version and every gate that holds it, ordered by gate.
	Candidate *stagecoachv1.CandidateVersion `json:"candidate,omitempty"`
	// Waves are a fleet rollout's waves and what each target waits on (explain_waves.go).
	Waves []WaveExplanation `json:"waves,omitempty"`
	// Records are the Stage's signed records and the upstream stream it follows
	// (explain_records.go).
	Records *RecordsExplanation `json:"records,omitempty"`
	now     time.Time
}

// PromotionSummary names a Promotion and says where it is.
type PromotionSummary struct {
	Name    string                         `json:"name"`
	Action  stagecoachv1.PromotionAction   `json:"action"`
	Version *stagecoachv1.VersionReference `json:"version,omitempty"`
	Message string                         `json:"message,omitempty"`
}

// Explain gathers the Explanation of a Stage from it and its Promotions.
func Explain(stage *stagecoachv1.Stage, promotions []stagecoachv1.Promotion, now time.Time) Explanation {
	e := Explanation{Namespace: stage.Namespace, Name: stage.Name, Service: stage.Spec.Service, Environment: stage.Spec.Environment, now: now}
	if ready := meta.FindStatusCondition(stage.Status.Conditions, stagecoachv1.ConditionReady); ready == nil {
		e.NotReady = "not reconciled yet"
	} else if ready.Status != metav1.ConditionTrue {
		e.NotReady = ready.Reason + ": " + ready.Message
	}
	e.Takes = takes(stage.Spec.Source.Git, stage.Namespace)
	if r := stage.Spec.Source.UpstreamRecords; r != nil && r.GitRepository != nil {
		e.Takes = fmt.Sprintf("Git commits that stream %s verified, each on a branch of %s", r.Stream, r.GitRepository.URL)
	}
	if p := stage.Spec.Promotion; p != nil {
		e.Writes = writes(p.Git)
	}
	e.Requires = requires(AttestationRequirements(stage))
	if stage.Spec.Attest != nil {
		e.Attests = "a signed promotion attestation on each digest it verifies (https://stagecoach.dev/attestation/promotion/v1)"
	}
	e.Runs = stage.Status.Current.DeepCopy()
	q := Queue(promotions)
	if p := q.Running; p != nil && p.Status.Version != nil {
		e.Promoting = &PromotionSummary{Name: p.Name, Action: p.Spec.Action, Version: p.Status.Version.DeepCopy(), Message: p.Status.Message}
	}
	if p := q.Next; p != nil {
		e.Waiting = &PromotionSummary{Name: p.Name, Action: p.Spec.Action, Version: p.Spec.Version.DeepCopy(), Message: p.Status.Message}
	}
	if frozen := meta.FindStatusCondition(stage.Status.Conditions, stagecoachv1.ConditionFrozen); frozen != nil && frozen.Status == metav1.ConditionTrue {
		e.Frozen = frozen.Message
	}
	if h := stage.Status.Hold; h != nil {
		e.Held = h.Message
	}
	if c := meta.FindStatusCondition(stage.Status.Conditions, stagecoachv1.ConditionGuarded); c != nil && c.Status == metav1.ConditionFalse {
		e.Unguarded = c.Message
	}
	if c := meta.FindStatusCondition(stage.Status.Conditions, stagecoachv1.ConditionMediated); c != nil && c.Status == metav1.ConditionFalse {
		e.Unmediated = c.Message
	}
	if c := stage.Status.Candidate; c != nil {
		e.Candidate = c.DeepCopy()
		sort.SliceStable(e.Candidate.BlockedBy, func(i, j int) bool { return e.Candidate.BlockedBy[i].Gate < e.Candidate.BlockedBy[j].Gate })
	}
	if len(stage.Status.Waves) > 0 {
		e.Waves = explainWaves(stage.Status.Waves)
	}
	e.Records = explainRecords(stage, promotions)
	return e
}

// Lines says the Explanation for people, one fact a line.
func (e Explanation) Lines() []string {
	lines := []string{fmt.Sprintf("%s/%s (%s, %s)", e.Namespace, e.Name, e.Service, e.Environment)}
	add := func(format string, args ...any) { lines = append(lines, "  "+fmt.Sprintf(format, args...)) }
	switch {
	case e.NotReady == "not reconciled yet":
		add("not reconciled yet")
	case e.NotReady != "":
		add("not ready: %s", e.NotReady)
	}
	if cur := e.Runs; cur != nil {
		verified := ""
		if cur.VerifiedAt != nil {
			verified = fmt.Sprintf(", verified %s ago", e.now.Sub(cur.VerifiedAt.Time).Round(time.Second))
		}
		add("runs:      %s%s", describeVersion(cur.Version, cur.Digest), verified)
	} else {
		add("runs:      nothing verified yet")
	}
	if e.Takes != "" {
		add("takes:     %s", e.Takes)
	}
	if e.Writes != "" {
		add("writes:    %s", e.Writes)
	}
	if e.Requires != "" {
		add("requires:  %s", e.Requires)
	}
	if e.Attests != "" {
		add("attests:   %s", e.Attests)
	}
	if p := e.Promoting; p != nil {
		add("promoting: Promotion %s applies %s: %s", p.Name, describeVersion(p.Version.Tag, p.Version.Digest), p.Message)
	}
	if p := e.Waiting; p != nil {
		add("waiting:   Promotion %s (%s): %s", p.Name, p.Action, orDash(p.Message))
	}
	for _, l := range wavesLines(e.Waves) {
		add("%s", l)
	}
	if e.Frozen != "" {
		add("frozen:    %s", e.Frozen)
	}
	if e.Held != "" {
		add("held:      %s", e.Held)
	}
	if e.Unguarded != "" {
		add("unguarded: %s", e.Unguarded)
	}
	if e.Unmediated != "" {
		add("unmediated: %s", e.Unmediated)
	}
	for _, l := range recordsLines(e.Records) {
		add("%s", l)
	}
	if c := e.Candidate; c != nil {
		switch {
		case c.Digest != "":
			add("candidate: %s", describeVersion(c.Version, c.Digest))
		case len(c.Skipped) > 0:
			add("candidate: none: every newer version is skipped")
		}
		for _, s := range c.Skipped {
			add("  skipped %s (%s %s): %s", describeVersion(s.Version, s.Digest), s.Gate, s.Reason, s.Message)
		}
		for _, b := range c.BlockedBy {
			until := ""
			if b.Until != nil {
				// A signature does not open by itself: its Until is when it is checked again.
				verb := "opens"
				if b.Gate == stagecoachv1.GateSignature || b.Gate == stagecoachv1.GateAttestations {
					verb = "checked again"
				}
				until = fmt.Sprintf(" (%s in %s)", verb, b.Until.Sub(e.now).Round(time.Second))
			}
			add("  blocked by %s: %s%s", b.Gate, b.Message, until)
		}
	} else if e.Promoting == nil && e.Waiting == nil {
		add("nothing to do: the source offers nothing newer")
	}
	return lines
}

func describeVersion(tag, digest string) string {
	algorithm, short, found := strings.Cut(digest, ":")
	if !found {
		algorithm, short = "sha256", digest
	}
	if len(short) > 12 {
		short = short[:12]
	}
	if tag == "" {
		return algorithm + ":" + short
	}
	return tag + " (" + algorithm + ":" + short + ")"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// takes says where a git source's commits come from, "" for any other source.
func takes(src *stagecoachv1.GitSource, namespace string) string {
	if src == nil {
		return ""
	}
	var b strings.Builder
	switch {
	case src.SourceRef != nil:
		fmt.Fprintf(&b, "Git commits that Flux GitRepository '%s/%s' fetched", namespace, src.SourceRef.Name)
	case src.Semver != "":
		fmt.Fprintf(&b, "Git commits of %s (tags meeting %q)", src.URL, src.Semver)
	default:
		fmt.Fprintf(&b, "Git commits of %s (branch %s)", src.URL, src.Branch)
	}
	if len(src.Paths) > 0 {
		fmt.Fprintf(&b, " that change %s", strings.Join(src.Paths, ", "))
	}
	if v := src.Verify; v != nil {
		fmt.Fprintf(&b, ", signed (%s) by a key of Secret '%s/%s'", v.GetMode(), namespace, v.SecretRef.Name)
	}
	return b.String()
}

// requires names the attestations a Stage requires, each with its condition.
func requires(reqs []stagecoachv1.AttestationRequirement) string {
	parts := make([]string, 0, len(reqs))
	for _, r := range reqs {
		part := r.PredicateType
		if r.Condition != "" {
			part += " where " + r.Condition
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

// writes says where a Stage that promotes through Git writes: the branch, how, and who merges.
func writes(g *stagecoachv1.GitPromotion) string {
	if g == nil {
		return ""
	}
	how := "signed commits"
	if g.SigningKeyRef == nil {
		how = "commits"
	}
	if g.Merge {
		how += " merging the promoted commit"
	} else {
		var files []string
		for _, e := range g.Set {
			files = append(files, e.Path)
		}
		how += " to " + strings.Join(files, ", ")
	}
	out := fmt.Sprintf("%s on branch %s of %s", how, g.Branch, g.URL)
	if pr := g.PullRequest; pr != nil {
		merger := "Stagecoach merges them"
		if pr.Merge == stagecoachv1.PullRequestMergeManual {
			merger = "a person merges them"
		}
		out = fmt.Sprintf("%s, as %s pull requests (%s)", out, pr.Provider, merger)
	}
	return out
}
