// Package applier knows, for each kind of GitOps object, how to point it at a version and how to
// tell from its status whether that version has landed. One file per engine; all are pure functions
// over the object as read from the API server (unstructured), so they are tested without a cluster.
package applier

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// Version is what a Stage promotes: the digest decides, the tag is for people.
type Version struct {
	Digest string
	Tag    string
}

// Problem is one reason the object cannot be used as it is (or runs more than the digest decides).
type Problem struct {
	Reason  string
	Message string
}

// Phase of a version on an applier.
type Phase string

const (
	// Progressing: the engine has not (yet) proven the version runs.
	Progressing Phase = "Progressing"
	// Landed: the engine reports the exact version applied and healthy, with fresh status.
	Landed Phase = "Landed"
	// Failed: the engine reports that applying this version failed.
	Failed Phase = "Failed"
	// Rechecking: the engine had reconciled this very generation successfully, with the version
	// proven, and is reconciling it again (a Flux interval run, a new commit or a nudge sets
	// Ready=Unknown meanwhile). It neither proves nor disproves the version: a landed version keeps
	// its grace clock but is not verified until the engine says Ready again (nor later than the
	// grace plus the progress deadline, when the Promotion fails).
	Rechecking Phase = "Rechecking"
)

// Observation is what the engine's status says about one version, with the evidence.
type Observation struct {
	Phase   Phase
	Reason  string
	Message string
}

// Applier is one kind's whole contract: every capability a kind may have is a method here, and
// Defaults answers for a kind without it, so the controller asks every applier the same
// questions and never probes for optional interfaces. Which kind answers what is tabled in
// docs/stage.md ("What each kind can do"); a new kind embeds Defaults and overrides what it can do.
type Applier interface {
	// Validate reports why the object cannot carry promotions (blocking, Ready=False) and what
	// besides the digest decides what runs (not blocking, Mediated=False).
	Validate(obj *unstructured.Unstructured) (blocking *Problem, unmediated *Problem)
	// Revision returns the digest the object is told to run now, "" when none.
	Revision(obj *unstructured.Unstructured) string
	// SetRevision points the object at the version and asks the engine to look at it now.
	SetRevision(obj *unstructured.Unstructured, v Version, now time.Time) error
	// Observe reports whether the version with this digest has landed.
	Observe(obj *unstructured.Unstructured, digest string) Observation

	// AlreadyLive proves the version live without a sync of it (a rollback after a sync the
	// cluster refused: the engine finds the old version running and starts nothing), with when
	// the engine compared it; false when the kind cannot tell.
	AlreadyLive(obj *unstructured.Unstructured, digest string, written time.Time) (comparedAt string, ok bool)
	// ApplyConfiguration is what a kind written by server-side apply sends (only the fields it
	// owns); nil for a kind written by a patch of what SetRevision changed.
	ApplyConfiguration(obj *unstructured.Unstructured, v Version) (*unstructured.Unstructured, error)
	// PinsTag reports whether obj's engine is given the version's tag (a Helm chart version), not
	// its digest: the engine resolves the tag itself when it pulls, so the tag is checked against
	// the digest before the write, at landing and while it runs.
	PinsTag(obj *unstructured.Unstructured) bool
	// ChartSource is where obj's engine pulls a chart given by version (meaningful when PinsTag).
	ChartSource(obj *unstructured.Unstructured) ChartSource
	// PulledTag is the registry tag the engine pulls for a version's tag.
	PulledTag(tag string) string
	// Drifted reports whether obj's own status says it runs something else than the verified
	// digest (a release the engine installed on its own), and how.
	Drifted(obj *unstructured.Unstructured, digest string) (string, bool)
	// Takes is the kind of version the applier's field takes: OCI digests or Git commits
	// (sha1:<SHA>), or either (spec.applyRef.set, whose templates choose).
	Takes(obj *unstructured.Unstructured) VersionKind
	// SyncedCommit is the Git commit (40 hex) the engine's status says it last fetched or synced
	// for the promoted source, "" when the kind does not follow a branch or has not yet. A Stage
	// that promotes by commit asks whether it holds the commit it pushed (a later commit on the
	// branch, by another Stage, is synced instead of it).
	SyncedCommit(obj *unstructured.Unstructured) string
	// ComparedCommit is the Git commit (40 hex) the engine last compared the desired state at,
	// when that can run ahead of the one it synced: Argo CD compares each new commit of the branch
	// but starts no sync for one that changes nothing of the Application. "" for other kinds.
	ComparedCommit(obj *unstructured.Unstructured) string
	// ObserveCompared is Observe with the comparison at compared (a later commit that holds
	// digest) standing for a comparison at digest. Only asked when ComparedCommit is not "".
	ObserveCompared(obj *unstructured.Unstructured, digest, compared string) Observation
}

// VersionKind is what kind of version an applier or a source deals in.
type VersionKind string

// Kinds of versions.
const (
	OCIDigests VersionKind = "OCI digests"
	GitCommits VersionKind = "Git commits"
	AnyVersion VersionKind = "any version"
)

// KindOf is the kind of a version's digest.
func KindOf(digest string) VersionKind {
	if strings.HasPrefix(digest, "sha1:") {
		return GitCommits
	}
	return OCIDigests
}

// Defaults is embedded by every applier kind: the answers of a kind without the capability.
type Defaults struct{}

// AlreadyLive implements Applier: the kind cannot prove a version live without a sync of it.
func (Defaults) AlreadyLive(*unstructured.Unstructured, string, time.Time) (string, bool) {
	return "", false
}

// ApplyConfiguration implements Applier: the kind is written by a patch.
func (Defaults) ApplyConfiguration(*unstructured.Unstructured, Version) (*unstructured.Unstructured, error) {
	return nil, nil
}

// PinsTag implements Applier: the kind is given the digest.
func (Defaults) PinsTag(*unstructured.Unstructured) bool { return false }

// ChartSource implements Applier: the kind pulls no chart by version.
func (Defaults) ChartSource(*unstructured.Unstructured) ChartSource { return ChartSource{} }

// PulledTag implements Applier: the engine pulls the tag as given.
func (Defaults) PulledTag(tag string) string { return tag }

// Drifted implements Applier: nothing on the object says so beyond Observe.
func (Defaults) Drifted(*unstructured.Unstructured, string) (string, bool) { return "", false }

// Takes implements Applier: the kind is written OCI digests.
func (Defaults) Takes(*unstructured.Unstructured) VersionKind { return OCIDigests }

// SyncedCommit implements Applier: the kind follows no branch.
func (Defaults) SyncedCommit(*unstructured.Unstructured) string { return "" }

// ComparedCommit implements Applier: the kind's comparison never runs ahead of its sync.
func (Defaults) ComparedCommit(*unstructured.Unstructured) string { return "" }

// ObserveCompared implements Applier: never asked of a kind without ComparedCommit.
func (Defaults) ObserveCompared(_ *unstructured.Unstructured, digest, _ string) Observation {
	return Observation{Phase: Progressing, Reason: stagecoachv1.ReasonWaitingForSync, Message: "waiting for " + digest}
}

// DigestAnnotation records, on an applier that is given a version's tag (a chart version), the
// digest Stagecoach verified behind it: the object itself cannot say which digest it runs.
const DigestAnnotation = "stagecoach.dev/digest"

// Options are what a Stage says about how to write to its applier.
type Options struct {
	// Image names the Kustomization spec.images entry to pin.
	Image string
	// ValuesKey is the dotted HelmRelease values path that carries the digest.
	ValuesKey string
	// Source names the promoted source of a multi-source Application.
	Source string
	// Through is the object that applies what this applier fetches (the Kustomization of an
	// OCIRepository), as read now; nil when there is none.
	Through *unstructured.Unstructured
	// Commits: the Stage takes Git commits (a git source), so an Argo CD Application's plain Git
	// source is written the commit.
	Commits bool
	// Applying are the Kustomizations labelled for the Stage that apply a GitRepository's
	// artifact, as read now (used when Through names none).
	Applying []*unstructured.Unstructured
}

// builders make the appliers of the built-in kinds (stagecoachv1.BuiltinAppliers) that are one
// object. The ApplicationSet has none: it is a fleet, whose Applications are promoted wave by wave
// (controller/controller/stage/fleet.go).
var builders = map[string]func(Options) Applier{
	"Application":   func(opts Options) Applier { return ArgoCDApplication{Source: opts.Source, Commits: opts.Commits} },
	"OCIRepository": func(opts Options) Applier { return FluxOCIRepository{Kustomization: opts.Through} },
	"GitRepository": func(opts Options) Applier {
		if opts.Through != nil {
			return FluxGitRepository{Kustomizations: []*unstructured.Unstructured{opts.Through}}
		}
		return FluxGitRepository{Kustomizations: opts.Applying}
	},
	"Kustomization": func(opts Options) Applier { return FluxKustomization{Image: opts.Image} },
	"HelmRelease":   func(opts Options) Applier { return FluxHelmRelease{ValuesKey: opts.ValuesKey} },
}

// For returns the applier of a kind, or nil when Stagecoach has no built-in one for it.
func For(gk schema.GroupKind, opts Options) Applier {
	builtin, ok := stagecoachv1.LookupBuiltinApplier(gk.Kind)
	build := builders[gk.Kind]
	if !ok || builtin.Group != gk.Group || build == nil {
		return nil
	}
	return build(opts)
}

// revisionNames reports whether an engine's revision string names the digest: engines write either
// the bare digest or "<tag>@<digest>".
func revisionNames(revision, digest string) bool {
	if digest == "" {
		return false
	}
	return revision == digest || len(revision) > len(digest) && revision[len(revision)-len(digest)-1:] == "@"+digest
}

// FieldManager is the field manager of what Stagecoach server-side applies.
const FieldManager = "stagecoach"
