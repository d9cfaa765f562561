// Package install checks what a user installs: the Helm chart against the kustomize install
// (manifests/), and `make release`'s files.
package install

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v4/pkg/chart/common"
	commonutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

const testDigest = "sha256:0000000000000000000000000000000000000000000000000000000000000abc"

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// parseDocs reads multi-document YAML into objects, skipping empty documents.
func parseDocs(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		obj := map[string]any{}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, fmt.Errorf("%w in:\n%s", err, doc)
		}
		if len(obj) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
}

// kustomizeBuild builds the kustomization in dir (which may reach outside it) into objects.
func kustomizeBuild(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = types.LoadRestrictionsNone
	rm, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := rm.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := parseDocs(data)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// kustomizeInstall builds manifests/ as `kubectl apply -k manifests` would, with the image pinned.
func kustomizeInstall(t *testing.T, image string) []*unstructured.Unstructured {
	t.Helper()
	dir := t.TempDir()
	manifests, err := filepath.Rel(dir, filepath.Join(repoRoot(), "manifests")) // kustomize refuses absolute bases
	if err != nil {
		t.Fatal(err)
	}
	k := fmt.Sprintf("resources: [%s]\nimages: [{name: stagecoach, newName: %s, digest: %q}]\n", manifests, image, testDigest)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return kustomizeBuild(t, dir)
}

// renderChart renders charts/stagecoach like `helm template stagecoach charts/stagecoach
// --include-crds -n NAMESPACE --set ...`.
func renderChart(namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	ch, err := loader.LoadDir(filepath.Join(repoRoot(), "charts", "stagecoach"))
	if err != nil {
		return nil, err
	}
	options := common.ReleaseOptions{Name: "stagecoach", Namespace: namespace, Revision: 1, IsInstall: true}
	vals, err := commonutil.ToRenderValuesWithSchemaValidation(ch, values, options, common.DefaultCapabilities.Copy(), false)
	if err != nil {
		return nil, err
	}
	files, err := engine.Engine{}.Render(ch, vals)
	if err != nil {
		return nil, err
	}
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, err
	}
	if len(hooks) > 0 {
		return nil, fmt.Errorf("the chart has %d hooks; install.yaml has none", len(hooks))
	}
	var all bytes.Buffer
	for _, crd := range ch.CRDObjects() {
		all.WriteString("---\n" + string(crd.File.Data) + "\n")
	}
	for _, m := range manifests {
		all.WriteString("---\n" + m.Content + "\n")
	}
	return parseDocs(all.Bytes())
}

// foldBlankLines turns every run of newlines in v's strings into one: kustomize re-emits a folded
// scalar's more-indented lines with a blank line between them (the policies' CEL expressions), which
// changes whitespace only.
func foldBlankLines(v any) any {
	switch v := v.(type) {
	case string:
		for strings.Contains(v, "\n\n") {
			v = strings.ReplaceAll(v, "\n\n", "\n")
		}
		return v
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			out[k] = foldBlankLines(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = foldBlankLines(e)
		}
		return out
	}
	return v
}

func key(o *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
}

func keys(objs []*unstructured.Unstructured) []string {
	out := []string{}
	for _, o := range objs {
		out = append(out, key(o))
	}
	sort.Strings(out)
	return out
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// findIn is find for a namespaced object.
func findIn(objs []*unstructured.Unstructured, kind, namespace, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == namespace && o.GetName() == name {
			return o
		}
	}
	return nil
}

func field(o *unstructured.Unstructured, path ...string) any {
	if o == nil {
		return nil
	}
	v, _, _ := unstructured.NestedFieldNoCopy(o.Object, path...)
	return v
}

func container(o *unstructured.Unstructured) map[string]any {
	cs, _ := field(o, "spec", "template", "spec", "containers").([]any)
	if len(cs) == 0 {
		return nil
	}
	return cs[0].(map[string]any)
}

// TestChartMatchesKustomize renders the chart with its defaults and compares it in substance with
// the kustomize install: the same kinds and names, RBAC rules, CRDs, policies and controller.
func TestChartMatchesKustomize(t *testing.T) {
	const image = "registry.example/stagecoach"
	kust := kustomizeInstall(t, image)
	chart, err := renderChart("stagecoach-system", map[string]any{"image": map[string]any{"repository": image, "digest": testDigest}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		check func(g *WithT)
	}{
		{"the same kinds and names (the Namespace is Helm's to create)", func(g *WithT) {
			var want []*unstructured.Unstructured
			for _, o := range kust {
				if o.GetKind() != "Namespace" {
					want = append(want, o)
				}
			}
			g.Expect(keys(chart)).To(Equal(keys(want)))
		}},
		{"the same RBAC rules, bindings and subjects", func(g *WithT) {
			for _, o := range kust {
				switch o.GetKind() {
				case "ClusterRole", "Role":
					g.Expect(field(find(chart, o.GetKind(), o.GetName()), "rules")).To(Equal(field(o, "rules")), key(o))
				case "ClusterRoleBinding", "RoleBinding":
					c := find(chart, o.GetKind(), o.GetName())
					g.Expect(field(c, "roleRef")).To(Equal(field(o, "roleRef")), key(o))
					g.Expect(field(c, "subjects")).To(Equal(field(o, "subjects")), key(o))
				}
			}
		}},
		{"the same CRDs and admission policies", func(g *WithT) {
			for _, o := range kust {
				switch o.GetKind() {
				case "CustomResourceDefinition", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
					g.Expect(foldBlankLines(field(find(chart, o.GetKind(), o.GetName()), "spec"))).To(Equal(foldBlankLines(field(o, "spec"))), key(o))
				}
			}
		}},
		{"the same controller: image, args, ports, probes, resources, security", func(g *WithT) {
			want, got := find(kust, "Deployment", "stagecoach-controller"), find(chart, "Deployment", "stagecoach-controller")
			g.Expect(got).NotTo(BeNil())
			g.Expect(container(got)["image"]).To(Equal(image + "@" + testDigest))
			for _, f := range []string{"image", "args", "ports", "livenessProbe", "readinessProbe", "resources", "securityContext", "volumeMounts"} {
				g.Expect(container(got)[f]).To(Equal(container(want)[f]), f)
			}
			for _, f := range []string{"replicas", "selector"} {
				g.Expect(field(got, "spec", f)).To(Equal(field(want, "spec", f)), f)
			}
			g.Expect(field(got, "spec", "template", "spec", "securityContext")).To(Equal(field(want, "spec", "template", "spec", "securityContext")))
			// A read-only root filesystem and a writable /tmp for check plugins, in both.
			g.Expect(container(got)["volumeMounts"]).To(ContainElement(HaveKeyWithValue("mountPath", "/tmp")))
			g.Expect(field(got, "spec", "template", "spec", "volumes")).To(Equal(field(want, "spec", "template", "spec", "volumes")))
			g.Expect(field(find(chart, "Service", "stagecoach-hooks"), "spec")).To(Equal(field(find(kust, "Service", "stagecoach-hooks"), "spec")))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.check(NewWithT(t)) })
	}
}

func TestChartValues(t *testing.T) {
	tests := []struct {
		name      string
		namespace string
		values    string
		check     func(g *WithT, objs []*unstructured.Unstructured)
	}{
		{name: "the image tag defaults to the chart's appVersion", values: `{}`, check: func(g *WithT, objs []*unstructured.Unstructured) {
			g.Expect(container(find(objs, "Deployment", "stagecoach-controller"))["image"]).To(Equal("ghcr.io/stagecoach-dev/stagecoach:dev"))
		}},
		{name: "replicas, resources and a tag", values: `{replicas: 3, image: {tag: v1.2.3}, resources: {limits: {memory: 1Gi}}}`, check: func(g *WithT, objs []*unstructured.Unstructured) {
			d := find(objs, "Deployment", "stagecoach-controller")
			g.Expect(field(d, "spec", "replicas")).To(BeEquivalentTo(3))
			g.Expect(container(d)["image"]).To(Equal("ghcr.io/stagecoach-dev/stagecoach:v1.2.3"))
			g.Expect(container(d)["resources"]).To(Equal(map[string]any{"limits": map[string]any{"memory": "1Gi"},
				"requests": map[string]any{"cpu": "50m", "memory": "64Mi"}}))
		}},
		{name: "without leader election: no Lease Role and no --leader-elect", values: `{leaderElection: {enabled: false}}`, check: func(g *WithT, objs []*unstructured.Unstructured) {
			g.Expect(find(objs, "Role", "stagecoach-leader-election")).To(BeNil())
			g.Expect(find(objs, "RoleBinding", "stagecoach-leader-election")).To(BeNil())
			g.Expect(container(find(objs, "Deployment", "stagecoach-controller"))["args"]).NotTo(ContainElement("--leader-elect"))
		}},
		{name: "watch namespaces and a log level become flags", values: `{watchNamespaces: [team-a, team-b], logLevel: debug}`, check: func(g *WithT, objs []*unstructured.Unstructured) {
			g.Expect(container(find(objs, "Deployment", "stagecoach-controller"))["args"]).To(ContainElements("--watch-namespaces=team-a,team-b", "--log-level=debug"))
		}},
		{name: "watch namespaces: Secrets through a Role in each, none cluster-wide", values: `{watchNamespaces: [team-a, team-b]}`, check: func(g *WithT, objs []*unstructured.Unstructured) {
			got, err := grants(objs)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).NotTo(ContainElement(HavePrefix("/secrets ")), "no ClusterRole may read Secrets when the controller watches some namespaces")
			g.Expect(got).To(ContainElements("/namespaces get", "stagecoach.dev/stages watch"), "the other rules stay cluster-wide")
			for _, ns := range []string{"team-a", "team-b"} {
				role, binding := findIn(objs, "Role", ns, "stagecoach-secrets"), findIn(objs, "RoleBinding", ns, "stagecoach-secrets")
				g.Expect(role).NotTo(BeNil(), "Role %s/stagecoach-secrets", ns)
				g.Expect(field(role, "rules")).To(Equal([]any{map[string]any{"apiGroups": []any{""}, "resources": []any{"secrets"},
					"verbs": []any{"get", "list", "watch"}}}))
				g.Expect(binding).NotTo(BeNil(), "RoleBinding %s/stagecoach-secrets", ns)
				g.Expect(field(binding, "roleRef", "name")).To(Equal("stagecoach-secrets"))
				g.Expect(field(binding, "subjects")).To(Equal([]any{map[string]any{"kind": "ServiceAccount", "name": "stagecoach-controller", "namespace": "stagecoach-system"}}))
			}
		}},
		{name: "all namespaces: the ClusterRole keeps Secrets, no per-namespace Role", values: `{}`, check: func(g *WithT, objs []*unstructured.Unstructured) {
			got, err := grants(objs)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(ContainElements("/secrets get", "/secrets list", "/secrets watch"))
			g.Expect(find(objs, "Role", "stagecoach-secrets")).To(BeNil())
		}},
		{name: "without hooks: no Service, no Secret Role, hooks listener off", values: `{hooks: {enabled: false}}`, check: func(g *WithT, objs []*unstructured.Unstructured) {
			g.Expect(find(objs, "Service", "stagecoach-hooks")).To(BeNil())
			g.Expect(find(objs, "Role", "stagecoach-hook-secrets")).To(BeNil())
			args := container(find(objs, "Deployment", "stagecoach-controller"))["args"]
			g.Expect(args).To(ContainElement("--hooks-bind-address=0"))
			g.Expect(args).NotTo(ContainElement(HavePrefix("--flux-hook-secret")))
		}},
		{name: "metrics off or on another port", values: `{metrics: {enabled: false}}`, check: func(g *WithT, objs []*unstructured.Unstructured) {
			g.Expect(container(find(objs, "Deployment", "stagecoach-controller"))["args"]).To(ContainElement("--metrics-bind-address=0"))
		}},
		{name: "metrics on another port", values: `{metrics: {port: 9090}}`, check: func(g *WithT, objs []*unstructured.Unstructured) {
			c := container(find(objs, "Deployment", "stagecoach-controller"))
			g.Expect(c["args"]).To(ContainElement("--metrics-bind-address=:9090"))
			g.Expect(c["ports"]).To(ContainElement(HaveKeyWithValue("containerPort", BeEquivalentTo(9090))))
		}},
		{name: "records off and no upstream trust by default", values: `{}`, check: func(g *WithT, objs []*unstructured.Unstructured) {
			args := container(find(objs, "Deployment", "stagecoach-controller"))["args"]
			g.Expect(args).NotTo(ContainElement(HavePrefix("--records-")))
			g.Expect(args).NotTo(ContainElement(HavePrefix("--upstream-trust")))
			g.Expect(find(objs, "ConfigMap", "stagecoach-upstream-trust")).To(BeNil())
		}},
		{name: "an attestation key becomes a flag; none by default", namespace: "delivery", values: `{attestationKeySecret: attestation-key}`,
			check: func(g *WithT, objs []*unstructured.Unstructured) {
				g.Expect(container(find(objs, "Deployment", "stagecoach-controller"))["args"]).To(ContainElement("--attestation-key-secret=delivery/attestation-key"))
				off, err := renderChart("delivery", map[string]any{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(container(find(off, "Deployment", "stagecoach-controller"))["args"]).NotTo(ContainElement(HavePrefix("--attestation-key-secret")))
			}},
		{name: "records and upstream trust become flags and a ConfigMap", namespace: "delivery",
			values: `{records: {repository: registry.example/delivery/streams, cluster: eu1},
				upstreamTrust: "keys:\n- name: staging-recorder\n  repositories: [\"registry.example/delivery/streams\"]\n  streams: [\"a1b2/staging/*\"]\n  publicKey: |\n    PEM\n"}`,
			check: func(g *WithT, objs []*unstructured.Unstructured) {
				args := container(find(objs, "Deployment", "stagecoach-controller"))["args"]
				g.Expect(args).To(ContainElements("--records-repository=registry.example/delivery/streams",
					"--records-key-secret=delivery/recorder-key", "--records-cluster=eu1",
					"--upstream-trust=configmap:delivery/stagecoach-upstream-trust"))
				cm := find(objs, "ConfigMap", "stagecoach-upstream-trust")
				g.Expect(cm).NotTo(BeNil())
				g.Expect(cm.GetNamespace()).To(Equal("delivery"))
				// The controller reads it through a Role naming it, not a cluster-wide rule.
				got, err := grants(objs)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got).NotTo(ContainElement(HavePrefix("/configmaps ")))
				role, binding := findIn(objs, "Role", "delivery", "stagecoach-upstream-trust"), findIn(objs, "RoleBinding", "delivery", "stagecoach-upstream-trust")
				g.Expect(role).NotTo(BeNil())
				g.Expect(field(role, "rules")).To(Equal([]any{map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"},
					"resourceNames": []any{"stagecoach-upstream-trust"}, "verbs": []any{"get"}}}))
				g.Expect(binding).NotTo(BeNil())
				g.Expect(field(binding, "roleRef", "name")).To(Equal("stagecoach-upstream-trust"))
				g.Expect(field(binding, "subjects")).To(Equal([]any{map[string]any{"kind": "ServiceAccount", "name": "stagecoach-controller", "namespace": "delivery"}}))
				g.Expect(field(cm, "data")).To(Equal(map[string]any{
					"upstream-trust.yaml": "keys:\n- name: staging-recorder\n  repositories: [\"registry.example/delivery/streams\"]\n  streams: [\"a1b2/staging/*\"]\n  publicKey: |\n    PEM\n"}))
			}},
		{name: "monitoring is off by default", values: `{}`, check: func(g *WithT, objs []*unstructured.Unstructured) {
			g.Expect(find(objs, "Service", "stagecoach-metrics")).To(BeNil())
			g.Expect(find(objs, "ConfigMap", "stagecoach-dashboard")).To(BeNil())
			for _, o := range objs {
				g.Expect(o.GetAPIVersion()).NotTo(HavePrefix("monitoring.coreos.com/"), key(o))
			}
		}},
		{name: "monitoring on: manifests/monitoring in the release's namespace, with the selectors' labels", namespace: "ops",
			values: `{metrics: {port: 9090, serviceMonitor: {enabled: true, interval: 1m, labels: {release: prom}},
				prometheusRule: {enabled: true, labels: {release: prom}}, dashboard: {enabled: true}}}`,
			check: func(g *WithT, objs []*unstructured.Unstructured) {
				monitoring := monitoringManifests(g)
				svc := find(objs, "Service", "stagecoach-metrics")
				g.Expect(svc).NotTo(BeNil(), "the ServiceMonitor needs the Service")
				g.Expect(svc.GetNamespace()).To(Equal("ops"))
				g.Expect(svc.GetLabels()).To(HaveKeyWithValue("app.kubernetes.io/component", "metrics"))
				g.Expect(field(svc, "spec", "ports")).To(Equal([]any{map[string]any{"name": "metrics", "port": float64(9090), "targetPort": "metrics"}}))
				g.Expect(field(svc, "spec", "selector")).To(Equal(field(find(monitoring, "Service", "stagecoach-metrics"), "spec", "selector")))

				sm := find(objs, "ServiceMonitor", "stagecoach-controller")
				g.Expect(sm).NotTo(BeNil())
				g.Expect(sm.GetNamespace()).To(Equal("ops"))
				g.Expect(sm.GetLabels()).To(Equal(map[string]string{"app.kubernetes.io/name": "stagecoach-controller", "release": "prom"}))
				g.Expect(field(sm, "spec", "namespaceSelector")).To(Equal(map[string]any{"matchNames": []any{"ops"}}))
				g.Expect(field(sm, "spec", "selector")).To(Equal(field(find(monitoring, "ServiceMonitor", "stagecoach-controller"), "spec", "selector")))
				g.Expect(svc.GetLabels()).To(HaveKeyWithValue("app.kubernetes.io/name", "stagecoach-controller"), "the ServiceMonitor selects the Service")
				g.Expect(field(sm, "spec", "endpoints")).To(Equal([]any{map[string]any{"port": "metrics", "path": "/metrics", "interval": "1m", "honorLabels": true}}))

				rule := find(objs, "PrometheusRule", "stagecoach")
				g.Expect(rule).NotTo(BeNil())
				g.Expect(rule.GetNamespace()).To(Equal("ops"))
				g.Expect(rule.GetLabels()).To(HaveKeyWithValue("release", "prom"))
				g.Expect(field(rule, "spec")).To(Equal(field(find(monitoring, "PrometheusRule", "stagecoach"), "spec")), "the rules are manifests/monitoring's, untouched")

				dashboard := find(objs, "ConfigMap", "stagecoach-dashboard")
				g.Expect(dashboard).NotTo(BeNil())
				g.Expect(dashboard.GetLabels()).To(HaveKeyWithValue("grafana_dashboard", "1"))
				want, err := os.ReadFile(filepath.Join(repoRoot(), "manifests", "monitoring", "grafana-dashboard.json"))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(field(dashboard, "data", "grafana-dashboard.json")).To(MatchJSON(want))
			}},
		{name: "a Service alone, without the Prometheus Operator", values: `{metrics: {service: {enabled: true}}}`, check: func(g *WithT, objs []*unstructured.Unstructured) {
			g.Expect(find(objs, "Service", "stagecoach-metrics")).NotTo(BeNil())
			g.Expect(find(objs, "ServiceMonitor", "stagecoach-controller")).To(BeNil())
		}},
		{name: "metrics off: no monitoring, whatever else asks", values: `{metrics: {enabled: false, serviceMonitor: {enabled: true}}}`, check: func(g *WithT, objs []*unstructured.Unstructured) {
			g.Expect(find(objs, "Service", "stagecoach-metrics")).To(BeNil())
			g.Expect(find(objs, "ServiceMonitor", "stagecoach-controller")).To(BeNil())
		}},
		{name: "without policies: no admission policies", values: `{policies: {enabled: false}}`, check: func(g *WithT, objs []*unstructured.Unstructured) {
			for _, o := range objs {
				g.Expect(o.GetKind()).NotTo(HavePrefix("ValidatingAdmissionPolicy"))
			}
		}},
		{name: "the author stamp: not where the cluster does not serve it (auto)", check: func(g *WithT, objs []*unstructured.Unstructured) {
			g.Expect(find(objs, "MutatingAdmissionPolicy", "stage-author-stamp.stagecoach.dev")).To(BeNil())
		}},
		{name: "the author stamp asked for: the policy and its binding, as manifests/policies has them", values: `{policies: {authorStamp: true}}`,
			check: func(g *WithT, objs []*unstructured.Unstructured) {
				for _, kind := range []string{"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"} {
					o := find(objs, kind, "stage-author-stamp.stagecoach.dev")
					g.Expect(o).NotTo(BeNil(), kind)
					g.Expect(o.GetAPIVersion()).To(Equal("admissionregistration.k8s.io/v1beta1"))
				}
				g.Expect(field(find(objs, "MutatingAdmissionPolicyBinding", "stage-author-stamp.stagecoach.dev"), "spec", "policyName")).
					To(Equal("stage-author-stamp.stagecoach.dev"))
			}},
		{name: "the author stamp off", values: `{policies: {authorStamp: false}}`, check: func(g *WithT, objs []*unstructured.Unstructured) {
			g.Expect(find(objs, "MutatingAdmissionPolicy", "stage-author-stamp.stagecoach.dev")).To(BeNil())
		}},
		{name: "the engines' identities in the policies", values: `{policies: {argoCD: {applicationController: "system:serviceaccount:gitops:app-ctl"}, flux: {kustomizeController: "system:serviceaccount:flux:kc"}}}`, check: func(g *WithT, objs []*unstructured.Unstructured) {
			app, _ := yaml.Marshal(field(find(objs, "ValidatingAdmissionPolicy", "application-guard.stagecoach.dev"), "spec"))
			g.Expect(string(app)).To(And(ContainSubstring("'system:serviceaccount:gitops:app-ctl'"), ContainSubstring("'system:serviceaccount:argocd:argocd-applicationset-controller'")))
			g.Expect(string(app)).NotTo(ContainSubstring("argocd-application-controller"))
			flux, _ := yaml.Marshal(field(find(objs, "ValidatingAdmissionPolicy", "flux-helmrelease-guard.stagecoach.dev"), "spec"))
			g.Expect(string(flux)).To(ContainSubstring("'system:serviceaccount:flux:kc'"))
		}},
		{name: "another namespace: the policies, bindings and hook secret follow it", namespace: "ops", values: `{policies: {breakGlassGroup: "ops:oncall"}}`, check: func(g *WithT, objs []*unstructured.Unstructured) {
			all, _ := yaml.Marshal(field(find(objs, "ValidatingAdmissionPolicy", "application-guard.stagecoach.dev"), "spec"))
			g.Expect(string(all)).To(And(ContainSubstring("system:serviceaccount:ops:stagecoach-controller"), ContainSubstring("'ops:oncall'")))
			g.Expect(string(all)).NotTo(ContainSubstring("stagecoach-system"))
			g.Expect(field(find(objs, "ClusterRoleBinding", "stagecoach-controller"), "subjects")).To(ContainElement(HaveKeyWithValue("namespace", "ops")))
			g.Expect(container(find(objs, "Deployment", "stagecoach-controller"))["args"]).To(ContainElement("--flux-hook-secret=ops/stagecoach-hooks"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			values := map[string]any{}
			g.Expect(yaml.Unmarshal([]byte(tt.values), &values)).To(Succeed())
			ns := tt.namespace
			if ns == "" {
				ns = "stagecoach-system"
			}
			objs, err := renderChart(ns, values)
			g.Expect(err).NotTo(HaveOccurred())
			tt.check(g, objs)
		})
	}
}

// TestChartCopies keeps the chart's copies of generated and shared manifests equal to manifests/
// (make generate rewrites them).
func TestChartCopies(t *testing.T) {
	root := repoRoot()
	crds, _ := filepath.Glob(filepath.Join(root, "manifests", "crds", "*.yaml"))
	pairs := [][2]string{
		{"manifests/rbac/role.yaml", "charts/stagecoach/files/clusterrole.yaml"},
		{"manifests/policies/application-guard.yaml", "charts/stagecoach/files/policies/application-guard.yaml"},
		{"manifests/policies/approval-guard.yaml", "charts/stagecoach/files/policies/approval-guard.yaml"},
		{"manifests/policies/stage-status-guard.yaml", "charts/stagecoach/files/policies/stage-status-guard.yaml"},
		{"manifests/policies/flux-guard.yaml", "charts/stagecoach/files/policies/flux-guard.yaml"},
		{"manifests/policies/optional/stage-author-stamp.yaml", "charts/stagecoach/files/policies/stage-author-stamp.yaml"},
		{"manifests/monitoring/servicemonitor.yaml", "charts/stagecoach/files/monitoring/servicemonitor.yaml"},
		{"manifests/monitoring/prometheusrule.yaml", "charts/stagecoach/files/monitoring/prometheusrule.yaml"},
		{"manifests/monitoring/grafana-dashboard.json", "charts/stagecoach/files/monitoring/grafana-dashboard.json"},
	}
	for _, c := range crds {
		pairs = append(pairs, [2]string{"manifests/crds/" + filepath.Base(c), "charts/stagecoach/crds/" + filepath.Base(c)})
	}
	chartCRDs, _ := filepath.Glob(filepath.Join(root, "charts", "stagecoach", "crds", "*.yaml"))
	if len(chartCRDs) != len(crds) {
		t.Errorf("charts/stagecoach/crds has %d CRDs, manifests/crds %d: run make generate", len(chartCRDs), len(crds))
	}
	for _, p := range pairs {
		t.Run(p[1], func(t *testing.T) {
			g := NewWithT(t)
			want, err := os.ReadFile(filepath.Join(root, p[0]))
			g.Expect(err).NotTo(HaveOccurred())
			got, err := os.ReadFile(filepath.Join(root, p[1]))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(strings.Compare(string(got), string(want))).To(BeZero(), "%s differs from %s: run make generate", p[1], p[0])
		})
	}
}

// monitoringManifests are the objects of manifests/monitoring, which the chart renders when asked.
func monitoringManifests(g *WithT) []*unstructured.Unstructured {
	var all []byte
	for _, name := range []string{"service.yaml", "servicemonitor.yaml", "prometheusrule.yaml"} {
		data, err := os.ReadFile(filepath.Join(repoRoot(), "manifests", "monitoring", name))
		g.Expect(err).NotTo(HaveOccurred())
		all = append(append(all, "---\n"...), data...)
	}
	objs, err := parseDocs(all)
	g.Expect(err).NotTo(HaveOccurred())
	return objs
}
