package promotion

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// event records a Kubernetes event about a Stage or Promotion.
func (run *Run) event(obj client.Object, eventType, reason, note string, args ...any) {
	run.r.Events.Eventf(obj, nil, eventType, reason, stagecoachv1.EventActionPromote, note, args...)
}

// announce records a transition of a Promotion as a Kubernetes event and through the engine's
// own notification path.
func (run *Run) announce(p *stagecoachv1.Promotion, eventType, reason, message, engineMessage string) {
	run.event(p, eventType, reason, "%s", message)
	run.engineEvent(p, eventType, reason, engineMessage)
}

// engineEvent tells the engine's own notification path about a transition: for a Flux applier, a
// Flux event about the Flux object (so an Alert on it routes the event), with the revision, Stage,
// environment and Promotion as metadata.
func (run *Run) engineEvent(p *stagecoachv1.Promotion, eventType, reason, message string) {
	if run.r.FluxEvents == nil || run.obj == nil || !strings.HasSuffix(run.obj.GroupVersionKind().Group, ".fluxcd.io") {
		return
	}
	group := run.obj.GroupVersionKind().Group
	metadata := map[string]string{
		group + "/revision":    versionString(p.Status.Version),
		group + "/stage":       run.stage.Namespace + "/" + run.stage.Name,
		group + "/environment": run.stage.Spec.Environment,
		group + "/promotion":   p.Name,
	}
	run.r.FluxEvents.AnnotatedEventf(run.obj, nil, metadata, eventType, reason, stagecoachv1.EventActionPromote, "%s", message)
}

// setPromotionAnnotations describes the promotion in flight on the applier, for Argo CD
// notification templates.
func setPromotionAnnotations(obj *unstructured.Unstructured, p *stagecoachv1.Promotion, phase stagecoachv1.Phase) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[stagecoachv1.VersionAnnotation] = versionString(p.Status.Version)
	a[stagecoachv1.PromotionAnnotation] = p.Name
	a[stagecoachv1.PhaseAnnotation] = string(phase)
	obj.SetAnnotations(a)
}

func versionString(v *stagecoachv1.VersionReference) string {
	switch {
	case v == nil:
		return "<none>"
	case v.Tag != "":
		return v.Tag + "@" + v.Digest
	}
	return v.Digest
}

// truncateName keeps generated names within the 253 characters of a Kubernetes name.
func truncateName(base, suffix string) string {
	if max := 253 - len(suffix); len(base) > max {
		base = base[:max]
	}
	return base + suffix
}
