package promotion

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/source/git/gittest"
)

// revisionSetting writes a commit's SHA into the Widget, as a config tool that takes a revision.
var revisionSetting = []stagecoachv1.FieldSetting{{Path: "/spec/containers/0/image", Value: "registry.example/config:{{ .Revision }}"}}

// gitStage is a Stage on a Widget taking the commits of srv's main branch.
func gitStage(srv *gittest.Server, mutate func(*stagecoachv1.GitSource)) func(*stagecoachv1.Stage) {
	return func(s *stagecoachv1.Stage) {
		widgetStage("dev", revisionSetting)(s)
		src := &stagecoachv1.GitSource{URL: srv.URL, Branch: "main", Insecure: true, Interval: &metav1.Duration{Duration: time.Hour}}
		if mutate != nil {
			mutate(src)
		}
		s.Spec.Source = stagecoachv1.StageSource{Git: src}
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true}
	}
}

// landWidget plays the Widget's controller once the Widget carries commit: it reports the
// generation observed and succeeded.
func landWidget(t *testing.T, ns, commit string) {
	t.Helper()
	var generation int64
	NewWithT(t).Eventually(func(g Gomega) {
		w := getWidget(g, t, ns, "dev")
		g.Expect(containerImages(w)[0]).To(Equal("registry.example/config:" + commit))
		generation = w.GetGeneration()
	}, timeout, interval).Should(Succeed())
	writeWidgetStatus(t, ns, "dev", generation, "True")
}

// A Stage with a git source takes each new commit of its branch: the version is the commit
// (digest sha1:<SHA>, tag its short SHA), the Promotion's reason quotes its subject, the applier
// is written the SHA and the Stage verifies at that commit. Commits that do not change the
// Stage's paths are not offered; a branch force-pushed behind the running commit is never
// followed backwards.
func TestGitSourceFollowsABranch(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	srv := gittest.NewServer(t, gittest.Options{})
	c1 := srv.Commit("dev overlay: first", map[string]string{"overlays/dev/kustomization.yaml": "v: 1"}, nil)
	newWidget(t, ns, "dev", "dev")
	newStage(t, ns, "dev", gitStage(srv, func(src *stagecoachv1.GitSource) { src.Paths = []string{"overlays/dev"} }))
	startController(t, nil)

	first := onlyPromotion(t, ns, "dev")
	g.Expect(first.Spec.Version).To(Equal(&stagecoachv1.VersionReference{Digest: "sha1:" + c1, Tag: c1[:7]}))
	g.Expect(first.Spec.Reason).To(ContainSubstring(`"dev overlay: first"`))
	landWidget(t, ns, c1)
	eventuallyPhase(t, ns, first.Name, stagecoachv1.PhaseSucceeded)
	eventuallyCondition(t, ns, "dev", stagecoachv1.ConditionVerified, metav1.ConditionTrue, stagecoachv1.ReasonVerified, "")
	g.Expect(getStage(g, t.Context(), ns, "dev").Status.Current.Digest).To(Equal("sha1:" + c1))

	// A commit to another environment's overlay is no version of this Stage; the next dev one is.
	srv.Commit("prod overlay", map[string]string{"overlays/prod/kustomization.yaml": "v: 2"}, nil)
	askToLook(t, ns, "dev")
	g.Consistently(func(g Gomega) { g.Expect(promotionsOf(g, t, ns, "dev")).To(HaveLen(1)) }, time.Second, interval).Should(Succeed())
	c3 := srv.Commit("dev overlay: second", map[string]string{"overlays/dev/kustomization.yaml": "v: 3"}, nil)
	askToLook(t, ns, "dev")
	g.Eventually(func(g Gomega) {
		g.Expect(promotionsOf(g, t, ns, "dev")).To(ContainElement(HaveField("Spec.Version.Digest", "sha1:"+c3)))
	}, timeout, interval).Should(Succeed())
	landWidget(t, ns, c3)
	eventuallyCondition(t, ns, "dev", stagecoachv1.ConditionVerified, metav1.ConditionTrue, stagecoachv1.ReasonVerified, "")

	// The branch is force-pushed back to c1, with a new dev commit on top: c3 is not an ancestor,
	// so automation offers nothing and says why.
	srv.Reset(c1)
	srv.Commit("dev overlay: rewritten", map[string]string{"overlays/dev/kustomization.yaml": "v: 4"}, nil)
	askToLook(t, ns, "dev")
	eventuallyBlockedBy(t, ns, "dev", stagecoachv1.GateSource, "no longer contains the running commit "+c3[:7], "never goes backwards")
	g.Expect(getStage(g, t.Context(), ns, "dev").Status.Candidate.BlockedBy[0].Reason).To(Equal(stagecoachv1.ReasonSourceRewound))
	g.Expect(promotionsOf(g, t, ns, "dev")).To(HaveLen(2))
}

// Only commits a trusted key signed are offered: an unsigned commit, or one signed by a key the
// Secret does not hold, is skipped with the reason and never promoted, even by a person.
func TestGitSourceVerifiesCommitSignatures(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	srv := gittest.NewServer(t, gittest.Options{})
	release, stranger := gittest.NewPGPSigner(t, "release"), gittest.NewSSHSigner(t)
	g.Expect(env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "git-keys"},
		Data: map[string][]byte{"release.asc": release.Public}})).To(Succeed())
	c1 := srv.Commit("signed", map[string]string{"a": "1"}, &release)
	newWidget(t, ns, "dev", "dev")
	newStage(t, ns, "dev", gitStage(srv, func(src *stagecoachv1.GitSource) {
		src.Verify = &stagecoachv1.GitVerification{SecretRef: stagecoachv1.LocalObjectReference{Name: "git-keys"}}
	}))
	startController(t, nil)
	first := onlyPromotion(t, ns, "dev")
	g.Expect(first.Spec.Version.Digest).To(Equal("sha1:" + c1))
	landWidget(t, ns, c1)
	done := eventuallyPhase(t, ns, first.Name, stagecoachv1.PhaseSucceeded)
	g.Expect(done.Status.Gates).To(ContainElement(And(HaveField("Gate", "signature"), HaveField("Passed", true),
		HaveField("Message", ContainSubstring("commit "+c1[:7]+" signed by OpenPGP key")))))

	unsigned := srv.Commit("unsigned", map[string]string{"a": "2"}, nil)
	byStranger := srv.Commit("signed by a stranger", map[string]string{"a": "3"}, &stranger)
	askToLook(t, ns, "dev")
	eventuallySkipped(t, ns, "dev", "", [2]string{"sha1:" + byStranger, stagecoachv1.ReasonSignatureInvalid},
		[2]string{"sha1:" + unsigned, stagecoachv1.ReasonSignatureMissing})
	skipped := getStage(g, t.Context(), ns, "dev").Status.Candidate.Skipped
	g.Expect(skipped[0].Message).To(ContainSubstring("has an SSH signature, and verify.secretRef holds no SSH key"))
	g.Expect(skipped[1].Message).To(ContainSubstring("commit " + unsigned[:7] + " is not signed"))

	// A person cannot promote the unsigned commit either.
	newPromotion(t, ns, "dev-unsigned", "dev", stagecoachv1.ActionPromote, "sha1:"+unsigned, unsigned[:7])
	g.Eventually(func(g Gomega) {
		p := getPromotion(g, t.Context(), ns, "dev-unsigned")
		g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhasePending))
		g.Expect(p.Status.Message).To(ContainSubstring("waiting: signature:"))
	}, timeout, interval).Should(Succeed())
	g.Expect(containerImages(getWidget(g, t, ns, "dev"))[0]).To(Equal("registry.example/config:" + c1))
	g.Expect(env.Client.Delete(t.Context(), getPromotion(g, t.Context(), ns, "dev-unsigned"))).To(Succeed())

	// A signed commit on top is offered past the two.
	c4 := srv.Commit("signed again", map[string]string{"a": "4"}, &release)
	askToLook(t, ns, "dev")
	g.Eventually(func(g Gomega) {
		g.Expect(promotionsOf(g, t, ns, "dev")).To(ContainElement(HaveField("Spec.Version.Digest", "sha1:"+c4)))
	}, timeout, interval).Should(Succeed())
}

// A semver source offers the tags that meet its constraint, the highest first; with verify mode
// Tag, a tag's own signature decides.
func TestGitSourceTakesSignedTags(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	srv := gittest.NewServer(t, gittest.Options{})
	release, stranger := gittest.NewPGPSigner(t, "release"), gittest.NewPGPSigner(t, "stranger")
	g.Expect(env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "git-keys"},
		Data: map[string][]byte{"release.asc": release.Public}})).To(Succeed())
	c1 := srv.Commit("one", map[string]string{"a": "1"}, nil)
	c2 := srv.Commit("two", map[string]string{"a": "2"}, nil)
	srv.Tag("v1.0.0", c1, &release)
	srv.Tag("v1.1.0", c2, &stranger)
	newWidget(t, ns, "dev", "dev")
	newStage(t, ns, "dev", gitStage(srv, func(src *stagecoachv1.GitSource) {
		src.Branch, src.Semver = "", ">=1.0.0"
		src.Verify = &stagecoachv1.GitVerification{Mode: stagecoachv1.GitVerifyTag, SecretRef: stagecoachv1.LocalObjectReference{Name: "git-keys"}}
	}))
	startController(t, nil)
	first := onlyPromotion(t, ns, "dev")
	g.Expect(first.Spec.Version).To(Equal(&stagecoachv1.VersionReference{Digest: "sha1:" + c1, Tag: "v1.0.0"}))
	eventuallySkipped(t, ns, "dev", "sha1:"+c1, [2]string{"sha1:" + c2, stagecoachv1.ReasonSignatureInvalid})
	g.Expect(getStage(g, t.Context(), ns, "dev").Status.Candidate.Skipped[0].Message).To(ContainSubstring("tag v1.1.0: its OpenPGP signature is from no trusted key"))
	landWidget(t, ns, c1)
	eventuallyPhase(t, ns, first.Name, stagecoachv1.PhaseSucceeded)
}

// What a person must fix about a git source blocks it with a reason naming the repository and the
// fix, and nothing is promoted: wrong credentials, no credentials, a Secret that is not there, a
// branch that does not exist, a server that is not there. Credentials are used only as far as
// the Stage's author may read them: tried as an author who may not, and with no author.
func TestGitSourceBadInput(t *testing.T) {
	srv := gittest.NewServer(t, gittest.Options{Username: "ci", Password: "s3cret"})
	srv.Commit("one", map[string]string{"a": "1"}, nil)
	startController(t, nil)
	for _, tc := range []struct {
		name   string
		secret map[string][]byte
		mutate func(*stagecoachv1.GitSource)
		// author replaces the suite's admin as spec.author (nil: keep it); noAuthor leaves none,
		// on an Argo CD Application (an applier that needs no author).
		author     *stagecoachv1.StageAuthor
		noAuthor   bool
		wantReason string
		wantParts  []string
	}{
		{name: "credentials the author may not read", secret: map[string][]byte{"username": []byte("ci"), "password": []byte("s3cret")},
			author: &stagecoachv1.StageAuthor{User: "tina"}, wantReason: stagecoachv1.ReasonAuthorForbidden,
			wantParts: []string{"the Stage's author tina may not get Secret", "/git-credentials' (spec.source.git.secretRef)", "so the controller does not use it"}},
		{name: "credentials and no author", secret: map[string][]byte{"username": []byte("ci"), "password": []byte("s3cret")},
			noAuthor: true, wantReason: stagecoachv1.ReasonAuthorMissing,
			wantParts: []string{"names no spec.author, and the controller uses Secret 'git-credentials' (spec.source.git.secretRef)"}},
		{name: "wrong credentials", secret: map[string][]byte{"username": []byte("ci"), "password": []byte("nope")},
			wantReason: stagecoachv1.ReasonGitUnauthorized, wantParts: []string{"refused to serve the repository", "fix the credentials in Secret"}},
		{name: "no credentials", mutate: func(src *stagecoachv1.GitSource) { src.SecretRef = nil },
			wantReason: stagecoachv1.ReasonGitUnauthorized, wantParts: []string{"set spec.source.git.secretRef"}},
		{name: "a Secret that is not there", mutate: func(src *stagecoachv1.GitSource) { src.SecretRef.Name = "missing" },
			wantReason: stagecoachv1.ReasonCredentialsUnreadable, wantParts: []string{"/missing' with the Git credentials cannot be read"}},
		{name: "a branch that does not exist", secret: map[string][]byte{"username": []byte("ci"), "password": []byte("s3cret")},
			mutate: func(src *stagecoachv1.GitSource) { src.Branch = "release" }, wantReason: stagecoachv1.ReasonGitRefNotFound,
			wantParts: []string{"has no branch release: fix spec.source.git.branch"}},
		{name: "a server that is not there", mutate: func(src *stagecoachv1.GitSource) { src.URL = "http://127.0.0.1:1/config.git" },
			wantReason: stagecoachv1.ReasonGitUnreachable, wantParts: []string{"cannot fetch http://127.0.0.1:1/config.git"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			g.Expect(env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "git-credentials"},
				Data: tc.secret})).To(Succeed())
			if tc.noAuthor {
				newApplication(t, ns, "dev", gitApplicationSpec(ns, srv.URL))
			} else {
				newWidget(t, ns, "dev", "dev")
			}
			if tc.author != nil {
				grantWidgets(t, ns, tc.author.User)
			}
			newStage(t, ns, "dev", func(s *stagecoachv1.Stage) {
				gitStage(srv, func(src *stagecoachv1.GitSource) {
					src.SecretRef = &stagecoachv1.LocalObjectReference{Name: "git-credentials"}
					if tc.mutate != nil {
						tc.mutate(src)
					}
				})(s)
				if tc.author != nil {
					s.Spec.Author = tc.author
				}
				if tc.noAuthor {
					s.Spec.Author, s.Spec.ApplyRef, s.Spec.Completion = nil, stagecoachv1.ApplierReference{Kind: "Application", Name: "dev"}, nil
				}
			})
			eventuallyBlockedBy(t, ns, "dev", stagecoachv1.GateSource, tc.wantParts...)
			s := getStage(g, t.Context(), ns, "dev")
			g.Expect(s.Status.Candidate.BlockedBy[0].Reason).To(Equal(tc.wantReason))
			g.Expect(strings.Contains(s.Status.Candidate.BlockedBy[0].Message, "s3cret")).To(BeFalse(), "a message shows the password")
			g.Expect(promotionsOf(g, t, ns, "dev")).To(BeEmpty())
		})
	}
}

// gitApplicationSpec is an automated Argo CD Application rendering a plain Git source (no plugin)
// at a branch.
func gitApplicationSpec(ns, url string) map[string]any {
	return map[string]any{
		"project":     "default",
		"source":      map[string]any{"repoURL": url, "path": "overlays/staging", "targetRevision": "main"},
		"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": ns},
		"syncPolicy":  map[string]any{"automated": map[string]any{"prune": true}},
	}
}

// An Argo CD Application on a plain Git source is the applier of a Stage of Git commits: its
// targetRevision is written the commit's SHA, the commit lands when Argo CD synced that SHA and
// reports it Healthy, and a failing sync rolls back to the previous commit. The same Application
// under a Stage of OCI digests is refused (ApplierNotOCI).
func TestArgoCDGitSourceTakesCommits(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	srv := gittest.NewServer(t, gittest.Options{})
	c1 := srv.Commit("staging: first", map[string]string{"overlays/staging/kustomization.yaml": "v: 1"}, nil)
	app := newApplication(t, ns, "staging", gitApplicationSpec(ns, srv.URL))
	newStage(t, ns, "staging", func(s *stagecoachv1.Stage) {
		s.Spec.Source = stagecoachv1.StageSource{Git: &stagecoachv1.GitSource{URL: srv.URL, Branch: "main", Insecure: true,
			Interval: &metav1.Duration{Duration: time.Hour}}}
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true}
	})
	startController(t, nil)
	eventuallyCondition(t, ns, "staging", stagecoachv1.ConditionReady, metav1.ConditionTrue, stagecoachv1.ReasonApplierReady, "")

	first := onlyPromotion(t, ns, "staging")
	g.Expect(first.Spec.Version.Digest).To(Equal("sha1:" + c1))
	app.deploy(c1, false, "Succeeded", "Healthy")
	done := eventuallyPhase(t, ns, first.Name, stagecoachv1.PhaseSucceeded)
	g.Expect(done.Status.Message).To(ContainSubstring("operation Succeeded at sha1:" + c1))

	// The next commit's sync fails: the Stage goes back to c1.
	c2 := srv.Commit("staging: broken", map[string]string{"overlays/staging/kustomization.yaml": "v: 2"}, nil)
	askToLook(t, ns, "staging")
	var second stagecoachv1.Promotion
	g.Eventually(func(g Gomega) {
		for _, p := range promotionsOf(g, t, ns, "staging") {
			if p.Spec.Version != nil && p.Spec.Version.Digest == "sha1:"+c2 {
				second = p
			}
		}
		g.Expect(second.Name).NotTo(BeEmpty())
	}, timeout, interval).Should(Succeed())
	app.deploy(c2, false, "Failed", "")
	app.waitForRevision(c1, false)
	app.deploy(c1, false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, second.Name, stagecoachv1.PhaseRolledBack)
	g.Expect(app.desiredRevision(app.get())).To(Equal(c1))
}

// The same Application under a Stage of OCI digests stays refused: its plain Git source takes no
// digest.
func TestArgoCDGitSourceUnderAnOCIStage(t *testing.T) {
	ns := newNamespace(t)
	newApplication(t, ns, "staging", gitApplicationSpec(ns, "https://git.example/org/config.git"))
	newStage(t, ns, "staging", nil)
	startController(t, nil)
	eventuallyCondition(t, ns, "staging", stagecoachv1.ConditionReady, metav1.ConditionFalse, stagecoachv1.ReasonApplierNotOCI, "which is not OCI")
}

// A commit soaks and waits for approvals as a digest does: soak counts from when the commit was
// first fetched, and an Approval names the commit (sha1:<SHA>).
func TestGitSourceSoaksAndAwaitsApproval(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	srv := gittest.NewServer(t, gittest.Options{})
	c1 := srv.Commit("one", map[string]string{"a": "1"}, nil)
	newWidget(t, ns, "dev", "dev")
	newStage(t, ns, "dev", gitStage(srv, func(*stagecoachv1.GitSource) {}))
	g.Eventually(func(g Gomega) {
		s := getStage(g, t.Context(), ns, "dev")
		s.Spec.Promotion.Soak = &metav1.Duration{Duration: 2 * time.Second}
		s.Spec.Promotion.Approvals = &stagecoachv1.ApprovalPolicy{Required: 1}
		g.Expect(env.Client.Update(t.Context(), s)).To(Succeed())
	}, timeout, interval).Should(Succeed())
	startController(t, nil)

	eventuallyBlockedBy(t, ns, "dev", stagecoachv1.GateSoak, "the Stage asks for 2s")
	s := getStage(g, t.Context(), ns, "dev")
	g.Expect(s.Status.Candidate.Digest).To(Equal("sha1:" + c1))
	g.Expect(s.Status.Candidate.FirstSeen).NotTo(BeNil())
	eventuallyBlockedBy(t, ns, "dev", stagecoachv1.GateApprovals)
	g.Expect(promotionsOf(g, t, ns, "dev")).To(BeEmpty())

	newApproval(t, ns, "dev-c1", "dev", "sha1:"+c1, "alice")
	p := onlyPromotion(t, ns, "dev")
	g.Expect(p.Spec.Version.Digest).To(Equal("sha1:" + c1))
}

// A tag on an unsigned commit (verify mode HEAD, a semver source) is skipped with its reason.
func TestGitSourceSkipsATagOnAnUnsignedCommit(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	srv := gittest.NewServer(t, gittest.Options{})
	release := gittest.NewPGPSigner(t, "release")
	g.Expect(env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "git-keys"},
		Data: map[string][]byte{"release.asc": release.Public}})).To(Succeed())
	signed := srv.Commit("signed", map[string]string{"a": "1"}, &release)
	unsigned := srv.Commit("unsigned", map[string]string{"a": "2"}, nil)
	srv.Tag("v1.0.0", signed, &release)
	srv.Tag("v1.1.0", unsigned, &release) // a signed tag does not make the commit signed
	newWidget(t, ns, "dev", "dev")
	newStage(t, ns, "dev", gitStage(srv, func(src *stagecoachv1.GitSource) {
		src.Branch, src.Semver = "", ">=1.0.0"
		src.Verify = &stagecoachv1.GitVerification{SecretRef: stagecoachv1.LocalObjectReference{Name: "git-keys"}}
	}))
	startController(t, nil)
	eventuallySkipped(t, ns, "dev", "sha1:"+signed, [2]string{"sha1:" + unsigned, stagecoachv1.ReasonSignatureMissing})
	g.Expect(onlyPromotion(t, ns, "dev").Spec.Version).To(Equal(&stagecoachv1.VersionReference{Digest: "sha1:" + signed, Tag: "v1.0.0"}))
}
