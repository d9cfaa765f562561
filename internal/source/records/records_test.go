package records

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"io"
	"log"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
	"github.com/stagecoach-dev/stagecoach/internal/records"
	"github.com/stagecoach-dev/stagecoach/internal/records/trust"
)

const stream = "0123456789ab/staging/payments"

// fixture is a registry on 127.0.0.1 with an apply repository holding two versions and a stream
// where the first was verified and the second failed.
type fixture struct {
	host          string
	verified, bad string
	missing       string
	tc            *trust.Config
	// elsewhere binds the same key to the stream in another repository only.
	elsewhere *trust.Config
}

func newFixture(t *testing.T) fixture {
	g := NewWithT(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	f := fixture{host: strings.TrimPrefix(srv.URL, "http://"), missing: "sha256:" + strings.Repeat("9", 64)}
	push := func(tag string) string {
		img, err := random.Image(64, 1)
		g.Expect(err).NotTo(HaveOccurred())
		ref, err := name.NewTag(f.host + "/deploy/payments:" + tag)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(remote.Write(ref, img)).To(Succeed())
		d, _ := img.Digest()
		return d.String()
	}
	f.verified, f.bad = push("v1"), push("v2")
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	g.Expect(err).NotTo(HaveOccurred())
	sv, err := signature.LoadECDSASignerVerifier(priv, crypto.SHA256)
	g.Expect(err).NotTo(HaveOccurred())
	signer, err := records.NewSigner(sv)
	g.Expect(err).NotTo(HaveOccurred())
	pem, err := cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	g.Expect(err).NotTo(HaveOccurred())
	trustIn := func(repository string) *trust.Config {
		tc, err := trust.Parse([]byte("keys:\n- name: staging\n  repositories: [\"" + repository + "\"]\n  streams: [\"0123456789ab/staging/*\"]\n  publicKey: |\n    " +
			strings.ReplaceAll(strings.TrimSpace(string(pem)), "\n", "\n    ") + "\n"))
		g.Expect(err).NotTo(HaveOccurred())
		return tc
	}
	f.tc = trustIn(f.host + "/delivery/streams")
	f.elsewhere = trustIn(f.host + "/mirror/streams")
	store, err := records.NewStore(f.host+"/delivery/streams", ociclient.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	w := records.NewWriter(store, signer)
	prev := ""
	steps := []struct {
		action  records.Action
		verdict records.Verdict
		digest  string
	}{
		{records.ActionPromote, records.VerdictSucceeded, f.verified}, {records.ActionVerify, records.VerdictVerified, f.verified},
		{records.ActionPromote, records.VerdictSucceeded, f.bad}, {records.ActionVerify, records.VerdictFailed, f.bad},
		{records.ActionPromote, records.VerdictSucceeded, f.missing}, {records.ActionVerify, records.VerdictVerified, f.missing},
	}
	for i, s := range steps {
		r := &records.Record{APIVersion: records.APIVersion, Stream: stream, Seq: int64(i + 1), Prev: prev, Action: s.action, Verdict: s.verdict,
			Stage: records.StageRef{Namespace: "staging", Name: "payments"}, Service: "payments", Environment: "staging",
			Version: &records.Version{Digest: s.digest}, Times: records.Times{Recorded: records.NewTime(time.Now())}}
		written, err := w.Write(t.Context(), r)
		g.Expect(err).NotTo(HaveOccurred())
		prev = written.Digest
	}
	return f
}

func (f fixture) stage(applyRepository string) *stagecoachv1.Stage {
	return &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "payments"},
		Spec: stagecoachv1.StageSpec{Source: stagecoachv1.StageSource{UpstreamRecords: &stagecoachv1.UpstreamRecordsSource{
			Repository: f.host + "/delivery/streams", Stream: stream, ApplyRepository: applyRepository}}}}
}

func TestOffer(t *testing.T) {
	f := newFixture(t)
	now := time.Now()
	cases := []struct {
		name       string
		trust      *trust.Config
		repository string
		wantDigest string
		wantReason string
		wantMsg    string
	}{
		{name: "no trust config", repository: f.host + "/deploy/payments",
			wantReason: stagecoachv1.ReasonUpstreamUntrusted, wantMsg: "--upstream-trust"},
		{name: "the newest verified version is missing from the apply repository", trust: f.tc, repository: f.host + "/deploy/payments",
			wantReason: stagecoachv1.ReasonNotPublished, wantMsg: "does not exist in this Stage's apply repository"},
		{name: "apply repository unknown", trust: f.tc,
			wantReason: stagecoachv1.ReasonNotPublished, wantMsg: "set spec.source.upstreamRecords.applyRepository"},
		{name: "the key is trusted for the stream in another repository only", trust: f.elsewhere, repository: f.host + "/deploy/payments",
			wantReason: stagecoachv1.ReasonUpstreamUntrusted, wantMsg: "to key(s) staging, but not in repository " + f.host + "/delivery/streams"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := &Source{Trust: tc.trust}
			offer, err := s.Offer(t.Context(), f.stage(tc.repository), now)
			g.Expect(err).NotTo(HaveOccurred())
			if tc.wantReason == "" {
				g.Expect(offer.Block).To(BeNil())
				g.Expect(offer.Newest().Digest).To(Equal(tc.wantDigest))
				return
			}
			g.Expect(offer.Block).NotTo(BeNil())
			g.Expect(offer.Block.Reason).To(Equal(tc.wantReason))
			g.Expect(offer.Block.Message).To(ContainSubstring(tc.wantMsg))
		})
	}
}

func TestPublished(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name         string
		digest       string
		wantExcluded bool
		wantBlock    string
		wantEvidence string
	}{
		{name: "verified upstream", digest: f.verified, wantEvidence: "verified upstream in record 2 (upstreamSeq=6 upstreamHead=sha256:"},
		{name: "failed upstream", digest: f.bad, wantExcluded: true, wantBlock: "is never taken: it failed verification upstream: Failed (record 4) (upstreamSeq=6"},
		{name: "never seen upstream", digest: "sha256:" + strings.Repeat("1", 64), wantBlock: "is not verified in the upstream's records"},
		{name: "verified but not in the apply repository", digest: f.missing, wantBlock: "does not exist in this Stage's apply repository"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := &Source{Trust: f.tc}
			v, err := s.Published(t.Context(), f.stage(f.host+"/deploy/payments"), tc.digest, time.Now())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(v.Excluded).To(Equal(tc.wantExcluded))
			if tc.wantBlock == "" {
				g.Expect(v.Block).To(BeNil())
				g.Expect(v.Evidence).To(ContainSubstring(tc.wantEvidence))
				return
			}
			g.Expect(v.Block).NotTo(BeNil())
			g.Expect(v.Block.Reason).To(Equal(stagecoachv1.ReasonNotPublished))
			g.Expect(v.Block.Message).To(ContainSubstring(tc.wantBlock))
			st := s.State(f.stage(""))
			g.Expect(st.Seen.Seq).To(Equal(int64(6)))
		})
	}
}

// otherKey is a trust config binding a key that signed nothing to the fixture's stream.
func otherKey(t *testing.T) *trust.Config {
	g := NewWithT(t)
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	g.Expect(err).NotTo(HaveOccurred())
	pem, err := cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	g.Expect(err).NotTo(HaveOccurred())
	tc, err := trust.Parse([]byte("keys:\n- name: other\n  repositories: [\"127.0.0.1:*/delivery/streams\"]\n  streams: [\"0123456789ab/staging/*\"]\n  publicKey: |\n    " +
		strings.ReplaceAll(strings.TrimSpace(string(pem)), "\n", "\n    ") + "\n"))
	g.Expect(err).NotTo(HaveOccurred())
	return tc
}

// SetTrust replaces the trust config of a running Source: what was read under the old config is
// verified again under the new one, and a config that cannot be used says why.
func TestSetTrust(t *testing.T) {
	f := newFixture(t)
	other := otherKey(t)
	s := &Source{Trust: f.tc}
	stage := f.stage(f.host + "/deploy/payments")
	steps := []struct {
		name         string
		trust        *trust.Config
		why          string
		wantEvidence string
		wantBlock    string
		wantReason   string
		wantSkipped  int
	}{
		{name: "the recorder's key", trust: f.tc, wantEvidence: "verified upstream in record 2 (upstreamSeq=6"},
		{name: "a config that cannot be used", why: "ConfigMap stagecoach-system/trust has no key upstream-trust.yaml",
			wantBlock: "ConfigMap stagecoach-system/trust has no key upstream-trust.yaml", wantReason: stagecoachv1.ReasonUpstreamUntrusted},
		{name: "only another key: every record is read again and skipped", trust: other,
			wantBlock: "is not verified in the upstream's records", wantSkipped: 6},
		{name: "the recorder's key again", trust: f.tc, wantEvidence: "verified upstream in record 2 (upstreamSeq=6"},
	}
	for i, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			g := NewWithT(t)
			if i > 0 {
				s.SetTrust(step.trust, step.why)
			}
			v, err := s.Published(t.Context(), stage, f.verified, time.Now())
			g.Expect(err).NotTo(HaveOccurred())
			st := s.State(stage)
			g.Expect(st.Reason).To(Equal(step.wantReason), st.Message)
			if step.wantBlock == "" {
				g.Expect(v.Block).To(BeNil())
				g.Expect(v.Evidence).To(ContainSubstring(step.wantEvidence))
				return
			}
			g.Expect(v.Block).NotTo(BeNil())
			g.Expect(v.Block.Message).To(ContainSubstring(step.wantBlock))
			g.Expect(st.Skipped).To(Equal(step.wantSkipped))
			if step.wantReason != "" {
				g.Expect(st.Message).To(Equal(step.why))
			}
		})
	}
}

// TestMaxAge: a stream whose newest trusted record is older than spec.source.upstreamRecords.maxAge
// is refused (a mirror that stopped showing the upstream's newest records could hide a failure),
// saying how old it is and what the bound is; within the bound, or without one, nothing changes.
func TestMaxAge(t *testing.T) {
	f := newFixture(t)
	hour := &metav1.Duration{Duration: time.Hour}
	cases := []struct {
		name   string
		stream string
		maxAge *metav1.Duration
		later  time.Duration // how long after the records were written the follower reads
		// wantMsg is the refusal; "" means the stream is fresh.
		wantMsg *regexp.Regexp
	}{
		{name: "no bound", later: 24 * time.Hour},
		{name: "within the bound", maxAge: hour, later: 30 * time.Minute},
		{name: "older than the bound", maxAge: hour, later: 2 * time.Hour,
			wantMsg: regexp.MustCompile(`the newest trusted record of stream "0123456789ab/staging/payments" in \S+/delivery/streams, record 6, ` +
				`was recorded 2h0m\d+s ago \(at \S+Z\), longer ago than spec.source.upstreamRecords.maxAge \(1h0m0s\)`)},
		{name: "no trusted record at all", stream: "0123456789ab/staging/withheld", maxAge: hour,
			wantMsg: regexp.MustCompile(`stream "0123456789ab/staging/withheld" in \S+ holds no trusted record, so nothing shows it is newer than spec.source.upstreamRecords.maxAge \(1h0m0s\)`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			stage := f.stage(f.host + "/deploy/payments")
			stage.Spec.Source.UpstreamRecords.MaxAge = tc.maxAge
			if tc.stream != "" {
				stage.Spec.Source.UpstreamRecords.Stream = tc.stream
			}
			now := time.Now().Add(tc.later)
			s := &Source{Trust: f.tc}
			offer, err := s.Offer(t.Context(), stage, now)
			g.Expect(err).NotTo(HaveOccurred())
			st := s.State(stage)
			v, err := s.Published(t.Context(), stage, f.verified, now)
			g.Expect(err).NotTo(HaveOccurred())
			if tc.wantMsg == nil {
				// The fixture's newest verified version is missing from the apply repository.
				g.Expect(offer.Block).NotTo(BeNil())
				g.Expect(offer.Block.Reason).To(Equal(stagecoachv1.ReasonNotPublished))
				g.Expect(st.Reason).To(BeEmpty(), st.Message)
				g.Expect(v.Block).To(BeNil())
				g.Expect(v.Evidence).To(ContainSubstring("verified upstream in record 2"))
				return
			}
			g.Expect(offer.Block).NotTo(BeNil())
			g.Expect(offer.Block.Gate).To(Equal(stagecoachv1.GateSource))
			g.Expect(offer.Block.Reason).To(Equal(stagecoachv1.ReasonUpstreamStale))
			g.Expect(offer.Block.Message).To(MatchRegexp(tc.wantMsg.String()))
			g.Expect(offer.Candidates).To(BeEmpty())
			g.Expect(st.Reason).To(Equal(stagecoachv1.ReasonUpstreamStale))
			g.Expect(st.Message).To(MatchRegexp(tc.wantMsg.String()))
			if tc.stream == "" {
				g.Expect(st.Seen).NotTo(BeNil(), "the read succeeded: upstreamSeen still moves")
				g.Expect(st.Seen.Seq).To(Equal(int64(6)))
			}
			g.Expect(v.Excluded).To(BeFalse())
			g.Expect(v.Block).NotTo(BeNil())
			g.Expect(v.Block.Reason).To(Equal(stagecoachv1.ReasonNotPublished))
			g.Expect(v.Block.Message).To(ContainSubstring(f.verified + " is not promoted while the upstream's records are stale: "))
			g.Expect(v.Block.Message).To(MatchRegexp(tc.wantMsg.String()))
		})
	}
	// Between two reads the view comes from memory; its age still grows (issue 37: staleness not
	// recomputed on that path let a stream that went quiet pass maxAge until the next read).
	t.Run("a view read from memory turns stale when maxAge passes", func(t *testing.T) {
		g := NewWithT(t)
		stage := f.stage(f.host + "/deploy/payments")
		stage.Spec.Source.UpstreamRecords.MaxAge = hour
		s := &Source{Trust: f.tc, Interval: time.Hour}
		start := time.Now()
		_, err := s.Offer(t.Context(), stage, start.Add(50*time.Minute))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.State(stage).Reason).To(BeEmpty(), "read within maxAge")
		offer, err := s.Offer(t.Context(), stage, start.Add(70*time.Minute))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(offer.Block).NotTo(BeNil())
		g.Expect(offer.Block.Reason).To(Equal(stagecoachv1.ReasonUpstreamStale))
		g.Expect(s.State(stage).Reason).To(Equal(stagecoachv1.ReasonUpstreamStale))
	})
	t.Run("a version the records exclude is still refused for good", func(t *testing.T) {
		g := NewWithT(t)
		stage := f.stage(f.host + "/deploy/payments")
		stage.Spec.Source.UpstreamRecords.MaxAge = hour
		v, err := (&Source{Trust: f.tc}).Published(t.Context(), stage, f.bad, time.Now().Add(2*time.Hour))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(v.Excluded).To(BeTrue())
	})
}
