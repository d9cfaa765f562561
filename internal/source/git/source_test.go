package git

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// A clone fetched with one namespace's Secret is never another namespace's, even under the same
// Secret name and URL; without credentials one clone serves every namespace. A deleted Stage's
// clone goes once no other Stage's listing uses it.
func TestClonesPerCredentials(t *testing.T) {
	const url = "https://git.example/org/config.git"
	withSecret := settings{url: url, branch: "main", secretRef: &stagecoachv1.LocalObjectReference{Name: "auth"}}
	anonymous := settings{url: url, branch: "main"}
	for _, tc := range []struct {
		name     string
		a, b     settings
		nsA, nsB string
		wantSame bool
	}{
		{name: "one Secret name in two namespaces", a: withSecret, b: withSecret, nsA: "team-a", nsB: "team-b"},
		{name: "one Secret in one namespace", a: withSecret, b: withSecret, nsA: "team-a", nsB: "team-a", wantSame: true},
		{name: "anonymous in two namespaces", a: anonymous, b: anonymous, nsA: "team-a", nsB: "team-b", wantSame: true},
		{name: "anonymous and with a Secret", a: anonymous, b: withSecret, nsA: "team-a", nsB: "team-a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := &Source{}
			g.Expect(s.repository(tc.nsA, tc.a) == s.repository(tc.nsB, tc.b)).To(Equal(tc.wantSame))
		})
	}

	t.Run("a deleted Stage's clone goes when unused", func(t *testing.T) {
		g := NewWithT(t)
		s := &Source{}
		a, b := types.NamespacedName{Namespace: "team-a", Name: "dev"}, types.NamespacedName{Namespace: "team-b", Name: "dev"}
		s.listings = map[types.NamespacedName]listing{a: {settings: withSecret}, b: {settings: withSecret}}
		s.repository(a.Namespace, withSecret)
		s.repository(b.Namespace, withSecret)
		g.Expect(s.repos).To(HaveLen(2))
		s.Forget(a)
		g.Expect(s.repos).To(HaveLen(1))
		g.Expect(s.repos).To(HaveKey(repositoryKey(b.Namespace, withSecret)))
		s.Forget(b)
		g.Expect(s.repos).To(BeEmpty())
	})
}
