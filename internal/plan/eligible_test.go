package plan

import (
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

func TestFirstEligible(t *testing.T) {
	digestN := func(i int) string { return fmt.Sprintf("sha256:%064d", i) }
	offered := func(n int) []Candidate { // v<n>.0.0 down to v1.0.0, newest first
		var out []Candidate
		for i := n; i >= 1; i-- {
			out = append(out, Candidate{Digest: digestN(i), Tag: fmt.Sprintf("v%d.0.0", i)})
		}
		return out
	}
	verifying := stagecoachv1.StageSpec{Source: stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{
		Repository: "registry.example/payments", Verify: &stagecoachv1.VerifySpec{}}}}
	plain := stagecoachv1.StageSpec{Source: stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: "registry.example/payments"}}}
	verdicts := func(byDigest map[string]string) SignatureOf { // digest → block reason; absent: signed
		return func(digest string) (*SignatureVerdict, error) {
			if reason, ok := byDigest[digest]; ok {
				return &SignatureVerdict{Block: &stagecoachv1.GateBlock{Gate: "signature", Reason: reason, Message: reason + " for " + digest}}, nil
			}
			return &SignatureVerdict{Message: "signed"}, nil
		}
	}
	for _, tc := range []struct {
		name        string
		spec        stagecoachv1.StageSpec
		failed      []string
		offered     []Candidate
		signature   SignatureOf
		want        string // digest; "" for none
		wantSkipped []string
		wantReasons []string
		wantErr     string
	}{
		{name: "nothing offered", spec: verifying, offered: nil, signature: verdicts(nil)},
		{name: "newest signed", spec: verifying, offered: offered(3), signature: verdicts(nil), want: digestN(3)},
		{name: "unsigned newer tag: the older signed one", spec: verifying, offered: offered(3),
			signature: verdicts(map[string]string{digestN(3): "SignatureMissing", digestN(2): "SignatureInvalid"}),
			want:      digestN(1), wantSkipped: []string{digestN(3), digestN(2)}, wantReasons: []string{"SignatureMissing", "SignatureInvalid"}},
		{name: "failed before: passed over without verifying", spec: verifying, offered: offered(2), failed: []string{digestN(2)},
			signature: verdicts(map[string]string{digestN(2): "SignatureMissing"}),
			want:      digestN(1), wantSkipped: []string{digestN(2)}, wantReasons: []string{stagecoachv1.ReasonPromotionFailed}},
		{name: "failed before, no signatures asked", spec: plain, offered: offered(2), failed: []string{digestN(2)},
			want: digestN(1), wantSkipped: []string{digestN(2)}, wantReasons: []string{stagecoachv1.ReasonPromotionFailed}},
		{name: "signatures not asked: unsigned is fine", spec: plain, offered: offered(2),
			signature: verdicts(map[string]string{digestN(2): "SignatureMissing"}), want: digestN(2)},
		{name: "every one unsigned: no candidate, the skipped listed", spec: verifying, offered: offered(2),
			signature:   verdicts(map[string]string{digestN(2): "SignatureMissing", digestN(1): "SignatureMissing"}),
			wantSkipped: []string{digestN(2), digestN(1)}, wantReasons: []string{"SignatureMissing", "SignatureMissing"}},
		{name: "a check that cannot run holds that version rather than falling back", spec: verifying, offered: offered(2),
			signature: verdicts(map[string]string{digestN(2): stagecoachv1.ReasonVerificationUnavailable}), want: digestN(2)},
		{name: "the skipped list keeps the newest five", spec: verifying, offered: offered(8),
			signature: verdicts(map[string]string{digestN(8): "SignatureMissing", digestN(7): "SignatureMissing", digestN(6): "SignatureMissing",
				digestN(5): "SignatureMissing", digestN(4): "SignatureMissing", digestN(3): "SignatureMissing", digestN(2): "SignatureMissing"}),
			want: digestN(1), wantSkipped: []string{digestN(8), digestN(7), digestN(6), digestN(5), digestN(4)},
			wantReasons: []string{"SignatureMissing", "SignatureMissing", "SignatureMissing", "SignatureMissing", "SignatureMissing"}},
		{name: "an error is returned", spec: verifying, offered: offered(1),
			signature: func(string) (*SignatureVerdict, error) { return nil, errors.New("boom") }, wantErr: "boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			stage := &stagecoachv1.Stage{Spec: tc.spec, Status: stagecoachv1.StageStatus{FailedDigests: tc.failed}}
			got, skipped, err := FirstEligible(stage, tc.offered, tc.signature, nil)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			if tc.want == "" {
				g.Expect(got).To(BeNil())
			} else {
				g.Expect(got).NotTo(BeNil())
				g.Expect(got.Digest).To(Equal(tc.want))
			}
			var digests, reasons []string
			for _, s := range skipped {
				digests = append(digests, s.Digest)
				reasons = append(reasons, s.Reason)
				g.Expect(s.Version).NotTo(BeEmpty())
				g.Expect(s.Message).To(ContainSubstring(s.Digest))
			}
			g.Expect(digests).To(Equal(tc.wantSkipped))
			g.Expect(reasons).To(Equal(tc.wantReasons))
		})
	}
}

func TestSoakCountsFromFirstSeen(t *testing.T) {
	g := NewWithT(t)
	seen := metav1.NewTime(t0.Add(-10 * time.Minute))
	stage := &stagecoachv1.Stage{Spec: stagecoachv1.StageSpec{Promotion: &stagecoachv1.PromotionPolicy{Auto: true, Soak: &metav1.Duration{Duration: 30 * time.Minute}}}}
	blocks := AutomationBlocks(stage, &Candidate{Digest: d2, FirstSeen: &seen}, t0)
	g.Expect(blocks).To(HaveLen(1))
	g.Expect(blocks[0].Gate).To(Equal(stagecoachv1.GateSoak))
	g.Expect(blocks[0].Message).To(Equal("first seen in the registry 10m0s ago; the Stage asks for 30m0s"))
	g.Expect(blocks[0].Until.Time).To(Equal(t0.Add(20 * time.Minute)))
}
