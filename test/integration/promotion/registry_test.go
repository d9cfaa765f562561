package promotion

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller"
	"github.com/stagecoach-dev/stagecoach/internal/cli"
	"github.com/stagecoach-dev/stagecoach/internal/verify/verifytest"
)

// testRegistry is an in-memory OCI registry on 127.0.0.1.
type testRegistry struct {
	server *httptest.Server
	repo   string
}

func newTestRegistry(t *testing.T) *testRegistry {
	t.Helper()
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)), ggcrregistry.WithReferrersSupport(true)))
	t.Cleanup(srv.Close)
	return &testRegistry{server: srv, repo: strings.TrimPrefix(srv.URL, "http://") + "/deploy/payments"}
}

// push writes a new random image under tag and returns its digest.
func (r *testRegistry) push(t *testing.T, tag string) string {
	t.Helper()
	g := NewWithT(t)
	img, err := random.Image(64, 1)
	g.Expect(err).NotTo(HaveOccurred())
	ref, err := name.NewTag(r.repo + ":" + tag)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(remote.Write(ref, img, remote.WithContext(t.Context()))).To(Succeed())
	d, err := img.Digest()
	g.Expect(err).NotTo(HaveOccurred())
	return d.String()
}

// askToLook sets stagecoach.dev/requested-at on a Stage, as a person does to make it look at its
// source now.
func askToLook(t *testing.T, ns, name string) {
	t.Helper()
	// A merge patch, as `kubectl annotate` sends: the controller writing the Stage's status
	// meanwhile must not make it conflict.
	stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, stagecoachv1.ReconcileRequestAnnotation, time.Now().Format(time.RFC3339Nano))
	NewWithT(t).Expect(env.Client.Patch(t.Context(), stage, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
}

// onlyPromotion waits until the Stage has exactly one Promotion and returns it.
func onlyPromotion(t *testing.T, ns, stage string) stagecoachv1.Promotion {
	t.Helper()
	var only stagecoachv1.Promotion
	NewWithT(t).Eventually(func(g Gomega) {
		list := promotionsOf(g, t, ns, stage)
		g.Expect(list).To(HaveLen(1))
		only = list[0]
	}, timeout, interval).Should(Succeed())
	return only
}

// A Stage with a registry source offers the newest tag meeting its semver constraint; a new tag
// is picked up at once when a person sets stagecoach.dev/requested-at; a registry that is down
// blocks the candidate with a reason and promotes nothing.
func TestRegistrySourceOffersTheNewestEligibleTag(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := newTestRegistry(t)
	v1 := reg.push(t, "v1.0.0")
	v11 := reg.push(t, "v1.1.0")
	reg.push(t, "v2.0.0-rc.1") // a prerelease: not eligible for ">=1.0.0"
	reg.push(t, "latest")      // not a version
	app := newApplication(t, ns, "dev", ociSpec(ns))
	newStage(t, ns, "dev", func(s *stagecoachv1.Stage) {
		s.Spec.Source = stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{
			Repository: reg.repo, Semver: ">=1.0.0", Interval: &metav1.Duration{Duration: time.Hour}}}
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true}
	})
	startController(t, nil)

	first := onlyPromotion(t, ns, "dev")
	g.Expect(first.Spec.Version).To(Equal(&stagecoachv1.VersionReference{Digest: v11, Tag: "v1.1.0"}))
	g.Expect(v1).NotTo(Equal(v11))
	app.deploy(v11, false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, first.Name, stagecoachv1.PhaseSucceeded)

	// A new tag is not seen before the (hour-long) interval, unless a person asks.
	v12 := reg.push(t, "v1.2.0")
	g.Consistently(func(g Gomega) {
		g.Expect(promotionsOf(g, t, ns, "dev")).To(HaveLen(1))
	}, time.Second, interval).Should(Succeed())
	askToLook(t, ns, "dev")
	g.Eventually(func(g Gomega) {
		list := promotionsOf(g, t, ns, "dev")
		g.Expect(list).To(ContainElement(HaveField("Spec.Version.Digest", v12)))
	}, timeout, interval).Should(Succeed())
	app.deploy(v12, false, "Succeeded", "Healthy")
	eventuallyCondition(t, ns, "dev", stagecoachv1.ConditionVerified, metav1.ConditionTrue, stagecoachv1.ReasonVerified, v12)

	// The registry goes away: the candidate is blocked with the reason, nothing is promoted.
	reg.server.Close()
	askToLook(t, ns, "dev")
	eventuallyBlockedBy(t, ns, "dev", stagecoachv1.GateSource, "cannot reach registry", reg.repo)
	g.Expect(getStage(g, t.Context(), ns, "dev").Status.Candidate.BlockedBy[0].Reason).To(Equal("RegistryUnreachable"))
	g.Expect(promotionsOf(g, t, ns, "dev")).To(HaveLen(2))
}

// eventuallySkipped waits until the Stage's candidate is wantDigest ("" for none) and the newer
// versions it passes over are exactly skipped (digest → reason), newest first.
func eventuallySkipped(t *testing.T, ns, stage, wantDigest string, skipped ...[2]string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		s := getStage(g, t.Context(), ns, stage)
		g.Expect(s.Status.Candidate).NotTo(BeNil())
		g.Expect(s.Status.Candidate.Digest).To(Equal(wantDigest), toJSON(s.Status.Candidate))
		var got [][2]string
		for _, sk := range s.Status.Candidate.Skipped {
			g.Expect(sk.Gate).To(BeElementOf(stagecoachv1.GateSignature, stagecoachv1.GateAttestations))
			g.Expect(sk.Version).NotTo(BeEmpty())
			got = append(got, [2]string{sk.Digest, sk.Reason})
		}
		g.Expect(got).To(Equal(skipped), toJSON(s.Status.Candidate))
	}, timeout, interval).Should(Succeed())
}

// Only versions a trusted key signed (legacy .sig or bundle) are offered: an unsigned version,
// or one carrying another digest's signature, is skipped with the reason in
// status.candidate.skipped and never promoted, even when a person asks; a signed version pushed
// before an unsigned newer one is still offered (issue 15: the newest *eligible* version).
func TestSignaturesGateRegistryVersions(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := newTestRegistry(t)
	release := verifytest.NewKeyPair(t)
	other := verifytest.NewKeyPair(t)
	g.Expect(env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cosign-keys"},
		Data: map[string][]byte{"release.pub": release.PublicPEM, "README": []byte("not a key")}})).To(Succeed())
	ask := func() { askToLook(t, ns, "dev") }
	digestOf := func(ref string) string { return ref[strings.Index(ref, "@")+1:] }

	v1 := verifytest.PushRandomImage(t, reg.repo, "v1.0.0")
	verifytest.SignLegacy(t, t.Context(), v1, release)
	app := newApplication(t, ns, "dev", ociSpec(ns))
	newStage(t, ns, "dev", func(s *stagecoachv1.Stage) {
		s.Spec.Source = stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: reg.repo,
			Interval: &metav1.Duration{Duration: time.Hour},
			Verify:   &stagecoachv1.VerifySpec{SecretRef: &stagecoachv1.LocalObjectReference{Name: "cosign-keys"}}}}
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true}
	})
	startController(t, nil)
	first := onlyPromotion(t, ns, "dev")
	g.Expect(first.Spec.Version.Digest).To(Equal(digestOf(v1)))
	app.deploy(digestOf(v1), false, "Succeeded", "Healthy")
	done := eventuallyPhase(t, ns, first.Name, stagecoachv1.PhaseSucceeded)
	g.Expect(done.Status.Gates).To(ContainElement(And(HaveField("Gate", "signature"), HaveField("Passed", true),
		HaveField("Message", ContainSubstring("legacy")))))

	// Unsigned: skipped, never promoted; nothing newer is eligible, so there is no candidate.
	v2 := verifytest.PushRandomImage(t, reg.repo, "v2.0.0")
	ask()
	eventuallySkipped(t, ns, "dev", "", [2]string{digestOf(v2), "SignatureMissing"})

	// Signed by an untrusted key, or carrying v1's signature: skipped as invalid.
	v3 := verifytest.PushRandomImage(t, reg.repo, "v3.0.0")
	verifytest.SignBundle(t, t.Context(), v3, other)
	ask()
	eventuallySkipped(t, ns, "dev", "", [2]string{digestOf(v3), "SignatureInvalid"}, [2]string{digestOf(v2), "SignatureMissing"})
	v4 := verifytest.PushRandomImage(t, reg.repo, "v4.0.0")
	verifytest.CopyLegacySignature(t, v1, v4)
	ask()
	eventuallySkipped(t, ns, "dev", "", [2]string{digestOf(v4), "SignatureInvalid"},
		[2]string{digestOf(v3), "SignatureInvalid"}, [2]string{digestOf(v2), "SignatureMissing"})

	// A person cannot promote the unsigned version either.
	newPromotion(t, ns, "dev-v2", "dev", stagecoachv1.ActionPromote, digestOf(v2), "v2.0.0")
	g.Eventually(func(g Gomega) {
		p := getPromotion(g, t.Context(), ns, "dev-v2")
		g.Expect(p.Status.Phase).To(Equal(stagecoachv1.PhasePending))
		g.Expect(p.Status.Message).To(ContainSubstring("waiting: signature:"))
	}, timeout, interval).Should(Succeed())
	g.Expect(app.desiredRevision(app.get())).To(Equal(digestOf(v1)))
	g.Expect(env.Client.Delete(t.Context(), getPromotion(g, t.Context(), ns, "dev-v2"))).To(Succeed())

	// A bundle from the trusted key, pushed before an unsigned v6: v5 is offered and promoted,
	// v6 is listed as skipped.
	v5 := verifytest.PushRandomImage(t, reg.repo, "v5.0.0")
	verifytest.SignBundle(t, t.Context(), v5, release)
	v6 := verifytest.PushRandomImage(t, reg.repo, "v6.0.0")
	ask()
	g.Eventually(func(g Gomega) {
		g.Expect(promotionsOf(g, t, ns, "dev")).To(ContainElement(HaveField("Spec.Version.Digest", digestOf(v5))))
	}, timeout, interval).Should(Succeed())
	eventuallySkipped(t, ns, "dev", digestOf(v5), [2]string{digestOf(v6), "SignatureMissing"})
	// stagecoach plan says so too.
	var out bytes.Buffer
	g.Expect(cli.Plan(t.Context(), env.Client, cli.PlanOptions{Namespace: ns, Stage: "dev"}, &out, time.Now())).To(Succeed())
	g.Expect(out.String()).To(ContainSubstring("skipped v6.0.0 (sha256:" + strings.TrimPrefix(digestOf(v6), "sha256:")[:12] + ") (signature SignatureMissing): digest " + digestOf(v6)))
	for _, p := range promotionsOf(g, t, ns, "dev") {
		g.Expect(p.Spec.Version.Digest).NotTo(BeElementOf(digestOf(v2), digestOf(v3), digestOf(v4), digestOf(v6)))
	}
}

// Soak applies to a registry source: automation waits until the version has been offered for
// promotion.soak, counted from when the controller first saw it (issue 15).
func TestRegistrySourceSoaksFromFirstSeen(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := newTestRegistry(t)
	v1 := reg.push(t, "v1.0.0")
	app := newApplication(t, ns, "dev", ociSpec(ns))
	newStage(t, ns, "dev", func(s *stagecoachv1.Stage) {
		s.Spec.Source = stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{
			Repository: reg.repo, Interval: &metav1.Duration{Duration: time.Hour}}}
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true, Soak: &metav1.Duration{Duration: 3 * time.Second}}
	})
	started := time.Now()
	startController(t, nil)

	eventuallyBlockedBy(t, ns, "dev", stagecoachv1.GateSoak, "first seen in the registry", "the Stage asks for 3s")
	s := getStage(g, t.Context(), ns, "dev")
	g.Expect(s.Status.Candidate.Digest).To(Equal(v1))
	g.Expect(s.Status.Candidate.FirstSeen).NotTo(BeNil())
	g.Expect(promotionsOf(g, t, ns, "dev")).To(BeEmpty())
	// Once soaked, automation promotes it without any event.
	p := onlyPromotion(t, ns, "dev")
	g.Expect(p.Spec.Version.Digest).To(Equal(v1))
	g.Expect(time.Since(started)).To(BeNumerically(">=", 2*time.Second))
	g.Expect(p.CreationTimestamp.Time).To(BeTemporally(">=", s.Status.Candidate.FirstSeen.Add(3*time.Second-time.Second)))
	// The Promotion keeps when the version was first seen, for DORA lead time (issue 20).
	g.Expect(p.Annotations).To(HaveKeyWithValue(stagecoachv1.FirstSeenAnnotation, s.Status.Candidate.FirstSeen.UTC().Format(time.RFC3339)))
	app.deploy(v1, false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, p.Name, stagecoachv1.PhaseSucceeded)
}

// A registry version that failed in the Stage is passed over and listed as skipped: after the
// rollback there is no candidate but the skipped v2; a newer v3 is then the candidate, held until
// a person promotes (issue 15).
func TestRegistrySourceSkipsAFailedVersion(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := newTestRegistry(t)
	v1 := reg.push(t, "v1.0.0")
	app := newApplication(t, ns, "dev", ociSpec(ns))
	newStage(t, ns, "dev", func(s *stagecoachv1.Stage) {
		s.Spec.Source = stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{
			Repository: reg.repo, Interval: &metav1.Duration{Duration: time.Hour}}}
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true}
	})
	startController(t, nil)
	first := onlyPromotion(t, ns, "dev")
	app.deploy(v1, false, "Succeeded", "Healthy")
	eventuallyPhase(t, ns, first.Name, stagecoachv1.PhaseSucceeded)

	// v2 fails and is rolled back to v1.
	v2 := reg.push(t, "v2.0.0")
	askToLook(t, ns, "dev")
	var failed stagecoachv1.Promotion
	g.Eventually(func(g Gomega) {
		for _, p := range promotionsOf(g, t, ns, "dev") {
			if p.Spec.Version != nil && p.Spec.Version.Digest == v2 {
				failed = p
			}
		}
		g.Expect(failed.Name).NotTo(BeEmpty())
	}, timeout, interval).Should(Succeed())
	app.waitForRevision(v2, false)
	app.deploy(v2, false, "Failed", "")
	eventuallyPhase(t, ns, failed.Name+"-rollback", stagecoachv1.PhaseRunning)
	app.deploy(v1, false, "Succeeded", "Healthy")
	eventuallyCondition(t, ns, "dev", stagecoachv1.ConditionVerified, metav1.ConditionTrue, stagecoachv1.ReasonRolledBack, v1)

	skippedV2 := And(HaveField("Digest", v2), HaveField("Version", "v2.0.0"), HaveField("Gate", stagecoachv1.GateHistory),
		HaveField("Reason", stagecoachv1.ReasonPromotionFailed))
	g.Eventually(func(g Gomega) {
		c := getStage(g, t.Context(), ns, "dev").Status.Candidate
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Digest).To(BeEmpty(), toJSON(c))
		g.Expect(c.Skipped).To(ConsistOf(skippedV2))
	}, timeout, interval).Should(Succeed())

	v3 := reg.push(t, "v3.0.0")
	askToLook(t, ns, "dev")
	eventuallyBlockedBy(t, ns, "dev", stagecoachv1.GateHold)
	c := getStage(g, t.Context(), ns, "dev").Status.Candidate
	g.Expect(c.Digest).To(Equal(v3))
	g.Expect(c.Skipped).To(BeEmpty(), "v2 is older than the candidate: nothing newer is passed over")
	g.Expect(c.BlockedBy).NotTo(ContainElement(HaveField("Gate", stagecoachv1.GateHistory)))
}

// A registry that accepts connections and never answers stalls only the Stage that lists it:
// that Stage says so in Ready within the registry timeout, and another namespace's Promotion
// runs meanwhile.
func TestHungRegistryStallsOnlyItsStage(t *testing.T) {
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(hung.Close)
	t.Cleanup(func() { close(release) })
	slow, other := newNamespace(t), newNamespace(t)
	newApplication(t, slow, "dev", ociSpec(slow))
	newStage(t, slow, "dev", func(s *stagecoachv1.Stage) {
		s.Spec.Source = stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{
			Repository: strings.TrimPrefix(hung.URL, "http://") + "/deploy/payments", Interval: &metav1.Duration{Duration: time.Hour}}}
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true}
	})
	app := newApplication(t, other, "prod", ociSpec(other))
	newStage(t, other, "prod", nil)
	startControllerWith(t, nil, func(o *controller.Options) { o.RegistryTimeout = 500 * time.Millisecond })

	// Within a minute (each request gives up after the registry timeout; the registry client
	// retries a few times with backoff before the listing fails).
	NewWithT(t).Eventually(func(g Gomega) {
		ready := meta.FindStatusCondition(getStage(g, t.Context(), slow, "dev").Status.Conditions, stagecoachv1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse), ready.Message)
		g.Expect(ready.Reason).To(Equal(stagecoachv1.ReasonRegistryUnreachable))
		g.Expect(ready.Message).To(ContainSubstring("Stage dev cannot read its source"))
	}, time.Minute, interval).Should(Succeed())
	newPromotion(t, other, "v1", "prod", stagecoachv1.ActionPromote, digest(1), "v1.0.0")
	app.waitForRevision(digest(1), false)
	app.deploy(digest(1), false, "Succeeded", "Healthy")
	eventuallyPhase(t, other, "v1", stagecoachv1.PhaseSucceeded)
}

// Verification keys that cannot be read make the Stage not Ready (no version could pass), with
// what to fix; the version waits as the candidate, blocked by the signature gate.
func TestUnreadableKeysMakeTheStageNotReady(t *testing.T) {
	ns := newNamespace(t)
	reg := newTestRegistry(t)
	reg.push(t, "v1.0.0")
	newApplication(t, ns, "dev", ociSpec(ns))
	newStage(t, ns, "dev", func(s *stagecoachv1.Stage) {
		s.Spec.Source = stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: reg.repo,
			Interval: &metav1.Duration{Duration: time.Hour},
			Verify:   &stagecoachv1.VerifySpec{SecretRef: &stagecoachv1.LocalObjectReference{Name: "missing-keys"}}}}
		s.Spec.Promotion = &stagecoachv1.PromotionPolicy{Auto: true}
	})
	startController(t, nil)
	eventuallyCondition(t, ns, "dev", stagecoachv1.ConditionReady, metav1.ConditionFalse, stagecoachv1.ReasonKeysUnreadable,
		"Stage dev cannot verify signatures: ")
	eventuallyBlockedBy(t, ns, "dev", stagecoachv1.GateSignature, "missing-keys")
	NewWithT(t).Consistently(func(g Gomega) {
		g.Expect(promotionsOf(g, t, ns, "dev")).To(BeEmpty())
	}, time.Second, interval).Should(Succeed())
}

// Issue 50 item 3: a registry source's pull Secret is used only as far as the Stage's author may
// get it, as the Git, promotion and attestation Secrets are: an author who may not read it, or
// no author, lists nothing from the private repository, with a reason naming the Secret and the
// fix; an author who may lists and is offered its versions.
func TestRegistryCredentialsOnlyAsTheAuthorMay(t *testing.T) {
	inner := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user, password, ok := r.BasicAuth(); !ok || user != "ci" || password != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="private"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	repo := host + "/private/app"
	img, err := random.Image(64, 1)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	ref, err := name.NewTag(repo + ":v1.0.0")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(remote.Write(ref, img, remote.WithContext(t.Context()), remote.WithAuth(&authn.Basic{Username: "ci", Password: "s3cret"}))).To(Succeed())
	v1, err := img.Digest()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	startController(t, nil)

	for _, tc := range []struct {
		name       string
		author     *stagecoachv1.StageAuthor
		grant      bool // RBAC lets the author get the pull Secret
		wantReason string
		wantParts  []string
	}{
		{name: "an author who may not read the pull Secret", author: &stagecoachv1.StageAuthor{User: "tina"}, wantReason: stagecoachv1.ReasonAuthorForbidden,
			wantParts: []string{"the Stage's author tina may not get Secret", "/pull' (spec.source.registry.secretRef), so the controller does not use it"}},
		{name: "no author", wantReason: stagecoachv1.ReasonAuthorMissing,
			wantParts: []string{"Stage 'dev' names no spec.author, and the controller uses Secret 'pull' (spec.source.registry.secretRef)"}},
		{name: "an author who may", author: &stagecoachv1.StageAuthor{User: "tina"}, grant: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			config := fmt.Sprintf(`{"auths":{%q:{"username":"ci","password":"s3cret"}}}`, host)
			g.Expect(env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull"},
				Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(config)}})).To(Succeed())
			if tc.grant {
				grantSecret(t, ns, "pull", tc.author.User)
			}
			newApplication(t, ns, "dev", ociSpec(ns))
			newStage(t, ns, "dev", func(s *stagecoachv1.Stage) {
				s.Spec.Author = tc.author
				s.Spec.Source = stagecoachv1.StageSource{Registry: &stagecoachv1.RegistrySource{Repository: repo, Semver: ">=1.0.0",
					SecretRef: &stagecoachv1.LocalObjectReference{Name: "pull"}}}
			})
			if tc.wantReason == "" {
				g.Eventually(func(g Gomega) {
					s := getStage(g, t.Context(), ns, "dev")
					g.Expect(s.Status.Candidate).NotTo(BeNil())
					g.Expect(s.Status.Candidate.Digest).To(Equal(v1.String()), toJSON(s.Status.Candidate))
				}, timeout, interval).Should(Succeed())
				return
			}
			eventuallyBlockedBy(t, ns, "dev", stagecoachv1.GateSource, tc.wantParts...)
			s := getStage(g, t.Context(), ns, "dev")
			g.Expect(s.Status.Candidate.BlockedBy[0].Reason).To(Equal(tc.wantReason))
			g.Expect(s.Status.Candidate.Digest).To(BeEmpty())
		})
	}
}
