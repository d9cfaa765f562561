package promotion

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/applier"
)

// A version given to the engine by its tag (a Helm chart version) is the judged digest only while
// the tag names that digest where the engine pulls it: checked right before the write (a Promote
// or a Rollback alike, which skips the gates), and again once it landed (controller/stage/chart.go keeps
// checking while it runs).

// chartTag is a version's tag, as the engine pulls it, resolved in the chart's repository.
type chartTag struct {
	src applier.ChartSource
	// tag is the tag the engine pulls for the version.
	tag string
	// names is the digest the tag names now ("" when it is gone).
	names string
}

// resolveVersionTag resolves the tag the engine pulls for the version; nil when the applier is
// given the digest itself. A chart from no OCI registry comes back with src.Repository "".
func (run *Run) resolveVersionTag(ctx context.Context, engine applier.Applier, v *stagecoachv1.VersionReference) (*chartTag, error) {
	src, ok, err := run.r.Charts.Source(ctx, engine, run.obj)
	if err != nil || !ok {
		return nil, err
	}
	t := &chartTag{src: src, tag: engine.PulledTag(v.Tag)}
	if src.Repository == "" || v.Tag == "" {
		return t, nil
	}
	if t.names, err = run.r.Charts.Resolve(ctx, run.stage, run.r.Charts.Head(ctx, run.stage), src, t.tag); err != nil {
		return nil, fmt.Errorf("failed to resolve tag %q of %s for %s in Stage %q: %w", t.tag, src.Repository, v.Digest, run.stage.Name, err)
	}
	return t, nil
}

// checkTagBeforeWrite refuses a Promotion or Rollback whose tag does not name its digest where
// the engine pulls it: nothing is written, the Promotion fails (TagMismatch, or
// ChartNotInRegistry when nothing can tie the two) and automation holds. It reports whether it
// refused.
func (run *Run) checkTagBeforeWrite(ctx context.Context, engine applier.Applier, p *stagecoachv1.Promotion) (bool, error) {
	v := p.Status.Version
	t, err := run.resolveVersionTag(ctx, engine, v)
	if err != nil || t == nil {
		return false, err
	}
	kind, name := run.obj.GetKind(), run.obj.GetName()
	var reason, msg string
	switch {
	case t.src.Repository == "":
		reason, msg = stagecoachv1.ReasonChartNotInRegistry, fmt.Sprintf(
			"%s %q takes its chart from %s: %s, so nothing ties version %q to %s; promote by digest instead (see the Stage's Mediated condition)",
			kind, name, t.src.From, t.src.NotOCI, v.Tag, v.Digest)
	case v.Tag == "":
		reason, msg = stagecoachv1.ReasonTagMismatch, fmt.Sprintf(
			"%s %q is given a chart version, but the Promotion names no tag for %s: name the version's tag (spec.version.tag)", kind, name, v.Digest)
	case t.names == "":
		reason, msg = stagecoachv1.ReasonTagMismatch, fmt.Sprintf(
			"tag %q does not exist in %s, where the engine pulls the chart: it cannot stand for %s; push it, or promote a version whose tag names its digest", t.tag, t.src.Repository, v.Digest)
	case t.names != v.Digest:
		reason, msg = stagecoachv1.ReasonTagMismatch, fmt.Sprintf(
			"tag %q of %s names %s, not %s, the digest this Promotion is for: the engine would pull a chart no gate judged. Push the tag back to %s, or promote the version the tag names now (its own gates judge it)",
			t.tag, t.src.Repository, t.names, v.Digest, v.Digest)
	default:
		return false, nil
	}
	return true, run.refuseUnwritten(ctx, p, reason, msg)
}

// refuseUnwritten fails a Promotion before anything was written to the applier: the Stage still
// runs what it ran (no history entry, no rollback), and automation holds, since the registry
// no longer says what the gates were told.
func (run *Run) refuseUnwritten(ctx context.Context, p *stagecoachv1.Promotion, reason, message string) error {
	stage := run.stage
	message = fmt.Sprintf("not applied (%s): %s", reason, message)
	stage.Status.Hold = &stagecoachv1.AutomationHold{Reason: reason, Promotion: p.Name, Since: metav1.NewTime(run.now),
		Message: fmt.Sprintf("automatic promotion is held since %s was refused before the write (%s): promote a version by hand to resume", p.Name, reason)}
	run.setPromotingIdle()
	if err := run.commit(ctx); err != nil {
		return err
	}
	msg := fmt.Sprintf("%s refused in %s: %s", versionString(p.Status.Version), stage.Name, message)
	run.announce(p, corev1.EventTypeWarning, stagecoachv1.EventPromotionFailed, msg, msg)
	return run.status.finish(ctx, p, stagecoachv1.PhaseFailed, message)
}

// tagMoved checks, once a version given to the engine by its tag (a chart version) landed, that
// the tag still names the digest checked before the write, where the engine pulls it: the engine
// resolved the tag itself when it pulled, and a tag pushed again in between runs something
// nobody verified. It says how the tag moved ("" when it did not).
func (run *Run) tagMoved(ctx context.Context, engine applier.Applier, p *stagecoachv1.Promotion) (string, error) {
	version := p.Status.Version
	t, err := run.resolveVersionTag(ctx, engine, version)
	switch {
	case err != nil:
		return "", fmt.Errorf("failed to check the tag again after %s landed: %w", version.Digest, err)
	case t == nil:
		return "", nil
	case t.src.Repository == "":
		return fmt.Sprintf("%s %q takes its chart from %s: %s, so what the engine pulled for %q cannot be checked against %s",
			run.obj.GetKind(), run.obj.GetName(), t.src.From, t.src.NotOCI, version.Tag, version.Digest), nil
	case t.names == "":
		return fmt.Sprintf("tag %q of %s is gone: what the engine pulled for it cannot be checked against the verified %s", t.tag, t.src.Repository, version.Digest), nil
	case t.names != version.Digest:
		return fmt.Sprintf("tag %q of %s now points at %s, not the verified %s: it was pushed again, so the engine may run a version nobody verified",
			t.tag, t.src.Repository, t.names, version.Digest), nil
	}
	return "", nil
}
