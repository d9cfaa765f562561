package cmp

import (
	"context"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

func TestRender(t *testing.T) {
	pinned := func(repo string) string { return repo + "@" + testDigest }
	cases := []struct {
		name  string
		app   string
		extra map[string]string
		check func(g Gomega, objs []object)
	}{
		{
			name:  "plain directory: declared images pinned in containers and initContainers, others left alone",
			app:   "apps/plain",
			extra: map[string]string{"ARGOCD_ENV_STAGECOACH_DIGEST": testDigest, "ARGOCD_ENV_STAGECOACH_VERSION": "v2.0.0"},
			check: func(g Gomega, objs []object) {
				g.Expect(ids(objs)).To(Equal([]string{"Namespace/payments-prod", "ConfigMap/settings", "Service/payments", "Deployment/payments"}),
					"Namespaces first, then by group, kind, namespace, name; README.md and .stagecoach.yaml are not manifests; the List is flattened")
				g.Expect(containerImages(byID(objs, "Deployment/payments"))).To(ConsistOf(
					"migrate="+pinned("registry.example/payments"), "app="+pinned("registry.example/payments"), "proxy=registry.example/envoy:1.30"))
				for _, o := range objs {
					g.Expect(o.get("metadata", "annotations")).To(Equal(map[string]any{
						"stagecoach.dev/stage": "payments", "stagecoach.dev/version": "v2.0.0"}), o.id())
				}
				g.Expect(byID(objs, "ConfigMap/settings").get("data")).To(Equal(map[string]any{"since": "2024-01-01", "enabled": "on"}),
					"scalars keep their quoting: a quoted on stays a string")
			},
		},
		{
			name:  "plain directory without a digest: images untouched, stage annotated, no version",
			app:   "apps/plain",
			extra: nil,
			check: func(g Gomega, objs []object) {
				g.Expect(containerImages(byID(objs, "Deployment/payments"))).To(ConsistOf(
					"migrate=registry.example/payments:1.0.0", "app=registry.example/payments:1.0.0", "proxy=registry.example/envoy:1.30"))
				for _, o := range objs {
					g.Expect(o.get("metadata", "annotations")).To(Equal(map[string]any{"stagecoach.dev/stage": "payments"}), o.id())
				}
			},
		},
		{
			name:  "the version annotation falls back to the digest; the images parameter pins more repositories",
			app:   "apps/plain",
			extra: map[string]string{"ARGOCD_ENV_STAGECOACH_DIGEST": testDigest, "ARGOCD_APP_PARAMETERS": `[{"name":"images","array":["registry.example/envoy"]}]`},
			check: func(g Gomega, objs []object) {
				g.Expect(containerImages(byID(objs, "Deployment/payments"))).To(ContainElement("proxy=" + pinned("registry.example/envoy")))
				g.Expect(byID(objs, "Service/payments").get("metadata", "annotations", "stagecoach.dev/version")).To(Equal(testDigest))
			},
		},
		{
			name:  "PARAM_* variables when ARGOCD_APP_PARAMETERS is absent",
			app:   "apps/plain",
			extra: map[string]string{"ARGOCD_ENV_STAGECOACH_DIGEST": testDigest, "PARAM_IMAGES_0": "registry.example/envoy"},
			check: func(g Gomega, objs []object) {
				g.Expect(containerImages(byID(objs, "Deployment/payments"))).To(ContainElement("proxy=" + pinned("registry.example/envoy")))
			},
		},
		{
			name:  "Kustomize overlay over a base in a parent directory: kustomize images applied, then the digest pinned",
			app:   "apps/kustomize",
			extra: map[string]string{"ARGOCD_ENV_STAGECOACH_DIGEST": testDigest, "ARGOCD_ENV_STAGECOACH_VERSION": "v2.0.0"},
			check: func(g Gomega, objs []object) {
				g.Expect(ids(objs)).To(Equal([]string{"Namespace/web-prod", "Deployment/web", "CronJob/report"}))
				g.Expect(containerImages(byID(objs, "Deployment/web"))).To(ConsistOf("web="+pinned("registry.example/payments"), "cache=redis:7.2"))
				g.Expect(containerImages(byID(objs, "CronJob/report"))).To(ConsistOf("report=" + pinned("registry.example/payments")))
				g.Expect(byID(objs, "Deployment/web").get("spec", "replicas")).To(Equal(3), "the overlay's patch")
				for _, o := range objs {
					g.Expect(o.get("metadata", "labels", "env")).To(Equal("prod"), o.id())
					g.Expect(o.get("metadata", "annotations", "stagecoach.dev/stage")).To(Equal("web"), o.id())
					g.Expect(o.get("metadata", "annotations", "stagecoach.dev/version")).To(Equal("v2.0.0"), o.id())
				}
			},
		},
		{
			name: "Kustomize without a digest keeps kustomize's image tags",
			app:  "apps/kustomize",
			check: func(g Gomega, objs []object) {
				g.Expect(containerImages(byID(objs, "Deployment/web"))).To(ConsistOf("web=registry.example/payments:2.0.0", "cache=redis:7.2"))
			},
		},
		{
			name: "Helm chart: release name and namespace from Argo CD, value files, values and helm-parameters in order",
			app:  "apps/helm",
			extra: map[string]string{"ARGOCD_APP_PARAMETERS": `[
				{"name":"values-files","array":["values-prod.yaml"]},
				{"name":"values","string":"greeting: from the values parameter\nimage:\n  tag: \"3.0.0\"\n"},
				{"name":"helm-parameters","map":{"image.tag":"9.9.9","worker.enabled":"true"}}]`},
			check: func(g Gomega, objs []object) {
				g.Expect(ids(objs)).To(Equal([]string{"CustomResourceDefinition/widgets.example.com", "ConfigMap/api-settings", "Deployment/api", "Job/api-migrate"}),
					"CRDs from crds/ first, templates and hooks, no NOTES.txt")
				deploy := byID(objs, "Deployment/api")
				g.Expect(deploy.get("metadata", "namespace")).To(Equal("api-prod"))
				g.Expect(deploy.get("spec", "replicas")).To(Equal(4), "from values-prod.yaml")
				g.Expect(containerImages(deploy)).To(ConsistOf("api=registry.example/api:9.9.9", "worker=registry.example/api-worker:9.9.9"),
					"helm-parameters win over the values parameter")
				g.Expect(byID(objs, "ConfigMap/api-settings").get("data")).To(Equal(map[string]any{
					"greeting": "from the values parameter", "kube": "v1.35.4"}), "values parameter over value files; KUBE_VERSION reaches .Capabilities")
			},
		},
		{
			name: "Helm chart at the digest: the declared image is pinned in templates and hooks, a look-alike repository is not",
			app:  "apps/helm",
			extra: map[string]string{"ARGOCD_ENV_STAGECOACH_DIGEST": testDigest,
				"ARGOCD_APP_PARAMETERS": `[{"name":"helm-parameters","map":{"worker.enabled":"true"}}]`},
			check: func(g Gomega, objs []object) {
				g.Expect(containerImages(byID(objs, "Deployment/api"))).To(ConsistOf("api="+pinned("registry.example/api"), "worker=registry.example/api-worker:1.0.0"))
				g.Expect(containerImages(byID(objs, "Job/api-migrate"))).To(ConsistOf("migrate=" + pinned("registry.example/api")))
				g.Expect(byID(objs, "Job/api-migrate").get("metadata", "annotations")).To(Equal(map[string]any{
					"helm.sh/hook": "pre-install", "stagecoach.dev/stage": "api", "stagecoach.dev/version": testDigest}))
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			out, err := Render(t.Context(), Options{Dir: filepath.Join(fixtureRepo, tc.app), Env: lookup(argoEnv(tc.app, tc.extra))})
			g.Expect(err).NotTo(HaveOccurred())
			tc.check(g, decodeObjects(t, out))
			again, err := Render(t.Context(), Options{Dir: filepath.Join(fixtureRepo, tc.app), Env: lookup(argoEnv(tc.app, tc.extra))})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(again)).To(Equal(string(out)), "the output is deterministic")
		})
	}
}

func TestRenderVerifiesBeforeRendering(t *testing.T) {
	cases := []struct {
		name      string
		extra     map[string]string
		verdict   error
		wantAsked []string
		wantErr   string
		// allowUnverified is the sidecar's explicit opt-out.
		allowUnverified bool
	}{
		{
			name:      "a verified digest renders",
			extra:     map[string]string{"ARGOCD_ENV_STAGECOACH_DIGEST": testDigest, "PARAM_IMAGES_0": "registry.example/envoy"},
			wantAsked: []string{"registry.example/envoy@" + testDigest, "registry.example/payments@" + testDigest},
		},
		{
			name:      "an unsigned digest is refused with one line naming it",
			extra:     map[string]string{"ARGOCD_ENV_STAGECOACH_DIGEST": testDigest},
			verdict:   context.DeadlineExceeded,
			wantAsked: []string{"registry.example/payments@" + testDigest},
			wantErr:   "refusing to render registry.example/payments@" + testDigest + ": its signature does not verify: context deadline exceeded",
		},
		{
			name:    "no digest with verification configured is refused",
			wantErr: "verification is configured but " + EnvDigest + " is empty: refusing to render unverified; set the Application's plugin env STAGECOACH_DIGEST (the controller does when it promotes) or, to render without it, set " + EnvAllowUnverified + "=true in the plugin's sidecar",
		},
		{
			name:            "no digest renders unverified only when explicitly allowed",
			allowUnverified: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var asked []string
			opts := Options{Dir: filepath.Join(fixtureRepo, "apps/plain"), Env: lookup(argoEnv("apps/plain", tc.extra)),
				VerifyDigest:    func(_ context.Context, ref string) error { asked = append(asked, ref); return tc.verdict },
				AllowUnverified: tc.allowUnverified}
			out, err := Render(t.Context(), opts)
			g.Expect(asked).To(Equal(tc.wantAsked))
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(decodeObjects(t, out)).To(HaveLen(4))
				return
			}
			g.Expect(err).To(MatchError(tc.wantErr))
			g.Expect(out).To(BeEmpty())
		})
	}
}
