package install

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// grants lists what every ClusterRole in objs grants, as "group/resource verb" (with "name=" for
// rules limited to resourceNames).
func grants(objs []*unstructured.Unstructured) ([]string, error) {
	set := map[string]bool{}
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" {
			continue
		}
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		for _, r := range rules {
			rule := r.(map[string]any)
			if _, ok := rule["nonResourceURLs"]; ok {
				return nil, fmt.Errorf("ClusterRole %s grants nonResourceURLs: not in any allow list", o.GetName())
			}
			strs := func(k string) []string {
				v, _, _ := unstructured.NestedStringSlice(rule, k)
				return v
			}
			for _, g := range strs("apiGroups") {
				for _, res := range strs("resources") {
					for _, verb := range strs("verbs") {
						set[g+"/"+res+" "+verb] = true
					}
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, nil
}

func allowList(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot(), "test", "install", "clusterrole-allowed.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	allowed := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			allowed[l] = true
		}
	}
	return allowed
}

// TestClusterRoleAllowList fails when the install's or the chart's ClusterRole grants a cluster-wide
// verb that clusterrole-allowed.txt does not list (or a wildcard), so each new power is reviewed.
func TestClusterRoleAllowList(t *testing.T) {
	allowed := allowList(t)
	chart, err := renderChart("stagecoach-system", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		objs []*unstructured.Unstructured
		want string // a grant the objects must not pass with, for the allow list's own test
	}{
		{name: "kustomize install", objs: kustomizeInstall(t, "registry.example/stagecoach")},
		{name: "Helm chart", objs: chart},
		{name: "a new verb is caught", want: "stagecoach.dev/stages delete", objs: []*unstructured.Unstructured{{Object: map[string]any{
			"kind": "ClusterRole", "metadata": map[string]any{"name": "x"},
			"rules": []any{map[string]any{"apiGroups": []any{"stagecoach.dev"}, "resources": []any{"stages"}, "verbs": []any{"get", "delete"}}}}}}},
		{name: "a wildcard is caught", want: "apps/* *", objs: []*unstructured.Unstructured{{Object: map[string]any{
			"kind": "ClusterRole", "metadata": map[string]any{"name": "x"},
			"rules": []any{map[string]any{"apiGroups": []any{"apps"}, "resources": []any{"*"}, "verbs": []any{"*"}}}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := grants(tt.objs)
			g.Expect(err).NotTo(HaveOccurred())
			var extra []string
			for _, gr := range got {
				if !allowed[gr] {
					extra = append(extra, gr)
				}
			}
			if tt.want != "" {
				g.Expect(extra).To(ConsistOf(tt.want))
				return
			}
			g.Expect(got).NotTo(BeEmpty())
			g.Expect(extra).To(BeEmpty(), "the ClusterRole grants more than test/install/clusterrole-allowed.txt allows: review, then list each with a reason")
		})
	}
}
