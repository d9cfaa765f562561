package stage

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller/chart"
	"github.com/stagecoach-dev/stagecoach/internal/applier"
)

// Helm charts by version (applier.Applier.PinsTag): the engine is given a tag and pulls whatever it
// names. The tag is resolved where the engine pulls it (the chart's own OCI repository) before
// a Promotion or Rollback writes it (controller/promotion/chart.go), when it lands, and, while it runs, on
// the Stage's reconcile at least every chartRecheckInterval: a tag pushed again after the
// version was verified turns the Stage Mediated=False TagMoved (automation holds) within that
// window. A chart that comes from no OCI registry, or from another repository than the one the
// Stage's versions are judged in, is Mediated=False, never MediatedByVersion.

// checkChart judges an applier given a chart version: where its engine pulls the chart from,
// whether that is where the Stage's versions are judged, and whether the tag of the version it
// runs still names the verified digest. It sets the verdict's Mediated (and when to look again).
func (r *Reconciler) checkChart(ctx context.Context, stage *stagecoachv1.Stage, v *applierVerdict) error {
	if !v.ready || v.unmediated != nil || v.engine == nil {
		return nil
	}
	src, ok, err := r.charts().Source(ctx, v.engine, v.obj)
	if err != nil || !ok {
		r.chartChecks.forget(client.ObjectKeyFromObject(stage))
		return err
	}
	described := fmt.Sprintf("%s '%s/%s'", v.gvk.Kind, stage.Namespace, stage.Spec.ApplyRef.Name)
	head := r.charts().Head(ctx, stage)
	judged, judgedBy := chart.JudgedRepository(stage, head)
	interval := chart.RecheckInterval(head)
	switch {
	case src.Repository == "":
		r.chartChecks.forget(client.ObjectKeyFromObject(stage))
		v.unmediated = &applier.Problem{Reason: stagecoachv1.ReasonChartNotInRegistry, Message: fmt.Sprintf(
			"%s is given a chart version and takes the chart from %s: %s. Nothing ties the version written to the digest the gates judge, so Stagecoach refuses to promote by version here: serve the chart from an OCI registry%s, or promote by digest (an oci:// source, a Flux OCIRepository, or applyRef.valuesKey)",
			described, src.From, src.NotOCI, inRepository(judged))}
		return nil
	case judged != "" && !applier.SameRepository(src.Repository, judged):
		r.chartChecks.forget(client.ObjectKeyFromObject(stage))
		v.unmediated = &applier.Problem{Reason: stagecoachv1.ReasonChartRepositoryMismatch, Message: fmt.Sprintf(
			"%s pulls its chart from %s (%s), but the Stage's versions are judged in %s (%s): the gates judge a tag there while the engine pulls the version elsewhere. Point the chart at %s, or the Stage's source at %s",
			described, src.Repository, src.From, judged, judgedBy, judged, src.Repository)}
		return nil
	}
	where := "in " + src.Repository
	if judged == "" {
		where = fmt.Sprintf("in the chart's own repository %s (no registry source heads this Stage's upstream chain)", src.Repository)
	}
	v.byVersion = fmt.Sprintf("%s is given the chart version, not the digest: the engine resolves the version itself, so Stagecoach resolves the tag %s before it writes, when the version lands (a version pushed again fails the Promotion, which rolls back) and every %s while it runs (Mediated=False TagMoved when it moved)",
		described, where, interval)
	problem, recheck := r.recheckRunning(ctx, stage, head, v, src, interval)
	v.unmediated, v.recheck = problem, recheck
	return nil
}

func inRepository(judged string) string {
	if judged == "" {
		return ""
	}
	return " (" + judged + ", where the Stage's versions are judged)"
}

// recheckRunning checks, while the verified version runs, that what the engine runs is still
// what was verified: the engine's own record (a HelmRelease's newest release) at every
// reconcile, the tag in the chart's repository at most once per interval. It returns the
// problem (nil when none) and when to look again.
func (r *Reconciler) recheckRunning(ctx context.Context, stage, head *stagecoachv1.Stage, v *applierVerdict, src applier.ChartSource,
	interval time.Duration) (*applier.Problem, time.Duration) {
	cur := stage.Status.Current
	if cur == nil || cur.VerifiedAt == nil || cur.Digest == "" || cur.Version == "" || v.engine.Revision(v.obj) != cur.Digest {
		// Nothing verified runs through it (a Promotion's own checks cover what it writes).
		r.chartChecks.forget(client.ObjectKeyFromObject(stage))
		return nil, 0
	}
	if msg, drifted := v.engine.Drifted(v.obj, cur.Digest); drifted {
		return &applier.Problem{Reason: stagecoachv1.ReasonTagMoved, Message: msg +
			": the engine installed it on its own, after the version was verified; promote a version to restore what the gates judged (automation holds until then)"}, interval
	}
	tag := v.engine.PulledTag(cur.Version)
	now := r.clock().Now()
	check, fresh := r.chartChecks.get(stage, src.Repository, tag, cur.Digest, now, interval)
	if !fresh {
		names, err := r.charts().Resolve(ctx, stage, head, src, tag)
		if errors.Is(err, context.Canceled) {
			return check.problem, interval
		}
		check.problem = nil
		switch {
		case err != nil:
			check.problem = &applier.Problem{Reason: chart.Reason(err), Message: fmt.Sprintf(
				"cannot check that tag %q of %s still names the verified %s: %v; the engine pulls what it names at its next sync, so automation holds until the check passes (again in %s)",
				tag, src.Repository, cur.Digest, err, interval)}
		case names == "":
			check.problem = &applier.Problem{Reason: stagecoachv1.ReasonTagMoved, Message: fmt.Sprintf(
				"tag %q of %s named %s when it was verified and is gone now: what the engine pulls for it at its next sync is unknown. Push the tag again at %s, or promote another version (automation holds until then; checked every %s)",
				tag, src.Repository, cur.Digest, cur.Digest, interval)}
		case names != cur.Digest:
			check.problem = &applier.Problem{Reason: stagecoachv1.ReasonTagMoved, Message: fmt.Sprintf(
				"tag %q of %s named %s when it was verified and names %s now: the engine pulls %s at its next sync or hard refresh, a chart no gate judged. Push the tag back to %s, or promote another version (automation holds until then; checked every %s)",
				tag, src.Repository, cur.Digest, names, names, cur.Digest, interval)}
		}
		r.chartChecks.put(stage, check)
	}
	return check.problem, max(interval-now.Sub(check.at), time.Second)
}

// chartRechecks remembers, per Stage, the last check of the running version's tag, so that the
// registry is asked at most once per interval however often the Stage is reconciled.
type chartRechecks struct {
	mu   sync.Mutex
	seen map[types.NamespacedName]chartRecheck
}

type chartRecheck struct {
	repository, tag, digest string
	at                      time.Time
	problem                 *applier.Problem
}

// get returns the remembered check of this tag and digest, and whether it is fresh; a stale or
// missing one comes back keyed and stamped now, for put.
func (c *chartRechecks) get(stage *stagecoachv1.Stage, repository, tag, digest string, now time.Time, interval time.Duration) (chartRecheck, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	got, ok := c.seen[client.ObjectKeyFromObject(stage)]
	if ok && got.repository == repository && got.tag == tag && got.digest == digest && now.Sub(got.at) < interval {
		return got, true
	}
	return chartRecheck{repository: repository, tag: tag, digest: digest, at: now}, false
}

func (c *chartRechecks) put(stage *stagecoachv1.Stage, check chartRecheck) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[types.NamespacedName]chartRecheck{}
	}
	c.seen[client.ObjectKeyFromObject(stage)] = check
}

func (c *chartRechecks) forget(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.seen, key)
}
