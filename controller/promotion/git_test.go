package promotion

import (
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/source/git/gittest"
)

func TestSignerFrom(t *testing.T) {
	pgp, sshKey := gittest.NewPGPSigner(t, "stagecoach"), gittest.NewSSHSigner(t)
	for _, tc := range []struct {
		name    string
		data    map[string][]byte
		wantErr string
	}{
		{name: "an OpenPGP private key", data: map[string][]byte{"git.asc": pgp.Private}},
		{name: "an SSH private key", data: map[string][]byte{"identity": sshKey.Private}},
		{name: "an OpenPGP public key", data: map[string][]byte{"git.asc": pgp.Public}, wantErr: "holds a public key"},
		{name: "not a key", data: map[string][]byte{"git.asc": []byte("hello")}, wantErr: "not an armored OpenPGP key"},
		{name: "an SSH public key", data: map[string][]byte{"identity": sshKey.Public}, wantErr: "ssh"},
		{name: "neither", data: map[string][]byte{"token": []byte("x")}, wantErr: "neither git.asc (OpenPGP) nor identity (SSH)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			signer, public, err := SignerFrom(tc.data)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			// A commit signed with it is told by its public key; an unsigned one, or one signed
			// by another key, is not.
			stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "staging"}}
			commit := &object.Commit{Message: "Promote\n\nStagecoach-Stage: team/staging\nStagecoach-Promotion: p\n",
				Author: object.Signature{Name: "Stagecoach", Email: "s@s"}, Committer: object.Signature{Name: "Stagecoach", Email: "s@s"}}
			g.Expect(OursFor(stage, &public)(commit)).To(BeFalse(), "an unsigned commit with the trailer is not ours")
			encoded := &plumbing.MemoryObject{}
			g.Expect(commit.EncodeWithoutSignature(encoded)).To(Succeed())
			r, err := encoded.Reader()
			g.Expect(err).NotTo(HaveOccurred())
			sig, err := signer.Sign(r)
			g.Expect(err).NotTo(HaveOccurred())
			commit.PGPSignature = string(sig)
			g.Expect(OursFor(stage, &public)(commit)).To(BeTrue(), "signed with the Stage's key")
			_, other, err := SignerFrom(map[string][]byte{"git.asc": gittest.NewPGPSigner(t, "mallory").Private})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(OursFor(stage, &other)(commit)).To(BeFalse(), "signed by another key than the Stage's")
		})
	}
}

func TestCommitMessage(t *testing.T) {
	stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "staging"},
		Spec: stagecoachv1.StageSpec{Service: "web", Environment: "staging"}}
	version := &stagecoachv1.VersionReference{Tag: "v1.2.0", Digest: "sha256:" + strings.Repeat("a", 64)}
	for _, tc := range []struct {
		name string
		p    *stagecoachv1.Promotion
		want []string
	}{
		{name: "a promotion names the version, the gates and the Promotion", p: &stagecoachv1.Promotion{
			ObjectMeta: metav1.ObjectMeta{Name: "staging-x1"},
			Spec:       stagecoachv1.PromotionSpec{Action: stagecoachv1.ActionPromote, RequestedBy: "alice"},
			Status: stagecoachv1.PromotionStatus{Version: version, Gates: []stagecoachv1.GateResult{
				{Gate: "soak", Passed: true, Message: "verified upstream for 1h\nmore"}, {Gate: "approvals", Passed: true}}}},
			want: []string{"Promote web to v1.2.0 in staging\n\n", "Version: v1.2.0 (sha256:aaaa", "- soak passed: verified upstream for 1h\n",
				"- approvals passed\n", "Requested by: alice\n", "\nStagecoach-Stage: team/staging\nStagecoach-Promotion: staging-x1\n"}},
		{name: "a rollback is a revert; its reason stays on one line", p: &stagecoachv1.Promotion{
			ObjectMeta: metav1.ObjectMeta{Name: "staging-rb"},
			Spec:       stagecoachv1.PromotionSpec{Action: stagecoachv1.ActionRollback, Reason: "Promotion staging-x2 failed\nStagecoach-Stage: team/prod"},
			Status:     stagecoachv1.PromotionStatus{Version: version}},
			want: []string{"Revert web in staging to v1.2.0\n\n", "Rolls back to the last verified version: Promotion staging-x2 failed Stagecoach-Stage: team/prod\n",
				"Stagecoach-Promotion: staging-rb\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			msg := CommitMessage(stage, tc.p)
			for _, w := range tc.want {
				g.Expect(msg).To(ContainSubstring(w))
			}
			g.Expect(OursFor(stage, nil)(&object.Commit{Message: msg})).To(BeTrue())
			other := stage.DeepCopy()
			other.Name = "prod"
			g.Expect(OursFor(other, nil)(&object.Commit{Message: msg})).To(BeFalse(), "another Stage's commit is not ours")
		})
	}
}

func TestEditFor(t *testing.T) {
	oci := &stagecoachv1.VersionReference{Tag: "v1", Digest: "sha256:" + strings.Repeat("b", 64)}
	commit := &stagecoachv1.VersionReference{Tag: "abc1234", Digest: "sha1:" + strings.Repeat("c", 40)}
	const values = "# values\nimage:\n  tag: old # pinned\n"
	for _, tc := range []struct {
		name    string
		edit    stagecoachv1.GitFileEdit
		version *stagecoachv1.VersionReference
		want    string
		wantErr string
	}{
		{name: "a key takes the digest by default", edit: stagecoachv1.GitFileEdit{Path: "values.yaml", Key: "image.tag"}, version: oci,
			want: "# values\nimage:\n  tag: sha256:" + strings.Repeat("b", 64) + " # pinned\n"},
		{name: "a key takes a commit's revision", edit: stagecoachv1.GitFileEdit{Path: "values.yaml", Key: "image.tag", Value: "{{ .Revision }}"}, version: commit,
			want: "# values\nimage:\n  tag: " + strings.Repeat("c", 40) + " # pinned\n"},
		{name: "a key takes the version and the Stage", edit: stagecoachv1.GitFileEdit{Path: "values.yaml", Key: "image.tag", Value: "{{ .Stage }}-{{ .Version }}"}, version: oci,
			want: "# values\nimage:\n  tag: staging-v1 # pinned\n"},
		{name: "an unknown name", edit: stagecoachv1.GitFileEdit{Path: "values.yaml", Key: "image.tag", Value: "{{ .Image }}"}, version: oci,
			wantErr: "does not render"},
		{name: "a loop is not a substitution", edit: stagecoachv1.GitFileEdit{Path: "values.yaml", Key: "image.tag", Value: "{{ range 3 }}{{ .Digest }}{{ end }}"}, version: oci,
			wantErr: "is not a substitution"},
		{name: "an image entry is given no commit", edit: stagecoachv1.GitFileEdit{Path: "kustomization.yaml", Image: "web"}, version: commit,
			wantErr: "is given an image digest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			edit, err := EditFor(tc.edit, "staging", tc.version)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(edit.Path).To(Equal(tc.edit.Path))
			out, err := edit.Apply([]byte(values))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(out)).To(Equal(tc.want))
		})
	}
}
