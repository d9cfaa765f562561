package git

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/authz"
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

// noBranchYet is a server whose repository has only main, and a Stage (hourly interval) following
// its branch release, which is not there yet.
func noBranchYet(t *testing.T) (*gittest.Server, *stagecoachv1.Stage) {
	t.Helper()
	srv := gittest.NewServer(t, gittest.Options{})
	srv.Commit("on main", map[string]string{"a": "0"}, nil)
	return srv, &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: "config", Generation: 1},
		Spec: stagecoachv1.StageSpec{Source: stagecoachv1.StageSource{Git: &stagecoachv1.GitSource{
			URL: srv.URL, Branch: "release", Insecure: true, Interval: &metav1.Duration{Duration: time.Hour}}}}}
}

// A look that ends in a block is tried again within seconds, backing off, not after the Stage's
// interval: here the branch does not exist until it is pushed. Once a look succeeds, the
// interval rules again.
func TestBlockedLooksRetrySoon(t *testing.T) {
	srv, stage := noBranchYet(t)
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

// A commit only a tag names is no release of a branch, even when the shared clone holds it (a
// Stage of tags fetched it); and a commit once found is refused as soon as the Stage's author
// may no longer read the Secret it was fetched with.
func TestHasCommitBranchesAndAuthor(t *testing.T) {
	const field = "spec.source.upstreamRecords.gitRepository"
	srv := gittest.NewServer(t, gittest.Options{})
	onMain := srv.Commit("on main", map[string]string{"a": "1"}, nil)
	srv.Branch("tmp")
	tagged := srv.Commit("tagged only", map[string]string{"a": "2"}, nil)
	srv.Tag("v2.0.0", tagged, nil)
	srv.Reset(onMain) // tmp no longer holds it: only the tag does

	t.Run("a commit only a tag names", func(t *testing.T) {
		g := NewWithT(t)
		s := &Source{}
		tags := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "tags", Generation: 1},
			Spec: stagecoachv1.StageSpec{Source: stagecoachv1.StageSource{Git: &stagecoachv1.GitSource{URL: srv.URL, Semver: ">=1.0.0", Insecure: true}}}}
		offer, err := s.Offer(t.Context(), tags, time.Now())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(offer.Candidates).To(ContainElement(HaveField("Digest", Digest(tagged))), "the shared clone holds the tagged commit")
		follower := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "follower"}}
		problem, err := s.HasCommit(t.Context(), follower, &stagecoachv1.GitRepositoryReference{URL: srv.URL, Insecure: true}, field, Digest(tagged))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(problem).To(ContainSubstring("is on no branch of"))
	})

	t.Run("an author who lost the right", func(t *testing.T) {
		g := NewWithT(t)
		var allowed atomic.Bool
		allowed.Store(true)
		s := &Source{Reader: secretReader{"creds": {"username": []byte("ci"), "password": []byte("x")}},
			MayRead: func(_ context.Context, _ *stagecoachv1.Stage, secret, field string) (*authz.Refusal, error) {
				if allowed.Load() {
					return nil, nil
				}
				return &authz.Refusal{Reason: stagecoachv1.ReasonAuthorForbidden, Message: "the Stage's author may not get Secret " + secret + " (" + field + ")"}, nil
			}}
		stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "follower"}}
		ref := &stagecoachv1.GitRepositoryReference{URL: srv.URL, Insecure: true, SecretRef: &stagecoachv1.LocalObjectReference{Name: "creds"}}
		problem, err := s.HasCommit(t.Context(), stage, ref, field, Digest(onMain))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(problem).To(BeEmpty())
		allowed.Store(false)
		problem, err = s.HasCommit(t.Context(), stage, ref, field, Digest(onMain))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(problem).To(Equal("the Stage's author may not get Secret creds (" + field + ".secretRef)"))
	})

	t.Run("a deleted Stage's listing keeps a follower's clone", func(t *testing.T) {
		g := NewWithT(t)
		s := &Source{}
		follower := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "follower"}}
		ref := &stagecoachv1.GitRepositoryReference{URL: srv.URL, Insecure: true}
		problem, err := s.HasCommit(t.Context(), follower, ref, field, Digest(onMain))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(problem).To(BeEmpty())
		s.Forget(types.NamespacedName{Namespace: "prod", Name: "gone"})
		g.Expect(s.repos).To(HaveKey(srv.URL))
		s.Forget(client.ObjectKeyFromObject(follower))
		g.Expect(s.repos).To(BeEmpty())
	})
}

// secretReader serves Secrets of any namespace by name.
type secretReader map[string]map[string][]byte

func (r secretReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	data, ok := r[key.Name]
	if !ok {
		return apierrors.NewNotFound(corev1.Resource("secrets"), key.Name)
	}
	obj.(*corev1.Secret).Data = data
	return nil
}

func (secretReader) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// A person asking for a look (stagecoach.dev/requested-at), or a changed spec, starts the backoff
// of a blocked source afresh: the look they asked for is not followed by the longer wait.
func TestAskingRestartsTheBackoff(t *testing.T) {
	g := NewWithT(t)
	_, stage := noBranchYet(t)
	s := &Source{}
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	for _, step := range []struct {
		name        string
		after       time.Duration
		ask         string
		generation  int64
		wantRecheck time.Duration
	}{
		{name: "first blocked look", wantRecheck: 5 * time.Second},
		{name: "second blocked look", after: 5 * time.Second, wantRecheck: 10 * time.Second},
		{name: "a person asks", after: 6 * time.Second, ask: "2026-12-07T10:00:06Z", wantRecheck: 5 * time.Second},
		{name: "blocked again on its own", after: 11 * time.Second, ask: "2026-12-07T10:00:06Z", wantRecheck: 10 * time.Second},
		{name: "the spec changes", after: 12 * time.Second, ask: "2026-12-07T10:00:06Z", generation: 2, wantRecheck: 5 * time.Second},
	} {
		t.Run(step.name, func(t *testing.T) {
			g := NewWithT(t)
			if step.ask != "" {
				stage.Annotations = map[string]string{stagecoachv1.ReconcileRequestAnnotation: step.ask}
			}
			if step.generation > 0 {
				stage.Generation = step.generation
			}
			offer, err := s.Offer(t.Context(), stage, t0.Add(step.after))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(offer.Block).To(HaveField("Reason", stagecoachv1.ReasonGitRefNotFound))
			g.Expect(offer.Recheck).To(Equal(step.wantRecheck))
		})
	}
	g.Expect(s.listings).To(HaveLen(1))
}

// Another Stage's Forget while this Stage's first fetch is under way (a deleted Stage's
// Promotions reconciled at start) must not leave the versions listed without the clone they were
// listed from: the signatures of what was offered are judged in that clone, and the next fetch
// is incremental in it.
func TestForgetDuringAFetch(t *testing.T) {
	g := NewWithT(t)
	srv := gittest.NewServer(t, gittest.Options{})
	release := gittest.NewPGPSigner(t, "release")
	signed := srv.Commit("signed", map[string]string{"a": "1"}, &release)
	s := &Source{Reader: secretReader{"git-keys": {"release.asc": release.Public}}}
	parsed, err := url.Parse(srv.URL)
	g.Expect(err).NotTo(HaveOccurred())
	backend := &url.URL{Scheme: parsed.Scheme, Host: parsed.Host}
	var forgot atomic.Int32
	forward := httputil.NewSingleHostReverseProxy(backend)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Forget(types.NamespacedName{Namespace: "dev", Name: "deleted"})
		forgot.Add(1)
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	repoURL := proxy.URL + parsed.Path
	stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: "config", Generation: 1},
		Spec: stagecoachv1.StageSpec{Source: stagecoachv1.StageSource{Git: &stagecoachv1.GitSource{
			URL: repoURL, Branch: "main", Insecure: true,
			Verify: &stagecoachv1.GitVerification{SecretRef: stagecoachv1.LocalObjectReference{Name: "git-keys"}}}}}}

	offer, err := s.Offer(t.Context(), stage, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(forgot.Load()).To(BeNumerically(">", 0), "the fetch went through the proxy")
	g.Expect(offer.Candidates).To(ConsistOf(HaveField("Digest", Digest(signed))))
	verdictOf, err := s.Verifier(t.Context(), stage, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	verdict := verdictOf(Digest(signed))
	g.Expect(verdict.Block).To(BeNil(), "judged in the clone it was listed from")
	g.Expect(verdict.Message).To(ContainSubstring("signed by OpenPGP key"))
	g.Expect(s.repos).To(HaveKey(repoURL), "the clone is kept for the next incremental fetch")
}
