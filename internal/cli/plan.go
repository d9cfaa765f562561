// Package cli holds the user verbs of the stagecoach binary, apart from flag parsing, so that
// tests run them against a real API server.
package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
	"github.com/stagecoach-dev/stagecoach/internal/records/trust"
)

// PlanOptions select the Stages to explain.
type PlanOptions struct {
	// Namespace of the Stages; ignored with AllNamespaces.
	Namespace     string
	AllNamespaces bool
	// Stage, when set, explains only that Stage.
	Stage string
	// Output is text (default), json or yaml.
	Output string
	// Trust, when set, makes each follower's explanation say what it would take now, read
	// from the upstream's registry (stagecoach plan --trust); Registry is how to reach it.
	Trust    *trust.Config
	Registry ociclient.Options
}

// Plan writes, for each selected Stage, what it runs, what it is doing and what holds it back.
func Plan(ctx context.Context, c client.Reader, opts PlanOptions, out io.Writer, now time.Time) error {
	var stages []stagecoachv1.Stage
	switch {
	case opts.Stage != "":
		s := stagecoachv1.Stage{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: opts.Namespace, Name: opts.Stage}, &s); err != nil {
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("stage %q not found in namespace %q (use -n NAMESPACE or -A)", opts.Stage, opts.Namespace)
			}
			return fmt.Errorf("failed to get Stage %s/%s: %w", opts.Namespace, opts.Stage, err)
		}
		stages = append(stages, s)
	default:
		var list stagecoachv1.StageList
		var listOpts []client.ListOption
		if !opts.AllNamespaces {
			listOpts = append(listOpts, client.InNamespace(opts.Namespace))
		}
		if err := c.List(ctx, &list, listOpts...); err != nil {
			return fmt.Errorf("failed to list Stages: %w", err)
		}
		stages = list.Items
	}
	if len(stages) == 0 {
		where := "namespace " + opts.Namespace
		if opts.AllNamespaces {
			where = "any namespace"
		}
		_, err := fmt.Fprintf(out, "No Stages in %s.\n", where)
		return err
	}
	sort.Slice(stages, func(i, j int) bool {
		return stages[i].Namespace+"/"+stages[i].Name < stages[j].Namespace+"/"+stages[j].Name
	})
	plans, err := ExplainStages(ctx, c, stages, now)
	if err != nil {
		return err
	}
	explanations := make([]plan.Explanation, 0, len(plans))
	for _, p := range plans {
		if r := p.Explanation.Records; opts.Trust != nil && r != nil && r.Follows != nil {
			r.Follows.Preview = previewFollower(ctx, r.Follows, opts.Trust, opts.Registry)
		}
		explanations = append(explanations, p.Explanation)
	}
	switch opts.Output {
	case "json", "yaml":
		return printStructured(out, opts.Output, explanations)
	case "", "text":
	default:
		return fmt.Errorf("unknown output format %q: use text, json or yaml", opts.Output)
	}
	for i, e := range explanations {
		if i > 0 {
			if _, err := fmt.Fprintln(out); err != nil {
				return err
			}
		}
		if _, err := fmt.Fprintln(out, strings.Join(e.Lines(), "\n")); err != nil {
			return err
		}
	}
	return nil
}

// printStructured writes v as indented JSON or as YAML.
func printStructured(out io.Writer, format string, v any) error {
	var data []byte
	var err error
	if format == "json" {
		data, err = json.MarshalIndent(v, "", "  ")
		data = append(data, '\n')
	} else {
		data, err = yaml.Marshal(v)
	}
	if err != nil {
		return fmt.Errorf("failed to encode the output as %s: %w", format, err)
	}
	_, err = out.Write(data)
	return err
}
