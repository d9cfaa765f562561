package admission

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

func TestStageStatusGuard(t *testing.T) {
	g := NewWithT(t)
	grantEveryone(t, "stage-status-writer", rbacv1.PolicyRule{APIGroups: []string{"stagecoach.dev"}, Resources: []string{"stages", "stages/status"},
		Verbs: []string{"get", "list", "create", "patch", "update"}})
	applyManifests(t, filepath.Join(testenv.RepoRoot(), "manifests", "policies", "stage-status-guard.yaml"))

	alice := as(t, "alice", "release-managers")
	stagecoach := as(t, controllerSA, "system:serviceaccounts")
	seen := &stagecoachv1.UpstreamSeen{Seq: 7, Digest: "sha256:" + fmt.Sprintf("%064d", 7)}
	// newStage makes a Stage whose status the controller wrote, with upstreamSeen set.
	newStage := func(name string) *stagecoachv1.Stage {
		s := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: stagecoachv1.StageSpec{Service: "payments", Environment: "prod",
				ApplyRef: stagecoachv1.ApplierReference{Kind: "Application", Name: name},
				Source: stagecoachv1.StageSource{UpstreamRecords: &stagecoachv1.UpstreamRecordsSource{
					Repository: "registry.example/delivery/streams", Stream: "0123456789ab/staging/payments"}}}}
		g.Expect(stagecoach.Create(t.Context(), s)).To(Succeed())
		s.Status.UpstreamSeen = seen.DeepCopy()
		s.Status.LastAppliedDigest = seen.Digest
		g.Expect(stagecoach.Status().Update(t.Context(), s)).To(Succeed())
		return s
	}
	// The policy takes a moment to be enforced after it is created.
	probes := 0
	g.Eventually(func() error {
		probes++
		s := newStage(fmt.Sprintf("probe-%d", probes))
		return alice.Status().Patch(t.Context(), s, client.RawPatch("application/merge-patch+json", []byte(`{"status":{"lastAppliedDigest":"x"}}`)))
	}, 10*time.Second, 100*time.Millisecond).Should(MatchError(ContainSubstring("others may only clear status.upstreamSeen")))

	cases := []struct {
		name    string
		who     client.Client
		patch   string
		wantErr string
	}{
		{name: "alice clears upstreamSeen alone", who: alice, patch: `{"status":{"upstreamSeen":null}}`},
		{name: "alice clears upstreamSeen and changes another field", who: alice,
			patch:   `{"status":{"upstreamSeen":null,"lastAppliedDigest":"sha256:evil"}}`,
			wantErr: "must change nothing else in its status"},
		// Issue 40: the commit the next write judges others' commits from.
		{name: "alice clears upstreamSeen and moves lastCommit past her own commit", who: alice,
			patch:   `{"status":{"upstreamSeen":null,"lastCommit":{"sha":"0123456789abcdef0123456789abcdef01234567","url":"https://git.example/c.git","branch":"env/prod"}}}`,
			wantErr: "must change nothing else in its status"},
		{name: "alice sets lastCommit", who: alice,
			patch:   `{"status":{"lastCommit":{"sha":"0123456789abcdef0123456789abcdef01234567","url":"https://git.example/c.git","branch":"env/prod"}}}`,
			wantErr: "others may only clear status.upstreamSeen"},
		{name: "alice rewrites upstreamSeen", who: alice, patch: `{"status":{"upstreamSeen":{"seq":3,"digest":"sha256:x"}}}`,
			wantErr: "others may only clear status.upstreamSeen"},
		{name: "alice writes a condition", who: alice, patch: `{"status":{"hold":{"reason":"x","message":"x","since":"2026-01-01T00:00:00Z"}}}`,
			wantErr: "others may only clear status.upstreamSeen"},
		{name: "the controller writes anything", who: stagecoach, patch: `{"status":{"upstreamSeen":{"seq":8,"digest":"sha256:y"},"lastAppliedDigest":"y"}}`},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := newStage(fmt.Sprintf("case-%d", i))
			err := tc.who.Status().Patch(t.Context(), s, client.RawPatch("application/merge-patch+json", []byte(tc.patch)))
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}

	t.Run("the policy compares every status field of the CRD", func(t *testing.T) {
		g := NewWithT(t)
		policy, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "manifests", "policies", "stage-status-guard.yaml"))
		g.Expect(err).NotTo(HaveOccurred())
		compared := map[string]bool{}
		for _, m := range regexp.MustCompile(`object\.status\.\?(\w+) ==`).FindAllStringSubmatch(string(policy), -1) {
			compared[m[1]] = true
		}
		data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "manifests", "crds", "stagecoach.dev_stages.yaml"))
		g.Expect(err).NotTo(HaveOccurred())
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(yaml.Unmarshal(data, crd)).To(Succeed())
		var missing []string
		for field := range crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"].Properties {
			if field != "upstreamSeen" && !compared[field] {
				missing = append(missing, field)
			}
		}
		sort.Strings(missing)
		g.Expect(missing).To(BeEmpty(), "add these status fields to manifests/policies/stage-status-guard.yaml")
	})
}
