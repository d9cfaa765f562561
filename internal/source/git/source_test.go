package git

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/source/git/gittest"
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

// A look that ends in a block is tried again within seconds, backing off, not after the Stage's
// interval: here the branch does not exist until it is pushed. Once a look succeeds, the
// interval rules again.
func TestBlockedLooksRetrySoon(t *testing.T) {
	srv := gittest.NewServer(t, gittest.Options{})
	srv.Commit("on main", map[string]string{"a": "0"}, nil)
	stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: "config", Generation: 1},
		Spec: stagecoachv1.StageSpec{Source: stagecoachv1.StageSource{Git: &stagecoachv1.GitSource{
			URL: srv.URL, Branch: "release", Insecure: true, Interval: &metav1.Duration{Duration: time.Hour}}}}}
	s := &Source{}
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	for _, step := range []struct {
		name        string
		after       time.Duration
		push        bool
		commit      bool
		wantReason  string
		wantCommits int
		wantRecheck time.Duration
	}{
		{name: "no branch yet", wantReason: stagecoachv1.ReasonGitRefNotFound, wantRecheck: 5 * time.Second},
		{name: "looked again after 5s, still none", after: 5 * time.Second, wantReason: stagecoachv1.ReasonGitRefNotFound, wantRecheck: 10 * time.Second},
		{name: "pushed, but the block stands until the backoff passes", after: 14 * time.Second, push: true, commit: true,
			wantReason: stagecoachv1.ReasonGitRefNotFound, wantRecheck: time.Second},
		{name: "looked again after 10s more", after: 15 * time.Second, wantCommits: 2, wantRecheck: time.Hour},
		// A commit pushed now is offered at the next interval, not before.
		{name: "then the interval rules", after: 15*time.Second + 30*time.Minute, commit: true, wantCommits: 2, wantRecheck: 30 * time.Minute},
	} {
		t.Run(step.name, func(t *testing.T) {
			g := NewWithT(t)
			if step.push {
				srv.Branch("release")
			}
			if step.commit {
				srv.Commit(step.name, map[string]string{"a": step.name}, nil)
			}
			offer, err := s.Offer(t.Context(), stage, t0.Add(step.after))
			g.Expect(err).NotTo(HaveOccurred())
			if step.wantReason != "" {
				g.Expect(offer.Block).To(HaveField("Reason", step.wantReason))
			} else {
				g.Expect(offer.Block).To(BeNil())
			}
			g.Expect(offer.Candidates).To(HaveLen(step.wantCommits))
			g.Expect(offer.Recheck).To(Equal(step.wantRecheck))
		})
	}
}

// A commit another cluster's records offer must be on a branch of the repository the Stage
// names: found on any branch (fetched once, then remembered), or a problem naming the field and
// the fix.
func TestHasCommit(t *testing.T) {
	srv := gittest.NewServer(t, gittest.Options{})
	onMain := srv.Commit("on main", map[string]string{"a": "1"}, nil)
	srv.Branch("release")
	onRelease := srv.Commit("on release", map[string]string{"a": "2"}, nil)
	const field = "spec.source.upstreamRecords.gitRepository"
	s := &Source{}
	stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "config"}}
	ref := &stagecoachv1.GitRepositoryReference{URL: srv.URL, Insecure: true}
	for _, tc := range []struct {
		name        string
		ref         *stagecoachv1.GitRepositoryReference
		digest      string
		wantProblem string
	}{
		{name: "on main", ref: ref, digest: Digest(onMain)},
		{name: "on another branch", ref: ref, digest: Digest(onRelease)},
		{name: "on no branch", ref: ref, digest: Digest(strings.Repeat("ab", 20)),
			wantProblem: "commit abababa is on no branch of " + srv.URL + " (" + field + "): push it there"},
		{name: "an OCI digest", ref: ref, digest: "sha256:" + strings.Repeat("0", 64),
			wantProblem: "is not a Git commit (sha1:<40 hex>), and " + field + " takes Git commits"},
		{name: "not hex", ref: ref, digest: "sha1:" + strings.Repeat("z", 40), wantProblem: "is not a Git commit"},
		{name: "a server that is not there", ref: &stagecoachv1.GitRepositoryReference{URL: "http://127.0.0.1:1/config.git", Insecure: true},
			digest: Digest(onMain), wantProblem: "cannot fetch http://127.0.0.1:1/config.git"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			problem, err := s.HasCommit(t.Context(), stage, tc.ref, field, tc.digest)
			g.Expect(err).NotTo(HaveOccurred())
			if tc.wantProblem == "" {
				g.Expect(problem).To(BeEmpty())
				return
			}
			g.Expect(problem).To(ContainSubstring(tc.wantProblem))
		})
	}
}
