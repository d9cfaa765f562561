package plan

import (
	"testing"

	. "github.com/onsi/gomega"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// A source that cannot be used at all makes the Stage not Ready (kubectl wait must not pass for
// it); a version held or skipped by a gate does not. Issue 50 item 5: a Git source blocked because
// its author may not use the credentials, or because the branch was rewritten, counted as usable.
func TestSourceUnreadable(t *testing.T) {
	source := func(reason string) stagecoachv1.GateBlock {
		return stagecoachv1.GateBlock{Gate: stagecoachv1.GateSource, Reason: reason, Message: reason}
	}
	for _, tc := range []struct {
		name      string
		candidate *stagecoachv1.CandidateVersion
		want      string // the reason of the block returned; "" for none
	}{
		{name: "no candidate"},
		{name: "a registry that does not answer", candidate: &stagecoachv1.CandidateVersion{BlockedBy: []stagecoachv1.GateBlock{source(stagecoachv1.ReasonRegistryUnreachable)}},
			want: stagecoachv1.ReasonRegistryUnreachable},
		{name: "a Git server that does not answer", candidate: &stagecoachv1.CandidateVersion{BlockedBy: []stagecoachv1.GateBlock{source(stagecoachv1.ReasonGitUnreachable)}},
			want: stagecoachv1.ReasonGitUnreachable},
		{name: "Git credentials refused", candidate: &stagecoachv1.CandidateVersion{BlockedBy: []stagecoachv1.GateBlock{source(stagecoachv1.ReasonGitUnauthorized)}},
			want: stagecoachv1.ReasonGitUnauthorized},
		{name: "a branch that is not there", candidate: &stagecoachv1.CandidateVersion{BlockedBy: []stagecoachv1.GateBlock{source(stagecoachv1.ReasonGitRefNotFound)}},
			want: stagecoachv1.ReasonGitRefNotFound},
		{name: "a rewritten branch", candidate: &stagecoachv1.CandidateVersion{BlockedBy: []stagecoachv1.GateBlock{source(stagecoachv1.ReasonSourceRewound)}},
			want: stagecoachv1.ReasonSourceRewound},
		{name: "credentials the author may not use", candidate: &stagecoachv1.CandidateVersion{BlockedBy: []stagecoachv1.GateBlock{source(stagecoachv1.ReasonAuthorForbidden)}},
			want: stagecoachv1.ReasonAuthorForbidden},
		{name: "credentials and no author", candidate: &stagecoachv1.CandidateVersion{BlockedBy: []stagecoachv1.GateBlock{source(stagecoachv1.ReasonAuthorMissing)}},
			want: stagecoachv1.ReasonAuthorMissing},
		{name: "a missing Secret", candidate: &stagecoachv1.CandidateVersion{BlockedBy: []stagecoachv1.GateBlock{source(stagecoachv1.ReasonCredentialsUnreadable)}},
			want: stagecoachv1.ReasonCredentialsUnreadable},
		{name: "keys that cannot be read", candidate: &stagecoachv1.CandidateVersion{Digest: "sha256:1", BlockedBy: []stagecoachv1.GateBlock{
			{Gate: stagecoachv1.GateSignature, Reason: stagecoachv1.ReasonKeysUnreadable}}}, want: stagecoachv1.ReasonKeysUnreadable},
		{name: "a source block beside a candidate is not the source's failure", candidate: &stagecoachv1.CandidateVersion{Digest: "sha256:1",
			BlockedBy: []stagecoachv1.GateBlock{source(stagecoachv1.ReasonGitUnreachable)}}},
		{name: "a gate holding a version", candidate: &stagecoachv1.CandidateVersion{Digest: "sha256:1", BlockedBy: []stagecoachv1.GateBlock{
			{Gate: stagecoachv1.GateApprovals, Reason: stagecoachv1.ReasonAwaitingApproval}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := SourceUnreadable(tc.candidate)
			if tc.want == "" {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got).NotTo(BeNil())
			g.Expect(got.Reason).To(Equal(tc.want))
		})
	}
}
