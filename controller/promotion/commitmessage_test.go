package promotion

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// Issue 50 item 5: a person's promote of a commit (--digest sha1:…) names no tag; its commit is
// called by the short SHA as automation's is, never by the whole digest.
func TestCommitMessageNamesACommitAsAutomationDoes(t *testing.T) {
	stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "staging"},
		Spec: stagecoachv1.StageSpec{Service: "cfg", Environment: "staging"}}
	sha := "cbcf056" + strings.Repeat("1", 33)
	for _, tc := range []struct {
		name    string
		version stagecoachv1.VersionReference
		want    string
	}{
		{name: "automation's (the source's name)", version: stagecoachv1.VersionReference{Tag: "cbcf056", Digest: "sha1:" + sha},
			want: "Promote cfg to cbcf056 in staging\n\nVersion: cbcf056 (sha1:" + sha + ")"},
		{name: "a person's, by digest", version: stagecoachv1.VersionReference{Digest: "sha1:" + sha},
			want: "Promote cfg to cbcf056 in staging\n\nVersion: cbcf056 (sha1:" + sha + ")"},
		{name: "an image by digest keeps its digest", version: stagecoachv1.VersionReference{Digest: "sha256:" + strings.Repeat("a", 64)},
			want: "Promote cfg to sha256:" + strings.Repeat("a", 64) + " in staging"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: "staging-x"},
				Spec: stagecoachv1.PromotionSpec{Action: stagecoachv1.ActionPromote}, Status: stagecoachv1.PromotionStatus{Version: &tc.version}}
			NewWithT(t).Expect(CommitMessage(stage, p)).To(ContainSubstring(tc.want))
		})
	}
}
