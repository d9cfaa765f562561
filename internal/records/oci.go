package records

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
)

// The artifact of one record.
//
// An OCI image manifest (pre-1.1 artifact form: a config media type of our own, no artifactType
// field, so registries without OCI 1.1 take it) with one layer, the canonical record bytes. The
// layer descriptor also carries the bytes inline ("data"), so a reader needs one GET per record;
// the blob is pushed as well, since registries check that layers exist.
//
// Where the signature lives, and why: in the manifest's annotations, base64, beside the record
// it signs. The alternatives are worse here. A cosign ".sig" tag per record doubles the pushes and
// the reads and opens a window (crash between the two pushes) where a record exists unsigned,
// which a follower must treat as a gap; OCI referrers are missing on many registries and a
// referrer is an untagged manifest that garbage collection may remove. In the annotations, one
// manifest PUT makes the record and its signature appear together under one tag, which GC keeps.
// The signature covers the record bytes (the layer), not the manifest, so the record digest —
// what the chain and status.upstreamSeen hold — does not depend on the signature (ECDSA
// signatures differ on every signing), and it is exactly a `cosign sign-blob` signature.
const (
	// ConfigMediaType marks a manifest as a Stagecoach record.
	configMediaType types.MediaType = "application/vnd.stagecoach.record.config.v1+json"
	// LayerMediaType is the record layer.
	layerMediaType types.MediaType = "application/vnd.stagecoach.record.v1+json"

	// AnnotationSignature is the base64 signature of the record bytes by the recorder key.
	annotationSignature = "dev.stagecoach.record.signature"
	// AnnotationKeyID names the key that signed (verify.KeyID); a hint for people, never trusted.
	annotationKeyID = "dev.stagecoach.record.key-id"
	// AnnotationBundle is a keyless signature of the record bytes instead: base64 of the Sigstore
	// bundle `cosign sign-blob --bundle` writes (certificate, log entry, timestamp), for trust
	// entries of CI identities (matchOIDCIdentity). Like the signature, it signs the layer, not
	// the manifest.
	annotationBundle = "dev.stagecoach.record.bundle"
	// AnnotationStream and AnnotationSeq repeat the record's stream and seq for people browsing a
	// registry; readers trust only the signed record.
	annotationStream = "dev.stagecoach.record.stream"
	annotationSeq    = "dev.stagecoach.record.seq"

	// maxManifestBytes bounds what a reader accepts as a record manifest.
	maxManifestBytes = 4 * maxRecordBytes
)

var configBlob = []byte("{}")

// Store is the OCI repository that holds record streams.
type Store struct {
	repo name.Repository
	opts ociclient.Options
	// Concurrency is how many records are fetched at once when reading a range; 8 when zero.
	Concurrency int
	// PageSize is the number of tags asked for per page of the tag list; 1000 when zero.
	PageSize int

	// One puller and one pusher for the store's life: go-containerregistry then pings the
	// registry and exchanges tokens once, not on every call (which cost most of a record's
	// write before). Neither keeps an error: a failed setup is retried on the next call.
	mu     sync.Mutex
	puller *remote.Puller
	pusher *remote.Pusher
}

// NewStore opens repository (for example registry.example/delivery/streams). Plain HTTP is used
// only for a loopback registry or when o.Insecure is set (ociclient's policy).
func NewStore(repository string, o ociclient.Options) (*Store, error) {
	repo, err := name.NewRepository(repository, ociclient.NameOptions(o.Insecure)...)
	if err != nil {
		return nil, fmt.Errorf("records repository %q is not a valid OCI repository name (such as registry.example/delivery/streams): %w", repository, err)
	}
	return &Store{repo: repo, opts: o}, nil
}

// Repository is the store's repository name.
func (s *Store) Repository() string { return s.repo.Name() }

// Ref is the full reference of a tag in the store.
func (s *Store) Ref(tag string) string { return s.repo.Tag(tag).Name() }

// clients returns the store's puller and pusher. The context in their options is never used:
// their methods take the caller's.
func (s *Store) clients(ctx context.Context) (*remote.Puller, *remote.Pusher, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.puller == nil {
		opts := append(ociclient.RemoteOptions(ctx, s.opts), remote.WithPageSize(s.pageSize()))
		pl, err := remote.NewPuller(opts...)
		if err != nil {
			return nil, nil, err
		}
		ps, err := remote.NewPusher(opts...)
		if err != nil {
			return nil, nil, err
		}
		s.puller, s.pusher = pl, ps
	}
	return s.puller, s.pusher, nil
}

func (s *Store) classify(err error) error { return ociclient.ClassifyError(s.repo.Name(), err) }

// seqs lists the record tags of stream: seq -> tag. A repository that does not exist yet holds no
// records.
func (s *Store) seqs(ctx context.Context, stream string) (map[int64]string, error) {
	pl, _, err := s.clients(ctx)
	if err != nil {
		return nil, err
	}
	tags, err := s.list(ctx, pl)
	if err != nil {
		if ociclient.IsNotFound(err) {
			return map[int64]string{}, nil
		}
		return nil, s.classify(err)
	}
	prefix := tagPrefix(stream)
	out := map[int64]string{}
	for _, t := range tags {
		if n, ok := seqOfTag(prefix, t); ok {
			out[n] = t
		}
	}
	return out, nil
}

func (s *Store) pageSize() int {
	if s.PageSize > 0 {
		return s.PageSize
	}
	return 1000
}

// errTruncated: a registry returned a full page of tags and no link to the next one.
var errTruncated = errors.New("registry returned a full page of tags without a link to the next page")

// list returns every tag of the repository, following the registry's pagination links. A
// registry that cuts the list without a link would hide records (and make a removal look like
// nothing happened), so that is an error, not a short list.
func (s *Store) list(ctx context.Context, pl *remote.Puller) ([]string, error) {
	lister, err := pl.Lister(ctx, s.repo)
	if err != nil {
		return nil, err
	}
	var out []string
	for lister.HasNext() {
		page, err := lister.Next(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Tags...)
		if !lister.HasNext() && len(page.Tags) >= s.pageSize() {
			return nil, fmt.Errorf("%w (%d tags in %s); the registry does not paginate the tag list as the OCI distribution spec says", errTruncated, len(page.Tags), s.repo.Name())
		}
	}
	return out, nil
}

// artifact is one record as read from the registry, before any trust decision.
type artifact struct {
	Tag      string
	Manifest string // manifest digest
	Bytes    []byte // record bytes, digest-checked
	Sig      []byte
	// Bundle is a keyless Sigstore bundle over Bytes (nil when the record carries none).
	Bundle  []byte
	KeyHint string
	// Problem says why the artifact is not a well-formed record artifact (empty when it is).
	Problem string
}

// errAbsent is returned by fetch for a tag that does not exist.
var errAbsent = errors.New("record tag absent")

// fetch reads the record under tag. Registry trouble is an error; a malformed artifact is not
// (it is returned with Problem set, for the caller to count as untrusted or as a break).
func (s *Store) fetch(ctx context.Context, tag string) (*artifact, error) {
	pl, _, err := s.clients(ctx)
	if err != nil {
		return nil, err
	}
	desc, err := pl.Get(ctx, s.repo.Tag(tag))
	if err != nil {
		if ociclient.IsNotFound(err) {
			return nil, errAbsent
		}
		return nil, s.classify(err)
	}
	a := &artifact{Tag: tag, Manifest: desc.Digest.String()}
	if len(desc.Manifest) > maxManifestBytes {
		a.Problem = fmt.Sprintf("manifest is %d bytes, more than a record manifest can be", len(desc.Manifest))
		return a, nil
	}
	var m v1.Manifest
	if err := json.Unmarshal(desc.Manifest, &m); err != nil {
		a.Problem = "manifest is not an OCI image manifest: " + err.Error()
		return a, nil
	}
	if m.Config.MediaType != configMediaType || len(m.Layers) != 1 || m.Layers[0].MediaType != layerMediaType {
		a.Problem = fmt.Sprintf("manifest is not a Stagecoach record (config %q, %d layers)", m.Config.MediaType, len(m.Layers))
		return a, nil
	}
	l := m.Layers[0]
	if l.Size < 0 || l.Size > maxRecordBytes {
		a.Problem = fmt.Sprintf("record layer is %d bytes, more than %d", l.Size, maxRecordBytes)
		return a, nil
	}
	b := l.Data
	if b == nil {
		layer, err := pl.Layer(ctx, s.repo.Digest(l.Digest.String()))
		if err != nil {
			return nil, s.classify(err)
		}
		rc, err := layer.Compressed()
		if err != nil {
			if ociclient.IsNotFound(err) {
				a.Problem = "record layer blob is missing"
				return a, nil
			}
			return nil, s.classify(err)
		}
		b, err = io.ReadAll(io.LimitReader(rc, maxRecordBytes+1))
		_ = rc.Close()
		if err != nil {
			return nil, s.classify(err)
		}
	}
	if Digest(b) != l.Digest.String() || int64(len(b)) != l.Size {
		a.Problem = "record bytes do not match the layer digest"
		return a, nil
	}
	a.Bytes = b
	a.KeyHint = m.Annotations[annotationKeyID]
	if b64, ok := m.Annotations[annotationBundle]; ok {
		if bundle, err := base64.StdEncoding.DecodeString(b64); err == nil && len(bundle) > 0 {
			a.Bundle = bundle
		}
	}
	sig, err := base64.StdEncoding.DecodeString(m.Annotations[annotationSignature])
	if err != nil || len(sig) == 0 {
		if a.Bundle != nil {
			return a, nil // signed keyless only
		}
		a.Problem = "record has no signature annotation " + annotationSignature
		return a, nil
	}
	a.Sig = sig
	return a, nil
}

// fetchAll fetches tags concurrently and returns the artifacts in the order given. The first
// registry error stops it; absent tags come back as nil artifacts.
func (s *Store) fetchAll(ctx context.Context, tags []string) ([]*artifact, error) {
	n := s.Concurrency
	if n <= 0 {
		n = 8
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]*artifact, len(tags))
	// The first error is the cause; the others are mostly the cancellation it triggered.
	var first error
	var once sync.Once
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i, t := range tags {
		sem <- struct{}{}
		if ctx.Err() != nil {
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			a, err := s.fetch(ctx, t)
			if errors.Is(err, errAbsent) {
				err = nil
			}
			if err != nil {
				once.Do(func() { first = err; cancel() })
				return
			}
			out[i] = a
		}()
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// head returns the manifest digest under tag, errAbsent when there is none.
func (s *Store) head(ctx context.Context, tag string) (string, error) {
	pl, _, err := s.clients(ctx)
	if err != nil {
		return "", err
	}
	d, err := pl.Head(ctx, s.repo.Tag(tag))
	if err != nil {
		if ociclient.IsNotFound(err) {
			return "", errAbsent
		}
		return "", s.classify(err)
	}
	return d.Digest.String(), nil
}

// push writes the record artifact under tag and returns its manifest digest.
func (s *Store) push(ctx context.Context, tag string, rec []byte, stream string, seq int64, sig []byte, keyID string) (string, error) {
	_, ps, err := s.clients(ctx)
	if err != nil {
		return "", err
	}
	layer := static.NewLayer(rec, layerMediaType)
	cfg := static.NewLayer(configBlob, configMediaType)
	for _, l := range []v1.Layer{cfg, layer} {
		if err := ps.Upload(ctx, s.repo, l); err != nil {
			return "", s.classify(err)
		}
	}
	ld, _ := layer.Digest()
	cd, _ := cfg.Digest()
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: configMediaType, Size: int64(len(configBlob)), Digest: cd},
		Layers:        []v1.Descriptor{{MediaType: layerMediaType, Size: int64(len(rec)), Digest: ld, Data: rec}},
		Annotations: map[string]string{
			annotationSignature: base64.StdEncoding.EncodeToString(sig),
			annotationKeyID:     keyID,
			annotationStream:    stream,
			annotationSeq:       strconv.FormatInt(seq, 10),
		},
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	if err := ps.Put(ctx, s.repo.Tag(tag), rawManifest(raw)); err != nil {
		return "", s.classify(err)
	}
	return Digest(raw), nil
}

// rawManifest is a manifest to PUT as is.
type rawManifest []byte

func (r rawManifest) RawManifest() ([]byte, error)        { return r, nil }
func (r rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// sortedSeqs returns the keys of m in ascending order.
func sortedSeqs(m map[int64]string) []int64 {
	out := make([]int64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// equalBytes is bytes.Equal, named for what it compares here.
func equalBytes(a, b []byte) bool { return bytes.Equal(a, b) }
