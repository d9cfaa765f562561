package records

import (
	"sync"
	"testing"
)

// BenchmarkWrite is the cost of recording one step: encode, sign, check the tag is absent, push
// two blobs and the manifest, against the in-memory registry on loopback.
func BenchmarkWrite(b *testing.B) {
	oldKey, _, _ := cosignKeys(b)
	reg := newRegistry(b)
	up := newUpstream(b, reg.store(b), oldKey, testStream)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		up.add(ActionPromote, VerdictSucceeded, digestOf('a'))
	}
}

// fillStream writes n chained, signed records quickly: the chain is built in order (it needs
// only the bytes), the pushes run in parallel.
func fillStream(b *testing.B, s *Store, signer *Signer, n int) {
	b.Helper()
	up := newUpstream(b, s, testKey{signer: signer}, testStream)
	type item struct {
		rec []byte
		seq int64
	}
	items := make([]item, 0, n)
	for i := 0; i < n; i++ {
		r := up.record(ActionVerify, VerdictVerified, digestOf("abcdef"[i%6]))
		if i%2 == 0 {
			r.Action, r.Verdict = ActionPromote, VerdictSucceeded
		}
		bs, err := Encode(r)
		if err != nil {
			b.Fatal(err)
		}
		up.seq, up.head = r.Seq, Digest(bs)
		items = append(items, item{rec: bs, seq: r.Seq})
	}
	work := make(chan item)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				sig, err := signer.Sign(it.rec)
				if err == nil {
					_, err = s.push(b.Context(), Tag(testStream, it.seq), it.rec, testStream, it.seq, sig, signer.KeyID())
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
}

// BenchmarkAudit10k is `stagecoach records verify` on a 10,000-record stream.
func BenchmarkAudit10k(b *testing.B) {
	oldKey, _, _ := cosignKeys(b)
	reg := newRegistry(b)
	s := reg.store(b)
	s.PageSize = 20000 // the in-memory registry cuts a page at n and sends no Link header
	fillStream(b, s, oldKey.signer, 10000)
	tc := trustOf(b, map[string]testKey{"staging": oldKey}, testStream)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a, err := AuditStream(b.Context(), s, tc, testStream)
		if err != nil {
			b.Fatal(err)
		}
		if len(a.Entries) != 10000 || len(a.Breaks) != 0 {
			b.Fatalf("audit: %d records, %d breaks", len(a.Entries), len(a.Breaks))
		}
	}
}

// BenchmarkFollow10k is a follower's first read of a 10,000-record stream, and then a read
// that finds one new record (the steady state: each record fetched and verified once).
func BenchmarkFollow10k(b *testing.B) {
	oldKey, _, _ := cosignKeys(b)
	reg := newRegistry(b)
	s := reg.store(b)
	s.PageSize = 20000 // the in-memory registry cuts a page at n and sends no Link header
	fillStream(b, s, oldKey.signer, 10000)
	f := Follower{Store: s, Trust: trustOf(b, map[string]testKey{"staging": oldKey}, testStream)}
	b.Run("first read", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			v, err := f.Read(b.Context(), testStream, nil, nil)
			if err != nil || v.Head.Seq != 10000 {
				b.Fatalf("read: %v", err)
			}
		}
	})
	b.Run("incremental read, nothing new", func(b *testing.B) {
		v, err := f.Read(b.Context(), testStream, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		seen := v.Head
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := f.Read(b.Context(), testStream, v, &seen); err != nil {
				b.Fatal(err)
			}
		}
	})
}
