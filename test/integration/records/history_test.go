package records

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller"
	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
	"github.com/stagecoach-dev/stagecoach/internal/records"
	"github.com/stagecoach-dev/stagecoach/internal/records/trust"
)

// trustDoc is a trust config binding each named public key to cluster A's streams in the
// suite's records repository.
func trustDoc(keys map[string][]byte) string {
	var b strings.Builder
	b.WriteString("keys:\n")
	for _, n := range sortedKeys(keys) {
		b.WriteString("- name: " + n + "\n  repositories: [\"" + reg.streams() + "\"]\n  streams: [\"" + clusterA + "/*/*\"]\n  publicKey: |\n    " +
			strings.ReplaceAll(strings.TrimSpace(string(keys[n])), "\n", "\n    ") + "\n")
	}
	return b.String()
}

func sortedKeys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func findReady(s *stagecoachv1.Stage) *metav1.Condition {
	return meta.FindStatusCondition(s.Status.Conditions, stagecoachv1.ConditionReady)
}

// writeTrust writes a trust config to a file of the test and returns its path.
func writeTrust(t *testing.T, doc string) string {
	t.Helper()
	g := NewWithT(t)
	_, err := trust.Parse([]byte(doc))
	g.Expect(err).NotTo(HaveOccurred())
	p := filepath.Join(t.TempDir(), "trust.yaml")
	g.Expect(os.WriteFile(p, []byte(doc), 0o600)).To(Succeed())
	return p
}

// startBTrusting starts cluster B's controller with the trust config at path.
func startBTrusting(t *testing.T, path string) (stop func()) {
	return start(t, envB, func(o *controller.Options) {
		o.UpstreamTrust = path
		o.UpstreamRecordsInterval = time.Second
	})
}

// A record that prod already read is replaced at its seq by another one, signed with the trusted
// key itself (someone with the key and push access rewrote history): prod refuses the stream as
// rewritten, and a person's promote meanwhile is refused.
func TestRewrittenRecordIsRefused(t *testing.T) {
	g := NewWithT(t)
	v1, v2 := pushVersion(t, "w1"), pushVersion(t, "w2")
	nsA, nsB, stream := pipeline(t)
	startA(t, nil)
	startB(t)
	p := verifyInStaging(t, nsA, "staging-v1", v1, "w1")
	followed(t, nsB, v1, 2)
	original := p.Status.Record.Digest

	// The rewrite: record 2 says v2 was verified instead of v1. The Writer never overwrites a
	// tag, so it is written to a scratch repository and copied over record 2's tag.
	signer, err := records.LoadSigner(recorderKey.PrivateBytes, []byte(keyPassword))
	g.Expect(err).NotTo(HaveOccurred())
	scratch, err := records.NewStore(reg.host()+"/scratch/"+nsA, ociclient.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	prev := audit(t, stream).Entries[0].Digest
	forged := &records.Record{APIVersion: records.APIVersion, Stream: stream, Seq: 2, Prev: prev,
		Stage: records.StageRef{Namespace: nsA, Name: "staging"}, Service: "payments", Environment: "staging",
		Action: records.ActionVerify, Verdict: records.VerdictVerified, Version: &records.Version{Digest: v2, Tag: "w2"},
		Times: records.Times{Recorded: records.NewTime(time.Now())}}
	w, err := records.NewWriter(scratch, signer).Write(t.Context(), forged)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(w.Digest).NotTo(Equal(original))
	src, err := name.NewTag(scratch.Ref(w.Tag))
	g.Expect(err).NotTo(HaveOccurred())
	img, err := remote.Image(src, remote.WithContext(t.Context()))
	g.Expect(err).NotTo(HaveOccurred())
	dst, err := name.NewTag(reg.streams() + ":" + w.Tag)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(remote.Write(dst, img, remote.WithContext(t.Context()))).To(Succeed())

	prod := eventuallyReady(t, nsB, metav1.ConditionFalse, stagecoachv1.ReasonUpstreamUnreadable, "upstream records were rewritten")
	c := findReady(prod)
	g.Expect(c.Message).To(ContainSubstring("record 2 of stream %q was %s when this Stage read it and is now %s", stream, original, w.Digest))
	g.Expect(prod.Status.UpstreamSeen).To(Equal(&stagecoachv1.UpstreamSeen{Seq: 2, Digest: original}), "the mark stays on what prod read")

	promotionWaitsUnchecked(t, nsB, "prod-v2", v2, "w2", "rewritten")
	g.Consistently(func(g Gomega) {
		g.Expect(getStage(g, t, envB, nsB, "prod").Status.Current.Digest).To(Equal(v1))
	}, 3*time.Second, 200*time.Millisecond).Should(Succeed(), "prod never takes the version the rewrite names")
}

// The recorder's key is rotated: prod lists the new key beside the old one first, then staging's
// controller restarts with the new key. prod takes what both keys signed; a follower that lists
// only the old key would skip the new records.
func TestKeyRotationWithBothKeysListed(t *testing.T) {
	g := NewWithT(t)
	v1, v2 := pushVersion(t, "k1"), pushVersion(t, "k2")
	nsA, nsB, stream := pipeline(t)
	newKey, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return []byte(keyPassword), nil })
	g.Expect(err).NotTo(HaveOccurred())
	secret := "recorder-key-" + nsA
	g.Expect(envA.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "stagecoach-system", Name: secret},
		Data: map[string][]byte{"cosign.key": newKey.PrivateBytes, "cosign.password": []byte(keyPassword)}})).To(Succeed())
	both := writeTrust(t, trustDoc(map[string][]byte{"staging-recorder-old": recorderKey.PublicBytes, "staging-recorder-new": newKey.PublicBytes}))

	stopA := startA(t, nil)
	startBTrusting(t, both)
	verifyInStaging(t, nsA, "staging-v1", v1, "k1")
	followed(t, nsB, v1, 2)

	stopA()
	startA(t, func(o *controller.Options) { o.RecordsKeySecret = "stagecoach-system/" + secret })
	verifyInStaging(t, nsA, "staging-v2", v2, "k2")
	followed(t, nsB, v2, 4)
	eventuallyReady(t, nsB, metav1.ConditionTrue, stagecoachv1.ReasonApplierReady, "")
	g.Expect(findReady(getStage(g, t, envB, nsB, "prod")).Message).NotTo(ContainSubstring("skipped"))

	a := auditWith(t, both, stream)
	g.Expect(a.Breaks).To(BeEmpty())
	var keys []string
	for _, e := range a.Entries {
		keys = append(keys, e.Key)
	}
	g.Expect(keys).To(Equal([]string{"staging-recorder-old", "staging-recorder-old", "staging-recorder-new", "staging-recorder-new"}))

	// The control: listing only the old key, the new records are skipped and v2 is not offered.
	store, err := records.NewStore(reg.streams(), ociclient.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(trustFile)
	g.Expect(err).NotTo(HaveOccurred())
	oldOnly, err := trust.Parse(data)
	g.Expect(err).NotTo(HaveOccurred())
	view, err := (&records.Follower{Store: store, Trust: oldOnly}).Read(t.Context(), stream, nil, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(view.Head.Seq).To(Equal(int64(2)))
	g.Expect(view.Skipped).To(Equal(2))
	_, offered := view.Offered(v2)
	g.Expect(offered).To(BeFalse())
}

// prod's controller stops and starts again while staging goes on: once after reading a promote
// that is not verified yet, once while staging verifies. prod takes each version once, and its
// upstreamSeen follows every seq.
func TestFollowerRestartMidStream(t *testing.T) {
	g := NewWithT(t)
	v1, v2, v3 := pushVersion(t, "m1"), pushVersion(t, "m2"), pushVersion(t, "m3")
	nsA, nsB, stream := pipeline(t)
	startA(t, nil)
	stopB := startB(t)
	verifyInStaging(t, nsA, "staging-v1", v1, "m1")
	followed(t, nsB, v1, 2)

	// staging promotes v2; prod reads the promote (seq 3), which offers nothing yet.
	promote(t, envA, nsA, "staging-v2", "staging", v2, "m2", nil)
	eventuallyRecorded(t, nsA, "staging-v2", stagecoachv1.PhaseRunning, records.ActionPromote)
	g.Eventually(func(g Gomega) {
		g.Expect(getStage(g, t, envB, nsB, "prod").Status.UpstreamSeen.Seq).To(Equal(int64(3)))
	}, timeout, interval).Should(Succeed())
	stopB()
	// While prod's controller is down, staging verifies v2 (seq 4).
	land(t, envA, nsA, "staging", v2, true)
	eventuallyRecorded(t, nsA, "staging-v2", stagecoachv1.PhaseSucceeded, records.ActionVerify)
	stopB = startB(t)
	followed(t, nsB, v2, 4)

	// Down again in the middle of the next version: promote recorded before, verdict after.
	promote(t, envA, nsA, "staging-v3", "staging", v3, "m3", nil)
	eventuallyRecorded(t, nsA, "staging-v3", stagecoachv1.PhaseRunning, records.ActionPromote)
	stopB()
	land(t, envA, nsA, "staging", v3, true)
	eventuallyRecorded(t, nsA, "staging-v3", stagecoachv1.PhaseSucceeded, records.ActionVerify)
	startB(t)
	followed(t, nsB, v3, 6)

	taken := map[string]int{}
	for _, p := range promotionsOf(g, t, envB, nsB) {
		if p.Spec.Action == stagecoachv1.ActionPromote && p.Spec.Version != nil {
			taken[p.Spec.Version.Digest]++
		}
	}
	g.Expect(taken).To(Equal(map[string]int{v1: 1, v2: 1, v3: 1}), "one Promotion per version, none twice")
	a := audit(t, stream)
	g.Expect(a.Breaks).To(BeEmpty())
	g.Expect(a.Entries).To(HaveLen(6))
	g.Expect(getStage(g, t, envB, nsB, "prod").Status.UpstreamSeen).To(Equal(&stagecoachv1.UpstreamSeen{Seq: 6, Digest: a.Entries[5].Digest}))
}
