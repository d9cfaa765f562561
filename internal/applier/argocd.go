package applier

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// PluginName is the config management plugin that renders Git sources at a digest.
const PluginName = "stagecoach"

// Plugin environment variables carrying the promoted version.
const (
	digestEnv  = "STAGECOACH_DIGEST"
	versionEnv = "STAGECOACH_VERSION"
)

// RefreshAnnotation asks Argo CD's application-controller to compare the Application now.
const RefreshAnnotation = "argocd.argoproj.io/refresh"

// ArgoCDApplication applies versions through an Argo CD Application: an OCI source's
// targetRevision, the Stagecoach plugin's environment for a Git source, or, for a Stage of Git
// commits, a plain Git source's targetRevision (the commit's SHA). It never syncs: the
// Application must sync automatically.
type ArgoCDApplication struct {
	Defaults
	// Source names the promoted source of a multi-source Application (applyRef.source): its
	// sources[].name or repoURL (argocd_sources.go).
	Source string
	// Commits: the Stage takes Git commits, written to a plain Git source.
	Commits bool
}

// writesCommit: the promoted source is a plain Git source of a Stage of commits.
func (a ArgoCDApplication) writesCommit(p promoted) bool { return a.Commits && p.git() }

// Takes implements Applier: a plain Git source of a Stage of commits takes Git commits; every
// other source (OCI, the plugin's image digest, a chart) OCI digests.
func (a ArgoCDApplication) Takes(obj *unstructured.Unstructured) VersionKind {
	if p, ok := a.promotedSource(obj); ok && a.writesCommit(p) {
		return GitCommits
	}
	return OCIDigests
}

// syncedRevision is what Argo CD reports for the version: the commit's SHA for a plain Git source,
// the digest otherwise.
func syncedRevision(digest string) string {
	if sha, ok := strings.CutPrefix(digest, "sha1:"); ok {
		return sha
	}
	return digest
}

var _ Applier = ArgoCDApplication{}

func describe(obj *unstructured.Unstructured) string {
	return fmt.Sprintf("Application '%s/%s'", obj.GetNamespace(), obj.GetName())
}

// Validate implements Applier.
func (a ArgoCDApplication) Validate(obj *unstructured.Unstructured) (*Problem, *Problem) {
	name := describe(obj)
	p, problem := a.findSource(obj)
	if problem != nil {
		return problem, nil
	}
	source := p.source
	repoURL, _, _ := unstructured.NestedString(source, "repoURL")
	pluginName, _, _ := unstructured.NestedString(source, "plugin", "name")
	_, pluginSet, _ := unstructured.NestedMap(source, "plugin")
	usesOurPlugin := pluginSet && isOurPlugin(pluginName)
	if !strings.HasPrefix(repoURL, "oci://") && !usesOurPlugin && p.chart() == "" && !a.writesCommit(p) {
		return &Problem{Reason: stagecoachv1.ReasonApplierNotOCI, Message: fmt.Sprintf(
			"%s has source %q, which is not OCI and does not use the %s plugin: use an oci:// repoURL, a Helm chart (chart), or set %s.plugin.name: %s",
			name, repoURL, PluginName, p.path(), PluginName)}, nil
	}
	if !automated(obj) {
		return &Problem{Reason: stagecoachv1.ReasonApplierNotAutomated, Message: fmt.Sprintf(
			"%s does not sync automatically: set spec.syncPolicy.automated, since Stagecoach never runs a sync", name)}, nil
	}

	var fields []string
	for _, f := range [][]string{
		{"kustomize", "images"}, {"kustomize", "patches"}, {"kustomize", "components"},
		{"helm", "parameters"}, {"helm", "values"}, {"helm", "valuesObject"}, {"helm", "valueFiles"}, {"helm", "fileParameters"},
	} {
		if v, ok, _ := unstructured.NestedFieldNoCopy(source, f...); ok && !empty(v) &&
			!(f[1] == "valueFiles" && valueFilesFromRefs(obj, p, v)) {
			fields = append(fields, p.path()+"."+strings.Join(f, "."))
		}
	}
	if pluginSet && !usesOurPlugin {
		fields = append(fields, fmt.Sprintf("%s.plugin (%q)", p.path(), pluginName))
	}
	// The plugin's parameters pass values, Helm parameters and images to the renderer.
	if params, ok, _ := unstructured.NestedFieldNoCopy(source, "plugin", "parameters"); ok && !empty(params) {
		fields = append(fields, p.path()+".plugin.parameters")
	}
	// Argo CD renders the hydrator's dry source instead of spec.source when both are set.
	if hydrator, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "sourceHydrator"); ok && !empty(hydrator) {
		fields = append(fields, "spec.sourceHydrator (Argo CD renders it instead of spec.source)")
	}
	if len(fields) > 0 {
		return nil, &Problem{Reason: stagecoachv1.ReasonNotMediated, Message: fmt.Sprintf(
			"%s sets %s: something besides the digest decides what runs", name, strings.Join(fields, ", "))}
	}
	if unpinned := unpinnedSources(obj, p); len(unpinned) > 0 {
		return nil, &Problem{Reason: stagecoachv1.ReasonSourceUnpinned, Message: fmt.Sprintf(
			"%s renders %s besides the promoted %s: pin each (a Git source to a commit SHA, an OCI source to a digest) and read value files through a pinned source ($ref/...), since what they point at decides what runs too",
			name, strings.Join(unpinned, ", "), p.path())}
	}
	return nil, nil
}

func isOurPlugin(name string) bool {
	return name == PluginName || strings.HasPrefix(name, PluginName+"-v")
}

func automated(obj *unstructured.Unstructured) bool {
	auto, ok, _ := unstructured.NestedMap(obj.Object, "spec", "syncPolicy", "automated")
	if !ok || auto == nil {
		return false
	}
	// Argo CD 3 can keep the block but switch it off.
	if enabled, found, _ := unstructured.NestedBool(auto, "enabled"); found && !enabled {
		return false
	}
	return true
}

func empty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case string:
		return t == ""
	case []any:
		return len(t) == 0
	case map[string]any:
		return len(t) == 0
	}
	return false
}

// Revision implements Applier.
func (a ArgoCDApplication) Revision(obj *unstructured.Unstructured) string {
	p, ok := a.promotedSource(obj)
	if !ok {
		return ""
	}
	switch {
	case p.plugin():
		env, _, _ := unstructured.NestedSlice(p.source, "plugin", "env")
		return envValue(env, digestEnv)
	case p.chart() != "":
		// The chart version cannot be read back as a digest: the one Stagecoach wrote beside it
		// stands for it.
		return obj.GetAnnotations()[DigestAnnotation]
	}
	rev, _, _ := unstructured.NestedString(p.source, "targetRevision")
	if a.writesCommit(p) {
		if commitPattern.MatchString(rev) && len(rev) == 40 {
			return "sha1:" + rev
		}
		return "" // a branch or HEAD: no commit pinned
	}
	return rev
}

// SetRevision implements Applier.
func (a ArgoCDApplication) SetRevision(obj *unstructured.Unstructured, v Version, _ time.Time) error {
	p, problem := a.findSource(obj)
	if problem != nil {
		return fmt.Errorf("cannot write the version to %s: %s", describe(obj), problem.Message)
	}
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	// p.source is the object's own map: the writes below change obj.
	switch {
	case p.plugin():
		env, _, _ := unstructured.NestedSlice(p.source, "plugin", "env")
		env = setEnv(env, digestEnv, v.Digest)
		env = setEnv(env, versionEnv, v.Tag)
		if err := unstructured.SetNestedSlice(p.source, env, "plugin", "env"); err != nil {
			return fmt.Errorf("failed to set the plugin env of %s in %s: %w", p.path(), describe(obj), err)
		}
	case p.chart() != "":
		if v.Tag == "" {
			return fmt.Errorf("%s takes the version as the chart version of %s, but %s has no tag", describe(obj), p.path(), v.Digest)
		}
		p.source["targetRevision"] = chartVersion(v.Tag)
		annotations[DigestAnnotation] = v.Digest
	case a.writesCommit(p):
		sha, ok := strings.CutPrefix(v.Digest, "sha1:")
		if !ok {
			return fmt.Errorf("%s takes Git commits at %s (sha1:<SHA>), not %s", describe(obj), p.path(), v.Digest)
		}
		p.source["targetRevision"] = sha
	default:
		p.source["targetRevision"] = v.Digest
	}
	annotations[RefreshAnnotation] = "normal"
	obj.SetAnnotations(annotations)
	return nil
}

func envValue(env []any, name string) string {
	for _, e := range env {
		if m, ok := e.(map[string]any); ok && m["name"] == name {
			s, _ := m["value"].(string)
			return s
		}
	}
	return ""
}

func setEnv(env []any, name, value string) []any {
	for _, e := range env {
		if m, ok := e.(map[string]any); ok && m["name"] == name {
			m["value"] = value
			return env
		}
	}
	return append(env, map[string]any{"name": name, "value": value})
}

// Observe implements Applier. Landed needs every one of: the last sync operation Succeeded and
// applied the digest, the comparison is Synced at the digest, health is Healthy, and the status was
// reconciled no earlier than the sync finished (health from before the sync proves nothing).
// status.sync.revision alone is never proof: it moves on refresh while the old version still runs.
func (a ArgoCDApplication) Observe(obj *unstructured.Unstructured, digest string) Observation {
	return a.observe(obj, digest, "")
}

// ObserveCompared implements Applier: Observe, with the comparison at compared (a later commit
// of the branch that holds digest, which Argo CD compared without a sync: nothing of this
// Application changed) standing for a comparison at digest. The sync operation must still have
// applied digest itself.
func (a ArgoCDApplication) ObserveCompared(obj *unstructured.Unstructured, digest, compared string) Observation {
	return a.observe(obj, digest, compared)
}

// ComparedCommit implements Applier: the revision of the promoted plain Git source Argo CD last
// compared (status.sync), which moves to each new commit of the branch without a sync.
func (a ArgoCDApplication) ComparedCommit(obj *unstructured.Unstructured) string {
	p, found := a.promotedSource(obj)
	if !found || !p.git() {
		return ""
	}
	status, _, _ := unstructured.NestedMap(obj.Object, "status")
	if rev := statusRevision(status, p, "sync"); commitPattern.MatchString(rev) && len(rev) == 40 {
		return rev
	}
	return ""
}

// observe is Observe; compared, when set, is the comparison revision accepted for digest's.
func (a ArgoCDApplication) observe(obj *unstructured.Unstructured, digest, compared string) Observation {
	status, _, _ := unstructured.NestedMap(obj.Object, "status")
	str := func(path ...string) string { s, _, _ := unstructured.NestedString(status, path...); return s }

	p, found := a.promotedSource(obj)
	if !found {
		return Observation{Phase: Progressing, Reason: stagecoachv1.ReasonWaitingForSync, Message: fmt.Sprintf(
			"waiting for %s to name the source Stagecoach promotes (applyRef.source)", describe(obj))}
	}
	// A chart is synced at its version; the digest behind it is the one Stagecoach wrote beside it
	// (and checks again at landing: see Applier.PinsTag).
	revision := digest
	if a.writesCommit(p) {
		revision = syncedRevision(digest) // Argo CD reports the commit's SHA
	}
	if p.chart() != "" {
		revision, _ = p.source["targetRevision"].(string)
		if recorded := a.Revision(obj); recorded != digest {
			return Observation{Phase: Progressing, Reason: stagecoachv1.ReasonWaitingForSync, Message: fmt.Sprintf(
				"%s carries chart %s %s for %q, not %s", describe(obj), p.chart(), revision, recorded, digest)}
		}
	}
	opPhase := str("operationState", "phase")
	opMessage := str("operationState", "message")
	opApplied := statusRevision(status, p, "operationState", "syncResult")
	opRequested := requestedRevision(status, p)
	finishedAt := str("operationState", "finishedAt")
	ours := revisionNames(opApplied, revision) || revisionNames(opRequested, revision)

	switch {
	case opPhase == "":
		return Observation{Phase: Progressing, Reason: stagecoachv1.ReasonWaitingForSync, Message: fmt.Sprintf("waiting for Argo CD to sync %s", digest)}
	case (opPhase == "Failed" || opPhase == "Error") && ours:
		return Observation{Phase: Failed, Reason: stagecoachv1.ReasonSyncFailed, Message: fmt.Sprintf("the sync of %s ended %s: %s", digest, opPhase, opMessage)}
	case opPhase != "Succeeded" || !revisionNames(opApplied, revision):
		return Observation{Phase: Progressing, Reason: stagecoachv1.ReasonWaitingForSync, Message: fmt.Sprintf(
			"waiting for Argo CD to sync %s (last operation %s at %q)", digest, opPhase, opApplied)}
	}

	health := str("health", "status")
	reconciledAt := str("reconciledAt")
	fresh := notBefore(reconciledAt, finishedAt)
	if health == "Degraded" && fresh {
		return Observation{Phase: Failed, Reason: stagecoachv1.ReasonDegraded, Message: fmt.Sprintf(
			"%s is Degraded after the sync of %s: %s", describe(obj), digest, str("health", "message"))}
	}
	syncStatus := str("sync", "status")
	comparedAt := statusRevision(status, p, "sync")
	var missing []string
	comparedOK := revisionNames(comparedAt, revision) || (compared != "" && revisionNames(comparedAt, syncedRevision(compared)))
	if syncStatus != "Synced" || !comparedOK {
		missing = append(missing, fmt.Sprintf("sync is %s at %q", syncStatus, comparedAt))
	}
	if health != "Healthy" {
		missing = append(missing, fmt.Sprintf("health is %s", health))
	}
	if !fresh {
		missing = append(missing, fmt.Sprintf("status reconciled at %s, before the sync finished at %s", reconciledAt, finishedAt))
	}
	if len(missing) > 0 {
		return Observation{Phase: Progressing, Reason: stagecoachv1.ReasonWaitingForHealth, Message: fmt.Sprintf(
			"synced %s at %s; waiting: %s", digest, finishedAt, strings.Join(missing, ", "))}
	}
	if p.chart() != "" {
		return Observation{Phase: Landed, Reason: stagecoachv1.ReasonLanded, Message: fmt.Sprintf(
			"operation Succeeded at chart %s %s (finished %s), Synced at it, Healthy, reconciled %s; Argo CD pins the chart version, not %s",
			p.chart(), revision, finishedAt, reconciledAt, digest)}
	}
	syncedAt := digest
	if !revisionNames(comparedAt, revision) {
		syncedAt = fmt.Sprintf("%s, a later commit holding it", comparedAt)
	}
	return Observation{Phase: Landed, Reason: stagecoachv1.ReasonLanded, Message: fmt.Sprintf(
		"operation Succeeded at %s (finished %s), Synced at %s, Healthy, reconciled %s", digest, finishedAt, syncedAt, reconciledAt)}
}

// SyncedCommit implements Applier: the revision of the promoted plain Git source that the last
// sync operation applied.
func (a ArgoCDApplication) SyncedCommit(obj *unstructured.Unstructured) string {
	p, found := a.promotedSource(obj)
	if !found || !p.git() {
		return ""
	}
	status, _, _ := unstructured.NestedMap(obj.Object, "status")
	if rev := statusRevision(status, p, "operationState", "syncResult"); commitPattern.MatchString(rev) && len(rev) == 40 {
		return rev
	}
	return ""
}

// AlreadyLive tells whether Argo CD found the cluster already running digest when it compared
// the Application after Stagecoach wrote it at written, and when (reconciledAt). Argo CD then
// starts no sync, so the last operation stays one of another revision: a rollback after a sync
// that the cluster refused (nothing of it applied) would otherwise wait for a sync that never
// comes. The proof: that last operation has ended, the refresh Stagecoach asked for with the
// write is done (Argo CD removes the annotation), the comparison is not older than the write,
// and it is Synced at the digest and Healthy.
func (a ArgoCDApplication) AlreadyLive(obj *unstructured.Unstructured, digest string, written time.Time) (string, bool) {
	str := func(path ...string) string { s, _, _ := unstructured.NestedString(obj.Object, path...); return s }
	switch str("status", "operationState", "phase") {
	case "Succeeded", "Failed", "Error":
	default:
		return "", false
	}
	if _, pending := obj.GetAnnotations()[RefreshAnnotation]; pending || written.IsZero() {
		return "", false
	}
	reconciledAt := str("status", "reconciledAt")
	reconciled, err := time.Parse(time.RFC3339, reconciledAt)
	if err != nil || reconciled.Before(written.Truncate(time.Second)) {
		return "", false
	}
	p, found := a.promotedSource(obj)
	if !found {
		return "", false
	}
	revision := digest
	if a.writesCommit(p) {
		revision = syncedRevision(digest)
	}
	if p.chart() != "" {
		if a.Revision(obj) != digest {
			return "", false
		}
		revision, _ = p.source["targetRevision"].(string)
	}
	status, _, _ := unstructured.NestedMap(obj.Object, "status")
	compared := statusRevision(status, p, "sync")
	return reconciledAt, revisionNames(compared, revision) &&
		str("status", "sync", "status") == "Synced" && str("status", "health", "status") == "Healthy"
}

// notBefore reports whether RFC 3339 time a is not before b. Argo CD writes both with one-second
// resolution, and its post-sync refresh usually lands in the same second as finishedAt, so equal
// counts as fresh; a stale Healthy in that second is caught by the grace period.
func notBefore(a, b string) bool {
	ta, errA := time.Parse(time.RFC3339, a)
	tb, errB := time.Parse(time.RFC3339, b)
	if errA != nil || errB != nil {
		return false
	}
	return !ta.Before(tb)
}
