package applier

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestSyncedCommit(t *testing.T) {
	sha := strings.Repeat("a", 40)
	for _, tc := range []struct {
		name    string
		applier Applier
		obj     string
		want    string
	}{
		{name: "an Application's plain Git source: its last sync", applier: ArgoCDApplication{Commits: true}, want: sha, obj: `
spec: {source: {repoURL: https://git.example/config.git, targetRevision: env/staging}}
status: {operationState: {phase: Succeeded, syncResult: {revision: ` + sha + `}}, sync: {revision: ` + strings.Repeat("b", 40) + `}}`},
		{name: "an Application not yet synced", applier: ArgoCDApplication{Commits: true}, obj: `
spec: {source: {repoURL: https://git.example/config.git, targetRevision: env/staging}}`},
		{name: "an Application's OCI source follows no branch", applier: ArgoCDApplication{}, obj: `
spec: {source: {repoURL: oci://registry.example/app, targetRevision: "sha256:1"}}
status: {operationState: {syncResult: {revision: ` + sha + `}}}`},
		{name: "a multi-source Application's promoted source", applier: ArgoCDApplication{Commits: true, Source: "config"}, want: sha, obj: `
spec: {sources: [{repoURL: oci://registry.example/chart, targetRevision: "sha256:1"}, {name: config, repoURL: https://git.example/config.git, targetRevision: env/prod}]}
status: {operationState: {syncResult: {revisions: ["sha256:1", ` + sha + `]}}}`},
		{name: "a GitRepository's artifact", applier: FluxGitRepository{}, want: sha, obj: `
status: {artifact: {revision: env/prod@sha1:` + sha + `}}`},
		{name: "a GitRepository without an artifact", applier: FluxGitRepository{}, obj: `
status: {}`},
		{name: "a Kustomization follows no branch", applier: FluxKustomization{}, obj: `
status: {lastAppliedRevision: main@sha1:` + sha + `}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(tc.applier.SyncedCommit(app(t, tc.obj))).To(Equal(tc.want))
		})
	}
}
