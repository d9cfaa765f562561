package admission

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

// Issue 37: a labelled Application new to its Stage (created by an engine's GitOps identity, again
// after a prune, by Replace=true,Force=true or by an ApplicationSet; or labelled by an update) may
// pin only what that Stage last had gate-judged (application-create-guard, whose parameters are
// the Stages of the namespace); the applicationset-controller changes what a live one runs no
// more than anyone else, and takes none over; a create carries no landing proof in its status.

// createDigest is the nth test digest.
func createDigest(n int) string { return "sha256:" + fmt.Sprintf("%064d", n) }

// ociSource is an OCI source at rev (none when rev is "").
func ociSource(rev string) map[string]any {
	s := map[string]any{"repoURL": "oci://registry.example/deploy/payments", "path": "."}
	if rev != "" {
		s["targetRevision"] = rev
	}
	return s
}

// pluginSource is a Git source rendered by the Stagecoach plugin at branch, with env (name, value pairs).
func pluginSource(branch string, env ...string) map[string]any {
	var list []any
	for i := 0; i+1 < len(env); i += 2 {
		list = append(list, map[string]any{"name": env[i], "value": env[i+1]})
	}
	plugin := map[string]any{"name": "stagecoach"}
	if len(list) > 0 {
		plugin["env"] = list
	}
	return map[string]any{"repoURL": "https://git.example/payments.git", "path": "app", "targetRevision": branch, "plugin": plugin}
}

// labelledApp is an Application labelled for stage, with source (a map: spec.source) or sources
// (a list: spec.sources).
func labelledApp(name, stage string, source any) *unstructured.Unstructured {
	spec := map[string]any{"project": "default",
		"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": ns},
		"syncPolicy":  map[string]any{"automated": map[string]any{}}}
	switch s := source.(type) {
	case []any:
		spec["sources"] = s
	default:
		spec["source"] = s
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion("argoproj.io/v1alpha1")
	u.SetKind("Application")
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(map[string]string{stagecoachv1.StageLabel: stage})
	return u
}

// stageForCreate makes a Stage whose applier is the Application name, with the status the
// controller wrote (status may be nil: a Stage that has never had a version).
func stageForCreate(t *testing.T, name, source string, status *stagecoachv1.StageStatus, mutate ...func(*stagecoachv1.Stage)) {
	t.Helper()
	g := NewWithT(t)
	stagecoach := as(t, controllerSA, "system:serviceaccounts")
	s := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: stagecoachv1.StageSpec{Service: "payments", Environment: "prod",
			ApplyRef: stagecoachv1.ApplierReference{Kind: "Application", Name: name, Source: source},
			Source:   stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: "staging"}}}}
	for _, m := range mutate {
		m(s)
	}
	g.Expect(stagecoach.Create(t.Context(), s)).To(Succeed())
	if status != nil {
		s.Status = *status
		g.Expect(stagecoach.Status().Update(t.Context(), s)).To(Succeed())
	}
}

// createCase is one write; wantErr empty: it must pass.
type createCase struct {
	name    string
	write   func() error
	wantErr string
}

func runCreateCases(t *testing.T, cases []createCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := tc.write()
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

// TestApplicationCreateGuard (issue 37 items 1 and 2c): an app-of-apps parent's
// application-controller or the applicationset-controller creating a labelled Application again
// (after a prune, with Replace=true,Force=true, or at an ApplicationSet template's digest) pins
// only what its Stage last had gate-judged, for every source shape; an Application given the
// label is judged alike.
func TestApplicationCreateGuard(t *testing.T) {
	g := NewWithT(t)
	grantEveryone(t, "application-create-writer", rbacv1.PolicyRule{APIGroups: []string{"argoproj.io"}, Resources: []string{"applications"},
		Verbs: []string{"get", "list", "create", "update", "patch", "delete"}})
	// The Stages' status as the controller writes it (stage-status-guard lets no one else).
	grantEveryone(t, "application-create-stages", rbacv1.PolicyRule{APIGroups: []string{"stagecoach.dev"}, Resources: []string{"stages", "stages/status"},
		Verbs: []string{"get", "create", "update"}})

	current, landing, other := createDigest(101), createDigest(102), createDigest(109)
	const valuesSHA = "0123456789abcdef0123456789abcdef01234567"
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	running := func(version string) *stagecoachv1.StageStatus {
		return &stagecoachv1.StageStatus{Current: &stagecoachv1.CurrentVersion{Version: version, Digest: current}, LastAppliedDigest: current}
	}
	// A promotion of landing is under way: the applier holds it, the Stage still runs current.
	stageForCreate(t, "cr-plugin", "", running("v1.0.0"))
	stageForCreate(t, "cr-chart", "", running("1.2.0_build.7"))
	stageForCreate(t, "cr-multi", "app", running("v1.0.0"))
	stageForCreate(t, "cr-multi-unnamed", "elsewhere", running("v1.0.0"))
	stageForCreate(t, "cr-fresh", "", nil)
	// A Stage of Git commits, running commitCurrent.
	const commitCurrent, commitOther = "1111111111111111111111111111111111111111", "9999999999999999999999999999999999999999"
	stageForCreate(t, "cr-git", "", &stagecoachv1.StageStatus{
		Current: &stagecoachv1.CurrentVersion{Version: commitCurrent[:7], Digest: "sha1:" + commitCurrent}, LastAppliedDigest: "sha1:" + commitCurrent})
	// A Stage that promotes by commit to branch env/prod, running current.
	stageForCreate(t, "cr-git-push", "", running("v1.0.0"), func(s *stagecoachv1.Stage) {
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Git: &stagecoachv1.GitPromotion{URL: "https://git.example/config.git", Branch: "env/prod",
			Set: []stagecoachv1.GitFileEdit{{Path: "prod/kustomization.yaml", Image: "payments"}}}}
	})
	stageForCreate(t, "cr-adopted-empty", "", &stagecoachv1.StageStatus{Adopted: &stagecoachv1.AdoptedRevision{At: now}})
	// Last: once the API server judges with this one's status, it has the others' too.
	stageForCreate(t, "cr-oci", "", &stagecoachv1.StageStatus{
		Current: &stagecoachv1.CurrentVersion{Version: "v1.0.0", Digest: current}, LastAppliedDigest: landing})
	applyManifests(t, filepath.Join(testenv.RepoRoot(), "manifests", "policies", "application-guard.yaml"))

	stagecoach := as(t, controllerSA, "system:serviceaccounts")
	breakGlass := as(t, "bob", "stagecoach:break-glass")
	parent := as(t, argoCDSA, "system:serviceaccounts")
	appSet := as(t, appSetSA, "system:serviceaccounts")
	alice := as(t, "alice", "developers")

	// The policy is enforced, with the Stages as parameters, a moment after it is created.
	probes := 0
	g.Eventually(func() error {
		probes++
		return parent.Create(t.Context(), labelledApp(fmt.Sprintf("cr-probe-%d", probes), "cr-oci", ociSource(other)))
	}, 20*time.Second, 100*time.Millisecond).Should(MatchError(MatchRegexp(
		`Stagecoach-managed Application cr-probe-\d+ may not be created with targetRevision ` + other)))

	create := func(who client.Client, u *unstructured.Unstructured) func() error {
		return func() error { return who.Create(t.Context(), u) }
	}
	// replaceForce is Argo CD's Replace=true,Force=true sync of a child: delete, then create the Git copy.
	replaceForce := func(u *unstructured.Unstructured) func() error {
		return func() error {
			if err := parent.Delete(t.Context(), u.DeepCopy()); err != nil {
				return err
			}
			return parent.Create(t.Context(), u)
		}
	}
	// label gives an unlabelled Application (created first, unguarded) the label for stage.
	label := func(name, stage string, source any) func() error {
		return func() error {
			u := labelledApp(name, stage, source)
			u.SetLabels(nil)
			if err := alice.Create(t.Context(), u); err != nil {
				return err
			}
			u.SetLabels(map[string]string{stagecoachv1.StageLabel: stage})
			return alice.Update(t.Context(), u)
		}
	}
	chart := func(version string) map[string]any {
		s := map[string]any{"repoURL": "registry.example/charts", "chart": "payments"}
		if version != "" {
			s["targetRevision"] = version
		}
		return s
	}
	multi := func(appRev, valuesRev string) []any {
		app := ociSource(appRev)
		app["name"] = "app"
		app["helm"] = map[string]any{"valueFiles": []any{"$values/prod.yaml"}}
		return []any{app, map[string]any{"name": "values", "repoURL": "https://git.example/config.git", "targetRevision": valuesRev, "ref": "values"}}
	}
	withDigestAnnotation := func(u *unstructured.Unstructured, d string) *unstructured.Unstructured {
		u.SetAnnotations(map[string]string{"stagecoach.dev/digest": d})
		return u
	}
	ociRefused := "Stage cr-oci last had gate-judged " + current + " and " + landing + " (version v1.0.0)"

	runCreateCases(t, []createCase{
		// A Stage of Git commits: a plain Git source pinned to the commit it runs passes, another
		// commit or a branch does not.
		{name: "the parent creates a Git child at the commit its Stage runs", write: create(parent, labelledApp("cr-git-1", "cr-git",
			map[string]any{"repoURL": "https://git.example/config.git", "path": "staging", "targetRevision": commitCurrent}))},
		{name: "the parent creates a Git child at another commit", write: create(parent, labelledApp("cr-git-2", "cr-git",
			map[string]any{"repoURL": "https://git.example/config.git", "path": "staging", "targetRevision": commitOther})),
			wantErr: "may not be created with source https://git.example/config.git at " + commitOther},
		{name: "the parent creates a Git child following a branch", write: create(parent, labelledApp("cr-git-3", "cr-git",
			map[string]any{"repoURL": "https://git.example/config.git", "path": "staging", "targetRevision": "main"})),
			wantErr: "may not be created with source https://git.example/config.git at main"},
		// OCI source, app-of-apps.
		// A Stage that promotes by commit: a plain Git source following its branch passes (the
		// branch holds what Stagecoach pushed), another branch or repository does not.
		{name: "the parent creates a Git child following the branch its Stage pushes to", write: create(parent, labelledApp("cr-git-push-1", "cr-git-push",
			map[string]any{"repoURL": "https://git.example/config.git", "path": "prod", "targetRevision": "env/prod"}))},
		{name: "the parent creates a Git child following another branch", write: create(parent, labelledApp("cr-git-push-2", "cr-git-push",
			map[string]any{"repoURL": "https://git.example/config.git", "path": "prod", "targetRevision": "main"})),
			wantErr: "may not be created with source https://git.example/config.git at main"},
		{name: "the parent creates a Git child following the branch of another repository", write: create(parent, labelledApp("cr-git-push-3", "cr-git-push",
			map[string]any{"repoURL": "https://git.example/fork.git", "path": "prod", "targetRevision": "env/prod"})),
			wantErr: "may not be created with source https://git.example/fork.git at env/prod"},
		{name: "the parent creates a child again at a digest its Stage never had", write: create(parent, labelledApp("cr-oci-1", "cr-oci", ociSource(other))),
			wantErr: "Stagecoach-managed Application cr-oci-1 may not be created with targetRevision " + other + " (user " + argoCDSA + "): " + ociRefused +
				". Leave targetRevision (or the plugin's STAGECOACH_ env, the chart version) out of the Git copy or ApplicationSet template or set it to what the Stage runs, and promote other versions through the Stage (a Promotion); or ask a break-glass member"},
		{name: "the parent creates a child again at the Stage's current digest", write: create(parent, labelledApp("cr-oci-2", "cr-oci", ociSource(current)))},
		{name: "the parent creates a child again at the digest being promoted", write: create(parent, labelledApp("cr-oci-3", "cr-oci", ociSource(landing)))},
		{name: "the parent creates a child again without targetRevision", write: create(parent, labelledApp("cr-oci-4", "cr-oci", ociSource("")))},
		{name: "the parent creates a child again at a tag", write: create(parent, labelledApp("cr-oci-5", "cr-oci", ociSource("v9.9.9"))),
			wantErr: "may not be created with targetRevision v9.9.9"},
		{name: "Replace=true,Force=true deletes the child and creates it at another digest", write: replaceForce(labelledApp("cr-oci-2", "cr-oci", ociSource(other))),
			wantErr: "Stagecoach-managed Application cr-oci-2 may not be created with targetRevision " + other},
		{name: "Replace=true,Force=true deletes the child and creates it from a copy without targetRevision", write: replaceForce(labelledApp("cr-oci-3", "cr-oci", ociSource("")))},
		{name: "the parent creates a child again from a plain Git source", write: create(parent, labelledApp("cr-oci-10", "cr-oci",
			map[string]any{"repoURL": "https://git.example/evil.git", "path": "."})),
			wantErr: "Stagecoach-managed Application cr-oci-10 may not be created with source https://git.example/evil.git at HEAD (user " + argoCDSA + "): " + ociRefused},
		{name: "the parent creates a child again rendered by another plugin", write: create(parent, labelledApp("cr-oci-11", "cr-oci",
			map[string]any{"repoURL": "https://git.example/payments.git", "path": ".", "targetRevision": "main", "plugin": map[string]any{"name": "helmfile"}})),
			wantErr: "may not be created with source https://git.example/payments.git (plugin helmfile) at main"},
		{name: "the parent creates a child again with a source hydrator", write: func() error {
			u := labelledApp("cr-oci-12", "cr-oci", ociSource(current))
			_ = unstructured.SetNestedMap(u.Object, map[string]any{
				"drySource":  map[string]any{"repoURL": "https://git.example/evil.git", "targetRevision": "main", "path": "app"},
				"syncSource": map[string]any{"targetBranch": "env/prod", "path": "app"}}, "spec", "sourceHydrator")
			return parent.Create(t.Context(), u)
		}, wantErr: "may not be created with spec.sourceHydrator"},
		// ApplicationSet per environment: the controller deletes and creates again at the template's digest.
		{name: "the applicationset-controller creates an Application again at its template's old digest",
			write:   create(appSet, labelledApp("cr-oci-6", "cr-oci", ociSource(createDigest(100)))),
			wantErr: "Stagecoach-managed Application cr-oci-6 may not be created with targetRevision " + createDigest(100) + " (user " + appSetSA + "): " + ociRefused},
		{name: "the applicationset-controller creates an Application at the Stage's digest", write: create(appSet, labelledApp("cr-oci-7", "cr-oci", ociSource(current)))},
		// Git source with the Stagecoach plugin: the branch is not judged, the plugin env is.
		{name: "the parent creates a plugin child pinning another digest", write: create(parent, labelledApp("cr-plugin-1", "cr-plugin", pluginSource("main", "STAGECOACH_DIGEST", other))),
			wantErr: "Stagecoach-managed Application cr-plugin-1 may not be created with STAGECOACH_DIGEST=" + other + " (user " + argoCDSA + "): Stage cr-plugin last had gate-judged " + current + " (version v1.0.0)"},
		{name: "the parent creates a plugin child at its Stage's digest and version", write: create(parent, labelledApp("cr-plugin-2", "cr-plugin",
			pluginSource("release-1", "STAGECOACH_DIGEST", current, "STAGECOACH_VERSION", "v1.0.0", "REGION", "eu")))},
		{name: "the parent creates a plugin child with another version", write: create(parent, labelledApp("cr-plugin-3", "cr-plugin",
			pluginSource("main", "STAGECOACH_DIGEST", current, "STAGECOACH_VERSION", "v9.0.0"))),
			wantErr: "may not be created with STAGECOACH_VERSION=v9.0.0"},
		{name: "the parent creates a plugin child without the env", write: create(parent, labelledApp("cr-plugin-4", "cr-plugin", pluginSource("main")))},
		// Helm chart by version.
		{name: "the parent creates a chart child at another chart version", write: create(parent, labelledApp("cr-chart-1", "cr-chart", chart("9.9.9"))),
			wantErr: "may not be created with chart payments version 9.9.9 (user " + argoCDSA + "): Stage cr-chart last had gate-judged " + current + " (version 1.2.0_build.7)"},
		{name: "the parent creates a chart child at the Stage's version", write: create(parent, labelledApp("cr-chart-2", "cr-chart", chart("1.2.0+build.7")))},
		{name: "the parent creates a chart child claiming another digest", write: create(parent, withDigestAnnotation(labelledApp("cr-chart-3", "cr-chart", chart("1.2.0+build.7")), other)),
			wantErr: "may not be created with annotation stagecoach.dev/digest=" + other},
		// Multi-source: the promoted source is judged, the others must be pinned.
		{name: "the parent creates a multi-source child pinning another digest", write: create(parent, labelledApp("cr-multi-1", "cr-multi", multi(other, valuesSHA))),
			wantErr: "Stagecoach-managed Application cr-multi-1 may not be created with targetRevision " + other},
		{name: "the parent creates a multi-source child at the Stage's digest, values pinned", write: create(parent, labelledApp("cr-multi-2", "cr-multi", multi(current, valuesSHA)))},
		{name: "the parent creates a multi-source child without the promoted revision", write: create(parent, labelledApp("cr-multi-3", "cr-multi", multi("", valuesSHA)))},
		{name: "the parent creates a multi-source child whose values follow a branch", write: create(parent, labelledApp("cr-multi-4", "cr-multi", multi(current, "main"))),
			wantErr: "Stagecoach-managed Application cr-multi-4 may not be created with https://git.example/config.git at main besides the source Stage cr-multi promotes (app) (user " + argoCDSA + ")"},
		{name: "the parent creates a multi-source child whose Stage names none of its sources", write: create(parent, labelledApp("cr-multi-5", "cr-multi-unnamed", multi(current, valuesSHA))),
			wantErr: "may not be created with source https://git.example/config.git at " + valuesSHA + " (user " + argoCDSA + "): Stage cr-multi-unnamed last had gate-judged " + current + " (version v1.0.0), and its applyRef.source names none of spec.sources"},
		// Stages without a version, and no Stage.
		{name: "a Stage that never had a version adopts what the new Application pins", write: create(parent, labelledApp("cr-fresh-1", "cr-fresh", ociSource(other)))},
		{name: "a Stage that adopted an Application pinning nothing judges every pin", write: create(parent, labelledApp("cr-adopted-1", "cr-adopted-empty", ociSource(other))),
			wantErr: "Stage cr-adopted-empty has no version gate-judged yet (it adopted an Application that pinned none)"},
		{name: "a label naming no Stage judges nothing", write: create(parent, labelledApp("cr-none-1", "cr-no-such-stage", ociSource(other)))},
		// An Application given the label is new to its Stage too.
		{name: "a user labels an Application that runs another digest", write: label("cr-label-1", "cr-oci", ociSource(other)),
			wantErr: "Stagecoach-managed Application cr-label-1 may not be labelled with targetRevision " + other + " (user alice): " + ociRefused},
		{name: "a user labels an Application that runs the Stage's digest", write: label("cr-label-2", "cr-oci", ociSource(current))},
		// Stagecoach and break-glass pass.
		{name: "Stagecoach creates one at any digest", write: create(stagecoach, labelledApp("cr-oci-8", "cr-oci", ociSource(other)))},
		{name: "break-glass creates one at any digest", write: create(breakGlass, labelledApp("cr-oci-9", "cr-oci", ociSource(other)))},
	})
}

// appSetOwner is the owner reference the applicationset-controller sets on what it generates.
func appSetOwner(name string) map[string]any {
	return map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet", "name": name,
		"uid": "00000000-0000-0000-0000-0000000000a5", "controller": true, "blockOwnerDeletion": true}
}

// TestApplicationSetPerEnvironmentGuard (issue 37 item 2a and 2b): an unlabelled ApplicationSet's
// template reaches a labelled Application only as far as anyone's writes do: the
// applicationset-controller may not change its source or ignoreDifferences, may not take over an
// Application no ApplicationSet controls, and owner references change only through Stagecoach,
// break-glass and the garbage collector.
func TestApplicationSetPerEnvironmentGuard(t *testing.T) {
	g := NewWithT(t)
	grantEveryone(t, "application-appset-writer", rbacv1.PolicyRule{APIGroups: []string{"argoproj.io"}, Resources: []string{"applications"},
		Verbs: []string{"get", "list", "create", "update", "patch", "delete"}})
	applyManifests(t, filepath.Join(testenv.RepoRoot(), "manifests", "policies", "application-guard.yaml"))

	alice := as(t, "alice", "developers")
	breakGlass := as(t, "bob", "stagecoach:break-glass")
	parent := as(t, argoCDSA, "system:serviceaccounts")
	appSet := as(t, appSetSA, "system:serviceaccounts")
	gc := as(t, gcSA, "system:serviceaccounts")

	generated := func(name string) *unstructured.Unstructured {
		u := labelledApp(name, name, ociSource(""))
		_ = unstructured.SetNestedSlice(u.Object, []any{appSetOwner("envs")}, "metadata", "ownerReferences")
		return u
	}
	probes := 0
	g.Eventually(func() error {
		probes++
		return parent.Create(t.Context(), generated(fmt.Sprintf("ps-probe-%d", probes)))
	}, 10*time.Second, 100*time.Millisecond).Should(MatchError(MatchRegexp(
		`Stagecoach-managed Application ps-probe-\d+ may not be created owned by an ApplicationSet`)))

	dev, staging, prod := generated("ps-dev"), generated("ps-staging"), generated("ps-prod")
	for _, u := range []*unstructured.Unstructured{dev, staging, prod} {
		g.Expect(appSet.Create(t.Context(), u.DeepCopy())).To(Succeed())
	}
	// A child an app-of-apps parent created: no ApplicationSet generated it.
	child := labelledApp("ps-child", "ps-child", ociSource(""))
	g.Expect(parent.Create(t.Context(), child.DeepCopy())).To(Succeed())

	setOwners := func(refs ...any) func(u *unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, refs, "metadata", "ownerReferences")
		}
	}
	notControlled := "Stagecoach-managed Application ps-child is controlled by no ApplicationSet, so the applicationset-controller may not "
	runGuardCases(t, []guardCase{
		// (a) The template's source and ignoreDifferences.
		{name: "the applicationset-controller copies an image added to the template", who: appSet, obj: dev,
			mutate: set([]any{"app=registry.example/app:evil"}, "spec", "source", "kustomize", "images"),
			wantErr: "spec.source of Stagecoach-managed Application ps-dev decide what runs and may only be changed by Stagecoach (user " + appSetSA +
				"): change them through a break-glass member, or remove the Application from its Stage; an ApplicationSet's template reaches a labelled Application only that way"},
		{name: "the applicationset-controller copies the template's repository", who: appSet, obj: dev,
			mutate: set("oci://evil.example/payments", "spec", "source", "repoURL"), wantErr: "spec.source of Stagecoach-managed Application ps-dev decide what runs"},
		{name: "the applicationset-controller copies the template's ignoreDifferences", who: appSet, obj: staging,
			mutate:  set([]any{map[string]any{"group": "apps", "kind": "Deployment", "jsonPointers": []any{"/spec/template/spec/containers/0/image"}}}, "spec", "ignoreDifferences"),
			wantErr: "spec.ignoreDifferences of Stagecoach-managed Application ps-staging decide what runs"},
		{name: "the applicationset-controller copies the template's annotations (steady state)", who: appSet, obj: dev,
			mutate: func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{"team": "payments"}) }},
		// (b) Ownership.
		{name: "a new ApplicationSet takes over an Application no ApplicationSet generated", who: appSet, obj: child,
			mutate: setOwners(appSetOwner("tenant")), wantErr: notControlled + "update it (user " + appSetSA + ")"},
		{name: "the applicationset-controller updates an Application no ApplicationSet controls", who: appSet, obj: child,
			mutate: func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{"team": "tenant"}) }, wantErr: notControlled + "update it"},
		{name: "the applicationset-controller deletes an Application no ApplicationSet controls", who: appSet, obj: child, delete: true,
			wantErr: notControlled + "delete it"},
		{name: "the applicationset-controller hands an Application to another ApplicationSet", who: appSet, obj: staging, mutate: setOwners(appSetOwner("tenant")),
			wantErr: "the ownerReferences of Stagecoach-managed Application ps-staging may only be changed by Stagecoach or a break-glass member (user " + appSetSA + ")"},
		{name: "a user gives an Application an owner", who: alice, obj: child, mutate: setOwners(appSetOwner("tenant")),
			wantErr: "the ownerReferences of Stagecoach-managed Application ps-child may only be changed by Stagecoach or a break-glass member (user alice)"},
		{name: "the garbage collector orphans an Application", who: gc, obj: prod, mutate: func(u *unstructured.Unstructured) { u.SetOwnerReferences(nil) }},
		{name: "the applicationset-controller deletes an Application it generated", who: appSet, obj: dev, delete: true},
		{name: "break-glass gives an Application to an ApplicationSet", who: breakGlass, obj: child, mutate: setOwners(appSetOwner("envs"))},
	})
}

// TestApplicationCreateStatusGuard (issue 37 item 7): the Application CRD has no status
// subresource, so a create carries its status: a new labelled Application carries no landing
// proof, while the empty status the applicationset-controller sends passes.
func TestApplicationCreateStatusGuard(t *testing.T) {
	g := NewWithT(t)
	grantEveryone(t, "application-status-writer", rbacv1.PolicyRule{APIGroups: []string{"argoproj.io"}, Resources: []string{"applications"},
		Verbs: []string{"get", "list", "create", "update", "patch", "delete"}})
	applyManifests(t, filepath.Join(testenv.RepoRoot(), "manifests", "policies", "application-guard.yaml"))

	breakGlass := as(t, "bob", "stagecoach:break-glass")
	parent := as(t, argoCDSA, "system:serviceaccounts")
	appSet := as(t, appSetSA, "system:serviceaccounts")
	d := createDigest(201)
	withStatus := func(name string, status map[string]any) *unstructured.Unstructured {
		u := labelledApp(name, name, ociSource(""))
		u.Object["status"] = status
		return u
	}
	landed := map[string]any{
		"operationState": map[string]any{"phase": "Succeeded", "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:10Z",
			"operation": map[string]any{"sync": map[string]any{"revision": d}}, "syncResult": map[string]any{"revision": d}},
		"sync": map[string]any{"status": "Synced", "revision": d,
			"comparedTo": map[string]any{"source": map[string]any{"repoURL": "oci://registry.example/deploy/payments", "targetRevision": d}, "destination": map[string]any{}}},
		"health":       map[string]any{"status": "Healthy"},
		"reconciledAt": "2026-01-01T00:00:20Z",
	}
	probes := 0
	g.Eventually(func() error {
		probes++
		return parent.Create(t.Context(), withStatus(fmt.Sprintf("st-probe-%d", probes), map[string]any{"health": map[string]any{"status": "Healthy"}}))
	}, 10*time.Second, 100*time.Millisecond).Should(MatchError(MatchRegexp(
		`Stagecoach-managed Application st-probe-\d+ may not be created with status.health.status Healthy`)))

	create := func(who client.Client, u *unstructured.Unstructured) func() error {
		return func() error { return who.Create(t.Context(), u) }
	}
	runCreateCases(t, []createCase{
		{name: "the parent creates a child with made-up landing proof", write: create(parent, withStatus("st-1", landed)),
			wantErr: "Stagecoach-managed Application st-1 may not be created with status.operationState, status.reconciledAt, status.sync.status Synced, status.sync.revision " + d +
				", status.sync.comparedTo, status.health.status Healthy (user " + argoCDSA + "): its status is Argo CD's to write once it has synced, and Stagecoach takes it as proof of what runs; create it without status"},
		{name: "a create with a multi-source comparison", write: create(parent, withStatus("st-2", map[string]any{"sync": map[string]any{"status": "", "revisions": []any{d},
			"comparedTo": map[string]any{"sources": []any{map[string]any{"repoURL": "oci://registry.example/deploy/payments", "targetRevision": d}}, "destination": map[string]any{}}}})),
			wantErr: "may not be created with status.sync.revisions, status.sync.comparedTo"},
		{name: "a create with the plugin's digest compared", write: create(parent, withStatus("st-3", map[string]any{"sync": map[string]any{"status": "",
			"comparedTo": map[string]any{"source": map[string]any{"repoURL": "https://git.example/payments.git",
				"plugin": map[string]any{"name": "stagecoach", "env": []any{map[string]any{"name": "STAGECOACH_DIGEST", "value": d}}}}, "destination": map[string]any{}}}})),
			wantErr: "may not be created with status.sync.comparedTo"},
		{name: "a create with history", write: create(appSet, withStatus("st-4", map[string]any{"history": []any{map[string]any{"id": int64(1), "revision": d,
			"deployedAt": "2026-01-01T00:00:00Z", "source": map[string]any{"repoURL": "oci://registry.example/deploy/payments"}}}})),
			wantErr: "may not be created with status.history (user " + appSetSA + ")"},
		{name: "a create with resources", write: create(parent, withStatus("st-5", map[string]any{"resources": []any{map[string]any{"kind": "Deployment", "name": "payments",
			"status": "Synced", "health": map[string]any{"status": "Healthy"}}}})),
			wantErr: "may not be created with status.resources"},
		// ApplicationStatus{} as the applicationset-controller's client serialises it.
		{name: "the applicationset-controller creates one with an empty status", write: create(appSet, withStatus("st-6", map[string]any{
			"sync":   map[string]any{"status": "", "comparedTo": map[string]any{"source": map[string]any{"repoURL": ""}, "destination": map[string]any{}}},
			"health": map[string]any{}, "summary": map[string]any{}, "sourceHydrator": map[string]any{}}))},
		{name: "break-glass creates one with status", write: create(breakGlass, withStatus("st-7", landed))},
	})
}
