package records

import (
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"

	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
	"github.com/stagecoach-dev/stagecoach/internal/records/trust"
)

// TestFollowOffersWhatUpstreamVerified: what the follower rebuilds from the records.
func TestFollowOffersWhatUpstreamVerified(t *testing.T) {
	oldKey, _, _ := cosignKeys(t)
	a, b, c := digestOf('a'), digestOf('b'), digestOf('c')
	type step struct {
		action  Action
		verdict Verdict
		digest  string
	}
	cases := []struct {
		name         string
		steps        []step
		wantOffered  []string // newest first
		wantExcluded []string
	}{
		{name: "verified version offered",
			steps:       []step{{ActionPromote, verdictStarted, a}, {ActionPromote, VerdictSucceeded, a}, {ActionVerify, VerdictVerified, a}},
			wantOffered: []string{a}},
		{name: "promote not yet verified not offered",
			steps: []step{{ActionPromote, VerdictSucceeded, a}}},
		{name: "verify without a succeeded promote not offered",
			steps: []step{{ActionPromote, verdictStarted, a}, {ActionVerify, VerdictVerified, a}}},
		{name: "failed verification never offered, even verified later",
			steps: []step{{ActionPromote, VerdictSucceeded, a}, {ActionVerify, VerdictFailed, a},
				{ActionPromote, VerdictSucceeded, a}, {ActionVerify, VerdictVerified, a}},
			wantExcluded: []string{a}},
		{name: "deadline exceeded never offered",
			steps:        []step{{ActionPromote, VerdictSucceeded, b}, {ActionVerify, verdictDeadlineExceeded, b}},
			wantExcluded: []string{b}},
		{name: "failed promote never offered",
			steps:        []step{{ActionPromote, VerdictFailed, b}},
			wantExcluded: []string{b}},
		{name: "rolled back after release no longer offered",
			steps: []step{{ActionPromote, VerdictSucceeded, a}, {ActionVerify, VerdictVerified, a},
				{ActionPromote, VerdictSucceeded, b}, {ActionVerify, VerdictVerified, b}, {actionRollback, verdictRolledBack, b}},
			wantOffered: []string{a}, wantExcluded: []string{b}},
		{name: "freeze record naming a version that failed after release",
			steps: []step{{ActionPromote, VerdictSucceeded, a}, {ActionVerify, VerdictVerified, a},
				{ActionPromote, VerdictSucceeded, c}, {ActionVerify, VerdictVerified, c}, {ActionFreeze, "", c}, {actionUnfreeze, "", ""}},
			wantOffered: []string{a}, wantExcluded: []string{c}},
		{name: "freeze without a version excludes nothing",
			steps:       []step{{ActionPromote, VerdictSucceeded, a}, {ActionVerify, VerdictVerified, a}, {ActionFreeze, "", ""}},
			wantOffered: []string{a}},
		{name: "newest first",
			steps: []step{{ActionPromote, VerdictSucceeded, a}, {ActionVerify, VerdictVerified, a},
				{ActionPromote, VerdictSucceeded, c}, {ActionVerify, VerdictVerified, c}},
			wantOffered: []string{c, a}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			reg := newRegistry(t)
			up := newUpstream(t, reg.store(t), oldKey, testStream)
			for _, s := range tc.steps {
				up.add(s.action, s.verdict, s.digest)
			}
			f := Follower{Store: reg.store(t), Trust: trustOf(t, map[string]testKey{"staging": oldKey}, "8d1e4f2a9c0b/staging/*")}
			v, err := f.Read(t.Context(), testStream, nil, nil)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(offered(v)).To(Equal(tc.wantOffered))
			g.Expect(v.Head).To(Equal(Seen{Seq: up.seq, Digest: up.head}))
			g.Expect(v.Skipped).To(BeZero())
			for _, d := range tc.wantExcluded {
				_, ok := v.Excluded(d)
				g.Expect(ok).To(BeTrue(), "excluded "+d)
				_, ok = v.Offered(d)
				g.Expect(ok).To(BeFalse(), "offered "+d)
			}
			if len(tc.wantOffered) > 0 {
				o, _ := v.Offered(tc.wantOffered[0])
				g.Expect(o.Seq).To(BeNumerically(">", 0))
				g.Expect(o.Digest).To(HavePrefix("sha256:"), "an offer cites the record it relies on")
			}
		})
	}
}

// TestFollowIsIncremental: a later read fetches only new records, and a failure read later
// withdraws an offer for good.
func TestFollowIsIncremental(t *testing.T) {
	g := NewWithT(t)
	oldKey, _, _ := cosignKeys(t)
	reg := newRegistry(t)
	up := newUpstream(t, reg.store(t), oldKey, testStream)
	up.release(digestOf('a'))
	f := Follower{Store: reg.store(t), Trust: trustOf(t, map[string]testKey{"staging": oldKey}, testStream)}

	reg.resetGets() // the writer's own existence checks do not count
	v1, err := f.Read(t.Context(), testStream, nil, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(offered(v1)).To(Equal([]string{digestOf('a')}))
	seen := v1.Head

	up.release(digestOf('b'))
	up.add(actionRollback, verdictRolledBack, digestOf('a'))
	reg.resetGets() // again: only the follower's reads count
	v2, err := f.Read(t.Context(), testStream, v1, &seen)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(offered(v2)).To(Equal([]string{digestOf('b')}))
	g.Expect(offered(v1)).To(Equal([]string{digestOf('a')}), "a read must not change the view it started from")
	g.Expect(v2.Head.Seq).To(Equal(int64(5)))

	for seq := int64(1); seq <= 2; seq++ {
		g.Expect(reg.getsOf(Tag(testStream, seq))).To(BeZero(), "record %d, read before, fetched again", seq)
	}
	for seq := int64(3); seq <= 5; seq++ {
		g.Expect(reg.getsOf(Tag(testStream, seq))).To(Equal(1), "record %d fetched once", seq)
	}
	// Nothing new: no record is fetched again.
	seen = v2.Head
	v3, err := f.Read(t.Context(), testStream, v2, &seen)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v3.Head).To(Equal(v2.Head))
	g.Expect(reg.getsOf(Tag(testStream, 5))).To(Equal(1))
}

// TestFollowSkipsUntrusted: records no trusted key signed are skipped and counted, wherever they
// are; the chain of trusted records still decides, so a trusted record removed or replaced is a gap.
func TestFollowSkipsUntrusted(t *testing.T) {
	oldKey, _, evil := cosignKeys(t)
	tc := func(t *testing.T) *Follower {
		return &Follower{Trust: trustOf(t, map[string]testKey{"staging": oldKey}, testStream)}
	}
	t.Run("forged records at the tail are skipped and counted", func(t *testing.T) {
		g := NewWithT(t)
		reg := newRegistry(t)
		up := newUpstream(t, reg.store(t), oldKey, testStream)
		up.release(digestOf('a'))
		// Someone with push access appends a "verified" release signed by their own key.
		forger := newUpstream(t, reg.store(t), evil, testStream)
		forger.seq, forger.head = up.seq, up.head
		forger.release(digestOf('e'))
		f := tc(t)
		f.Store = reg.store(t)
		v, err := f.Read(t.Context(), testStream, nil, nil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(offered(v)).To(Equal([]string{digestOf('a')}))
		g.Expect(v.Skipped).To(Equal(2))
		g.Expect(v.Head.Seq).To(Equal(int64(2)))
		// The real recorder neither writes over them nor stops at them: its next record goes past
		// them, chained to its own record 2, and the follower follows it.
		w, err := up.w.Write(t.Context(), up.record(ActionPromote, VerdictSucceeded, digestOf('b')))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(w.Seq).To(Equal(int64(5)))
		seen := v.Head
		v, err = f.Read(t.Context(), testStream, v, &seen)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(v.Head).To(Equal(Seen{Seq: 5, Digest: w.Digest}))
		g.Expect(v.Skipped).To(Equal(2), "the forged records are still counted")
	})
	t.Run("untrusted records before a trusted record that chains past them are skipped", func(t *testing.T) {
		g := NewWithT(t)
		reg := newRegistry(t)
		up := newUpstream(t, reg.store(t), oldKey, testStream)
		up.release(digestOf('a'))
		forger := newUpstream(t, reg.store(t), evil, testStream)
		forger.seq, forger.head = up.seq, up.head
		forger.add(actionRollback, verdictRolledBack, digestOf('a')) // 3
		reg.pushJunk(t, Tag(testStream, 4))
		up.seq = 4                // the recorder moved past both; prev stays its own record 2
		up.release(digestOf('b')) // 5, 6
		f := tc(t)
		f.Store = reg.store(t)
		v, err := f.Read(t.Context(), testStream, nil, nil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(v.Head).To(Equal(Seen{Seq: 6, Digest: up.head}))
		g.Expect(offered(v)).To(Equal([]string{digestOf('b'), digestOf('a')}), "the forged rollback excludes nothing")
		g.Expect(v.Skipped).To(Equal(2))
	})
	t.Run("junk far ahead is no gap", func(t *testing.T) {
		g := NewWithT(t)
		reg := newRegistry(t)
		up := newUpstream(t, reg.store(t), oldKey, testStream)
		up.release(digestOf('a'))
		reg.pushJunk(t, Tag(testStream, 1<<62))
		f := tc(t)
		f.Store = reg.store(t)
		v, err := f.Read(t.Context(), testStream, nil, nil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(v.Head.Seq).To(Equal(int64(2)))
		g.Expect(v.Skipped).To(Equal(1))
	})
	t.Run("a trusted record replaced by junk is refused", func(t *testing.T) {
		g := NewWithT(t)
		reg := newRegistry(t)
		up := newUpstream(t, reg.store(t), oldKey, testStream)
		up.release(digestOf('a'))
		up.add(actionRollback, verdictRolledBack, digestOf('a')) // 3: the failure someone wants hidden
		up.release(digestOf('b'))
		reg.deleteTag(t, Tag(testStream, 3))
		reg.pushJunk(t, Tag(testStream, 3))
		f := tc(t)
		f.Store = reg.store(t)
		_, err := f.Read(t.Context(), testStream, nil, nil)
		g.Expect(err).To(MatchError(errGap))
		g.Expect(err).To(MatchError(ContainSubstring("record 3 of stream")))
		g.Expect(err).To(MatchError(ContainSubstring("record 4 after it names")))
	})
	t.Run("junk removed below what was read is no removal", func(t *testing.T) {
		g := NewWithT(t)
		reg := newRegistry(t)
		up := newUpstream(t, reg.store(t), oldKey, testStream)
		up.release(digestOf('a'))
		reg.pushJunk(t, Tag(testStream, 3))
		up.seq = 3
		up.release(digestOf('b')) // 4, 5
		f := tc(t)
		f.Store = reg.store(t)
		v, err := f.Read(t.Context(), testStream, nil, nil)
		g.Expect(err).NotTo(HaveOccurred())
		seen := v.Head
		g.Expect(seen.Seq).To(Equal(int64(5)))
		// An operator cleans the junk up.
		reg.deleteTag(t, Tag(testStream, 3))
		_, err = f.Read(t.Context(), testStream, v, &seen)
		g.Expect(err).NotTo(HaveOccurred(), "view kept")
		_, err = f.Read(t.Context(), testStream, nil, &seen)
		g.Expect(err).NotTo(HaveOccurred(), "follower restarted")
		// A trusted record removed below it still is.
		reg.deleteTag(t, Tag(testStream, 4))
		_, err = f.Read(t.Context(), testStream, v, &seen)
		g.Expect(err).To(MatchError(errRemoved))
		_, err = f.Read(t.Context(), testStream, nil, &seen)
		g.Expect(err).To(MatchError(errRemoved))
	})
	t.Run("a forged record before a trusted one is a gap", func(t *testing.T) {
		g := NewWithT(t)
		reg := newRegistry(t)
		up := newUpstream(t, reg.store(t), oldKey, testStream)
		up.release(digestOf('a'))
		forger := newUpstream(t, reg.store(t), evil, testStream)
		forger.seq, forger.head = up.seq, up.head
		forger.add(ActionPromote, VerdictSucceeded, digestOf('e'))
		up.seq, up.head = forger.seq, forger.head
		up.add(ActionVerify, VerdictVerified, digestOf('e'))
		f := tc(t)
		f.Store = reg.store(t)
		_, err := f.Read(t.Context(), testStream, nil, nil)
		g.Expect(err).To(MatchError(errGap))
		g.Expect(err).To(MatchError(ContainSubstring("record 3 of stream")))
	})
	t.Run("no trust config", func(t *testing.T) {
		g := NewWithT(t)
		reg := newRegistry(t)
		up := newUpstream(t, reg.store(t), oldKey, testStream)
		up.release(digestOf('a'))
		f := Follower{Store: reg.store(t)}
		_, err := f.Read(t.Context(), testStream, nil, nil)
		g.Expect(err).To(MatchError(ErrUntrusted))
	})
	t.Run("a key bound to other streams only", func(t *testing.T) {
		g := NewWithT(t)
		reg := newRegistry(t)
		up := newUpstream(t, reg.store(t), oldKey, testStream)
		up.release(digestOf('a'))
		f := Follower{Store: reg.store(t), Trust: trustOf(t, map[string]testKey{"prod": oldKey}, "8d1e4f2a9c0b/prod/*")}
		_, err := f.Read(t.Context(), testStream, nil, nil)
		g.Expect(err).To(MatchError(ErrUntrusted))
	})
}

// TestFollowRefusesRemovedOrRewritten: a read that ends before status.upstreamSeen, or holds
// another record at its seq, is refused — whether the follower kept its view or restarted.
func TestFollowRefusesRemovedOrRewritten(t *testing.T) {
	oldKey, _, _ := cosignKeys(t)
	cases := []struct {
		name string
		// cut changes the upstream after the follower read records 1-4 (seen = 4).
		cut     func(t *testing.T, reg *testRegistry, up *upstream)
		wantErr error
		wantMsg string
	}{
		{name: "newest record deleted", wantErr: errRemoved, wantMsg: "ends at record 3, before record 4",
			cut: func(t *testing.T, reg *testRegistry, up *upstream) { reg.deleteTag(t, Tag(testStream, 4)) }},
		{name: "an older record deleted", wantErr: errRemoved, wantMsg: "record 2 of stream",
			cut: func(t *testing.T, reg *testRegistry, up *upstream) { reg.deleteTag(t, Tag(testStream, 2)) }},
		{name: "newest record rewritten by the trusted key, stream grown since", wantErr: errRewritten, wantMsg: "record 4 of stream",
			cut: func(t *testing.T, reg *testRegistry, up *upstream) {
				reg.deleteTag(t, Tag(testStream, 4))
				up.seq, up.head = 3, up.w.mustDigestAt(t, 3)
				up.add(ActionVerify, VerdictVerified, digestOf('f')) // another record at seq 4
				up.release(digestOf('9'))                            // and more after it
			}},
		{name: "newest record replaced by a forgery", wantErr: errRewritten, wantMsg: "does not verify",
			cut: func(t *testing.T, reg *testRegistry, up *upstream) {
				_, _, evil := cosignKeys(t)
				reg.deleteTag(t, Tag(testStream, 4))
				forger := newUpstream(t, reg.store(t), evil, testStream)
				forger.seq, forger.head = 3, up.w.mustDigestAt(t, 3)
				forger.add(ActionVerify, VerdictVerified, digestOf('f'))
			}},
		{name: "a record missing after the one seen is a gap", wantErr: errGap, wantMsg: "record 5 of stream",
			cut: func(t *testing.T, reg *testRegistry, up *upstream) {
				up.release(digestOf('9'))
				reg.deleteTag(t, Tag(testStream, 5))
			}},
	}
	for _, tc := range cases {
		for _, restarted := range []bool{false, true} {
			name := tc.name + ", view kept"
			if restarted {
				name = tc.name + ", follower restarted"
			}
			t.Run(name, func(t *testing.T) {
				g := NewWithT(t)
				reg := newRegistry(t)
				up := newUpstream(t, reg.store(t), oldKey, testStream)
				up.release(digestOf('a'))
				up.release(digestOf('b'))
				f := Follower{Store: reg.store(t), Trust: trustOf(t, map[string]testKey{"staging": oldKey}, testStream)}
				v, err := f.Read(t.Context(), testStream, nil, nil)
				g.Expect(err).NotTo(HaveOccurred())
				seen := v.Head
				g.Expect(seen.Seq).To(Equal(int64(4)))

				tc.cut(t, reg, up)
				if restarted {
					v = nil // only status.upstreamSeen survives a restart
				}
				_, err = f.Read(t.Context(), testStream, v, &seen)
				g.Expect(err).To(MatchError(tc.wantErr))
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantMsg)))
			})
		}
	}
}

// mustDigestAt returns the digest of the record at seq as the writer's key signed it.
func (w *Writer) mustDigestAt(t *testing.T, seq int64) string {
	t.Helper()
	a, err := w.store.fetch(t.Context(), Tag(testStream, seq))
	if err != nil {
		t.Fatal(err)
	}
	return Digest(a.Bytes)
}

// TestFollowKeyRotation: with both keys listed, records of either verify; a follower that
// learns only the new key sees the old records as a gap; one that knows only the old key skips
// the new records.
func TestFollowKeyRotation(t *testing.T) {
	oldKey, newKey, _ := cosignKeys(t)
	cases := []struct {
		name        string
		trusted     map[string]testKey
		wantErr     error
		wantHead    int64
		wantSkipped int
		wantOffered []string
	}{
		{name: "both keys listed", trusted: map[string]testKey{"recorder-2025": oldKey, "recorder-2026": newKey},
			wantHead: 4, wantOffered: []string{digestOf('b'), digestOf('a')}},
		{name: "only the old key", trusted: map[string]testKey{"recorder-2025": oldKey},
			wantHead: 2, wantSkipped: 2, wantOffered: []string{digestOf('a')}},
		{name: "only the new key", trusted: map[string]testKey{"recorder-2026": newKey}, wantErr: errGap},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			reg := newRegistry(t)
			up := newUpstream(t, reg.store(t), oldKey, testStream)
			up.release(digestOf('a'))
			rotated := newUpstream(t, reg.store(t), newKey, testStream)
			rotated.seq, rotated.head, rotated.clock = up.seq, up.head, up.clock
			rotated.release(digestOf('b'))

			f := Follower{Store: reg.store(t), Trust: trustOf(t, tc.trusted, "8d1e4f2a9c0b/*/*")}
			v, err := f.Read(t.Context(), testStream, nil, nil)
			if tc.wantErr != nil {
				g.Expect(err).To(MatchError(tc.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(v.Head.Seq).To(Equal(tc.wantHead))
			g.Expect(v.Skipped).To(Equal(tc.wantSkipped))
			g.Expect(offered(v)).To(Equal(tc.wantOffered))
		})
	}
}

// TestFollowRegistryDownThenBack: an outage is a read error that changes nothing; the next read
// after it gets everything written meanwhile.
func TestFollowRegistryDownThenBack(t *testing.T) {
	g := NewWithT(t)
	oldKey, _, _ := cosignKeys(t)
	reg := newRegistry(t)
	up := newUpstream(t, reg.store(t), oldKey, testStream)
	up.release(digestOf('a'))
	f := Follower{Store: reg.store(t), Trust: trustOf(t, map[string]testKey{"staging": oldKey}, testStream)}
	v, err := f.Read(t.Context(), testStream, nil, nil)
	g.Expect(err).NotTo(HaveOccurred())
	seen := v.Head

	up.release(digestOf('b'))
	reg.down.Store(true)
	got, err := f.Read(t.Context(), testStream, v, &seen)
	g.Expect(err).To(MatchError(ociclient.ErrUnreachable))
	g.Expect(got).To(BeNil())
	g.Expect(v.Head).To(Equal(seen), "a failed read leaves the view as it was")

	// The recorder's write fails too, and succeeds once the registry is back: delayed, not lost.
	pending := up.record(actionRollback, verdictRolledBack, digestOf('a'))
	_, err = up.w.Write(t.Context(), pending)
	g.Expect(err).To(MatchError(ociclient.ErrUnreachable))

	reg.down.Store(false)
	w, err := up.w.Write(t.Context(), pending)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(w.Existed).To(BeFalse())
	up.seq, up.head = w.Seq, w.Digest

	// An outage in the middle of a read (one record's GET fails among parallel ones) is the
	// registry's error, not the cancellation of the others, and changes nothing either.
	bad := Tag(testStream, 4)
	reg.failTag.Store(&bad)
	got, err = f.Read(t.Context(), testStream, v, &seen)
	g.Expect(err).To(MatchError(ociclient.ErrUnreachable))
	g.Expect(got).To(BeNil())
	reg.failTag.Store(nil)

	v, err = f.Read(t.Context(), testStream, v, &seen)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Head).To(Equal(Seen{Seq: 5, Digest: up.head}))
	g.Expect(offered(v)).To(Equal([]string{digestOf('b')}))
}

// TestFollowRefusesFork: a trusted record that does not chain to the one before it is refused.
func TestFollowRefusesFork(t *testing.T) {
	g := NewWithT(t)
	oldKey, _, _ := cosignKeys(t)
	reg := newRegistry(t)
	up := newUpstream(t, reg.store(t), oldKey, testStream)
	up.release(digestOf('a'))
	up.head = digestOf('f') // record 3 names a record 2 that is not the one in the stream
	up.add(ActionPromote, VerdictSucceeded, digestOf('b'))
	f := Follower{Store: reg.store(t), Trust: trustOf(t, map[string]testKey{"staging": oldKey}, testStream)}
	_, err := f.Read(t.Context(), testStream, nil, nil)
	g.Expect(err).To(MatchError(errFork))
	g.Expect(err).To(MatchError(ContainSubstring("record 3 of stream")))
}

// TestFollowRefusesTruncatedTagList: a registry that cuts the tag list without a link to the
// next page would hide records; that is an error, not a shorter stream.
func TestFollowRefusesTruncatedTagList(t *testing.T) {
	g := NewWithT(t)
	oldKey, _, _ := cosignKeys(t)
	reg := newRegistry(t)
	up := newUpstream(t, reg.store(t), oldKey, testStream)
	up.release(digestOf('a'))
	up.release(digestOf('b'))
	s := reg.store(t)
	s.PageSize = 3 // go-containerregistry's in-memory registry honours n but sends no Link
	f := Follower{Store: s, Trust: trustOf(t, map[string]testKey{"staging": oldKey}, testStream)}
	_, err := f.Read(t.Context(), testStream, nil, nil)
	g.Expect(err).To(MatchError(errTruncated))
	s = reg.store(t)
	s.PageSize = 4 // a full last page is indistinguishable from a cut one: refused too
	f.Store = s
	_, err = f.Read(t.Context(), testStream, nil, nil)
	g.Expect(err).To(MatchError(errTruncated))
	s = reg.store(t)
	s.PageSize = 5
	f.Store = s
	v, err := f.Read(t.Context(), testStream, nil, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Head.Seq).To(Equal(int64(4)))
}

// TestFollowBindsTrustToRepository: the recorder's signed records copied to another repository,
// without the failure recorded last, are not trusted there: the key is bound to the stream in
// the upstream's repository only.
func TestFollowBindsTrustToRepository(t *testing.T) {
	oldKey, _, _ := cosignKeys(t)
	reg := newRegistry(t)
	up := newUpstream(t, reg.store(t), oldKey, testStream)
	up.release(digestOf('a'))
	up.add(actionRollback, verdictRolledBack, digestOf('a'))
	copyRepo := strings.TrimPrefix(reg.srv.URL, "http://") + "/someones/copy"
	for seq := int64(1); seq <= 2; seq++ { // the rollback left out
		src, err := name.NewTag(reg.repository() + ":" + Tag(testStream, seq))
		if err != nil {
			t.Fatal(err)
		}
		desc, err := remote.Get(src, remote.WithContext(t.Context()))
		if err != nil {
			t.Fatal(err)
		}
		dst, err := name.NewTag(copyRepo + ":" + Tag(testStream, seq))
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Put(dst, desc, remote.WithContext(t.Context())); err != nil {
			t.Fatal(err)
		}
	}
	upstreamOnly := trustOf(t, map[string]testKey{"staging": oldKey}, testStream)
	cases := []struct {
		name        string
		repository  string
		trust       *trust.Config
		wantErr     string
		wantOffered []string
	}{
		{name: "the upstream's repository", repository: reg.repository(), trust: upstreamOnly},
		{name: "a copy elsewhere", repository: copyRepo, trust: upstreamOnly,
			wantErr: "binds stream \"" + testStream + "\" to key(s) staging, but not in repository " + copyRepo},
		{name: "a copy elsewhere that the config names", repository: copyRepo,
			trust: trustIn(t, map[string]testKey{"staging": oldKey}, []string{copyRepo}, testStream), wantOffered: []string{digestOf('a')}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := Follower{Store: reg.storeIn(t, tc.repository), Trust: tc.trust}
			v, err := f.Read(t.Context(), testStream, nil, nil)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ErrUntrusted))
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(offered(v)).To(Equal(tc.wantOffered))
		})
	}
	t.Run("an audit of the copy trusts none of it", func(t *testing.T) {
		g := NewWithT(t)
		a, err := AuditStream(t.Context(), reg.storeIn(t, copyRepo), upstreamOnly, testStream)
		g.Expect(err).NotTo(HaveOccurred())
		for _, e := range a.Entries {
			g.Expect(e.OK).To(BeFalse(), "record %d", e.Seq)
		}
	})
}
