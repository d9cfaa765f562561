package records

import (
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

const (
	testStream = "8d1e4f2a9c0b/staging/payments"
	digestA    = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB    = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

var t0 = time.Date(2026, 12, 1, 11, 10, 19, 0, time.UTC)

func sampleRecord() *Record {
	return &Record{
		APIVersion:  APIVersion,
		Stream:      testStream,
		Seq:         2,
		Prev:        digestB,
		Stage:       StageRef{Namespace: "staging", Name: "payments"},
		Service:     "payments",
		Environment: "staging",
		Action:      ActionPromote,
		Verdict:     VerdictSucceeded,
		Version:     &Version{Digest: digestA, Tag: "v1.2.3"},
		Gates:       []Gate{{Name: "soak", Evidence: "verified upstream 31m ago"}, {Name: "approvals", Evidence: "2 of release-managers: ann, bob"}},
		Actor:       "system:serviceaccount:stagecoach:controller",
		BreakGlass:  &BreakGlass{Reason: "hotfix <CVE> & co"},
		Times:       Times{Recorded: NewTime(t0), Started: newTimePtr(t0.Add(-time.Minute).In(time.FixedZone("CET", 3600))), Finished: newTimePtr(t0.Add(500 * time.Millisecond))},
	}
}

func TestEncodeIsCanonical(t *testing.T) {
	g := NewWithT(t)
	b, err := Encode(sampleRecord())
	g.Expect(err).NotTo(HaveOccurred())
	want := `{"action":"Promote","actor":"system:serviceaccount:stagecoach:controller","apiVersion":"records.stagecoach.dev/v1",` +
		`"breakGlass":{"reason":"hotfix <CVE> & co"},"environment":"staging",` +
		`"gates":[{"evidence":"verified upstream 31m ago","name":"soak"},{"evidence":"2 of release-managers: ann, bob","name":"approvals"}],` +
		`"prev":"` + digestB + `","seq":2,"service":"payments","stage":{"name":"payments","namespace":"staging"},` +
		`"stream":"8d1e4f2a9c0b/staging/payments","times":{"finished":"2026-12-01T11:10:19Z","recorded":"2026-12-01T11:10:19Z",` +
		`"started":"2026-12-01T11:09:19Z"},"verdict":"Succeeded","version":{"digest":"` + digestA + `","tag":"v1.2.3"}}`
	g.Expect(string(b)).To(Equal(want))

	again, err := Encode(sampleRecord())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(Digest(again)).To(Equal(Digest(b)), "the same record must have the same bytes")

	back, err := Decode(b)
	g.Expect(err).NotTo(HaveOccurred())
	round, err := Encode(back)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(round).To(Equal(b))
}

func TestDecodeRefuses(t *testing.T) {
	good, err := Encode(sampleRecord())
	if err != nil {
		t.Fatal(err)
	}
	s := string(good)
	cases := []struct {
		name    string
		in      string
		wantErr string
	}{
		{name: "unknown apiVersion", in: strings.Replace(s, APIVersion, "records.stagecoach.dev/v2", 1), wantErr: `apiVersion "records.stagecoach.dev/v2" is not supported`},
		{name: "no apiVersion", in: `{"seq":1}`, wantErr: `apiVersion "" is not supported`},
		{name: "unknown field", in: strings.Replace(s, `{"action"`, `{"extra":1,"action"`, 1), wantErr: `unknown field "extra"`},
		{name: "not canonical: space", in: strings.Replace(s, `"seq":2`, `"seq": 2`, 1), wantErr: "not in canonical form"},
		{name: "not canonical: key order", in: strings.Replace(s, `{"digest":"`+digestA+`","tag":"v1.2.3"}`, `{"tag":"v1.2.3","digest":"`+digestA+`"}`, 1), wantErr: "not in canonical form"},
		{name: "not canonical: local time", in: strings.Replace(s, `"recorded":"2026-12-01T11:10:19Z"`, `"recorded":"2026-12-01T12:10:19+01:00"`, 1), wantErr: "not in canonical form"},
		{name: "not canonical: escaped letter", in: strings.Replace(s, `"service":"payments"`, `"service":"p\u0061yments"`, 1), wantErr: "not in canonical form"},
		{name: "trailing data", in: s + `{}`, wantErr: "data after"},
		{name: "too large", in: s + strings.Repeat(" ", maxRecordBytes), wantErr: "more than"},
		{name: "not JSON", in: `[1,2]`, wantErr: "not a JSON object"},
		{name: "bad action", in: strings.Replace(s, `"action":"Promote"`, `"action":"Delete"`, 1), wantErr: `unknown action "Delete"`},
		{name: "verdict not allowed", in: strings.Replace(s, `"verdict":"Succeeded"`, `"verdict":"Verified"`, 1), wantErr: `cannot have verdict "Verified"`},
		{name: "bad digest", in: strings.Replace(s, digestA, "sha256:XYZ", 1), wantErr: "is not sha256:<64 hex>"},
		{name: "prev not a digest", in: strings.Replace(s, `"prev":"`+digestB+`"`, `"prev":"record-1"`, 1), wantErr: `prev "record-1" must be the sha256 digest`},
		// A Git commit is a version's digest, never a record's.
		{name: "prev a commit", in: strings.Replace(s, `"prev":"`+digestB+`"`, `"prev":"sha1:`+strings.Repeat("c", 40)+`"`, 1), wantErr: `must be the sha256 digest`},
		{name: "bad stream", in: strings.Replace(s, testStream, "staging/payments", 1), wantErr: "is not <cluster>/<namespace>/<name>"},
		{name: "break glass without reason", in: strings.Replace(s, `"hotfix <CVE> & co"`, `" "`, 1), wantErr: "needs a reason"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.in))
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name    string
		edit    func(r *Record)
		wantErr string
	}{
		{name: "valid", edit: func(*Record) {}},
		{name: "seq 0", edit: func(r *Record) { r.Seq = 0 }, wantErr: "seqs start at 1"},
		{name: "seq 1 with prev", edit: func(r *Record) { r.Seq = 1 }, wantErr: "has a prev digest"},
		{name: "seq 1 without prev", edit: func(r *Record) { r.Seq, r.Prev = 1, "" }},
		// The first record the recorder wrote past junk someone pushed at seq 1.
		{name: "first record after seq 1", edit: func(r *Record) { r.Prev = "" }},
		{name: "promote without version", edit: func(r *Record) { r.Version = nil }, wantErr: "needs a version"},
		{name: "freeze without version", edit: func(r *Record) { r.Action, r.Verdict, r.Version = ActionFreeze, "", nil }},
		{name: "freeze with verdict", edit: func(r *Record) { r.Action = ActionFreeze }, wantErr: "cannot have verdict"},
		{name: "gate without name", edit: func(r *Record) { r.Gates[0].Name = "" }, wantErr: "gates[0] has no name"},
		{name: "no recorded time", edit: func(r *Record) { r.Times.Recorded = Time{} }, wantErr: "times.recorded is required"},
		{name: "no stage", edit: func(r *Record) { r.Stage.Name = "" }, wantErr: "required"},
		{name: "a Git commit as the version", edit: func(r *Record) { r.Version.Digest = "sha1:" + strings.Repeat("c", 40) }},
		{name: "a Git commit as prev", edit: func(r *Record) { r.Prev = "sha1:" + strings.Repeat("c", 40) }, wantErr: "must be the sha256 digest"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := sampleRecord()
			tc.edit(r)
			_, err := Encode(r)
			if tc.wantErr == "" {
				NewWithT(t).Expect(err).NotTo(HaveOccurred())
				return
			}
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

func TestStreamIDAndTags(t *testing.T) {
	long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63)
	cases := []struct {
		name                 string
		cluster, ns, stage   string
		wantID, wantTag      string
		wantErr              string
		wantTagLen, wantSeqN int64
	}{
		{name: "plain", cluster: "8d1e4f2a9c0b", ns: "staging", stage: "payments", wantID: "8d1e4f2a9c0b/staging/payments", wantTag: "8d1e4f2a9c0b.staging.payments-7"},
		{name: "dotted name", cluster: "c1", ns: "prod", stage: "pay.ments", wantID: "c1/prod/pay.ments", wantTag: "c1.prod.pay.ments-7"},
		{name: "long name is shortened with a hash", cluster: "c1", ns: "prod", stage: long, wantID: "c1/prod/" + long},
		{name: "uppercase refused", cluster: "C1", ns: "prod", stage: "x", wantErr: "lowercase DNS labels"},
		{name: "empty namespace refused", cluster: "c1", ns: "", stage: "x", wantErr: "lowercase DNS labels"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			id, err := StreamID(tc.cluster, tc.ns, tc.stage)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(id).To(Equal(tc.wantID))
			tag := Tag(id, 7)
			if tc.wantTag != "" {
				g.Expect(tag).To(Equal(tc.wantTag))
			}
			g.Expect(len(Tag(id, 1<<62))).To(BeNumerically("<=", 128))
			g.Expect(tag).To(MatchRegexp(`^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$`))
			n, ok := seqOfTag(tagPrefix(id), tag)
			g.Expect(ok).To(BeTrue())
			g.Expect(n).To(Equal(int64(7)))
		})
	}
	t.Run("cluster identity from kube-system's UID", func(t *testing.T) {
		g := NewWithT(t)
		id, err := ClusterIdentity("8D1E4F2A-9C0B-4a5e-9f1b-0123456789ab")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(id).To(Equal("8d1e4f2a9c0b"))
		_, err = ClusterIdentity("not-a-uid")
		g.Expect(err).To(MatchError(ContainSubstring("is not a UUID")))
	})
	t.Run("a neighbour stream's tags are not ours", func(t *testing.T) {
		g := NewWithT(t)
		// Stage "payments-1" next to "payments": its record 5 must not read as our record "1-5".
		_, ok := seqOfTag(tagPrefix("c1/prod/payments"), Tag("c1/prod/payments-1", 5))
		g.Expect(ok).To(BeFalse())
		for _, bad := range []string{"c1.prod.payments-0", "c1.prod.payments-01", "c1.prod.payments-", "c1.prod.payments-x"} {
			_, ok := seqOfTag(tagPrefix("c1/prod/payments"), bad)
			g.Expect(ok).To(BeFalse(), bad)
		}
	})
}

// FuzzDecode: whatever Decode accepts is canonical (re-encodes to the same bytes) and valid.
func FuzzDecode(f *testing.F) {
	good, _ := Encode(sampleRecord())
	f.Add(good)
	r := sampleRecord()
	r.Seq, r.Prev, r.BreakGlass, r.Gates = 1, "", nil, nil
	first, _ := Encode(r)
	f.Add(first)
	f.Add([]byte(`{"apiVersion":"records.stagecoach.dev/v1"}`))
	f.Add([]byte(`{"apiVersion":"records.stagecoach.dev/v1","seq":1e400}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Encode(rec)
		if err != nil {
			t.Fatalf("Decode accepted a record Encode refuses: %v", err)
		}
		if string(again) != string(b) {
			t.Fatalf("Decode accepted non-canonical bytes:\n in  %q\n out %q", b, again)
		}
	})
}

func TestLoadSigner(t *testing.T) {
	priv, err := os.ReadFile("testdata/cosign.key")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		key      []byte
		password string
		wantErr  string
	}{
		{name: "cosign.key with its password", key: priv, password: keyPassword},
		{name: "wrong password", key: priv, password: "nope", wantErr: "not a cosign private key that this password opens"},
		{name: "not PEM", key: []byte("hello"), password: keyPassword, wantErr: "invalid pem block"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s, err := LoadSigner(tc.key, []byte(tc.password))
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			// What it signs verifies with cosign.pub through a trust config, as followers check it.
			msg := []byte(`{"seq":1}`)
			sig, err := s.Sign(msg)
			g.Expect(err).NotTo(HaveOccurred())
			oldKey, _, _ := cosignKeys(t)
			tc := trustOf(t, map[string]testKey{"staging": oldKey}, testStream)
			name, ok := tc.Verify("127.0.0.1:5000/delivery/streams", testStream, msg, sig)
			g.Expect(ok).To(BeTrue())
			g.Expect(name).To(Equal("staging"))
		})
	}
}

// A promote's or rollback's verdict is the word of the phase it ended in, the one vocabulary of
// Promotions and waves; only a Verify record states something else (and records of earlier
// versions said Started, which is read and never written).
func TestVerdictsArePhases(t *testing.T) {
	for action, allowed := range verdicts {
		t.Run(string(action), func(t *testing.T) {
			g := NewWithT(t)
			for _, v := range allowed {
				switch {
				case v == "" || v == verdictStarted:
				case action == ActionVerify:
					g.Expect(verificationOutcomes).To(ContainElement(v))
				default:
					g.Expect(stagecoachv1.Phases).To(ContainElement(stagecoachv1.Phase(v)), "verdict %q of %s", v, action)
				}
			}
		})
	}
}
