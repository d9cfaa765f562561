package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/dora"
)

// DoraOptions select the Stages and the window of `stagecoach dora`.
type DoraOptions struct {
	Namespace     string
	AllNamespaces bool
	// Service, when set, keeps only its Stages.
	Service string
	// Since is the window's length, ending now.
	Since time.Duration
	// Output is text (default), json or yaml.
	Output string
}

// DoraReport is what `stagecoach dora -o json|yaml` prints.
type DoraReport struct {
	Since time.Time   `json:"since"`
	Until time.Time   `json:"until"`
	Keys  []dora.Keys `json:"stages"`
}

// Dora computes the four DORA keys of each selected Stage from the objects alone.
func Dora(ctx context.Context, c client.Reader, opts DoraOptions, out io.Writer, now time.Time) error {
	if err := checkOutput(opts.Output); err != nil {
		return err
	}
	if opts.Since <= 0 {
		return fmt.Errorf("--since must be a positive duration such as 30d or 12h")
	}
	var listOpts []client.ListOption
	if !opts.AllNamespaces {
		listOpts = append(listOpts, client.InNamespace(opts.Namespace))
	}
	// Upstreams may live in other namespaces: lead time needs their Promotions too, so with a
	// namespace the pipeline's other Stages are read one by one.
	var stages stagecoachv1.StageList
	if err := c.List(ctx, &stages, listOpts...); err != nil {
		return fmt.Errorf("failed to list Stages: %w", err)
	}
	var promotions stagecoachv1.PromotionList
	if err := c.List(ctx, &promotions, listOpts...); err != nil {
		return fmt.Errorf("failed to list Promotions: %w", err)
	}
	allStages, allPromotions, err := withUpstreams(ctx, c, stages.Items, promotions.Items)
	if err != nil {
		return err
	}
	report := DoraReport{Since: now.Add(-opts.Since).UTC(), Until: now.UTC(), Keys: []dora.Keys{}}
	selected := map[[2]string]bool{}
	for _, s := range stages.Items {
		if opts.Service == "" || s.Spec.Service == opts.Service {
			selected[[2]string{s.Namespace, s.Name}] = true
		}
	}
	for _, k := range dora.Compute(allStages, allPromotions, report.Since, report.Until) {
		if selected[[2]string{k.Namespace, k.Stage}] {
			report.Keys = append(report.Keys, k)
		}
	}
	if opts.Output == "json" || opts.Output == "yaml" {
		return printStructured(out, opts.Output, report)
	}
	if len(report.Keys) == 0 {
		_, err := fmt.Fprintln(out, "No Stages found.")
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "SERVICE\tENVIRONMENT\tSTAGE\tDEPLOYS/DAY\tLEAD TIME (MEDIAN)\tCHANGE FAILURE RATE\tTIME TO RESTORE (MEDIAN)\n")
	for _, k := range report.Keys {
		fmt.Fprintf(w, "%s\t%s\t%s/%s\t%.2f (%d)\t%s\t%s\t%s\n", k.Service, k.Environment, k.Namespace, k.Stage, k.DeploymentsPerDay, k.Deployments,
			median(k.LeadTime), rate(k), median(k.TimeToRestore))
	}
	return w.Flush()
}

func median(d dora.Durations) string {
	if d.Count == 0 {
		return "-"
	}
	return fmt.Sprintf("%s (%d)", d.Median.Round(time.Second), d.Count)
}

func rate(k dora.Keys) string {
	if k.Changes == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%% (%d/%d)", 100*k.ChangeFailureRate, k.Failures, k.Changes)
}

// withUpstreams adds the upstream Stages (and their namespaces' Promotions) that the listed
// Stages follow from other namespaces.
func withUpstreams(ctx context.Context, c client.Reader, stages []stagecoachv1.Stage, promotions []stagecoachv1.Promotion) ([]stagecoachv1.Stage, []stagecoachv1.Promotion, error) {
	have := map[[2]string]bool{}
	namespaces := map[string]bool{}
	for _, s := range stages {
		have[[2]string{s.Namespace, s.Name}] = true
		namespaces[s.Namespace] = true
	}
	for i := 0; i < len(stages) && i < 1000; i++ {
		up, ok := stages[i].UpstreamKey()
		if !ok || have[[2]string{up.Namespace, up.Name}] {
			continue
		}
		s := stagecoachv1.Stage{}
		if err := c.Get(ctx, up, &s); err != nil {
			if client.IgnoreNotFound(err) == nil {
				continue
			}
			return nil, nil, fmt.Errorf("failed to read upstream Stage %s: %w", up, err)
		}
		have[[2]string{up.Namespace, up.Name}] = true
		stages = append(stages, s)
		if !namespaces[up.Namespace] {
			namespaces[up.Namespace] = true
			var list stagecoachv1.PromotionList
			if err := c.List(ctx, &list, client.InNamespace(up.Namespace)); err != nil {
				return nil, nil, fmt.Errorf("failed to list the Promotions of namespace %s: %w", up.Namespace, err)
			}
			promotions = append(promotions, list.Items...)
		}
	}
	return stages, promotions, nil
}

// ParseSince reads a window length: a Go duration (12h, 90m) or a number of days (30d).
func ParseSince(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err == nil && n > 0 {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	} else if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d, nil
	}
	return 0, fmt.Errorf("--since %q is neither a number of days such as 30d nor a duration such as 12h", s)
}

// checkOutput refuses an output format other than text, json or yaml.
func checkOutput(format string) error {
	switch format {
	case "", "text", "json", "yaml":
		return nil
	}
	return fmt.Errorf("unknown output format %q: use text, json or yaml", format)
}
