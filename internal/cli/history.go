package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/metrics"
)

// HistoryOptions select the Stage whose Promotions `stagecoach history` lists.
type HistoryOptions struct {
	Namespace, Stage string
	// Output is text (default), json or yaml.
	Output string
}

// HistoryEntry is one past (or running) Promotion of a Stage.
type HistoryEntry struct {
	Name        string                         `json:"name"`
	Action      stagecoachv1.PromotionAction   `json:"action"`
	Version     *stagecoachv1.VersionReference `json:"version,omitempty"`
	RequestedBy string                         `json:"requestedBy,omitempty"`
	Reason      string                         `json:"reason,omitempty"`
	Result      stagecoachv1.Phase             `json:"result"`
	Message     string                         `json:"message,omitempty"`
	CreatedAt   time.Time                      `json:"createdAt"`
	FinishedAt  *time.Time                     `json:"finishedAt,omitempty"`
	// Seconds from creation to the end, and in each phase it went through (the phases of the
	// stagecoach_promotion_phase_duration_seconds metric).
	TotalSeconds float64            `json:"totalSeconds,omitempty"`
	Phases       map[string]float64 `json:"phaseSeconds,omitempty"`
}

// History lists a Stage's Promotions, newest first: who asked for what, the result and how long
// each phase took.
func History(ctx context.Context, c client.Reader, opts HistoryOptions, out io.Writer) error {
	if err := checkOutput(opts.Output); err != nil {
		return err
	}
	stage, err := getStage(ctx, c, opts.Namespace, opts.Stage)
	if err != nil {
		return err
	}
	var list stagecoachv1.PromotionList
	if err := c.List(ctx, &list, client.InNamespace(opts.Namespace)); err != nil {
		return fmt.Errorf("failed to list the Promotions of Stage %s/%s: %w", opts.Namespace, opts.Stage, err)
	}
	var mine []stagecoachv1.Promotion
	for _, p := range list.Items {
		if p.Spec.Stage == stage.Name {
			mine = append(mine, p)
		}
	}
	sort.Slice(mine, func(i, j int) bool {
		a, b := mine[i].CreationTimestamp, mine[j].CreationTimestamp
		if !a.Equal(&b) {
			return b.Before(&a)
		}
		return mine[i].Name > mine[j].Name
	})
	entries := make([]HistoryEntry, 0, len(mine))
	for i := range mine {
		entries = append(entries, historyEntry(stage, mine, &mine[i]))
	}
	if opts.Output == "json" || opts.Output == "yaml" {
		return printStructured(out, opts.Output, entries)
	}
	if len(entries) == 0 {
		_, err := fmt.Fprintf(out, "Stage %s/%s has no Promotions.\n", stage.Namespace, stage.Name)
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tACTION\tVERSION\tBY\tRESULT\tCREATED\tTOOK\tPHASES\tMESSAGE")
	for _, e := range entries {
		version := "-"
		if e.Version != nil {
			version = e.Version.Tag
			if version == "" {
				version = e.Version.Digest
			}
		}
		took := "-"
		if e.FinishedAt != nil {
			took = (time.Duration(e.TotalSeconds) * time.Second).String()
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Name, e.Action, version, dash(e.RequestedBy), e.Result,
			e.CreatedAt.UTC().Format(time.RFC3339), took, phaseList(e.Phases), e.Message)
	}
	return w.Flush()
}

func historyEntry(stage *stagecoachv1.Stage, all []stagecoachv1.Promotion, p *stagecoachv1.Promotion) HistoryEntry {
	e := HistoryEntry{Name: p.Name, Action: p.Spec.Action, Version: p.Status.Version, RequestedBy: p.Spec.RequestedBy, Reason: p.Spec.Reason,
		Result: phaseOf(p), Message: p.Status.Message, CreatedAt: p.CreationTimestamp.UTC()}
	if e.Action == "" {
		e.Action = stagecoachv1.ActionPromote
	}
	if e.Version == nil {
		e.Version = p.Spec.Version
	}
	if f := p.Status.FinishedAt; f != nil {
		t := f.UTC()
		e.FinishedAt = &t
		e.TotalSeconds = f.Sub(p.CreationTimestamp.Time).Seconds()
		if d := metrics.PhaseDurations(stage, all, p); len(d) > 0 {
			e.Phases = map[string]float64{}
			for phase, v := range d {
				e.Phases[phase] = v.Seconds()
			}
		}
	}
	return e
}

// phaseList writes the phases in their order of occurrence.
func phaseList(phases map[string]float64) string {
	var out string
	for _, name := range []string{metrics.PhaseQueued, metrics.PhaseGates, metrics.PhaseApplying, metrics.PhaseLanding, metrics.PhaseGrace, metrics.PhaseVerification} {
		if v, ok := phases[name]; ok {
			if out != "" {
				out += " "
			}
			out += fmt.Sprintf("%s=%s", name, time.Duration(v)*time.Second)
		}
	}
	return dash(out)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
