package records

import (
	"testing"

	. "github.com/onsi/gomega"
)

// TestWriterExactlyOnce: a crash between push and status write is healed by writing the same
// record again; a different record at that seq is refused and nothing is overwritten.
func TestWriterExactlyOnce(t *testing.T) {
	oldKey, _, evil := cosignKeys(t)
	cases := []struct {
		name string
		// again is called after record 2 was pushed and "the process died" before its status
		// write: it returns the writer of the restarted process and the record it writes.
		again        func(t *testing.T, reg *testRegistry, up *upstream, first *Record) (*Writer, *Record)
		wantErr      error
		wantExisted  bool
		wantSameMani bool
	}{
		{name: "same record after a restart is done, nothing pushed", wantExisted: true, wantSameMani: true,
			again: func(t *testing.T, reg *testRegistry, up *upstream, first *Record) (*Writer, *Record) {
				// A new Writer (new process), the record rebuilt from the Promotion's spec.
				c := *first
				return NewWriter(reg.store(t), oldKey.signer), &c
			}},
		{name: "another record at that seq is a conflict", wantErr: ErrConflict,
			again: func(t *testing.T, reg *testRegistry, up *upstream, first *Record) (*Writer, *Record) {
				c := *first
				c.Verdict = VerdictFailed
				return NewWriter(reg.store(t), oldKey.signer), &c
			}},
		{name: "same bytes under someone else's signature are re-signed, not rewritten", wantExisted: true,
			again: func(t *testing.T, reg *testRegistry, up *upstream, first *Record) (*Writer, *Record) {
				reg.deleteTag(t, Tag(testStream, 2))
				c := *first
				if _, err := NewWriter(reg.store(t), evil.signer).Write(t.Context(), &c); err != nil {
					t.Fatal(err)
				}
				return NewWriter(reg.store(t), oldKey.signer), &c
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			reg := newRegistry(t)
			up := newUpstream(t, reg.store(t), oldKey, testStream)
			up.add(ActionPromote, verdictStarted, digestOf('a'))
			second := up.record(ActionPromote, VerdictSucceeded, digestOf('a'))
			first, err := up.w.Write(t.Context(), second)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(first.Existed).To(BeFalse())
			g.Expect(first.Ref).To(Equal(reg.repository() + ":8d1e4f2a9c0b.staging.payments-2"))

			w, rec := tc.again(t, reg, up, second)
			got, err := w.Write(t.Context(), rec)
			if tc.wantErr != nil {
				g.Expect(err).To(MatchError(tc.wantErr))
				g.Expect(err).To(MatchError(ContainSubstring("already holds another record")))
				g.Expect(w.mustDigestAt(t, 2)).To(Equal(first.Digest), "nothing overwritten")
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Existed).To(Equal(tc.wantExisted))
			g.Expect(got.Digest).To(Equal(first.Digest))
			g.Expect(got.Seq).To(Equal(int64(2)))
			if tc.wantSameMani {
				g.Expect(got.Manifest).To(Equal(first.Manifest), "no second push")
			}
			// Whatever happened, a follower sees records 1-2 in order, signed by the recorder.
			f := Follower{Store: reg.store(t), Trust: trustOf(t, map[string]testKey{"staging": oldKey}, testStream)}
			v, err := f.Read(t.Context(), testStream, nil, &Seen{Seq: 2, Digest: first.Digest})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(v.Head).To(Equal(Seen{Seq: 2, Digest: first.Digest}))
			g.Expect(v.Skipped).To(BeZero())
			// And the recorder of a re-created Stage continues from there.
			head, rec2, err := w.Head(t.Context(), testStream)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(head.Seq).To(Equal(int64(2)))
			g.Expect(rec2.Verdict).To(Equal(VerdictSucceeded))
		})
	}
}

func TestWriterRefusesInvalidRecords(t *testing.T) {
	g := NewWithT(t)
	oldKey, _, _ := cosignKeys(t)
	reg := newRegistry(t)
	up := newUpstream(t, reg.store(t), oldKey, testStream)
	r := up.record(ActionVerify, verdictStarted, digestOf('a'))
	_, err := up.w.Write(t.Context(), r)
	g.Expect(err).To(MatchError(ContainSubstring(`action Verify cannot have verdict "Started"`)))
	head, _, err := up.w.Head(t.Context(), testStream)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(head).To(BeNil(), "nothing was pushed")
}

// TestAuditStream: every break in a stream is reported, each once.
func TestAuditStream(t *testing.T) {
	oldKey, newKey, evil := cosignKeys(t)
	cases := []struct {
		name       string
		build      func(t *testing.T, reg *testRegistry, up *upstream)
		wantBreaks []Break // Kind and Seq only
		wantOK     int
	}{
		{name: "clean stream", wantOK: 4,
			build: func(t *testing.T, reg *testRegistry, up *upstream) {
				up.release(digestOf('a'))
				up.release(digestOf('b'))
			}},
		{name: "forged record in the middle", wantOK: 3, wantBreaks: []Break{{Seq: 3, Kind: breakSignature}},
			build: func(t *testing.T, reg *testRegistry, up *upstream) {
				up.release(digestOf('a'))
				forger := newUpstream(t, reg.store(t), evil, testStream)
				forger.seq, forger.head = up.seq, up.head
				forger.add(ActionPromote, VerdictSucceeded, digestOf('e'))
				up.seq, up.head = forger.seq, forger.head
				up.add(ActionVerify, VerdictVerified, digestOf('e'))
			}},
		{name: "missing record", wantOK: 3, wantBreaks: []Break{{Seq: 2, Kind: breakMissing}},
			build: func(t *testing.T, reg *testRegistry, up *upstream) {
				up.release(digestOf('a'))
				up.release(digestOf('b'))
				reg.deleteTag(t, Tag(testStream, 2))
			}},
		{name: "fork: record chained to another record", wantOK: 2, wantBreaks: []Break{{Seq: 3, Kind: breakChain}},
			build: func(t *testing.T, reg *testRegistry, up *upstream) {
				up.release(digestOf('a'))
				up.head = digestOf('f')
				up.add(ActionPromote, VerdictSucceeded, digestOf('b'))
			}},
		{name: "key not listed", wantOK: 2, wantBreaks: []Break{{Seq: 3, Kind: breakSignature}, {Seq: 4, Kind: breakSignature}},
			build: func(t *testing.T, reg *testRegistry, up *upstream) {
				up.release(digestOf('a'))
				rotated := newUpstream(t, reg.store(t), newKey, testStream)
				rotated.seq, rotated.head = up.seq, up.head
				rotated.release(digestOf('b'))
			}},
		{name: "junk the recorder wrote past", wantOK: 4, wantBreaks: []Break{{Seq: 3, Kind: breakMalformed}},
			build: func(t *testing.T, reg *testRegistry, up *upstream) {
				up.release(digestOf('a'))
				reg.pushJunk(t, Tag(testStream, 3))
				up.release(digestOf('b')) // at 4 and 5, chained to record 2
			}},
		{name: "junk far ahead: one break for the seqs before it", wantOK: 2,
			wantBreaks: []Break{{Seq: 3, Kind: breakMissing}, {Seq: 1 << 40, Kind: breakMalformed}},
			build: func(t *testing.T, reg *testRegistry, up *upstream) {
				up.release(digestOf('a'))
				reg.pushJunk(t, Tag(testStream, 1<<40))
			}},
		{name: "empty stream", wantBreaks: []Break{{Kind: breakEmpty}},
			build: func(*testing.T, *testRegistry, *upstream) {}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			reg := newRegistry(t)
			up := newUpstream(t, reg.store(t), oldKey, testStream)
			tc.build(t, reg, up)
			a, err := AuditStream(t.Context(), reg.store(t), trustOf(t, map[string]testKey{"staging": oldKey}, testStream), testStream)
			g.Expect(err).NotTo(HaveOccurred())
			var got []Break
			for _, b := range a.Breaks {
				g.Expect(b.Message).NotTo(BeEmpty())
				got = append(got, Break{Seq: b.Seq, Kind: b.Kind})
			}
			g.Expect(got).To(Equal(tc.wantBreaks))
			ok := 0
			for _, e := range a.Entries {
				if e.OK {
					ok++
					g.Expect(e.Key).To(Equal("staging"))
					g.Expect(e.Record).NotTo(BeNil())
				}
			}
			g.Expect(ok).To(Equal(tc.wantOK))
		})
	}
}

// TestWriterMovesPastUntrusted: whatever sits at the next seq without this recorder's signature
// on a record of that seq (junk, an unsigned record, another key's record, a replayed copy of an
// older record) cannot block the stream: the record goes to the next free seq, still chained to
// the last record the recorder signed, and a follower follows it past what it skips.
func TestWriterMovesPastUntrusted(t *testing.T) {
	oldKey, _, evil := cosignKeys(t)
	cases := []struct {
		name string
		// plant puts things in the stream after records 1-2 (a released version).
		plant       func(t *testing.T, reg *testRegistry, up *upstream)
		wantSeq     int64
		wantSkipped int // records the follower skips
	}{
		{name: "junk that is not a record", wantSeq: 4, wantSkipped: 1,
			plant: func(t *testing.T, reg *testRegistry, up *upstream) { reg.pushJunk(t, Tag(testStream, 3)) }},
		{name: "a record without a signature", wantSeq: 4, wantSkipped: 1,
			plant: func(t *testing.T, reg *testRegistry, up *upstream) {
				reg.pushUnsigned(t, up.record(ActionVerify, VerdictFailed, digestOf('a')))
			}},
		{name: "a record signed by another key", wantSeq: 4, wantSkipped: 1,
			plant: func(t *testing.T, reg *testRegistry, up *upstream) {
				forger := newUpstream(t, reg.store(t), evil, testStream)
				forger.seq, forger.head = up.seq, up.head
				forger.add(actionRollback, verdictRolledBack, digestOf('a'))
			}},
		{name: "the recorder's own record 1 replayed at seq 3", wantSeq: 4, wantSkipped: 1,
			plant: func(t *testing.T, reg *testRegistry, up *upstream) {
				reg.copyTag(t, Tag(testStream, 1), Tag(testStream, 3))
			}},
		{name: "several in a row", wantSeq: 6, wantSkipped: 3,
			plant: func(t *testing.T, reg *testRegistry, up *upstream) {
				reg.pushJunk(t, Tag(testStream, 3))
				forger := newUpstream(t, reg.store(t), evil, testStream)
				forger.seq, forger.head = 3, up.head
				forger.add(ActionPromote, VerdictSucceeded, digestOf('e'))
				forger.add(ActionVerify, VerdictVerified, digestOf('e'))
			}},
		{name: "junk far ahead moves nothing and is no gap", wantSeq: 3, wantSkipped: 1,
			plant: func(t *testing.T, reg *testRegistry, up *upstream) {
				reg.pushJunk(t, Tag(testStream, 1_000_000_000_000))
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			reg := newRegistry(t)
			up := newUpstream(t, reg.store(t), oldKey, testStream)
			up.release(digestOf('a'))
			signedHead := up.head
			tc.plant(t, reg, up)

			next := up.record(ActionPromote, VerdictSucceeded, digestOf('b'))
			got, err := up.w.Write(t.Context(), next)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Seq).To(Equal(tc.wantSeq))
			g.Expect(got.Existed).To(BeFalse())
			g.Expect(got.Ref).To(HaveSuffix(Tag(testStream, tc.wantSeq)))
			a, err := up.w.store.fetch(t.Context(), Tag(testStream, tc.wantSeq))
			g.Expect(err).NotTo(HaveOccurred())
			written, err := Decode(a.Bytes)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(written.Seq).To(Equal(tc.wantSeq))
			g.Expect(written.Prev).To(Equal(signedHead), "chained to the last record the recorder signed")
			g.Expect(Digest(a.Bytes)).To(Equal(got.Digest))

			// A crash before the Stage heard of it: the same record written again is found, not pushed twice.
			again, err := NewWriter(reg.store(t), oldKey.signer).Write(t.Context(), next)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(again.Existed).To(BeTrue())
			g.Expect(again.Seq).To(Equal(tc.wantSeq))
			g.Expect(again.Digest).To(Equal(got.Digest))

			up.seq, up.head = got.Seq, got.Digest
			up.add(ActionVerify, VerdictVerified, digestOf('b'))
			f := Follower{Store: reg.store(t), Trust: trustOf(t, map[string]testKey{"staging": oldKey}, testStream)}
			v, err := f.Read(t.Context(), testStream, nil, nil)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(v.Head).To(Equal(Seen{Seq: up.seq, Digest: up.head}))
			g.Expect(offered(v)).To(Equal([]string{digestOf('b'), digestOf('a')}))
			g.Expect(v.Skipped).To(Equal(tc.wantSkipped))
			// The recorder of a re-created Stage continues from its own newest record.
			head, _, err := up.w.Head(t.Context(), testStream)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(head.Seq).To(Equal(up.seq))
		})
	}
}

// TestWriterFirstRecordPastJunk: junk pushed at seq 1 before the Stage's first step (stream ids
// are predictable) does not block the stream either: its first record has no prev.
func TestWriterFirstRecordPastJunk(t *testing.T) {
	g := NewWithT(t)
	oldKey, _, _ := cosignKeys(t)
	reg := newRegistry(t)
	reg.pushJunk(t, Tag(testStream, 1))
	up := newUpstream(t, reg.store(t), oldKey, testStream)
	up.release(digestOf('a'))
	g.Expect(up.seq).To(Equal(int64(3)))
	f := Follower{Store: reg.store(t), Trust: trustOf(t, map[string]testKey{"staging": oldKey}, testStream)}
	v, err := f.Read(t.Context(), testStream, nil, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Head.Seq).To(Equal(int64(3)))
	g.Expect(offered(v)).To(Equal([]string{digestOf('a')}))
	g.Expect(v.Skipped).To(Equal(1))
}
