package records

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
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

// verifyInStaging promotes digest in staging and lands it, and waits until both records are written.
func verifyInStaging(t *testing.T, nsA, name, digest, tag string) *stagecoachv1.Promotion {
	t.Helper()
	promote(t, envA, nsA, name, "staging", digest, tag, nil)
	land(t, envA, nsA, "staging", digest, true)
	return eventuallyRecorded(t, nsA, name, stagecoachv1.PhaseSucceeded, records.ActionVerify)
}

// failInStaging promotes digest in staging, lands it failed, and waits for the failure's record.
func failInStaging(t *testing.T, nsA, name, digest, tag string) *stagecoachv1.Promotion {
	t.Helper()
	promote(t, envA, nsA, name, "staging", digest, tag, nil)
	land(t, envA, nsA, "staging", digest, false)
	return eventuallyRecorded(t, nsA, name, stagecoachv1.PhaseFailed, records.ActionVerify)
}

// promotionWaitsUnchecked has bob promote digest in prod and waits until the Promotion waits,
// saying the upstream's records cannot be checked, and why.
func promotionWaitsUnchecked(t *testing.T, nsB, name, digest, tag, why string) {
	t.Helper()
	promote(t, envB, nsB, name, "prod", digest, tag, func(p *stagecoachv1.Promotion) { p.Spec.RequestedBy = "bob" })
	NewWithT(t).Eventually(func(g Gomega) {
		p := getPromotion(g, t, envB, nsB, name)
		g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhasePending))
		g.Expect(p.Status.Message).To(ContainSubstring("the upstream's records cannot be checked"))
		g.Expect(p.Status.Message).To(ContainSubstring(why))
	}, timeout, interval).Should(Succeed())
}

// followed waits until prod runs digest, landing it when prod applies it.
func followed(t *testing.T, nsB, digest string, seq int64) {
	t.Helper()
	defer func() {
		if t.Failed() {
			g := NewWithT(t)
			t.Logf("prod: %s", toJSON(getStage(g, t, envB, nsB, "prod").Status))
			for _, p := range promotionsOf(g, t, envB, nsB) {
				t.Logf("promotion %s: %s", p.Name, toJSON(p.Status))
			}
		}
	}()
	land(t, envB, nsB, "prod", digest, true)
	NewWithT(t).Eventually(func(g Gomega) {
		prod := getStage(g, t, envB, nsB, "prod")
		g.Expect(prod.Status.Current).NotTo(BeNil())
		g.Expect(prod.Status.Current.Digest).To(Equal(digest))
		g.Expect(prod.Status.UpstreamSeen).NotTo(BeNil())
		g.Expect(prod.Status.UpstreamSeen.Seq).To(Equal(seq))
	}, timeout, interval).Should(Succeed())
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A version that failed in staging is never offered to prod, and a person's promote of it is
// refused, citing the record that excludes it.
func TestFailedUpstreamIsNeverTaken(t *testing.T) {
	g := NewWithT(t)
	v1, v2 := pushVersion(t, "f1"), pushVersion(t, "f2")
	nsA, nsB, _ := pipeline(t)
	startA(t, nil)
	startB(t)
	verifyInStaging(t, nsA, "staging-v1", v1, "f1")
	followed(t, nsB, v1, 2)

	failInStaging(t, nsA, "staging-v2", v2, "f2")
	g.Eventually(func(g Gomega) {
		g.Expect(getStage(g, t, envB, nsB, "prod").Status.UpstreamSeen.Seq).To(Equal(int64(4)))
	}, timeout, interval).Should(Succeed())

	promote(t, envB, nsB, "prod-v2", "prod", v2, "f2", func(p *stagecoachv1.Promotion) { p.Spec.RequestedBy = "bob" })
	g.Eventually(func(g Gomega) {
		p := getPromotion(g, t, envB, nsB, "prod-v2")
		g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhaseFailed))
		g.Expect(p.Status.Message).To(ContainSubstring("NotPublished"))
		g.Expect(p.Status.Message).To(ContainSubstring("is never taken: it failed verification upstream: Failed (record 4)"))
		g.Expect(p.Status.Message).To(ContainSubstring("upstreamSeq=4 upstreamHead=sha256:"))
	}, timeout, interval).Should(Succeed())
	for _, p := range promotionsOf(g, t, envB, nsB) {
		g.Expect(p.Name == "prod-v2" || p.Spec.Version.Digest != v2).To(BeTrue(), "prod took %s: %s", v2, p.Name)
	}
	g.Expect(getStage(g, t, envB, nsB, "prod").Status.Current.Digest).To(Equal(v1))
}

// A record that no trusted key signed is skipped, and the Ready message counts it.
func TestUntrustedRecordIsSkippedAndCounted(t *testing.T) {
	g := NewWithT(t)
	v1 := pushVersion(t, "u1")
	nsA, nsB, stream := pipeline(t)
	startA(t, nil)
	startB(t)
	p := verifyInStaging(t, nsA, "staging-v1", v1, "u1")
	followed(t, nsB, v1, 2)

	// Someone with push access appends a record signed with a key prod does not trust.
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	g.Expect(err).NotTo(HaveOccurred())
	sv, err := signature.LoadECDSASignerVerifier(priv, crypto.SHA256)
	g.Expect(err).NotTo(HaveOccurred())
	evil, err := records.NewSigner(sv)
	g.Expect(err).NotTo(HaveOccurred())
	store, err := records.NewStore(reg.streams(), ociclient.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	forged := &records.Record{APIVersion: records.APIVersion, Stream: stream, Seq: 3, Prev: p.Status.Record.Digest,
		Stage: records.StageRef{Namespace: nsA, Name: "staging"}, Service: "payments", Environment: "staging",
		Action: records.ActionFreeze, Version: &records.Version{Digest: v1}, Times: records.Times{Recorded: records.NewTime(time.Now())}}
	_, err = records.NewWriter(store, evil).Write(t.Context(), forged)
	g.Expect(err).NotTo(HaveOccurred())

	prod := eventuallyReady(t, nsB, metav1.ConditionTrue, stagecoachv1.ReasonApplierReady,
		"1 upstream record(s) skipped: no trusted key in --upstream-trust signed them")
	g.Expect(prod.Status.UpstreamSeen.Seq).To(Equal(int64(2)), "the forged record is not read as seen")
	g.Expect(prod.Status.Current.Digest).To(Equal(v1))
}

// The newest record deleted after prod read it: prod refuses the stream (removed), refuses a
// promote as NotPublished, and takes it again once a person clears status.upstreamSeen.
func TestRemovedRecordIsRefused(t *testing.T) {
	g := NewWithT(t)
	v1 := pushVersion(t, "r1")
	nsA, nsB, stream := pipeline(t)
	startA(t, nil)
	startB(t)
	verifyInStaging(t, nsA, "staging-v1", v1, "r1")
	followed(t, nsB, v1, 2)

	ref, err := name.NewTag(reg.streams() + ":" + records.Tag(stream, 2))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(remote.Delete(ref, remote.WithContext(t.Context()))).To(Succeed())
	eventuallyReady(t, nsB, metav1.ConditionFalse, stagecoachv1.ReasonUpstreamUnreadable, "upstream records were removed")

	promotionWaitsUnchecked(t, nsB, "prod-again", v1, "r1", "removed")

	// An auditor confirms the cut: clearing the mark lets the next read set it again.
	prod := getStage(g, t, envB, nsB, "prod")
	g.Expect(envB.Client.Status().Patch(t.Context(), prod, client.RawPatch("application/merge-patch+json",
		[]byte(`{"status":{"upstreamSeen":null}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		prod := getStage(g, t, envB, nsB, "prod")
		g.Expect(prod.Status.UpstreamSeen).NotTo(BeNil())
		g.Expect(prod.Status.UpstreamSeen.Seq).To(Equal(int64(1)))
	}, timeout, interval).Should(Succeed())
	eventuallyReady(t, nsB, metav1.ConditionTrue, stagecoachv1.ReasonApplierReady, "")
	// What is left of the stream no longer shows v1 verified.
	g.Eventually(func(g Gomega) {
		p := getPromotion(g, t, envB, nsB, "prod-again")
		g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhasePending))
		g.Expect(p.Status.Message).To(ContainSubstring("is not verified in the upstream's records"))
		g.Expect(p.Status.Message).To(ContainSubstring("upstreamSeq=1"))
	}, timeout, interval).Should(Succeed())
}

// The registry goes down: staging's promote and verdict go on, its records wait (and say so),
// prod is not Ready; once the registry is back the records are written in order and prod follows.
func TestRegistryDownThenBack(t *testing.T) {
	g := NewWithT(t)
	v1, v2 := pushVersion(t, "d1"), pushVersion(t, "d2")
	nsA, nsB, stream := pipeline(t)
	startA(t, nil)
	startB(t)
	verifyInStaging(t, nsA, "staging-v1", v1, "d1")
	followed(t, nsB, v1, 2)

	reg.down.Store(true)
	t.Cleanup(func() { reg.down.Store(false) })
	promote(t, envA, nsA, "staging-v2", "staging", v2, "d2", nil)
	land(t, envA, nsA, "staging", v2, true)
	g.Eventually(func(g Gomega) {
		p := getPromotion(g, t, envA, nsA, "staging-v2")
		g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhaseSucceeded), "the verdict does not wait for the registry")
		g.Expect(p.Status.Recording).NotTo(BeNil())
		g.Expect(p.Status.Recording.Message).To(ContainSubstring("not written yet, retrying"))
		staging := getStage(g, t, envA, nsA, "staging")
		g.Expect(staging.Status.Stream.Message).To(ContainSubstring("records delayed"))
	}, timeout, interval).Should(Succeed())
	eventuallyReady(t, nsB, metav1.ConditionFalse, stagecoachv1.ReasonUpstreamUnreadable, "registry")

	reg.down.Store(false)
	eventuallyRecorded(t, nsA, "staging-v2", stagecoachv1.PhaseSucceeded, records.ActionVerify)
	followed(t, nsB, v2, 4)
	eventuallyReady(t, nsB, metav1.ConditionTrue, stagecoachv1.ReasonApplierReady, "")
	a := audit(t, stream)
	g.Expect(a.Breaks).To(BeEmpty())
	g.Expect(a.Entries).To(HaveLen(4))
}

// Cluster A's controller fails between the push and the status writes, and is restarted in the
// middle of a promote: the stream has each step once, with no seq missing.
func TestRecorderRestartMidStream(t *testing.T) {
	g := NewWithT(t)
	v1, v2 := pushVersion(t, "s1"), pushVersion(t, "s2")
	nsA, nsB, stream := pipeline(t)
	var failedStage, failedPromotion atomic.Bool
	crashy := func(cfg *rest.Config, o client.Options) (client.Client, error) {
		c, err := client.NewWithWatch(cfg, o)
		if err != nil {
			return nil, err
		}
		return interceptor.NewClient(c, interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				data, _ := patch.Data(obj)
				switch obj.(type) {
				case *stagecoachv1.Stage:
					// The push of record 1 happened; its commit to the Stage is lost.
					if obj.GetNamespace() == nsA && strings.Contains(string(data), `"seq":1`) && failedStage.CompareAndSwap(false, true) {
						return errors.New("injected: controller died after the push")
					}
				case *stagecoachv1.Promotion:
					// Record 2 is in the stream and on the Stage; the Promotion is not told.
					if obj.GetNamespace() == nsA && strings.Contains(string(data), `"recording":null`) && strings.Contains(string(data), `"seq":2`) &&
						failedPromotion.CompareAndSwap(false, true) {
						return errors.New("injected: controller died before the Promotion heard of its record")
					}
				}
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}), nil
	}
	stopA := startA(t, func(o *controller.Options) { o.NewClient = crashy })
	startB(t)

	promote(t, envA, nsA, "staging-v1", "staging", v1, "s1", nil)
	eventuallyRecorded(t, nsA, "staging-v1", stagecoachv1.PhaseRunning, records.ActionPromote)
	// Restart in the middle of the promote.
	stopA()
	startA(t, func(o *controller.Options) { o.NewClient = crashy })
	land(t, envA, nsA, "staging", v1, true)
	eventuallyRecorded(t, nsA, "staging-v1", stagecoachv1.PhaseSucceeded, records.ActionVerify)
	followed(t, nsB, v1, 2)
	verifyInStaging(t, nsA, "staging-v2", v2, "s2")
	followed(t, nsB, v2, 4)
	g.Expect(failedStage.Load()).To(BeTrue(), "the injected failure after the push happened")
	g.Expect(failedPromotion.Load()).To(BeTrue(), "the injected failure before the Promotion's write happened")

	a := audit(t, stream)
	g.Expect(a.Breaks).To(BeEmpty())
	var steps []string
	for i, e := range a.Entries {
		g.Expect(e.Seq).To(Equal(int64(i + 1)))
		steps = append(steps, string(e.Record.Action)+" "+e.Record.Version.Tag)
	}
	g.Expect(steps).To(Equal([]string{"Promote s1", "Verify s1", "Promote s2", "Verify s2"}))
	g.Expect(getStage(g, t, envA, nsA, "staging").Status.Stream.Seq).To(Equal(int64(4)))
}

// A break-glass promote during a freeze appears in the stream with its actor and reason.
func TestBreakGlassPromoteIsRecorded(t *testing.T) {
	g := NewWithT(t)
	v1 := pushVersion(t, "b1")
	nsA, _, stream := pipeline(t)
	startA(t, nil)

	g.Expect(envA.Client.Create(t.Context(), &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "freeze"},
		Spec: stagecoachv1.PromotionSpec{Stage: "staging", Action: stagecoachv1.ActionFreeze, RequestedBy: "alice", Reason: "release freeze"}})).To(Succeed())
	eventuallyRecorded(t, nsA, "freeze", stagecoachv1.PhaseSucceeded, records.ActionFreeze)
	promote(t, envA, nsA, "hotfix", "staging", v1, "b1", func(p *stagecoachv1.Promotion) {
		p.Spec.RequestedBy, p.Spec.BreakGlass, p.Spec.Reason = "bob", true, "INC-42: payments down"
	})
	land(t, envA, nsA, "staging", v1, true)
	eventuallyRecorded(t, nsA, "hotfix", stagecoachv1.PhaseSucceeded, records.ActionVerify)

	a := audit(t, stream)
	g.Expect(a.Breaks).To(BeEmpty())
	g.Expect(a.Entries).To(HaveLen(3))
	g.Expect(a.Entries[0].Record.Action).To(Equal(records.ActionFreeze))
	g.Expect(a.Entries[0].Record.Actor).To(Equal("alice"))
	bg := a.Entries[1].Record
	g.Expect(bg.Action).To(Equal(records.ActionPromote))
	g.Expect(bg.Actor).To(Equal("bob"))
	g.Expect(bg.BreakGlass).To(Equal(&records.BreakGlass{Reason: "INC-42: payments down"}))
}

// A freeze record that names a version (one found failing after release) keeps followers from
// it, even though staging verified it before.
func TestFreezeRecordNamingAVersionExcludesIt(t *testing.T) {
	g := NewWithT(t)
	v1, v2 := pushVersion(t, "z1"), pushVersion(t, "z2")
	nsA, nsB, _ := pipeline(t)
	startA(t, nil)
	verifyInStaging(t, nsA, "staging-v1", v1, "z1")
	verifyInStaging(t, nsA, "staging-v2", v2, "z2")
	g.Expect(envA.Client.Create(t.Context(), &stagecoachv1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "freeze-v2"},
		Spec: stagecoachv1.PromotionSpec{Stage: "staging", Action: stagecoachv1.ActionFreeze, RequestedBy: "alice",
			Version: &stagecoachv1.VersionReference{Digest: v2, Tag: "z2"}, Reason: "z2 fails its checks after release"}})).To(Succeed())
	eventuallyRecorded(t, nsA, "freeze-v2", stagecoachv1.PhaseSucceeded, records.ActionFreeze)

	// prod starts following only now: it takes v1, the newest version nothing excludes.
	startB(t)
	followed(t, nsB, v1, 5)
	promote(t, envB, nsB, "prod-v2", "prod", v2, "z2", func(p *stagecoachv1.Promotion) { p.Spec.RequestedBy = "bob" })
	g.Eventually(func(g Gomega) {
		p := getPromotion(g, t, envB, nsB, "prod-v2")
		g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhaseFailed))
		g.Expect(p.Status.Message).To(ContainSubstring("is never taken: a freeze upstream names it as failed (record 5) (upstreamSeq=5"))
	}, timeout, interval).Should(Succeed())
}
