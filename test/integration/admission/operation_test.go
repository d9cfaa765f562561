package admission

import (
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

// A Deployment running an image nobody promoted: what a local sync would apply.
const foreignDeployment = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"payments"},` +
	`"spec":{"selector":{"matchLabels":{"app":"payments"}},"template":{"metadata":{"labels":{"app":"payments"}},` +
	`"spec":{"containers":[{"name":"app","image":"evil.example/payments:latest"}]}}}}`

// multiSource is a labelled Application with two sources: the promoted OCI one and pinned values.
func multiSource(name string) *unstructured.Unstructured {
	u := application(name, false)
	spec := u.Object["spec"].(map[string]any)
	delete(spec, "source")
	spec["sources"] = []any{
		map[string]any{"repoURL": "oci://registry.example/deploy/payments", "path": ".", "targetRevision": "sha256:aaaa"},
		map[string]any{"repoURL": "https://git.example/values.git", "targetRevision": "0123456789abcdef0123456789abcdef01234567", "ref": "values"},
	}
	return u
}

// withSyncOptions is a labelled Application whose own sync policy carries the options.
func withSyncOptions(options ...any) func(name string) *unstructured.Unstructured {
	return func(name string) *unstructured.Unstructured {
		u := application(name, false)
		_ = unstructured.SetNestedSlice(u.Object, options, "spec", "syncPolicy", "syncOptions")
		return u
	}
}

func ociApplication(name string) *unstructured.Unstructured { return application(name, false) }

// ownSync is a sync of the Application's own source at its own revision, as argocd-server writes
// one (it copies spec.source or spec.sources and the revisions into every sync it starts); more
// sets further fields of operation.sync.
func ownSync(more map[string]any) func(app *unstructured.Unstructured) map[string]any {
	return func(app *unstructured.Unstructured) map[string]any {
		sync := map[string]any{}
		if source, ok, _ := unstructured.NestedMap(app.Object, "spec", "source"); ok {
			sync["source"] = source
			sync["revision"] = source["targetRevision"]
		}
		if sources, ok, _ := unstructured.NestedSlice(app.Object, "spec", "sources"); ok {
			sync["sources"] = sources
			var revisions []any
			for _, s := range sources {
				revisions = append(revisions, s.(map[string]any)["targetRevision"])
			}
			sync["revisions"] = revisions
		}
		for k, v := range more {
			sync[k] = v
		}
		return sync
	}
}

// justSync is an operation.sync with exactly these fields.
func justSync(sync map[string]any) func(*unstructured.Unstructured) map[string]any {
	return func(*unstructured.Unstructured) map[string]any { return sync }
}

// Every field of Argo CD's Operation and SyncOperation, as the verdict table of
// manifests/policies/application-guard.yaml judges it: a field that would decide what runs is
// refused to a plain user (and to argocd-server) and allowed to Stagecoach and break-glass; a sync
// of the Application's own source at its own revision passes with every harmless field.
func TestApplicationGuardOperation(t *testing.T) {
	g := NewWithT(t)
	grantEveryone(t, "application-operation-writer", rbacv1.PolicyRule{APIGroups: []string{"argoproj.io"}, Resources: []string{"applications"},
		Verbs: []string{"get", "list", "create", "update", "patch", "delete"}})
	applyManifests(t, filepath.Join(testenv.RepoRoot(), "manifests", "policies", "application-guard.yaml"))

	alice := as(t, "alice", "developers")
	stagecoach := as(t, controllerSA, "system:serviceaccounts")
	breakGlass := as(t, "bob", "stagecoach:break-glass")
	argocd := as(t, argoCDSA, "system:serviceaccounts")
	argoServer := as(t, argoServerSA, "system:serviceaccounts")

	probes := 0
	g.Eventually(func() error {
		probes++
		return alice.Create(t.Context(), application(fmt.Sprintf("op-probe-%d", probes), false))
	}, 10*time.Second, 100*time.Millisecond).Should(MatchError(MatchRegexp(
		`only Stagecoach may create Stagecoach-managed Application op-probe-\d+ \(user alice\)`)))

	type opCase struct {
		name    string
		who     client.Client
		app     func(name string) *unstructured.Unstructured // the Application before the write
		sync    func(app *unstructured.Unstructured) map[string]any
		wantErr string
	}
	// The fields that decide what runs, each tried by alice (refused), Stagecoach and break-glass.
	deciding := []struct {
		name    string
		app     func(name string) *unstructured.Unstructured
		sync    func(app *unstructured.Unstructured) map[string]any
		refused string // what the refusal names
	}{
		{name: "manifests (a local sync)", app: ociApplication,
			sync: justSync(map[string]any{"manifests": []any{foreignDeployment}}), refused: "operation.sync.manifests"},
		{name: "manifests beside the own source", app: ociApplication,
			sync: ownSync(map[string]any{"manifests": []any{foreignDeployment}}), refused: "operation.sync.manifests"},
		{name: "manifests in a dry run", app: ociApplication,
			sync: justSync(map[string]any{"manifests": []any{foreignDeployment}, "dryRun": true}), refused: "operation.sync.manifests"},
		{name: "source from another repository", app: ociApplication, sync: justSync(map[string]any{
			"source": map[string]any{"repoURL": "oci://evil.example/payments", "path": ".", "targetRevision": "sha256:aaaa"}}),
			refused: "operation.sync.source"},
		{name: "source at another revision", app: ociApplication, sync: justSync(map[string]any{
			"source": map[string]any{"repoURL": "oci://registry.example/deploy/payments", "path": ".", "targetRevision": "sha256:eeee"}}),
			refused: "operation.sync.source"},
		{name: "source with the plugin's digest changed", app: func(name string) *unstructured.Unstructured { return application(name, true) },
			sync: func(app *unstructured.Unstructured) map[string]any {
				source, _, _ := unstructured.NestedMap(app.Object, "spec", "source")
				_ = unstructured.SetNestedSlice(source, []any{map[string]any{"name": "STAGECOACH_DIGEST", "value": "sha256:eeee"}}, "plugin", "env")
				return map[string]any{"source": source}
			}, refused: "operation.sync.source"},
		{name: "source on a multi-source Application", app: multiSource, sync: func(app *unstructured.Unstructured) map[string]any {
			sources, _, _ := unstructured.NestedSlice(app.Object, "spec", "sources")
			return map[string]any{"source": sources[0]}
		}, refused: "operation.sync.source"},
		{name: "sources on a single-source Application", app: ociApplication, sync: func(app *unstructured.Unstructured) map[string]any {
			source, _, _ := unstructured.NestedMap(app.Object, "spec", "source")
			return map[string]any{"sources": []any{source}}
		}, refused: "operation.sync.sources"},
		{name: "sources not the Application's", app: multiSource, sync: func(app *unstructured.Unstructured) map[string]any {
			sources, _, _ := unstructured.NestedSlice(app.Object, "spec", "sources")
			sources[1].(map[string]any)["targetRevision"] = "main"
			return map[string]any{"sources": sources}
		}, refused: "operation.sync.sources"},
		{name: "another revision", app: ociApplication, sync: justSync(map[string]any{"revision": "sha256:eeee"}),
			refused: "operation.sync.revision sha256:eeee"},
		{name: "a revision on a multi-source Application", app: multiSource, sync: justSync(map[string]any{"revision": "sha256:aaaa"}),
			refused: "operation.sync.revision sha256:aaaa"},
		{name: "revisions not the sources'", app: multiSource,
			sync:    justSync(map[string]any{"revisions": []any{"sha256:eeee", "0123456789abcdef0123456789abcdef01234567"}}),
			refused: "operation.sync.revisions sha256:eeee,0123456789abcdef0123456789abcdef01234567"},
		{name: "revisions on a single-source Application", app: ociApplication, sync: justSync(map[string]any{"revisions": []any{"sha256:aaaa"}}),
			refused: "operation.sync.revisions sha256:aaaa"},
		{name: "syncOptions RespectIgnoreDifferences (live values instead of the render's)", app: ociApplication,
			sync:    ownSync(map[string]any{"syncOptions": []any{"ServerSideApply=true", "RespectIgnoreDifferences=true"}}),
			refused: "operation.sync.syncOptions RespectIgnoreDifferences=true"},
		{name: "syncOptions Argo CD may add later", app: ociApplication, sync: ownSync(map[string]any{"syncOptions": []any{"Future=true"}}),
			refused: "operation.sync.syncOptions Future=true"},
	}
	var cases []opCase
	for _, d := range deciding {
		cases = append(cases,
			opCase{name: "a user sets " + d.name, who: alice, app: d.app, sync: d.sync,
				wantErr: d.refused + " would decide what runs, and only Stagecoach or a break-glass member may set that (user alice)"},
			opCase{name: "Stagecoach sets " + d.name, who: stagecoach, app: d.app, sync: d.sync},
			opCase{name: "break-glass sets " + d.name, who: breakGlass, app: d.app, sync: d.sync},
		)
	}
	cases = append(cases, []opCase{
		{name: "argocd-server starts a local sync", who: argoServer, app: ociApplication,
			sync:    ownSync(map[string]any{"manifests": []any{foreignDeployment}, "dryRun": true}),
			wantErr: "operation.sync.manifests would decide what runs"},
		{name: "the application-controller starts an automated sync", who: argocd, app: multiSource, sync: ownSync(nil)},
		// What argocd-server writes for a person's sync from the UI or CLI.
		{name: "a user syncs the own source at the own revision", who: alice, app: ociApplication, sync: ownSync(nil)},
		{name: "a user syncs the plugin source as it is", who: alice, app: func(name string) *unstructured.Unstructured { return application(name, true) },
			sync: ownSync(nil)},
		{name: "a user syncs the own sources at their revisions", who: alice, app: multiSource, sync: ownSync(nil)},
		{name: "argocd-server syncs for a person", who: argoServer, app: ociApplication, sync: ownSync(map[string]any{"prune": true})},
		{name: "a user prunes", who: alice, app: ociApplication, sync: ownSync(map[string]any{"prune": true})},
		{name: "a user dry-runs", who: alice, app: ociApplication, sync: ownSync(map[string]any{"dryRun": true})},
		{name: "a user syncs some resources", who: alice, app: ociApplication, sync: ownSync(map[string]any{"resources": []any{
			map[string]any{"group": "apps", "kind": "Deployment", "name": "payments", "namespace": ns}}})},
		{name: "a user forces the apply strategy", who: alice, app: ociApplication,
			sync: ownSync(map[string]any{"syncStrategy": map[string]any{"apply": map[string]any{"force": true}}})},
		{name: "a user forces the hook strategy", who: alice, app: ociApplication,
			sync: justSync(map[string]any{"syncStrategy": map[string]any{"hook": map[string]any{"force": true}}})},
		{name: "a user sets the options that only change how the render is applied", who: alice, app: ociApplication,
			sync: ownSync(map[string]any{"syncOptions": []any{"Validate=false", "PruneLast=true", "ApplyOutOfSyncOnly=true",
				"PrunePropagationPolicy=foreground", "Prune=confirm", "FailOnSharedResource=true", "SkipDryRunOnMissingResource=true",
				"ServerSideApply=true", "ClientSideApplyMigration=false", "CreateNamespace=true", "Replace=true"}})},
		{name: "a user sets an option the Application's own sync policy carries", who: alice, app: withSyncOptions("RespectIgnoreDifferences=true"),
			sync: ownSync(map[string]any{"syncOptions": []any{"RespectIgnoreDifferences=true"}})},
		{name: "a user counts self-heal attempts", who: alice, app: ociApplication, sync: ownSync(map[string]any{"autoHealAttemptsCount": int64(3)})},
	}...)

	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			app := tc.app(fmt.Sprintf("op-%d", i))
			g.Expect(stagecoach.Create(t.Context(), app)).To(Succeed())
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(app.GroupVersionKind())
			g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(app), u)).To(Succeed())
			before := u.DeepCopy()
			operation := map[string]any{"initiatedBy": map[string]any{"username": "alice"}, "sync": tc.sync(u)}
			if tc.wantErr == "" {
				// The fields that never decide what runs ride along with every allowed sync.
				operation["info"] = []any{map[string]any{"name": "reason", "value": "hotfix"}}
				operation["retry"] = map[string]any{"limit": int64(2), "refresh": true, "backoff": map[string]any{"duration": "5s", "factor": int64(2)}}
			}
			u.Object["operation"] = operation
			err := tc.who.Update(t.Context(), u)
			after := &unstructured.Unstructured{}
			after.SetGroupVersionKind(app.GroupVersionKind())
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(app), after)).To(Succeed())
				g.Expect(after.Object["operation"]).To(Equal(operation), "the operation is stored as written")
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			g.Expect(err).To(MatchError(ContainSubstring("Stagecoach-managed Application " + app.GetName() + " may only sync its own source at its own targetRevision")))
			g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(app), after)).To(Succeed())
			g.Expect(reflect.DeepEqual(after.Object["operation"], before.Object["operation"])).To(BeTrue(), "operation changed")
		})
	}
}
