// Package records is Stagecoach's signed record of every step on a Stage, and the way a Stage in
// one cluster follows a Stage in another through them.
//
// A Record is a small versioned JSON document with one canonical encoding (Encode; Decode refuses
// anything else), so one record has one digest. Each record of a Stage's stream carries its seq
// and the digest of the record before it (a hash chain), and is pushed as an OCI artifact under
// the tag <stream>-<seq> with a cosign-compatible signature in its manifest annotations (see the
// comment on the artifact layout in oci.go for why). Nothing needs the OCI referrers API, and every
// record is tagged, so garbage collection keeps it.
//
// Anyone who can push to the repository can put anything at any tag. So the chain runs through
// signed records only: the recorder writes past a tag holding nothing it signed (Writer.Write),
// and a follower skips (and counts) what no key its trust config binds to the stream in that
// repository signed. A signed record removed or replaced still breaks the chain; only the newest
// records can be withheld, which status.upstreamSeen and spec.source.upstreamRecords.maxAge bound.
//
//	w := records.NewWriter(store, signer)            // the recorder, upstream
//	written, err := w.Write(ctx, rec)                // exactly once per seq
//
//	f := records.Follower{Store: store, Trust: tc}   // the follower, downstream
//	view, err = f.Read(ctx, stream, view, &seen)     // incremental; err: removed, rewritten, gap, fork, registry
//	view.Offers()                                    // what the upstream verified and nothing excludes
//
//	audit, err := records.AuditStream(ctx, store, tc, stream) // `stagecoach records verify`
package records
