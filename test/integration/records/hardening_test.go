package records

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
	"github.com/sigstore/sigstore/pkg/signature"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller"
	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
	"github.com/stagecoach-dev/stagecoach/internal/records"
)

// Someone with push access to the records repository puts junk at staging's next seq, and a
// record signed with their own key (a freeze naming the next version) after it; later a copy of
// staging's own record 1 at the seq after its promote. None of it blocks the stream: staging's
// recorder writes its next records past them, chained to its own — also when it fails after such
// a push, before the Promotion hears of it — and prod follows, skipping (and counting) what no
// trusted key signed.
func TestJunkAtTheNextSeqDoesNotBlockTheStream(t *testing.T) {
	g := NewWithT(t)
	v1, v2 := pushVersion(t, "j1"), pushVersion(t, "j2")
	nsA, nsB, stream := pipeline(t)
	var failedPromotion atomic.Bool
	crashy := func(cfg *rest.Config, o client.Options) (client.Client, error) {
		c, err := client.NewWithWatch(cfg, o)
		if err != nil {
			return nil, err
		}
		return interceptor.NewClient(c, interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				data, _ := patch.Data(obj)
				// Record 7 (reserved as 6) is in the stream and on the Stage; the Promotion is not told.
				if _, ok := obj.(*stagecoachv1.Promotion); ok && obj.GetNamespace() == nsA && strings.Contains(string(data), `"recording":null`) &&
					strings.Contains(string(data), `"seq":7`) && failedPromotion.CompareAndSwap(false, true) {
					return errors.New("injected: controller failed before the Promotion heard of its record")
				}
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}), nil
	}
	startA(t, func(o *controller.Options) { o.NewClient = crashy })
	startB(t)
	p1 := verifyInStaging(t, nsA, "staging-v1", v1, "j1")
	followed(t, nsB, v1, 2)

	// seq 3: not a record at all.
	img, err := random.Image(64, 1)
	g.Expect(err).NotTo(HaveOccurred())
	junk, err := name.NewTag(reg.streams() + ":" + records.Tag(stream, 3))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(remote.Write(junk, img, remote.WithContext(t.Context()))).To(Succeed())
	// seq 4: a well-formed record chained to record 2, signed by a key prod does not trust.
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	g.Expect(err).NotTo(HaveOccurred())
	sv, err := signature.LoadECDSASignerVerifier(priv, crypto.SHA256)
	g.Expect(err).NotTo(HaveOccurred())
	evil, err := records.NewSigner(sv)
	g.Expect(err).NotTo(HaveOccurred())
	store, err := records.NewStore(reg.streams(), ociclient.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = records.NewWriter(store, evil).Write(t.Context(), &records.Record{APIVersion: records.APIVersion, Stream: stream, Seq: 4,
		Prev: p1.Status.Record.Digest, Stage: records.StageRef{Namespace: nsA, Name: "staging"}, Service: "payments", Environment: "staging",
		Action: records.ActionFreeze, Version: &records.Version{Digest: v2}, Times: records.Times{Recorded: records.NewTime(time.Now())}})
	g.Expect(err).NotTo(HaveOccurred())

	promote(t, envA, nsA, "staging-v2", "staging", v2, "j2", nil)
	p2 := eventuallyRecorded(t, nsA, "staging-v2", stagecoachv1.PhaseRunning, records.ActionPromote)
	g.Expect(p2.Status.Record.Seq).To(Equal(int64(5)), "reserved as 3, written past 3 and 4")
	// seq 6: staging's own record 1, replayed.
	src, err := name.NewTag(reg.streams() + ":" + records.Tag(stream, 1))
	g.Expect(err).NotTo(HaveOccurred())
	desc, err := remote.Get(src, remote.WithContext(t.Context()))
	g.Expect(err).NotTo(HaveOccurred())
	replay, err := name.NewTag(reg.streams() + ":" + records.Tag(stream, 6))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(remote.Put(replay, desc, remote.WithContext(t.Context()))).To(Succeed())

	land(t, envA, nsA, "staging", v2, true)
	p2 = eventuallyRecorded(t, nsA, "staging-v2", stagecoachv1.PhaseSucceeded, records.ActionVerify)
	g.Expect(failedPromotion.Load()).To(BeTrue(), "the injected failure after the push happened")
	staging := getStage(g, t, envA, nsA, "staging")
	g.Expect(staging.Status.Stream.Seq).To(Equal(int64(7)))
	g.Expect(staging.Status.Stream.Message).NotTo(ContainSubstring("StreamConflict"))
	g.Expect(p2.Status.Record).To(Equal(&stagecoachv1.RecordReference{Ref: reg.streams() + ":" + records.Tag(stream, 7), Seq: 7,
		Action: string(records.ActionVerify), Digest: staging.Status.Stream.Digest}), "the Promotion names where its record is, not where it was reserved")

	followed(t, nsB, v2, 7)
	prod := eventuallyReady(t, nsB, metav1.ConditionTrue, stagecoachv1.ReasonApplierReady,
		"3 upstream record(s) skipped: no trusted key in --upstream-trust signed them")
	g.Expect(prod.Status.UpstreamSeen).To(Equal(&stagecoachv1.UpstreamSeen{Seq: 7, Digest: p2.Status.Record.Digest}))

	a := audit(t, stream)
	var breaks []string
	for _, b := range a.Breaks {
		breaks = append(breaks, fmt.Sprintf("%d %s", b.Seq, b.Kind))
	}
	g.Expect(breaks).To(Equal([]string{"3 Malformed", "4 Signature", "6 Malformed"}), "the junk is still there to see, nothing else")
	var trusted []int64
	for _, e := range a.Entries {
		if e.OK {
			trusted = append(trusted, e.Seq)
		}
	}
	g.Expect(trusted).To(Equal([]int64{1, 2, 5, 7}))
}

// prod bounds how old staging's newest record may be (maxAge). Started only once staging's
// newest record is older than that, it refuses the stream — not Ready, UpstreamStale, saying how
// old the record is and what the bound is — and takes nothing; a newer record makes it follow
// again.
func TestStaleStreamIsRefused(t *testing.T) {
	g := NewWithT(t)
	const maxAge = 10 * time.Second
	v1 := pushVersion(t, "a1")
	nsA, nsB, stream := pipelineWith(t, func(prod *stagecoachv1.Stage) {
		prod.Spec.Source.UpstreamRecords.MaxAge = &metav1.Duration{Duration: maxAge}
	})
	startA(t, nil)
	verifyInStaging(t, nsA, "staging-v1", v1, "a1")
	a := audit(t, stream)
	g.Expect(a.Entries).To(HaveLen(2))
	recorded := a.Entries[1].Record.Times.Recorded.Time
	// A mirror that stopped here would look just like this to prod.
	time.Sleep(time.Until(recorded.Add(maxAge + 2*time.Second)))

	startB(t)
	prod := eventuallyReady(t, nsB, metav1.ConditionFalse, stagecoachv1.ReasonUpstreamStale,
		"longer ago than spec.source.upstreamRecords.maxAge (10s)")
	msg := findReady(prod).Message
	g.Expect(msg).To(MatchRegexp(`the newest trusted record of stream "` + regexp.QuoteMeta(stream) + `" in \S+, record 2, was recorded \d+s ago \(at \S+Z\)`))
	g.Expect(msg).To(ContainSubstring("newer records may be withheld"))
	g.Expect(prod.Status.UpstreamSeen).To(Equal(&stagecoachv1.UpstreamSeen{Seq: 2, Digest: a.Entries[1].Digest}), "the read itself succeeded")
	g.Expect(prod.Status.Candidate).NotTo(BeNil())
	var blocks []string
	for _, b := range prod.Status.Candidate.BlockedBy {
		blocks = append(blocks, b.Gate+"/"+b.Reason)
	}
	g.Expect(blocks).To(ContainElement(stagecoachv1.GateSource + "/" + stagecoachv1.ReasonUpstreamStale))
	g.Consistently(func(g Gomega) {
		g.Expect(promotionsOf(g, t, envB, nsB)).To(BeEmpty(), "nothing is taken from a stale stream")
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())

	// Any newer record shows the stream is current again (here staging is frozen, naming no
	// version): prod takes v1, which it refused while the stream was stale.
	g.Expect(envA.Client.Create(t.Context(), &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "freeze"},
		Spec: stagecoachv1.PromotionSpec{Stage: "staging", Action: stagecoachv1.ActionFreeze, RequestedBy: "alice", Reason: "quiet week"}})).To(Succeed())
	eventuallyRecorded(t, nsA, "freeze", stagecoachv1.PhaseSucceeded, records.ActionFreeze)
	followed(t, nsB, v1, 3)
}

// prod reads staging's stream from a copy in another repository, which the trust config does not
// bind the recorder's key to: every record there is untrusted, and prod says which repository
// to add if the copy is one to trust.
func TestTrustIsBoundToTheRepository(t *testing.T) {
	g := NewWithT(t)
	v1 := pushVersion(t, "c1")
	copyRepo := reg.host() + "/someones/copy"
	nsA, nsB, stream := pipelineWith(t, func(prod *stagecoachv1.Stage) { prod.Spec.Source.UpstreamRecords.Repository = copyRepo })
	startA(t, nil)
	verifyInStaging(t, nsA, "staging-v1", v1, "c1")
	for seq := int64(1); seq <= 2; seq++ {
		src, err := name.NewTag(reg.streams() + ":" + records.Tag(stream, seq))
		g.Expect(err).NotTo(HaveOccurred())
		desc, err := remote.Get(src, remote.WithContext(t.Context()))
		g.Expect(err).NotTo(HaveOccurred())
		dst, err := name.NewTag(copyRepo + ":" + records.Tag(stream, seq))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(remote.Put(dst, desc, remote.WithContext(t.Context()))).To(Succeed())
	}
	startB(t)
	prod := eventuallyReady(t, nsB, metav1.ConditionFalse, stagecoachv1.ReasonUpstreamUntrusted,
		"binds stream \""+stream+"\" to key(s) staging-recorder, but not in repository "+copyRepo)
	g.Expect(findReady(prod).Message).To(ContainSubstring("add " + copyRepo + " to their repositories"))
	g.Expect(prod.Status.Current).To(BeNil())
}
