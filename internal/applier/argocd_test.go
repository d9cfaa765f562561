package applier

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const (
	d1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	d2 = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

// ociSpec is an OCI Application told to run d2.
const ociSpec = `spec: {source: {repoURL: oci://r/p, targetRevision: "` + d2 + `"}}
`

// appWithStatus is the Application spec (ociSpec when empty) with status.
func appWithStatus(t *testing.T, spec, status string) *unstructured.Unstructured {
	t.Helper()
	if spec == "" {
		spec = ociSpec
	}
	return app(t, spec+"status: "+status)
}

func app(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	obj := map[string]any{}
	if err := yaml.Unmarshal([]byte(y), &obj); err != nil {
		t.Fatalf("bad fixture: %v", err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion("argoproj.io/v1alpha1")
	u.SetKind("Application")
	u.SetNamespace("prod")
	u.SetName("payments")
	return u
}

func TestArgoCDValidate(t *testing.T) {
	cases := []struct {
		name, spec         string
		wantBlocking       string
		wantUnmediated     string
		wantMessageContain string
	}{
		{name: "OCI, automated", spec: `{source: {repoURL: oci://r/p, path: .}, syncPolicy: {automated: {}}}`},
		{name: "Stagecoach plugin on Git", spec: `{source: {repoURL: https://git/x.git, plugin: {name: stagecoach}}, syncPolicy: {automated: {prune: true}}}`},
		{name: "versioned Stagecoach plugin", spec: `{source: {repoURL: https://git/x.git, plugin: {name: stagecoach-v1}}, syncPolicy: {automated: {}}}`},
		{name: "multi-source", spec: `{sources: [{repoURL: oci://r/a}, {repoURL: oci://r/b}], syncPolicy: {automated: {}}}`,
			wantBlocking: "ApplierMultiSource", wantMessageContain: "Application 'prod/payments' has 2 entries in spec.sources"},
		{name: "Git without plugin", spec: `{source: {repoURL: https://git/x.git, path: app}, syncPolicy: {automated: {}}}`,
			wantBlocking: "ApplierNotOCI", wantMessageContain: `source "https://git/x.git", which is not OCI`},
		{name: "Git with a foreign plugin", spec: `{source: {repoURL: https://git/x.git, plugin: {name: sops}}, syncPolicy: {automated: {}}}`,
			wantBlocking: "ApplierNotOCI"},
		{name: "no source", spec: `{syncPolicy: {automated: {}}}`, wantBlocking: "ApplierNotOCI", wantMessageContain: "has no spec.source"},
		{name: "manual sync", spec: `{source: {repoURL: oci://r/p}}`,
			wantBlocking: "ApplierNotAutomated", wantMessageContain: "set spec.syncPolicy.automated, since Stagecoach never runs a sync"},
		{name: "automation switched off", spec: `{source: {repoURL: oci://r/p}, syncPolicy: {automated: {enabled: false}}}`,
			wantBlocking: "ApplierNotAutomated"},
		{name: "kustomize images", spec: `{source: {repoURL: oci://r/p, kustomize: {images: ["app=app:v2"]}}, syncPolicy: {automated: {}}}`,
			wantUnmediated: "NotMediated", wantMessageContain: "sets spec.source.kustomize.images: something besides the digest decides what runs"},
		{name: "helm values and parameters", spec: `{source: {repoURL: oci://r/p, helm: {values: "x: 1", parameters: [{name: a, value: b}]}}, syncPolicy: {automated: {}}}`,
			wantUnmediated: "NotMediated", wantMessageContain: "spec.source.helm.parameters, spec.source.helm.values"},
		{name: "foreign plugin on OCI", spec: `{source: {repoURL: oci://r/p, plugin: {name: sops}}, syncPolicy: {automated: {}}}`,
			wantUnmediated: "NotMediated", wantMessageContain: `spec.source.plugin ("sops")`},
		{name: "source hydrator", spec: `{source: {repoURL: oci://r/p}, sourceHydrator: {drySource: {repoURL: https://git/x.git, targetRevision: main, path: app}}, syncPolicy: {automated: {}}}`,
			wantUnmediated: "NotMediated", wantMessageContain: "spec.sourceHydrator (Argo CD renders it instead of spec.source)"},
		{name: "Stagecoach plugin with parameters", spec: `{source: {repoURL: https://git/x.git, plugin: {name: stagecoach, parameters: [{name: images, array: [app]}]}}, syncPolicy: {automated: {}}}`,
			wantUnmediated: "NotMediated", wantMessageContain: "spec.source.plugin.parameters"},
		{name: "empty kustomize block is fine", spec: `{source: {repoURL: oci://r/p, kustomize: {images: []}}, syncPolicy: {automated: {}}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := app(t, "spec: "+tc.spec)
			blocking, unmediated := ArgoCDApplication{}.Validate(obj)
			// The cache of appliers holds Applications slimmed: same verdict.
			fromCache, unmediatedFromCache := ArgoCDApplication{}.Validate(cached(t, obj))
			g.Expect(fromCache).To(Equal(blocking))
			g.Expect(unmediatedFromCache).To(Equal(unmediated))
			switch {
			case tc.wantBlocking != "":
				g.Expect(blocking).NotTo(BeNil())
				g.Expect(blocking.Reason).To(Equal(tc.wantBlocking))
				g.Expect(blocking.Message).To(ContainSubstring(tc.wantMessageContain))
			case tc.wantUnmediated != "":
				g.Expect(blocking).To(BeNil())
				g.Expect(unmediated).NotTo(BeNil())
				g.Expect(unmediated.Reason).To(Equal(tc.wantUnmediated))
				g.Expect(unmediated.Message).To(ContainSubstring(tc.wantMessageContain))
			default:
				g.Expect(blocking).To(BeNil())
				g.Expect(unmediated).To(BeNil())
			}
		})
	}
}

func TestArgoCDSetRevision(t *testing.T) {
	cases := []struct {
		name    string
		spec    string
		check   func(g Gomega, obj *unstructured.Unstructured)
		before  string
		wantRev string
	}{
		{name: "OCI targetRevision", spec: `{source: {repoURL: oci://r/p, targetRevision: ""}}`, before: "",
			check: func(g Gomega, obj *unstructured.Unstructured) {
				rev, _, _ := unstructured.NestedString(obj.Object, "spec", "source", "targetRevision")
				g.Expect(rev).To(Equal(d2))
			}},
		{name: "plugin env, existing entries kept", before: d1,
			spec: `{source: {repoURL: https://git/x.git, targetRevision: main, plugin: {name: stagecoach, env: [{name: STAGE, value: prod}, {name: STAGECOACH_DIGEST, value: "` + d1 + `"}]}}}`,
			check: func(g Gomega, obj *unstructured.Unstructured) {
				env, _, _ := unstructured.NestedSlice(obj.Object, "spec", "source", "plugin", "env")
				g.Expect(env).To(ConsistOf(
					map[string]any{"name": "STAGE", "value": "prod"},
					map[string]any{"name": "STAGECOACH_DIGEST", "value": d2},
					map[string]any{"name": "STAGECOACH_VERSION", "value": "v2.0.0"},
				))
				rev, _, _ := unstructured.NestedString(obj.Object, "spec", "source", "targetRevision")
				g.Expect(rev).To(Equal("main"), "the Git revision is not Stagecoach's to change")
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := app(t, "spec: "+tc.spec)
			a := ArgoCDApplication{}
			g.Expect(a.Revision(cached(t, obj))).To(Equal(tc.before))
			expectSameWrite(t, g, obj, func(u *unstructured.Unstructured) error {
				return a.SetRevision(u, Version{Digest: d2, Tag: "v2.0.0"}, time.Now())
			})
			g.Expect(a.Revision(obj)).To(Equal(tc.before))
			g.Expect(a.SetRevision(obj, Version{Digest: d2, Tag: "v2.0.0"}, time.Now())).To(Succeed())
			g.Expect(a.Revision(obj)).To(Equal(d2))
			g.Expect(obj.GetAnnotations()).To(HaveKeyWithValue("argocd.argoproj.io/refresh", "normal"))
			tc.check(g, obj)
		})
	}
}

func TestArgoCDObserve(t *testing.T) {
	cases := []struct {
		name       string
		status     string
		app        string
		wantPhase  Phase
		wantReason string
		wantMsg    string
	}{
		{name: "no operation yet", status: `{sync: {status: OutOfSync, revision: "` + d2 + `"}}`,
			wantPhase: Progressing, wantReason: "WaitingForSync"},
		{name: "refresh moved sync.revision but the old version runs",
			status: `{sync: {status: OutOfSync, revision: "` + d2 + `"}, health: {status: Healthy},
			  operationState: {phase: Succeeded, finishedAt: "2026-11-30T10:00:00Z", syncResult: {revision: "` + d1 + `"}},
			  reconciledAt: "2026-11-30T10:05:00Z"}`,
			wantPhase: Progressing, wantReason: "WaitingForSync"},
		{name: "sync running", status: `{operationState: {phase: Running, operation: {sync: {revision: "` + d2 + `"}}}}`,
			wantPhase: Progressing, wantReason: "WaitingForSync"},
		{name: "landed", status: `{sync: {status: Synced, revision: "` + d2 + `"}, health: {status: Healthy},
			  operationState: {phase: Succeeded, finishedAt: "2026-11-30T10:00:00Z", syncResult: {revision: "` + d2 + `"}},
			  reconciledAt: "2026-11-30T10:00:02Z"}`,
			wantPhase: Landed, wantMsg: "operation Succeeded at " + d2},
		{name: "landed, reconciled in the second the sync finished", status: `{sync: {status: Synced, revision: "` + d2 + `"}, health: {status: Healthy},
			  operationState: {phase: Succeeded, finishedAt: "2026-11-30T10:00:00Z", syncResult: {revision: "` + d2 + `"}},
			  reconciledAt: "2026-11-30T10:00:00Z"}`,
			wantPhase: Landed},
		{name: "stale Healthy from before the sync is not proof", status: `{sync: {status: Synced, revision: "` + d2 + `"}, health: {status: Healthy},
			  operationState: {phase: Succeeded, finishedAt: "2026-11-30T10:00:00Z", syncResult: {revision: "` + d2 + `"}},
			  reconciledAt: "2026-11-30T09:59:59Z"}`,
			wantPhase: Progressing, wantReason: "WaitingForHealth", wantMsg: "before the sync finished"},
		{name: "revision in tag@digest form", status: `{sync: {status: Synced, revision: "v2@` + d2 + `"}, health: {status: Healthy},
			  operationState: {phase: Succeeded, finishedAt: "2026-11-30T10:00:00Z", syncResult: {revision: "v2@` + d2 + `"}},
			  reconciledAt: "2026-11-30T10:00:01Z"}`,
			wantPhase: Landed},
		{name: "still progressing", status: `{sync: {status: Synced, revision: "` + d2 + `"}, health: {status: Progressing},
			  operationState: {phase: Succeeded, finishedAt: "2026-11-30T10:00:00Z", syncResult: {revision: "` + d2 + `"}},
			  reconciledAt: "2026-11-30T10:00:01Z"}`,
			wantPhase: Progressing, wantMsg: "health is Progressing"},
		{name: "sync failed", status: `{operationState: {phase: Failed, message: "one or more objects failed to apply", operation: {sync: {revision: "` + d2 + `"}}, syncResult: {revision: "` + d2 + `"}}}`,
			wantPhase: Failed, wantReason: "SyncFailed", wantMsg: "ended Failed: one or more objects failed to apply"},
		{name: "sync error", status: `{operationState: {phase: Error, message: "boom", operation: {sync: {revision: "` + d2 + `"}}}}`,
			wantPhase: Failed, wantReason: "SyncFailed"},
		{name: "a failed sync of another digest is not ours", status: `{operationState: {phase: Failed, operation: {sync: {revision: "` + d1 + `"}}, syncResult: {revision: "` + d1 + `"}}}`,
			wantPhase: Progressing},
		{name: "degraded after the sync", status: `{sync: {status: Synced, revision: "` + d2 + `"}, health: {status: Degraded, message: "crashloop"},
			  operationState: {phase: Succeeded, finishedAt: "2026-11-30T10:00:00Z", syncResult: {revision: "` + d2 + `"}},
			  reconciledAt: "2026-11-30T10:00:03Z"}`,
			wantPhase: Failed, wantReason: "Degraded", wantMsg: "is Degraded after the sync of " + d2 + ": crashloop"},
		{name: "degraded from before the sync does not fail it", status: `{sync: {status: Synced, revision: "` + d2 + `"}, health: {status: Degraded},
			  operationState: {phase: Succeeded, finishedAt: "2026-11-30T10:00:00Z", syncResult: {revision: "` + d2 + `"}},
			  reconciledAt: "2026-11-30T09:00:00Z"}`,
			wantPhase: Progressing},
		{name: "plugin source landed by env, not by commit", app: `spec: {source: {repoURL: https://git/x.git, plugin: {name: stagecoach, env: [{name: STAGECOACH_DIGEST, value: "` + d2 + `"}]}}}
`, status: `{sync: {status: Synced, revision: 0a1b2c, comparedTo: {source: {plugin: {env: [{name: STAGECOACH_DIGEST, value: "` + d2 + `"}]}}}}, health: {status: Healthy},
			  operationState: {phase: Succeeded, finishedAt: "2026-11-30T10:00:00Z", syncResult: {revision: 0a1b2c, source: {plugin: {env: [{name: STAGECOACH_DIGEST, value: "` + d2 + `"}]}}}},
			  reconciledAt: "2026-11-30T10:00:01Z"}`,
			wantPhase: Landed},
		{name: "plugin source synced at the old digest", app: `spec: {source: {repoURL: https://git/x.git, plugin: {name: stagecoach}}}
`, status: `{sync: {status: Synced, revision: 0a1b2c, comparedTo: {source: {plugin: {env: [{name: STAGECOACH_DIGEST, value: "` + d1 + `"}]}}}}, health: {status: Healthy},
			  operationState: {phase: Succeeded, finishedAt: "2026-11-30T10:00:00Z", syncResult: {revision: 0a1b2c, source: {plugin: {env: [{name: STAGECOACH_DIGEST, value: "` + d1 + `"}]}}}},
			  reconciledAt: "2026-11-30T10:00:01Z"}`,
			wantPhase: Progressing},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := appWithStatus(t, tc.app, tc.status)
			obs := ArgoCDApplication{}.Observe(obj.DeepCopy(), d2)
			g.Expect(obs.Phase).To(Equal(tc.wantPhase), obs.Message)
			if tc.wantReason != "" {
				g.Expect(obs.Reason).To(Equal(tc.wantReason))
			}
			g.Expect(obs.Message).To(ContainSubstring(tc.wantMsg))
			// The cache holds Applications slimmed, with Argo CD's other status beside: same verdict.
			g.Expect(ArgoCDApplication{}.Observe(cached(t, obj), d2)).To(Equal(obs))
		})
	}
}

func TestRevisionNames(t *testing.T) {
	cases := []struct {
		rev, digest string
		want        bool
	}{
		{d1, d1, true}, {"v1@" + d1, d1, true}, {d2, d1, false}, {"v1" + d1, d1, false}, {"", "", false}, {d1[:20], d1, false},
	}
	for _, tc := range cases {
		t.Run(tc.rev, func(t *testing.T) {
			NewWithT(t).Expect(revisionNames(tc.rev, tc.digest)).To(Equal(tc.want))
		})
	}
}

func TestArgoCDAlreadyLive(t *testing.T) {
	written := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	// Argo CD compared v2 after the write, found it running, and started no sync: the last
	// operation is still the failed sync of d1.
	const compared = `{sync: {status: Synced, revision: "` + d2 + `"}, health: {status: Healthy},
	  operationState: {phase: Failed, finishedAt: "2026-11-30T09:59:00Z", operation: {sync: {revision: "` + d1 + `"}}},
	  reconciledAt: "2026-11-30T10:00:03Z"}`
	cases := []struct {
		name, app, status string
		written           time.Time
		want              bool
	}{
		{name: "compared after the write, Synced and Healthy", status: compared, written: written, want: true},
		{name: "the refresh asked with the write is not done", status: compared, written: written,
			app: `metadata: {annotations: {argocd.argoproj.io/refresh: normal}}
` + ociSpec},
		{name: "compared before the write", status: compared, written: written.Add(5 * time.Second)},
		{name: "no time of the write", status: compared},
		{name: "an operation still runs", written: written, status: `{sync: {status: Synced, revision: "` + d2 + `"}, health: {status: Healthy},
		  operationState: {phase: Running}, reconciledAt: "2026-11-30T10:00:03Z"}`},
		{name: "Synced at another digest", written: written, status: `{sync: {status: Synced, revision: "` + d1 + `"}, health: {status: Healthy},
		  operationState: {phase: Failed}, reconciledAt: "2026-11-30T10:00:03Z"}`},
		{name: "not Healthy", written: written, status: `{sync: {status: Synced, revision: "` + d2 + `"}, health: {status: Progressing},
		  operationState: {phase: Failed}, reconciledAt: "2026-11-30T10:00:03Z"}`},
		{name: "a plugin source compared at the digest's env", written: written,
			app: `spec: {source: {repoURL: https://git/x.git, plugin: {name: stagecoach, env: [{name: STAGECOACH_DIGEST, value: "` + d2 + `"}]}}}
`, status: `{sync: {status: Synced, revision: 0a1b2c, comparedTo: {source: {plugin: {env: [{name: STAGECOACH_DIGEST, value: "` + d2 + `"}]}}}},
		  health: {status: Healthy}, operationState: {phase: Succeeded}, reconciledAt: "2026-11-30T10:00:03Z"}`, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := appWithStatus(t, tc.app, tc.status)
			at, ok := ArgoCDApplication{}.AlreadyLive(obj, d2, tc.written)
			g.Expect(ok).To(Equal(tc.want))
			atFromCache, okFromCache := ArgoCDApplication{}.AlreadyLive(cached(t, obj), d2, tc.written)
			g.Expect([]any{atFromCache, okFromCache}).To(Equal([]any{at, ok}), "read from the cache")
			if tc.want {
				g.Expect(at).To(Equal("2026-11-30T10:00:03Z"))
			}
		})
	}
}

// For a Stage of Git commits, an Application's plain Git source is the applier: its
// targetRevision is written the commit's SHA, and the commit has landed when the sync operation
// Succeeded at that SHA, the comparison is Synced at it, health is Healthy and the status fresh.
// For a Stage of OCI digests the same source stays refused (ApplierNotOCI).
func TestArgoCDApplicationGitCommits(t *testing.T) {
	c1, c2 := "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	gitSpec := `spec: {source: {repoURL: "https://git.example/org/config.git", path: overlays/staging, targetRevision: "` + c2 + `"}, syncPolicy: {automated: {}}}
`
	multiSpec := `spec: {sources: [{name: chart, repoURL: oci://r/chart, targetRevision: "` + d1 + `"}, {name: config, repoURL: "https://git.example/org/config.git", targetRevision: "` + c2 + `"}], syncPolicy: {automated: {}}}
`
	status := func(applied, compared, health, reconciled string) string {
		return `{operationState: {phase: Succeeded, finishedAt: "2026-01-01T00:00:10Z", syncResult: {revision: "` + applied + `"}},
			sync: {status: Synced, revision: "` + compared + `"}, health: {status: ` + health + `}, reconciledAt: "` + reconciled + `"}`
	}
	multiStatus := `{operationState: {phase: Succeeded, finishedAt: "2026-01-01T00:00:10Z", syncResult: {revisions: ["` + d1 + `", "` + c2 + `"]}},
		sync: {status: Synced, revisions: ["` + d1 + `", "` + c2 + `"]}, health: {status: Healthy}, reconciledAt: "2026-01-01T00:00:10Z"}`
	for _, tc := range []struct {
		name      string
		applier   ArgoCDApplication
		spec      string
		status    string
		wantPhase Phase
		wantMsg   string
	}{
		{name: "synced and healthy at the commit", applier: ArgoCDApplication{Commits: true}, spec: gitSpec,
			status: status(c2, c2, "Healthy", "2026-01-01T00:00:10Z"), wantPhase: Landed, wantMsg: "operation Succeeded at sha1:" + c2},
		{name: "the last sync was another commit", applier: ArgoCDApplication{Commits: true}, spec: gitSpec,
			status: status(c1, c2, "Healthy", "2026-01-01T00:00:10Z"), wantPhase: Progressing, wantMsg: `last operation Succeeded at "` + c1 + `"`},
		{name: "synced but not healthy", applier: ArgoCDApplication{Commits: true}, spec: gitSpec,
			status: status(c2, c2, "Progressing", "2026-01-01T00:00:10Z"), wantPhase: Progressing, wantMsg: "health is Progressing"},
		{name: "health from before the sync", applier: ArgoCDApplication{Commits: true}, spec: gitSpec,
			status: status(c2, c2, "Healthy", "2026-01-01T00:00:05Z"), wantPhase: Progressing, wantMsg: "before the sync finished"},
		{name: "one source of a multi-source Application", applier: ArgoCDApplication{Commits: true, Source: "config"}, spec: multiSpec,
			status: multiStatus, wantPhase: Landed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := appWithStatus(t, tc.spec, tc.status)
			blocking, _ := tc.applier.Validate(obj)
			g.Expect(blocking).To(BeNil())
			obs := tc.applier.Observe(obj, "sha1:"+c2)
			g.Expect(obs.Phase).To(Equal(tc.wantPhase), obs.Message)
			g.Expect(obs.Message).To(ContainSubstring(tc.wantMsg))
		})
	}

	// Another Stage's promotion to the same branch came right after: Argo CD synced the commit
	// written (c1), then compared the later one (c2) without a sync, as nothing of this
	// Application changed. The comparison at c2 stands for one at c1 only when asked
	// (ObserveCompared: the controller checked c2 holds what was written).
	t.Run("a comparison at a later commit holding the written one", func(t *testing.T) {
		g := NewWithT(t)
		a := ArgoCDApplication{Commits: true}
		obj := appWithStatus(t, gitSpec, status(c1, c2, "Healthy", "2026-01-01T00:00:10Z"))
		g.Expect(a.SyncedCommit(obj)).To(Equal(c1))
		g.Expect(a.ComparedCommit(obj)).To(Equal(c2))
		obs := a.Observe(obj, "sha1:"+c1)
		g.Expect(obs.Phase).To(Equal(Progressing), obs.Message)
		g.Expect(obs.Message).To(ContainSubstring(`sync is Synced at "` + c2 + `"`))
		obs = a.ObserveCompared(obj, "sha1:"+c1, c2)
		g.Expect(obs.Phase).To(Equal(Landed), obs.Message)
		g.Expect(obs.Message).To(ContainSubstring(c2 + ", a later commit holding it"))
		obs = a.ObserveCompared(obj, "sha1:"+c2, c2)
		g.Expect(obs.Phase).To(Equal(Progressing), "the sync operation must have applied the version itself: "+obs.Message)
		g.Expect(ArgoCDApplication{}.ComparedCommit(app(t, `spec: {source: {repoURL: oci://r/app, targetRevision: "`+d1+`"}}`))).To(BeEmpty())
	})

	t.Run("writes and reads the commit", func(t *testing.T) {
		g := NewWithT(t)
		a := ArgoCDApplication{Commits: true}
		obj := app(t, `spec: {source: {repoURL: "https://git.example/org/config.git", path: overlays/staging, targetRevision: main}, syncPolicy: {automated: {}}}`)
		g.Expect(a.Revision(obj)).To(BeEmpty(), "a branch pins no commit")
		g.Expect(a.Takes(obj)).To(Equal(GitCommits))
		g.Expect(a.SetRevision(obj, Version{Digest: "sha1:" + c1, Tag: c1[:7]}, time.Now())).To(Succeed())
		rev, _, _ := unstructured.NestedString(obj.Object, "spec", "source", "targetRevision")
		g.Expect(rev).To(Equal(c1))
		g.Expect(a.Revision(obj)).To(Equal("sha1:" + c1))
		g.Expect(obj.GetAnnotations()).To(HaveKeyWithValue(RefreshAnnotation, "normal"))
		g.Expect(a.SetRevision(obj, Version{Digest: d1}, time.Now())).To(MatchError(ContainSubstring("takes Git commits at spec.source (sha1:<SHA>), not " + d1)))
	})

	t.Run("a Stage of OCI digests refuses a plain Git source", func(t *testing.T) {
		g := NewWithT(t)
		obj := app(t, gitSpec)
		blocking, _ := ArgoCDApplication{}.Validate(obj)
		g.Expect(blocking).NotTo(BeNil())
		g.Expect(blocking.Reason).To(Equal("ApplierNotOCI"))
		g.Expect(ArgoCDApplication{}.Takes(obj)).To(Equal(OCIDigests))
		g.Expect(ArgoCDApplication{Commits: true}.Takes(app(t, ociSpec))).To(Equal(OCIDigests))
	})
}
