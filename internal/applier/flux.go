package applier

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// RequestedAtAnnotation asks a Flux controller to reconcile now.
const RequestedAtAnnotation = "reconcile.fluxcd.io/requestedAt"

// Substitution variables a Kustomization's manifests use for the promoted version.
const (
	digestSubstitution  = "STAGECOACH_DIGEST"
	versionSubstitution = "STAGECOACH_VERSION"
)

func describeKind(obj *unstructured.Unstructured) string {
	return fmt.Sprintf("%s '%s/%s'", obj.GetKind(), obj.GetNamespace(), obj.GetName())
}

// fluxSuspended is the blocking problem of every Flux kind: a suspended object applies nothing.
func fluxSuspended(obj *unstructured.Unstructured) *Problem {
	if suspended, _, _ := unstructured.NestedBool(obj.Object, "spec", "suspend"); suspended {
		return &Problem{Reason: stagecoachv1.ReasonApplierSuspended, Message: fmt.Sprintf(
			"%s is suspended, so it applies nothing: set spec.suspend to false (flux resume)", describeKind(obj))}
	}
	return nil
}

func nudge(obj *unstructured.Unstructured, now time.Time) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[RequestedAtAnnotation] = now.UTC().Format(time.RFC3339Nano)
	obj.SetAnnotations(a)
}

// fluxState is a Flux object's Ready condition, judged for the object's current generation.
type fluxState struct {
	current bool // the controller has reconciled this generation
	ready   string
	reason  string
	message string
	stalled bool
	// settled: status.observedGeneration is the object's generation, that is, a reconcile of this
	// generation has already ended Ready (or Stalled): Flux records it only then.
	settled bool
}

// readFluxState applies the flux CLI's rule: Ready's own observedGeneration, when set, must be
// the object's generation; otherwise status.observedGeneration must be. A Ready=True left over
// from the previous generation says nothing about the version just written.
func readFluxState(obj *unstructured.Unstructured) fluxState {
	gen := obj.GetGeneration()
	statusGen, _, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	st := fluxState{settled: statusGen == gen}
	for _, c := range conditions {
		m, _ := c.(map[string]any)
		switch m["type"] {
		case "Ready":
			st.ready, _ = m["status"].(string)
			st.reason, _ = m["reason"].(string)
			st.message, _ = m["message"].(string)
			condGen, _, _ := unstructured.NestedInt64(m, "observedGeneration")
			st.current = statusGen == gen
			if condGen != 0 {
				st.current = condGen == gen
			}
		case "Stalled":
			st.stalled = m["status"] == "True"
		}
	}
	return st
}

// observeFlux turns the Ready state into an observation; proven reports the kind's own proof
// that the digest is what was applied ("" when proven).
func observeFlux(obj *unstructured.Unstructured, digest string, failureReasons []string, unproven string, evidence string) Observation {
	st := readFluxState(obj)
	name := describeKind(obj)
	switch {
	case !st.current:
		return Observation{Phase: Progressing, Reason: stagecoachv1.ReasonWaitingForReconcile, Message: fmt.Sprintf(
			"waiting for %s to be reconciled at generation %d", name, obj.GetGeneration())}
	case st.ready == "False" && (slices.Contains(failureReasons, st.reason) || st.stalled):
		return Observation{Phase: Failed, Reason: st.reason, Message: fmt.Sprintf("%s failed with %s applying %s: %s", name, st.reason, digest, st.message)}
	case st.ready == "Unknown" && st.settled && unproven == "":
		return Observation{Phase: Rechecking, Reason: stagecoachv1.ReasonRechecking, Message: fmt.Sprintf(
			"%s is reconciling generation %d again, which it had reconciled before (%s: %s)", name, obj.GetGeneration(), st.reason, st.message)}
	case st.ready != "True":
		return Observation{Phase: Progressing, Reason: stagecoachv1.ReasonWaitingForReady, Message: fmt.Sprintf("%s is not Ready (%s): %s", name, st.reason, st.message)}
	case unproven != "":
		return Observation{Phase: Progressing, Reason: stagecoachv1.ReasonWaitingForRevision, Message: unproven}
	}
	return Observation{Phase: Landed, Reason: stagecoachv1.ReasonLanded, Message: fmt.Sprintf("%s is Ready at generation %d: %s", name, obj.GetGeneration(), evidence)}
}

// FluxOCIRepository applies versions by pinning spec.ref.digest; landed when the stored artifact
// is that digest and, when a Kustomization applies the artifact, that Kustomization is Ready for
// its generation with the digest as its lastAppliedRevision.
type FluxOCIRepository struct {
	Defaults
	Kustomization *unstructured.Unstructured
}

// Validate implements Applier.
func (FluxOCIRepository) Validate(obj *unstructured.Unstructured) (*Problem, *Problem) {
	return fluxSuspended(obj), nil
}

// Revision implements Applier.
func (FluxOCIRepository) Revision(obj *unstructured.Unstructured) string {
	d, _, _ := unstructured.NestedString(obj.Object, "spec", "ref", "digest")
	return d
}

// SetRevision implements Applier. The digest takes precedence over a tag or semver in ref.
func (FluxOCIRepository) SetRevision(obj *unstructured.Unstructured, v Version, now time.Time) error {
	if err := unstructured.SetNestedField(obj.Object, v.Digest, "spec", "ref", "digest"); err != nil {
		return fmt.Errorf("failed to set spec.ref.digest of %s: %w", describeKind(obj), err)
	}
	nudge(obj, now)
	return nil
}

// Observe implements Applier.
func (o FluxOCIRepository) Observe(obj *unstructured.Unstructured, digest string) Observation {
	var applying []*unstructured.Unstructured
	if o.Kustomization != nil {
		applying = []*unstructured.Unstructured{o.Kustomization}
	}
	return observeSource(obj, digest, []string{"FetchFailed", "StorageOperationFailed", "VerificationError", "InvalidURL", "AuthenticationFailed"}, applying)
}

// observeSource judges a Flux source (an OCIRepository, a GitRepository) told to fetch digest:
// its stored artifact must name the digest and, when Kustomizations apply the artifact, each must
// have applied it (observeKustomizations).
func observeSource(obj *unstructured.Unstructured, digest string, failures []string, applying []*unstructured.Unstructured) Observation {
	rev, _, _ := unstructured.NestedString(obj.Object, "status", "artifact", "revision")
	unproven := ""
	if !revisionNames(rev, digest) {
		unproven = fmt.Sprintf("%s stores artifact %q, not %s yet", describeKind(obj), rev, digest)
	}
	source := observeFlux(obj, digest, failures, unproven, "artifact "+rev)
	if len(applying) == 0 || (source.Phase != Landed && source.Phase != Rechecking) {
		return source
	}
	applied := observeKustomizations(applying, digest)
	switch {
	case source.Phase == Rechecking && applied.Phase == Failed:
		return applied // the source checking its artifact again hides nothing a Kustomization reports
	case source.Phase == Rechecking:
		return source
	case applied.Phase == Landed:
		applied.Message = source.Message + "; " + applied.Message
	}
	return applied
}

// observeKustomizations judges every Kustomization applying an artifact: a failure of any is the
// verdict, then the first that has not landed; landed when all have, with each one's evidence.
func observeKustomizations(applying []*unstructured.Unstructured, digest string) Observation {
	var landed []string
	var waiting *Observation
	for _, k := range applying {
		obs := observeThroughKustomization(k, digest)
		switch obs.Phase {
		case Failed:
			return obs
		case Landed:
			landed = append(landed, obs.Message)
		default:
			if waiting == nil {
				waiting = &obs
			}
		}
	}
	if waiting != nil {
		return *waiting
	}
	return Observation{Phase: Landed, Reason: stagecoachv1.ReasonLanded, Message: strings.Join(landed, "; ")}
}

// observeThroughKustomization judges the Kustomization k that applies a source's artifact. Its
// generation does not change with the artifact, so its Ready=False may be about an older artifact
// (say, the release being rolled back from): a failure counts only once the Kustomization has
// tried this digest (status.lastAttemptedRevision), or names it, or is Stalled. An artifact it
// cannot even fetch is not recorded as tried, so that failure shows at the progress deadline.
func observeThroughKustomization(k *unstructured.Unstructured, digest string) Observation {
	_, hex, _ := strings.Cut(digest, ":")
	attempted, _, _ := unstructured.NestedString(k.Object, "status", "lastAttemptedRevision")
	if st := readFluxState(k); st.current && st.ready == "False" && !st.stalled && !revisionNames(attempted, digest) &&
		(hex == "" || !strings.Contains(st.message, hex)) {
		return Observation{Phase: Progressing, Reason: stagecoachv1.ReasonWaitingForAttempt, Message: fmt.Sprintf(
			"%s has not tried %s yet; it last tried %q (%s: %s)", describeKind(k), digest, attempted, st.reason, st.message)}
	}
	applied, _, _ := unstructured.NestedString(k.Object, "status", "lastAppliedRevision")
	unproven := ""
	if !revisionNames(applied, digest) {
		unproven = fmt.Sprintf("%s applied %q, not %s yet", describeKind(k), applied, digest)
	}
	return observeFlux(k, digest, kustomizationFailures, unproven, "applied "+applied)
}

// FluxGitRepository applies Git commits by pinning spec.ref.commit (Flux then fetches the branch
// at that commit); landed when the stored artifact is that commit and every Kustomization applying
// the artifact (the one applyRef.kustomization names, or else each labelled for the Stage whose
// sourceRef is the GitRepository) is Ready for its generation with the commit as its
// lastAppliedRevision.
type FluxGitRepository struct {
	Defaults
	Kustomizations []*unstructured.Unstructured
}

// gitRepositoryFailures are the Ready reasons with which source-controller gives up fetching.
var gitRepositoryFailures = []string{"GitOperationFailed", "AuthenticationFailed", "StorageOperationFailed", "InvalidURL", "VerificationError"}

// Validate implements Applier.
func (FluxGitRepository) Validate(obj *unstructured.Unstructured) (*Problem, *Problem) {
	return fluxSuspended(obj), nil
}

// Takes implements Applier.
func (FluxGitRepository) Takes(*unstructured.Unstructured) VersionKind { return GitCommits }

// Revision implements Applier: the pinned commit, as a version digest (sha1:<SHA>).
func (FluxGitRepository) Revision(obj *unstructured.Unstructured) string {
	commit, _, _ := unstructured.NestedString(obj.Object, "spec", "ref", "commit")
	if commitPattern.MatchString(commit) && len(commit) == 40 {
		return "sha1:" + commit
	}
	return ""
}

// SetRevision implements Applier. The commit wins over a branch, tag or semver in ref.
func (FluxGitRepository) SetRevision(obj *unstructured.Unstructured, v Version, now time.Time) error {
	commit, ok := strings.CutPrefix(v.Digest, "sha1:")
	if !ok {
		return fmt.Errorf("%s takes Git commits (sha1:<SHA>), not %s", describeKind(obj), v.Digest)
	}
	if err := unstructured.SetNestedField(obj.Object, commit, "spec", "ref", "commit"); err != nil {
		return fmt.Errorf("failed to set spec.ref.commit of %s: %w", describeKind(obj), err)
	}
	nudge(obj, now)
	return nil
}

// SyncedCommit implements Applier: the commit of the stored artifact (<ref>@sha1:<SHA>).
func (FluxGitRepository) SyncedCommit(obj *unstructured.Unstructured) string {
	rev, _, _ := unstructured.NestedString(obj.Object, "status", "artifact", "revision")
	if i := strings.LastIndex(rev, "sha1:"); i >= 0 && len(rev)-i == 45 {
		return rev[i+5:]
	}
	return ""
}

// Observe implements Applier.
func (o FluxGitRepository) Observe(obj *unstructured.Unstructured, digest string) Observation {
	return observeSource(obj, digest, gitRepositoryFailures, o.Kustomizations)
}

// substitutionFailures are the Ready reasons with which kustomize-controller gives up on a
// revision, except ArtifactFailed: when Stagecoach writes the version into the Kustomization's
// spec, the artifact is its source's (a Git repository, say), the same whatever the version, and
// often only not there yet ("Source artifact not found").
var substitutionFailures = []string{"HealthCheckFailed", "BuildFailed", "ReconciliationFailed", "PruneFailed"}

// kustomizationFailures are all the Ready reasons with which kustomize-controller gives up on a
// revision: applying an OCIRepository's artifact, the artifact is the version.
var kustomizationFailures = slices.Concat(substitutionFailures, []string{"ArtifactFailed"})

// FluxKustomization applies versions through spec.images (the entry named Image) or the
// postBuild substitutions; both are in its spec, so landed is Ready for the generation that
// carries them.
type FluxKustomization struct {
	Defaults
	Image string
}

// Validate implements Applier.
func (k FluxKustomization) Validate(obj *unstructured.Unstructured) (*Problem, *Problem) {
	if p := fluxSuspended(obj); p != nil {
		return p, nil
	}
	if k.Image != "" && k.imageIndex(obj) < 0 {
		return &Problem{Reason: stagecoachv1.ReasonApplierUnreadable, Message: fmt.Sprintf(
			"%s has no spec.images entry named %q: add it, or fix the Stage's spec.applyRef.image", describeKind(obj), k.Image)}, nil
	}
	return nil, nil
}

func (k FluxKustomization) imageIndex(obj *unstructured.Unstructured) int {
	images, _, _ := unstructured.NestedSlice(obj.Object, "spec", "images")
	for i, im := range images {
		if m, _ := im.(map[string]any); m["name"] == k.Image {
			return i
		}
	}
	return -1
}

// Revision implements Applier.
func (k FluxKustomization) Revision(obj *unstructured.Unstructured) string {
	if k.Image != "" {
		images, _, _ := unstructured.NestedSlice(obj.Object, "spec", "images")
		if i := k.imageIndex(obj); i >= 0 {
			d, _ := images[i].(map[string]any)["digest"].(string)
			return d
		}
		return ""
	}
	d, _, _ := unstructured.NestedString(obj.Object, "spec", "postBuild", "substitute", digestSubstitution)
	return d
}

// SetRevision implements Applier.
func (k FluxKustomization) SetRevision(obj *unstructured.Unstructured, v Version, now time.Time) error {
	if k.Image != "" {
		images, _, _ := unstructured.NestedSlice(obj.Object, "spec", "images")
		i := k.imageIndex(obj)
		if i < 0 {
			return fmt.Errorf("%s has no spec.images entry named %q", describeKind(obj), k.Image)
		}
		images[i].(map[string]any)["digest"] = v.Digest
		if err := unstructured.SetNestedSlice(obj.Object, images, "spec", "images"); err != nil {
			return fmt.Errorf("failed to set spec.images of %s: %w", describeKind(obj), err)
		}
	} else {
		subst, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "postBuild", "substitute")
		if subst == nil {
			subst = map[string]string{}
		}
		subst[digestSubstitution] = v.Digest
		subst[versionSubstitution] = v.Tag
		if err := unstructured.SetNestedStringMap(obj.Object, subst, "spec", "postBuild", "substitute"); err != nil {
			return fmt.Errorf("failed to set spec.postBuild.substitute of %s: %w", describeKind(obj), err)
		}
	}
	nudge(obj, now)
	return nil
}

// Observe implements Applier.
func (k FluxKustomization) Observe(obj *unstructured.Unstructured, digest string) Observation {
	unproven := ""
	if k.Revision(obj) != digest {
		unproven = fmt.Sprintf("%s carries %q, not %s", describeKind(obj), k.Revision(obj), digest)
	}
	rev, _, _ := unstructured.NestedString(obj.Object, "status", "lastAppliedRevision")
	return observeFlux(obj, digest, substitutionFailures, unproven, "applied source revision "+rev)
}

// FluxHelmRelease applies versions as a values key (ValuesKey) or as the chart version (the tag);
// landed when Ready for the generation and the newest release in history is deployed.
type FluxHelmRelease struct {
	Defaults
	ValuesKey string
}

// Validate implements Applier.
func (h FluxHelmRelease) Validate(obj *unstructured.Unstructured) (*Problem, *Problem) {
	return fluxSuspended(obj), nil
}

// PinsTag implements Applier: without a values key the version goes in as the chart version,
// a tag Flux resolves when it reconciles. A chart from an OCI registry is proven by the digest
// Flux records (history ociDigest); the digest behind the tag is checked again at landing too.
func (h FluxHelmRelease) PinsTag(*unstructured.Unstructured) bool {
	return h.ValuesKey == ""
}

func (h FluxHelmRelease) path() []string {
	if h.ValuesKey != "" {
		return append([]string{"spec", "values"}, strings.Split(h.ValuesKey, ".")...)
	}
	return []string{"spec", "chart", "spec", "version"}
}

// Revision implements Applier: the digest in the values key; with the chart version, the
// digest cannot be read back, so the version recorded by the last write stands for it.
func (h FluxHelmRelease) Revision(obj *unstructured.Unstructured) string {
	if h.ValuesKey != "" {
		d, _, _ := unstructured.NestedString(obj.Object, h.path()...)
		return d
	}
	return obj.GetAnnotations()[DigestAnnotation]
}

// SetRevision implements Applier.
func (h FluxHelmRelease) SetRevision(obj *unstructured.Unstructured, v Version, now time.Time) error {
	value := v.Digest
	if h.ValuesKey == "" {
		if v.Tag == "" {
			return fmt.Errorf("%s takes the version as its chart version, but %s has no tag", describeKind(obj), v.Digest)
		}
		value = fluxChartVersion(v.Tag)
		a := obj.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[DigestAnnotation] = v.Digest
		obj.SetAnnotations(a)
	}
	if err := unstructured.SetNestedField(obj.Object, value, h.path()...); err != nil {
		return fmt.Errorf("failed to set %s of %s: %w", strings.Join(h.path(), "."), describeKind(obj), err)
	}
	nudge(obj, now)
	return nil
}

// Observe implements Applier.
func (h FluxHelmRelease) Observe(obj *unstructured.Unstructured, digest string) Observation {
	history, _, _ := unstructured.NestedSlice(obj.Object, "status", "history")
	unproven := fmt.Sprintf("%s has no release in status.history yet", describeKind(obj))
	evidence := ""
	if len(history) > 0 {
		latest, _ := history[0].(map[string]any)
		status, _ := latest["status"].(string)
		chartVersion, _ := latest["chartVersion"].(string)
		evidence = fmt.Sprintf("release %v %s, chart %s", latest["version"], status, chartVersion)
		ociDigest, _ := latest["ociDigest"].(string)
		if ociDigest != "" {
			evidence += ", OCI digest " + ociDigest
		}
		switch {
		case status != "deployed":
			unproven = fmt.Sprintf("%s: newest release is %s, not deployed", describeKind(obj), status)
		case h.ValuesKey == "" && sameVersionCore(chartVersion, h.chartVersion(obj)) && h.Revision(obj) == digest && readFluxState(obj).current:
			// Released for this very generation: a version constraint ignores build metadata, so
			// a 1.2.3+x pushed since matched the 1.2.3 written.
			return chartMismatch(obj, chartVersion, h.chartVersion(obj), digest)
		case h.ValuesKey == "" && chartVersion != h.chartVersion(obj):
			unproven = fmt.Sprintf("%s: newest release runs chart %s, not %s", describeKind(obj), chartVersion, h.chartVersion(obj))
		case h.ValuesKey == "" && ociDigest != "" && ociDigest != digest:
			// Flux pulled another chart under the same version: a re-pushed tag.
			return Observation{Phase: Failed, Reason: stagecoachv1.ReasonTagMoved, Message: fmt.Sprintf(
				"%s: newest release runs chart %s at OCI digest %s, not the verified %s: the version was pushed again",
				describeKind(obj), chartVersion, ociDigest, digest)}
		default:
			unproven = ""
		}
	}
	if h.Revision(obj) != digest {
		unproven = fmt.Sprintf("%s carries %q, not %s", describeKind(obj), h.Revision(obj), digest)
	}
	return observeFlux(obj, digest, []string{"InstallFailed", "UpgradeFailed", "TestFailed", "ArtifactFailed", "InitFailed",
		"RollbackSucceeded", "RollbackFailed", "UninstallSucceeded", "UninstallFailed"}, unproven, evidence)
}

func (h FluxHelmRelease) chartVersion(obj *unstructured.Unstructured) string {
	v, _, _ := unstructured.NestedString(obj.Object, "spec", "chart", "spec", "version")
	return v
}
