package api

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/cli"
)

// MaxPromotions is how many recent Promotions a Stage of a pipeline lists.
const MaxPromotions = 10

// Pipeline is a service's Stages in promotion order, as the viewer sees them.
type Pipeline struct {
	Service string  `json:"service"`
	Viewer  Viewer  `json:"viewer"`
	Stages  []Stage `json:"stages"`
	// Hidden counts the service's Stages left out: those in namespaces where the viewer may not
	// list Stages.
	Hidden int `json:"hidden"`
}

// Stage is one Stage of a Pipeline.
type Stage struct {
	Namespace    string      `json:"namespace"`
	Name         string      `json:"name"`
	Environment  string      `json:"environment"`
	Applier      Applier     `json:"applier"`
	Current      *Current    `json:"current"`
	Health       string      `json:"health"`
	Ready        Condition   `json:"ready"`
	Frozen       bool        `json:"frozen"`
	FrozenReason string      `json:"frozenReason"`
	Candidate    *Candidate  `json:"candidate"`
	Promotions   []Promotion `json:"promotions"`
	Waves        []Wave      `json:"waves"`
	Records      []Record    `json:"records"`
	// Held says why automation is held after a failure ("" when it is not).
	Held string `json:"held"`
	// Plan is `stagecoach plan`'s text for the Stage, one fact a line.
	Plan []string `json:"plan"`
}

// Applier is the object that applies a Stage's version.
type Applier struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
}

// Current is the version a Stage runs, and since when.
type Current struct {
	Tag        string `json:"tag"`
	Digest     string `json:"digest"`
	Since      string `json:"since"`
	VerifiedAt string `json:"verifiedAt"`
	Promotion  string `json:"promotion"`
}

// Condition is a Stage condition's status, reason and message.
type Condition struct {
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Candidate is a Stage's next version and every gate that holds it.
type Candidate struct {
	Tag     string  `json:"tag"`
	Digest  string  `json:"digest"`
	Blocked []Block `json:"blocked"`
}

// Block is one gate that holds a candidate, and when it may open ("" when unknown).
type Block struct {
	Gate    string `json:"gate"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Until   string `json:"until"`
}

// Promotion is one recent operation on a Stage (rollbacks included).
type Promotion struct {
	Name       string `json:"name"`
	Action     string `json:"action"`
	Phase      string `json:"phase"`
	Tag        string `json:"tag"`
	Digest     string `json:"digest"`
	Actor      string `json:"actor"`
	Reason     string `json:"reason"`
	StartedAt  string `json:"startedAt"`
	FinishedAt string `json:"finishedAt"`
	Message    string `json:"message"`
}

// Wave is the progress of one wave of a fleet rollout.
type Wave struct {
	Name      string   `json:"name"`
	Phase     string   `json:"phase"`
	Message   string   `json:"message"`
	Targets   []string `json:"targets"`
	Completed []string `json:"completed"`
	Failed    []string `json:"failed"`
}

// Record points at a signed record of the Stage's stream.
type Record struct {
	Stream string `json:"stream"`
	Seq    int64  `json:"seq"`
	Ref    string `json:"ref"`
}

// appPipeline answers the pipeline of the service whose Stage applies an Application.
func (s *Server) appPipeline(w http.ResponseWriter, r *http.Request, who Viewer) error {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	var list stagecoachv1.StageList
	if err := s.opts.Reader.List(r.Context(), &list); err != nil {
		return internal(fmt.Errorf("failed to list Stages: %w", err))
	}
	for i := range list.Items {
		if appliesApplication(&list.Items[i], ns, name) {
			return s.servePipeline(w, r, who, list.Items[i].Spec.Service)
		}
	}
	return &Error{Code: http.StatusNotFound, Reason: "NotFound",
		Message: fmt.Sprintf("no Stage applies Application %s/%s: create a Stage whose applyRef names it (kind Application) in namespace %s", ns, name, ns)}
}

func (s *Server) servicePipeline(w http.ResponseWriter, r *http.Request, who Viewer) error {
	return s.servePipeline(w, r, who, r.PathValue("service"))
}

func (s *Server) servePipeline(w http.ResponseWriter, r *http.Request, who Viewer, service string) error {
	plans, err := s.pipeline(r, service)
	if err != nil {
		return err
	}
	namespaces := make([]string, 0, len(plans))
	for _, sp := range plans {
		namespaces = append(namespaces, sp.Stage.Namespace)
	}
	access, err := s.readableIn(r.Context(), who, namespaces)
	if err != nil {
		return internal(err)
	}
	p := Pipeline{Service: service, Viewer: who, Stages: make([]Stage, 0, len(plans))}
	for _, sp := range plans {
		switch can := access[sp.Stage.Namespace]; {
		case !can.stages:
			p.Hidden++
			continue
		case !can.promotions:
			// Who asked for what, and why, is the Promotions'; the Stage's own history stays.
			sp.Promotions = nil
		}
		p.Stages = append(p.Stages, stageView(sp))
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

// pipeline explains a service's Stages with the CLI's code, once the caller's Application
// header names an Application one of them applies: Argo CD authorized the user for that
// Application only.
func (s *Server) pipeline(r *http.Request, service string) ([]cli.StagePlan, error) {
	plans, err := cli.Pipeline(r.Context(), s.opts.Reader, service, s.opts.Clock.Now())
	if err != nil {
		return nil, internal(err)
	}
	if len(plans) == 0 {
		return nil, &Error{Code: http.StatusNotFound, Reason: "NotFound", Message: fmt.Sprintf("service %q has no Stages", service)}
	}
	stages := make([]*stagecoachv1.Stage, 0, len(plans))
	for _, p := range plans {
		stages = append(stages, p.Stage)
	}
	if err := checkApplication(r, service, stages); err != nil {
		return nil, err
	}
	return plans, nil
}

// checkApplication requires the Argocd-Application-Name header (namespace:name) to name an
// Application that a Stage of the pipeline applies.
func checkApplication(r *http.Request, service string, stages []*stagecoachv1.Stage) error {
	header := strings.TrimSpace(r.Header.Get("Argocd-Application-Name"))
	ns, name, ok := strings.Cut(header, ":")
	if !ok || ns == "" || name == "" {
		return &Error{Code: http.StatusForbidden, Reason: "Forbidden",
			Message: fmt.Sprintf("the Argocd-Application-Name header %q is not <namespace>:<name> of an Application (Argo CD's proxy extension requires it)", header)}
	}
	for _, st := range stages {
		if appliesApplication(st, ns, name) {
			return nil
		}
	}
	return &Error{Code: http.StatusForbidden, Reason: "Forbidden",
		Message: fmt.Sprintf("Application %s/%s is not applied by any Stage of service %q: open the pipeline from one of its Applications", ns, name, service)}
}

// appliesApplication reports whether a Stage applies the Argo CD Application ns/name.
func appliesApplication(s *stagecoachv1.Stage, ns, name string) bool {
	ref := s.Spec.ApplyRef
	if ref.Kind != "Application" || (ref.APIVersion != "" && !strings.HasPrefix(ref.APIVersion, "argoproj.io/")) {
		return false
	}
	return s.Namespace == ns && ref.Name == name
}

func internal(err error) *Error {
	return &Error{Code: http.StatusInternalServerError, Reason: "InternalError", Message: err.Error()}
}

// stageView is a Stage as the contract shows it.
func stageView(sp cli.StagePlan) Stage {
	st, e := sp.Stage, sp.Explanation
	v := Stage{Namespace: st.Namespace, Name: st.Name, Environment: st.Spec.Environment,
		Applier: Applier{APIVersion: st.Spec.ApplyRef.APIVersion, Kind: st.Spec.ApplyRef.Kind, Namespace: st.Namespace, Name: st.Spec.ApplyRef.Name},
		Ready:   Condition{Status: string(metav1.ConditionUnknown), Reason: "NotReconciled", Message: "not reconciled yet"},
		Held:    e.Held, Plan: e.Lines(),
		Promotions: []Promotion{}, Waves: []Wave{}, Records: []Record{}}
	if a := st.Status.Applier; a != nil {
		v.Applier = Applier{APIVersion: a.APIVersion, Kind: a.Kind, Namespace: a.Namespace, Name: a.Name}
		if v.Applier.Namespace == "" {
			v.Applier.Namespace = st.Namespace
		}
	}
	if c := e.Runs; c != nil {
		v.Current = &Current{Tag: c.Version, Digest: c.Digest, Since: timeString(c.PromotedAt), VerifiedAt: timeString(c.VerifiedAt), Promotion: c.Promotion}
		if v.Current.Since == "" {
			v.Current.Since = v.Current.VerifiedAt
		}
	}
	if ready := meta.FindStatusCondition(st.Status.Conditions, stagecoachv1.ConditionReady); ready != nil {
		v.Ready = Condition{Status: string(ready.Status), Reason: ready.Reason, Message: ready.Message}
	}
	if e.Frozen != "" {
		v.Frozen, v.FrozenReason = true, e.Frozen
	}
	v.Health = health(st, e.Promoting != nil, v.Frozen)
	if c := e.Candidate; c != nil {
		v.Candidate = &Candidate{Tag: c.Version, Digest: c.Digest, Blocked: []Block{}}
		for _, b := range c.BlockedBy {
			v.Candidate.Blocked = append(v.Candidate.Blocked, Block{Gate: b.Gate, Reason: b.Reason, Message: b.Message, Until: timeString(b.Until)})
		}
	}
	v.Promotions = promotions(sp)
	for _, w := range st.Status.Waves {
		v.Waves = append(v.Waves, wave(w))
	}
	if stream := st.Status.Stream; stream != nil {
		for _, h := range st.Status.History {
			if h.Record != nil {
				v.Records = append(v.Records, Record{Stream: stream.ID, Seq: h.Record.Seq, Ref: h.Record.Ref})
			}
		}
	}
	return v
}

// health sums a Stage up in one word: Frozen before all, then Unknown until reconciled,
// Progressing while a version is being applied or Ready is Unknown, Degraded when not Ready or
// stalled, Healthy otherwise.
func health(st *stagecoachv1.Stage, promoting, frozen bool) string {
	ready := meta.FindStatusCondition(st.Status.Conditions, stagecoachv1.ConditionReady)
	switch {
	case frozen:
		return "Frozen"
	case ready == nil:
		return "Unknown"
	case promoting || meta.IsStatusConditionTrue(st.Status.Conditions, stagecoachv1.ConditionPromoting):
		return "Progressing"
	case meta.IsStatusConditionTrue(st.Status.Conditions, stagecoachv1.ConditionStalled), ready.Status == metav1.ConditionFalse:
		return "Degraded"
	case ready.Status == metav1.ConditionUnknown:
		return "Progressing"
	}
	return "Healthy"
}

// promotions lists a Stage's newest Promotions, then finished ones known only from its history
// (their Promotion objects may be gone), newest first, at most MaxPromotions.
func promotions(sp cli.StagePlan) []Promotion {
	type dated struct {
		at time.Time
		p  Promotion
	}
	var all []dated
	seen := map[string]bool{}
	for _, p := range sp.Promotions {
		seen[p.Name] = true
		version := p.Spec.Version
		if p.Status.Version != nil {
			version = p.Status.Version
		}
		v := Promotion{Name: p.Name, Action: string(p.Spec.Action), Phase: string(p.Status.Phase), Actor: p.Spec.RequestedBy,
			Reason: p.Spec.Reason, StartedAt: timeString(p.Status.StartedAt), FinishedAt: timeString(p.Status.FinishedAt), Message: p.Status.Message}
		if v.Action == "" {
			v.Action = string(stagecoachv1.ActionPromote)
		}
		if v.Phase == "" {
			v.Phase = string(stagecoachv1.PhasePending)
		}
		if version != nil {
			v.Tag, v.Digest = version.Tag, version.Digest
		}
		all = append(all, dated{at: p.CreationTimestamp.Time, p: v})
	}
	for _, h := range sp.Stage.Status.History {
		if h.Promotion != "" && seen[h.Promotion] {
			continue
		}
		v := Promotion{Name: h.Promotion, Action: string(h.Action), Phase: string(h.Phase), Tag: h.Version, Digest: h.Digest,
			StartedAt: timeString(h.PromotedAt), FinishedAt: timeString(h.FinishedAt)}
		at := time.Time{}
		if h.PromotedAt != nil {
			at = h.PromotedAt.Time
		} else if h.FinishedAt != nil {
			at = h.FinishedAt.Time
		}
		all = append(all, dated{at: at, p: v})
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].at.After(all[j].at) })
	out := make([]Promotion, 0, min(len(all), MaxPromotions))
	for i := 0; i < len(all) && i < MaxPromotions; i++ {
		out = append(out, all[i].p)
	}
	return out
}

// wave is a wave as the Stage's status says it stands (phase and message are the scheduler's).
func wave(w stagecoachv1.WaveStatus) Wave {
	phase := w.Phase
	if phase == "" {
		phase = stagecoachv1.PhasePending // written before phases were
	}
	return Wave{Name: w.Name, Phase: string(phase), Message: w.Message,
		Targets: orEmpty(w.Targets), Completed: orEmpty(w.Completed), Failed: orEmpty(w.Failed)}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func timeString(t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// stageFor reads a Stage with the controller's reader.
func (s *Server) stageFor(r *http.Request) (*stagecoachv1.Stage, error) {
	st := &stagecoachv1.Stage{}
	key := client.ObjectKey{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	if err := s.opts.Reader.Get(r.Context(), key, st); err != nil {
		return nil, err
	}
	return st, nil
}
