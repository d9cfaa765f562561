package promotion

import (
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/applier"
	"github.com/stagecoach-dev/stagecoach/internal/gitwrite"
	gitsource "github.com/stagecoach-dev/stagecoach/internal/source/git"
	"github.com/stagecoach-dev/stagecoach/internal/source/git/gittest"
)

// Issue 50 item 6: the decisions of promotion through Git, each with its input and the decision
// expected, stepped as the controller steps a Promotion (steps_test.go's fake client and clock)
// against a real Git server on 127.0.0.1 (gittest).

// newGitStepEnv is stepEnv's Stage prod/payments promoting through Git as spec says, with one
// Promotion, the Secrets given in its namespace, and a controller that has just started: a Git
// writer without a clone.
func newGitStepEnv(t *testing.T, spec stagecoachv1.GitPromotion, mutate func(*stagecoachv1.Stage), p *stagecoachv1.Promotion,
	secrets map[string]map[string][]byte) *stepEnv {
	t.Helper()
	env := newStepEnv(t, stepFixture{stage: stepStage(func(s *stagecoachv1.Stage) {
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Git: spec.DeepCopy()}
		if mutate != nil {
			mutate(s)
		}
	}), promotions: []*stagecoachv1.Promotion{p}})
	for name, data := range secrets {
		if err := env.c.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name}, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	env.run.r.GitWriter = gitwrite.New()
	env.run.rollout = GitRollout(applier.For(appGVK.GroupKind(), applier.Options{}), spec)
	return env
}

const gitValues = "prod/values.yaml"

func valuesAt(digest string) map[string]string {
	return map[string]string{gitValues: "image:\n  digest: " + digest + " # Stagecoach writes it\n"}
}

// What the branch holds since the last commit Stagecoach wrote decides whether the next promotion
// is written or the Stage freezes: a branch rewritten while the controller restarted (its new
// clone never held that commit), and, for a Stage that merges, any commit a person made.
func TestGitRolloutJudgesTheBranch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		merge bool
		// repo makes the repository; it returns the Stage's status.lastCommit on env/prod and the
		// digest to promote.
		repo func(srv *gittest.Server) (last, digest string)
		// wantFrozen is in the Frozen condition's message; "" when the promotion is written.
		wantFrozen string
	}{
		{name: "a branch rewritten while the controller restarted freezes the Stage",
			wantFrozen: "the branch was rewritten: it no longer contains ", repo: func(srv *gittest.Server) (string, string) {
				base := srv.Commit("base", valuesAt("none"), nil)
				srv.Branch("env/prod")
				last := srv.Commit("Promote payments to v1.0.0 in prod\n\nStagecoach-Stage: prod/payments\nStagecoach-Promotion: p0\n", valuesAt(digestV1), nil)
				srv.Reset(base) // a force-push without it
				srv.Commit("rewritten", map[string]string{"README.md": "force-pushed\n"}, nil)
				srv.Checkout("main")
				return last, digestV2
			}},
		{name: "a branch that still holds the last commit is written on after a restart",
			repo: func(srv *gittest.Server) (string, string) {
				srv.Commit("base", valuesAt("none"), nil)
				srv.Branch("env/prod")
				last := srv.Commit("Promote payments to v1.0.0 in prod\n\nStagecoach-Stage: prod/payments\nStagecoach-Promotion: p0\n", valuesAt(digestV1), nil)
				srv.Commit("docs", map[string]string{"README.md": "prod\n"}, nil)
				srv.Checkout("main")
				return last, digestV2
			}},
		{name: "merge: a person's commit after the last one freezes the Stage", merge: true,
			wantFrozen: `("hotfix") changed what Stagecoach writes`, repo: func(srv *gittest.Server) (string, string) {
				srv.Commit("one", map[string]string{"app/config.yaml": "version: one\n"}, nil)
				last := srv.Commit("two", map[string]string{"app/config.yaml": "version: two\n"}, nil)
				srv.Branch("env/prod") // fast-forwarded to two by Stagecoach
				srv.Commit("hotfix", map[string]string{"README.md": "hotfix\n"}, nil)
				srv.Checkout("main")
				return last, gitsource.DigestPrefix + srv.Commit("three", map[string]string{"app/config.yaml": "version: three\n"}, nil)
			}},
		{name: "merge: Stagecoach's own commit after the last one is written on", merge: true,
			repo: func(srv *gittest.Server) (string, string) {
				srv.Commit("one", map[string]string{"app/config.yaml": "version: one\n"}, nil)
				last := srv.Commit("two", map[string]string{"app/config.yaml": "version: two\n"}, nil)
				srv.Branch("env/prod")
				srv.Commit("Promote payments to x in prod\n\nStagecoach-Stage: prod/payments\nStagecoach-Promotion: p1\n", map[string]string{"README.md": "x\n"}, nil)
				srv.Checkout("main")
				return last, gitsource.DigestPrefix + srv.Commit("three", map[string]string{"app/config.yaml": "version: three\n"}, nil)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := gittest.NewServer(t, gittest.Options{})
			last, digest := tc.repo(srv)
			spec := stagecoachv1.GitPromotion{URL: srv.URL, Insecure: true, Branch: "env/prod", Merge: tc.merge}
			if !tc.merge {
				spec.Set = []stagecoachv1.GitFileEdit{{Path: gitValues, Key: "image.digest"}}
			}
			lastCommit := &stagecoachv1.BranchCommit{SHA: last, URL: srv.URL, Branch: "env/prod"}
			env := newGitStepEnv(t, spec, func(s *stagecoachv1.Stage) {
				s.Status.LastAppliedDigest, s.Status.LastCommit = digestV1, lastCommit.DeepCopy()
			}, stepPromotion("p", stagecoachv1.ActionPromote, digest, running(nil, nil)), nil)
			before := srv.Head("env/prod")

			_, err := env.run.progress(t.Context(), &env.run.promotions[0])
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(env.run.commit(t.Context())).To(Succeed())
			got, stage := env.promotion(t, "p"), env.stage(t)
			frozen := meta.FindStatusCondition(stage.Status.Conditions, stagecoachv1.ConditionFrozen)
			if tc.wantFrozen == "" {
				g.Expect(frozen).To(BeNil())
				g.Expect(got.Status.Phase).To(Equal(stagecoachv1.PhaseRunning), got.Status.Message)
				g.Expect(got.Status.Commit).NotTo(BeNil())
				g.Expect(srv.Head("env/prod")).To(And(Equal(got.Status.Commit.SHA), Not(Equal(before))))
				g.Expect(stage.Status.LastCommit).To(Equal(&stagecoachv1.BranchCommit{SHA: got.Status.Commit.SHA, URL: srv.URL, Branch: "env/prod"}))
				return
			}
			g.Expect(frozen).NotTo(BeNil(), "the Stage freezes")
			g.Expect(frozen.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(frozen.Reason).To(Equal(stagecoachv1.ReasonForeignWrite))
			g.Expect(frozen.Message).To(ContainSubstring(tc.wantFrozen))
			g.Expect(got.Status.Phase).To(Equal(stagecoachv1.PhaseAborted))
			g.Expect(got.Status.Commit).To(BeNil())
			g.Expect(srv.Head("env/prod")).To(Equal(before), "nothing is written over the branch")
			g.Expect(stage.Status.LastCommit).To(Equal(lastCommit))
		})
	}
}

// The Stage trailer names the whole Stage: a Stage whose name extends this one's (two Stages
// writing one branch, even signing with one key) does not own this Stage's commits, nor this
// Stage theirs.
func TestOursForMatchesTheWholeStageName(t *testing.T) {
	stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "staging"}}
	named := func(ns, name string) *stagecoachv1.Stage {
		return &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	p := &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: "p1"}, Spec: stagecoachv1.PromotionSpec{Action: stagecoachv1.ActionPromote},
		Status: stagecoachv1.PromotionStatus{Version: &stagecoachv1.VersionReference{Tag: "v1", Digest: digestV1}}}
	// One signing key Secret for every Stage of the namespace.
	signer, public, err := SignerFrom(map[string][]byte{"git.asc": gittest.NewPGPSigner(t, "team").Private})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	for _, tc := range []struct {
		name    string
		message string
		want    bool
	}{
		{name: "the Stage's own commit", message: CommitMessage(stage, p), want: true},
		{name: "a Stage whose name extends this one's", message: CommitMessage(named("team", "staging-canary"), p)},
		{name: "a Stage whose name extends this one's with a dot", message: CommitMessage(named("team", "staging.v2"), p)},
		{name: "a Stage of a namespace whose name ends as this one's", message: CommitMessage(named("myteam", "staging"), p)},
		{name: "another trailer whose name ends in the Stage trailer's", message: "Promote web\n\nNot-Stagecoach-Stage: team/staging\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			commit := &object.Commit{Message: tc.message, Author: object.Signature{Name: "Stagecoach", Email: "s@s"},
				Committer: object.Signature{Name: "Stagecoach", Email: "s@s"}}
			g.Expect(OursFor(stage, nil)(commit)).To(Equal(tc.want), "by its trailer")
			encoded := &plumbing.MemoryObject{}
			g.Expect(commit.EncodeWithoutSignature(encoded)).To(Succeed())
			r, err := encoded.Reader()
			g.Expect(err).NotTo(HaveOccurred())
			sig, err := signer.Sign(r)
			g.Expect(err).NotTo(HaveOccurred())
			commit.PGPSignature = string(sig)
			g.Expect(OursFor(stage, &public)(commit)).To(Equal(tc.want), "signed with the key every Stage of the namespace signs with")
		})
	}
}

// With signingKeyRef, every commit Stagecoach makes is signed with the Stage's key: a merge onto
// a branch with its own commits, a merge back to an older commit (a revert), and a rollback's
// revert commit; and is told as the Stage's own by that key.
func TestGitRolloutSignsMergesAndReverts(t *testing.T) {
	pgp := gittest.NewPGPSigner(t, "stagecoach")
	sshKey := gittest.NewSSHSigner(t)
	for _, tc := range []struct {
		name        string
		merge       bool
		action      stagecoachv1.PromotionAction
		key         map[string][]byte
		trusted     gitsource.Keys
		repo        func(srv *gittest.Server) (digest string)
		wantParents int
		wantSubject string
	}{
		{name: "a merge onto a branch with its own commits", merge: true, action: stagecoachv1.ActionPromote, wantParents: 2,
			key: map[string][]byte{"git.asc": pgp.Private}, trusted: gitsource.Keys{PGP: []string{string(pgp.Public)}},
			wantSubject: "Promote payments to ", repo: func(srv *gittest.Server) string {
				srv.Commit("one", map[string]string{"app/config.yaml": "version: one\n"}, nil)
				srv.Branch("env/prod")
				srv.Commit("prod only", map[string]string{"prod.yaml": "replicas: 3\n"}, nil)
				srv.Checkout("main")
				return gitsource.DigestPrefix + srv.Commit("two", map[string]string{"app/config.yaml": "version: two\n"}, nil)
			}},
		{name: "a merge back to an older commit, a revert", merge: true, action: stagecoachv1.ActionPromote, wantParents: 1,
			key: map[string][]byte{"identity": sshKey.Private}, trusted: gitsource.Keys{SSH: []string{string(sshKey.Public)}},
			wantSubject: "Promote payments to ", repo: func(srv *gittest.Server) string {
				one := srv.Commit("one", map[string]string{"app/config.yaml": "version: one\n"}, nil)
				srv.Commit("two", map[string]string{"app/config.yaml": "version: two\n"}, nil)
				srv.Branch("env/prod")
				srv.Checkout("main")
				return gitsource.DigestPrefix + one
			}},
		{name: "a rollback of a merging Stage", merge: true, action: stagecoachv1.ActionRollback, wantParents: 1,
			key: map[string][]byte{"git.asc": pgp.Private}, trusted: gitsource.Keys{PGP: []string{string(pgp.Public)}},
			wantSubject: "Revert payments in prod to ", repo: func(srv *gittest.Server) string {
				one := srv.Commit("one", map[string]string{"app/config.yaml": "version: one\n"}, nil)
				srv.Commit("two", map[string]string{"app/config.yaml": "version: two\n"}, nil)
				srv.Branch("env/prod")
				srv.Checkout("main")
				return gitsource.DigestPrefix + one
			}},
		{name: "a rollback's revert commit, OpenPGP", action: stagecoachv1.ActionRollback, wantParents: 1,
			key: map[string][]byte{"git.asc": pgp.Private}, trusted: gitsource.Keys{PGP: []string{string(pgp.Public)}},
			wantSubject: "Revert payments in prod to ", repo: func(srv *gittest.Server) string {
				srv.Commit("base", valuesAt(digestV1), nil)
				srv.Branch("env/prod")
				srv.Commit("Promote payments to v2.0.0 in prod", valuesAt(digestV2), nil)
				srv.Checkout("main")
				return digestV1
			}},
		{name: "a rollback's revert commit, SSH", action: stagecoachv1.ActionRollback, wantParents: 1,
			key: map[string][]byte{"identity": sshKey.Private}, trusted: gitsource.Keys{SSH: []string{string(sshKey.Public)}},
			wantSubject: "Revert payments in prod to ", repo: func(srv *gittest.Server) string {
				srv.Commit("base", valuesAt(digestV1), nil)
				srv.Branch("env/prod")
				srv.Commit("Promote payments to v2.0.0 in prod", valuesAt(digestV2), nil)
				srv.Checkout("main")
				return digestV1
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := gittest.NewServer(t, gittest.Options{})
			digest := tc.repo(srv)
			spec := stagecoachv1.GitPromotion{URL: srv.URL, Insecure: true, Branch: "env/prod", Merge: tc.merge,
				SigningKeyRef: &stagecoachv1.LocalObjectReference{Name: "signing"}}
			if !tc.merge {
				spec.Set = []stagecoachv1.GitFileEdit{{Path: gitValues, Key: "image.digest"}}
			}
			p := stepPromotion("p", tc.action, digest, func(p *stagecoachv1.Promotion) {
				running(nil, nil)(p)
				p.Spec.Reason = "Promotion p0 failed"
			})
			env := newGitStepEnv(t, spec, nil, p, map[string]map[string][]byte{"signing": tc.key})
			before := srv.Head("env/prod")

			_, err := env.run.progress(t.Context(), &env.run.promotions[0])
			g.Expect(err).NotTo(HaveOccurred())
			got := env.promotion(t, "p")
			g.Expect(got.Status.Commit).NotTo(BeNil(), "%s: %s", got.Status.Phase, got.Status.Message)
			head := srv.Head("env/prod")
			g.Expect(head).To(And(Equal(got.Status.Commit.SHA), Not(Equal(before))))
			c := srv.CommitObject(head)
			g.Expect(c.ParentHashes).To(HaveLen(tc.wantParents))
			g.Expect(c.ParentHashes[0].String()).To(Equal(before))
			g.Expect(c.Message).To(HavePrefix(tc.wantSubject))
			_, err = gitsource.SignedBy(c, tc.trusted)
			g.Expect(err).NotTo(HaveOccurred(), "signed with the key of signingKeyRef")
			g.Expect(OursFor(env.stage(t), &tc.trusted)(c)).To(BeTrue(), "told as the Stage's own by its key")
			if tc.merge {
				g.Expect(c.TreeHash).To(Equal(srv.CommitObject(strings.TrimPrefix(digest, gitsource.DigestPrefix)).TreeHash))
			} else {
				g.Expect(srv.File(head, gitValues)).To(ContainSubstring(digestV1))
			}
		})
	}
}
