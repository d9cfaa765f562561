package git

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/source/git/gittest"
)

// verify.mode TagAndHEAD trusts a release only when both its annotated tag and its commit are
// signed by a key of the verify Secret: a signed commit does not make up for a lightweight tag
// (no tag object, so nothing to carry a signature) or a tag signed by a key the Secret does not
// hold, and a signed tag does not make up for an unsigned commit. Judged as the promotion's
// signature gate judges it, through the Stage's Verifier.
func TestTagAndHEADNeedsBothSignatures(t *testing.T) {
	srv := gittest.NewServer(t, gittest.Options{})
	trusted, stranger := gittest.NewPGPSigner(t, "release"), gittest.NewPGPSigner(t, "stranger")
	// One commit per tag: the Verifier judges a commit under the highest tag naming it.
	bothSigned := srv.Commit("both signed", map[string]string{"a": "1"}, &trusted)
	lightweight := srv.Commit("lightweight tag", map[string]string{"a": "2"}, &trusted)
	strangersTag := srv.Commit("tag by a stranger", map[string]string{"a": "3"}, &trusted)
	unsignedCommit := srv.Commit("unsigned commit", map[string]string{"a": "4"}, nil)
	srv.Tag("v1.0.0", bothSigned, &trusted)
	srv.Tag("v1.1.0", lightweight, nil)
	srv.Tag("v1.2.0", strangersTag, &stranger)
	srv.Tag("v1.3.0", unsignedCommit, &trusted)

	stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "config", Generation: 1},
		Spec: stagecoachv1.StageSpec{Source: stagecoachv1.StageSource{Git: &stagecoachv1.GitSource{
			URL: srv.URL, Semver: ">=1.0.0", Insecure: true,
			Verify: &stagecoachv1.GitVerification{Mode: stagecoachv1.GitVerifyTagAndHEAD,
				SecretRef: stagecoachv1.LocalObjectReference{Name: "git-keys"}}}}}}
	s := &Source{Reader: secretReader{"git-keys": {"release.asc": trusted.Public}}}
	offer, err := s.Offer(t.Context(), stage, time.Now())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(offer.Block).To(BeNil())
	NewWithT(t).Expect(offer.Candidates).To(HaveLen(4), "every tag is a version of the source")
	verdictOf, err := s.Verifier(t.Context(), stage, time.Now())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())

	for _, tc := range []struct {
		name        string
		commit      string
		wantReason  string // "": trusted
		wantMessage []string
	}{
		{name: "a signed annotated tag on a signed commit", commit: bothSigned,
			wantMessage: []string{"tag v1.0.0 signed by OpenPGP key", "commit " + Short(bothSigned) + " signed by OpenPGP key"}},
		{name: "a lightweight tag on a signed commit", commit: lightweight, wantReason: stagecoachv1.ReasonSignatureInvalid,
			wantMessage: []string{"tag v1.1.0 (commit " + Short(lightweight) + "): tag v1.1.0 is a lightweight tag: only an annotated tag carries a signature"}},
		{name: "a tag signed by an untrusted key on a signed commit", commit: strangersTag, wantReason: stagecoachv1.ReasonSignatureInvalid,
			// The library's words name a tag as a tag (issue 50 item 5: they said "Git commit").
			wantMessage: []string{"tag v1.2.0 (commit " + Short(strangersTag) + "): tag v1.2.0: its OpenPGP signature is from no trusted key: unable to verify Git tag"}},
		{name: "a signed tag on an unsigned commit", commit: unsignedCommit, wantReason: stagecoachv1.ReasonSignatureMissing,
			wantMessage: []string{"tag v1.3.0 (commit " + Short(unsignedCommit) + ") is not signed (verify.mode TagAndHEAD)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			verdict := verdictOf(Digest(tc.commit))
			g.Expect(verdict).NotTo(BeNil())
			if tc.wantReason == "" {
				g.Expect(verdict.Block).To(BeNil(), "%+v", verdict.Block)
				for _, m := range tc.wantMessage {
					g.Expect(verdict.Message).To(ContainSubstring(m))
				}
				return
			}
			g.Expect(verdict.Block).NotTo(BeNil(), "trusted: %s", verdict.Message)
			g.Expect(verdict.Block.Gate).To(Equal(stagecoachv1.GateSignature))
			g.Expect(verdict.Block.Reason).To(Equal(tc.wantReason), verdict.Block.Message)
			for _, m := range tc.wantMessage {
				g.Expect(verdict.Block.Message).To(ContainSubstring(m))
			}
		})
	}
}
