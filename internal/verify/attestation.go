package verify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	intoto "github.com/in-toto/attestation/go/v1"
	ssldsse "github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/sigstore/cosign/v3/pkg/oci"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	sgbundle "github.com/sigstore/sigstore-go/pkg/bundle"
	sigdsse "github.com/sigstore/sigstore/pkg/signature/dsse"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
)

// MaxAttestationSize bounds what is read of one attestation (a bundle, or a DSSE layer of the
// .att tag): an SBOM of a large image runs to megabytes, and one larger than this is refused
// rather than read into memory.
const MaxAttestationSize = 16 << 20

// MaxAttestationsRead bounds how many referrers, and how many entries of the .att tag, are read
// for one digest: a digest with more is judged on the first ones, and the rest are refused unread.
const MaxAttestationsRead = 64

// Annotations cosign writes beside attestations, naming their predicate type; when present, an
// attestation of another type is passed over without being read.
const (
	bundlePredicateTypeAnnotation = "dev.sigstore.bundle.predicateType"
	legacyPredicateTypeAnnotation = "predicateType"
)

// Attestation is an in-toto statement about a digest whose signature verified.
type Attestation struct {
	// PredicateType of the statement.
	PredicateType string
	// Statement is the statement's JSON, as signed.
	Statement []byte
	// Format is where it was found: FormatBundle (an OCI referrer) or FormatLegacy (the .att tag).
	Format string
	// What names it for messages, such as "bundle sha256:…".
	What string
	// Referrer is the digest of the referrer manifest that carries it (bundles only).
	Referrer string
	// KeyID of the trusted key that verified it; Signer, for keyless, who signed.
	KeyID  string
	Signer *Signer
}

// SignedBy names who signed the attestation, for messages.
func (a Attestation) SignedBy() string {
	if a.Signer != nil {
		return "keyless by " + a.Signer.String()
	}
	return "by trusted key " + a.KeyID
}

// AttestationRefusal is an attestation of the predicate type that did not verify.
type AttestationRefusal struct {
	Format string
	What   string
	// Part is the Failure* constant the refusal is about (FailureClaim: it is about another
	// digest; FailureForm: malformed, or too large).
	Part string
	// Signer is who a keyless attestation says signed, when its certificate chains to the root.
	Signer *Signer
	Err    error
}

func (r AttestationRefusal) String() string { return fmt.Sprintf("%s: %v", r.What, r.Err) }

// Attestations is what a digest carries of one predicate type.
type Attestations struct {
	// ImageNotFound: the digest does not exist in the repository.
	ImageNotFound bool
	// Verified are the statements of the type about this digest signed by a trusted signer.
	Verified []Attestation
	// Refused are those of the type that did not verify (another digest, untrusted signer,
	// malformed, too large).
	Refused []AttestationRefusal
}

// Attestations finds the attestations of predicateType attached to ref
// ("repository@sha256:<hex>") the way cosign attaches them, Sigstore bundles as OCI referrers
// and DSSE envelopes under the legacy .att tag, and verifies each, offline, with the Verifier's
// trust: what it states must be about this very digest. An error means they could not be read
// (registry down, credentials refused) and should be retried; whether any is good enough is the
// caller's verdict.
func (v *Verifier) Attestations(ctx context.Context, ref, predicateType string) (Attestations, error) {
	d, err := name.NewDigest(ref, ociclient.NameOptions(v.opts.Insecure)...)
	if err != nil {
		return Attestations{}, fmt.Errorf("cannot verify the attestations of %q: want repository@sha256:<digest>: %w", ref, err)
	}
	hash, ropts, err := v.open(ctx, d)
	if errors.Is(err, errImageNotFound) {
		return Attestations{ImageNotFound: true}, nil
	}
	if err != nil {
		return Attestations{}, err
	}
	want, err := digestBytes(hash)
	if err != nil {
		return Attestations{}, err
	}
	limit := v.opts.MaxAttestationSize
	if limit <= 0 {
		limit = MaxAttestationSize
	}
	s := &attestationSearch{v: v, d: d, hash: hash, want: want, predicateType: predicateType, ropts: ropts, limit: limit}
	if err := s.bundles(ctx); err != nil {
		return Attestations{}, err
	}
	if err := s.legacy(ctx); err != nil {
		return Attestations{}, err
	}
	return s.found, nil
}

// attestationSearch gathers one digest's attestations of one predicate type.
type attestationSearch struct {
	v             *Verifier
	d             name.Digest
	hash          v1.Hash
	want          []byte
	predicateType string
	ropts         []remote.Option
	limit         int64
	found         Attestations
}

func (s *attestationSearch) tooLarge() error {
	return fmt.Errorf("larger than the %d bytes an attestation may be: not read", s.limit)
}

func (s *attestationSearch) refuse(format, what string, part string, signer *Signer, err error) {
	s.found.Refused = append(s.found.Refused, AttestationRefusal{Format: format, What: what, Part: part, Signer: signer, Err: err})
}

// bundles verifies the Sigstore bundle referrers of the digest that carry an attestation of the type.
func (s *attestationSearch) bundles(ctx context.Context) error {
	repo := s.d.Context().Name()
	idx, err := remote.Referrers(s.d, s.ropts...)
	if err != nil {
		if ociclient.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("cannot list referrers of %s: %w", s.d.DigestStr(), ociclient.ClassifyError(repo, err))
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return fmt.Errorf("cannot read referrers of %s: %w", s.d.DigestStr(), ociclient.ClassifyError(repo, err))
	}
	read := 0
	for _, desc := range im.Manifests {
		switch {
		case strings.HasPrefix(desc.ArtifactType, bundleArtifactTypePrefix), desc.ArtifactType == "", desc.ArtifactType == emptyConfigMediaType:
		default:
			continue // SBOMs and other tools' artifacts attached as they are, not as signed statements
		}
		if t, ok := desc.Annotations[bundlePredicateTypeAnnotation]; ok && t != s.predicateType {
			continue
		}
		what := "bundle " + desc.Digest.String()
		if read++; read > MaxAttestationsRead {
			s.refuse(FormatBundle, what, FailureForm, nil, fmt.Errorf("beyond the first %d referrers read for one digest: not read", MaxAttestationsRead))
			continue
		}
		raw, ok, err := s.readBundleLayer(s.d.Context().Digest(desc.Digest.String()))
		switch {
		case errors.Is(err, errTooLarge):
			s.refuse(FormatBundle, what, FailureForm, nil, s.tooLarge())
			continue
		case err != nil && ociclient.IsInfrastructure(err):
			return fmt.Errorf("cannot read %s of %s: %w", what, s.d.DigestStr(), ociclient.ClassifyError(repo, err))
		case err != nil:
			// A listed referrer that is gone or unreadable is this referrer's refusal, not a
			// reason to hold every version.
			s.refuse(FormatBundle, what, FailureForm, nil, fmt.Errorf("unreadable: %w", ociclient.ClassifyError(repo, err)))
			continue
		case !ok:
			continue
		}
		b := &sgbundle.Bundle{}
		if err := b.UnmarshalJSON(raw); err != nil {
			s.refuse(FormatBundle, what, FailureForm, nil, fmt.Errorf("not a Sigstore bundle: %w", err))
			continue
		}
		env := b.GetDsseEnvelope()
		if env == nil {
			continue // a message signature: a cosign signature, not an attestation
		}
		if env.GetPayloadType() != inTotoPayloadType {
			s.refuse(FormatBundle, what, FailureForm, nil, fmt.Errorf("payload type %q is not an in-toto statement (%s)", env.GetPayloadType(), inTotoPayloadType))
			continue
		}
		st, err := parseStatement(env.GetPayload())
		if err != nil {
			s.refuse(FormatBundle, what, FailureForm, nil, err)
			continue
		}
		if st.GetPredicateType() != s.predicateType {
			continue
		}
		claim := func() error { return checkStatementSubject(st, s.hash) }
		keyID, signer, err := s.v.verifyBundle(ctx, b, s.hash, s.want, claim)
		if err != nil {
			s.refuse(FormatBundle, what, partOf(err, FailureKey), signer, err)
			continue
		}
		s.found.Verified = append(s.found.Verified, Attestation{PredicateType: st.GetPredicateType(), Statement: env.GetPayload(),
			Format: FormatBundle, What: what, Referrer: desc.Digest.String(), KeyID: keyID, Signer: signer})
	}
	return nil
}

// errTooLarge: an attestation is larger than the limit, and was not read.
var errTooLarge = errors.New("attestation too large")

// readBundleLayer reads a referrer's manifest and, when it carries a Sigstore bundle, the
// bundle's bytes (ok false: not a bundle). errTooLarge when the bundle is larger than the limit
// (by its descriptor, or by what the registry sends); other errors are registry errors.
func (s *attestationSearch) readBundleLayer(ref name.Digest) (raw []byte, ok bool, err error) {
	desc, err := remote.Get(ref, s.ropts...)
	if err != nil {
		return nil, false, err
	}
	m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil || len(m.Layers) != 1 {
		return nil, false, nil
	}
	layer := m.Layers[0]
	isBundle := strings.HasPrefix(string(m.ArtifactType), bundleArtifactTypePrefix) || strings.HasPrefix(string(layer.MediaType), bundleArtifactTypePrefix)
	if !isBundle {
		return nil, false, nil
	}
	if layer.Size > s.limit {
		return nil, false, errTooLarge
	}
	l, err := remote.Layer(ref.Context().Digest(layer.Digest.String()), s.ropts...)
	if err != nil {
		return nil, false, err
	}
	if raw, err = readAtMost(l, s.limit); err != nil {
		return nil, false, err
	}
	if int64(len(raw)) > s.limit {
		return nil, false, errTooLarge
	}
	return raw, true, nil
}

// legacy verifies the DSSE envelopes under the digest's .att tag that carry an attestation of the type.
func (s *attestationSearch) legacy(ctx context.Context) error {
	repo := s.d.Context().Name()
	oopts := []ociremote.Option{ociremote.WithRemoteOptions(s.ropts...)}
	tag, err := ociremote.AttestationTag(s.d, oopts...)
	if err != nil {
		return fmt.Errorf("cannot name the attestation tag of %s: %w", s.d, err)
	}
	atts, err := ociremote.Signatures(tag, oopts...) // a missing tag is an empty list
	if err != nil {
		return fmt.Errorf("cannot read attestations %s: %w", tag, ociclient.ClassifyError(repo, err))
	}
	list, err := atts.Get()
	if err != nil {
		if ociclient.IsInfrastructure(err) {
			return fmt.Errorf("cannot read attestations %s: %w", tag, ociclient.ClassifyError(repo, err))
		}
		s.refuse(FormatLegacy, "attestation tag "+tag.TagStr(), FailureForm, nil, err)
		return nil
	}
	for i, att := range list {
		what := fmt.Sprintf("attestation %d in %s", i+1, tag.TagStr())
		if i >= MaxAttestationsRead {
			s.refuse(FormatLegacy, what, FailureForm, nil, fmt.Errorf("beyond the first %d entries read: not read", MaxAttestationsRead))
			continue
		}
		if ann, err := att.Annotations(); err == nil {
			if t, ok := ann[legacyPredicateTypeAnnotation]; ok && t != s.predicateType {
				continue
			}
		}
		if size, err := att.Size(); err == nil && size > s.limit {
			s.refuse(FormatLegacy, what, FailureForm, nil, s.tooLarge())
			continue
		}
		payload, err := att.Payload()
		if err != nil {
			if ociclient.IsInfrastructure(err) {
				return fmt.Errorf("cannot read %s: %w", what, ociclient.ClassifyError(repo, err))
			}
			s.refuse(FormatLegacy, what, FailureForm, nil, err)
			continue
		}
		if a, mine, err := s.verifyLegacy(ctx, att, payload, what); mine {
			if err != nil {
				var signer *Signer
				var se *signedError
				if errors.As(err, &se) {
					signer = se.signer
				}
				s.refuse(FormatLegacy, what, partOf(err, FailureKey), signer, err)
				continue
			}
			s.found.Verified = append(s.found.Verified, a)
		}
	}
	return nil
}

// verifyLegacy checks one DSSE envelope of the .att tag; mine is false when it is about another
// predicate type (then it is passed over).
func (s *attestationSearch) verifyLegacy(ctx context.Context, att oci.Signature, payload []byte, what string) (a Attestation, mine bool, err error) {
	var env ssldsse.Envelope
	if err := json.Unmarshal(payload, &env); err != nil {
		return a, true, failed(FailureForm, "not a DSSE envelope: %v", err)
	}
	if env.PayloadType != inTotoPayloadType {
		return a, true, failed(FailureForm, "payload type %q is not an in-toto statement (%s)", env.PayloadType, inTotoPayloadType)
	}
	body, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		return a, true, failed(FailureForm, "envelope payload is not base64: %v", err)
	}
	st, err := parseStatement(body)
	if err != nil {
		return a, true, err
	}
	if st.GetPredicateType() != s.predicateType {
		return a, false, nil
	}
	if err := checkStatementSubject(st, s.hash); err != nil {
		return a, true, &partError{part: FailureClaim, err: err}
	}
	if cert, err := att.Cert(); err != nil {
		return a, true, failed(FailureForm, "certificate annotation unreadable: %v", err)
	} else if cert != nil {
		if s.v.keyless == nil {
			return a, true, failed(FailureForm, "signed keyless (a certificate naming %s), but only keys are trusted: list the signer in matchOIDCIdentity",
				subjectOf(cert))
		}
		signer, err := s.v.keyless.verifyLegacyAttestation(att, cert, &env, s.hash.Algorithm, s.want)
		if err != nil {
			return a, true, &signedError{err: err, signer: signer}
		}
		return Attestation{PredicateType: st.GetPredicateType(), Statement: body, Format: FormatLegacy, What: what, Signer: signer}, true, nil
	}
	if len(s.v.keys) == 0 {
		return a, true, failed(FailureForm, "signed with a key, but only keyless identities are trusted: add its public key to secretRef")
	}
	var lastErr error
	for _, k := range s.v.keys {
		ev, err := ssldsse.NewEnvelopeVerifier(&sigdsse.VerifierAdapter{SignatureVerifier: k.verifier})
		if err != nil {
			return a, true, err
		}
		if _, err := ev.Verify(ctx, &env); err != nil {
			lastErr = err
			continue
		}
		return Attestation{PredicateType: st.GetPredicateType(), Statement: body, Format: FormatLegacy, What: what, KeyID: k.id}, true, nil
	}
	return a, true, failed(FailureKey, "no trusted key verifies it: %v", lastErr)
}

// signedError is a refusal of a keyless attestation with who its certificate says signed.
type signedError struct {
	err    error
	signer *Signer
}

func (e *signedError) Error() string { return e.err.Error() }
func (e *signedError) Unwrap() error { return e.err }

// parseStatement reads an in-toto statement (v1, or v0.1 as older cosign writes it) and checks
// it is one: a type, subjects with digests, a predicate type and a predicate.
func parseStatement(payload []byte) (*intoto.Statement, error) {
	st := &intoto.Statement{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(payload, st); err != nil {
		return nil, failed(FailureForm, "not an in-toto statement: %v", err)
	}
	if err := st.Validate(); err != nil {
		return nil, failed(FailureForm, "malformed in-toto statement: %v", err)
	}
	return st, nil
}

// checkStatementSubject requires the statement to be about this very digest.
func checkStatementSubject(st *intoto.Statement, hash v1.Hash) error {
	for _, sub := range st.GetSubject() {
		if sub.GetDigest()[hash.Algorithm] == hash.Hex {
			return nil
		}
	}
	var about []string
	for _, sub := range st.GetSubject() {
		for alg, hex := range sub.GetDigest() {
			about = append(about, alg+":"+hex)
		}
	}
	slices.Sort(about)
	return &partError{part: FailureClaim, err: fmt.Errorf("the statement is about %s, not %s", strings.Join(about, ", "), hash)}
}

// readAtMost reads a layer's bytes, at most limit+1 of them.
func readAtMost(l v1.Layer, limit int64) ([]byte, error) {
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	raw, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, err
	}
	return raw, nil
}

// AttestationsState fingerprints what is attached to ref as attestations: the referrers the
// registry lists and the .att tag's manifest. It changes when an attestation is attached or
// removed, so a refusal reached under one state holds until it changes. Three registry reads,
// no attestation downloaded.
func (v *Verifier) AttestationsState(ctx context.Context, ref string) (string, error) {
	d, err := name.NewDigest(ref, ociclient.NameOptions(v.opts.Insecure)...)
	if err != nil {
		return "", fmt.Errorf("cannot read the attestations of %q: want repository@sha256:<digest>: %w", ref, err)
	}
	_, ropts, err := v.open(ctx, d)
	if errors.Is(err, errImageNotFound) {
		return "missing", nil
	}
	if err != nil {
		return "", err
	}
	repo := d.Context().Name()
	h := sha256.New()
	idx, err := remote.Referrers(d, ropts...)
	switch {
	case err == nil:
		raw, err := idx.RawManifest()
		if err != nil {
			return "", fmt.Errorf("cannot read referrers of %s: %w", d.DigestStr(), ociclient.ClassifyError(repo, err))
		}
		h.Write(raw)
	case !ociclient.IsNotFound(err):
		return "", fmt.Errorf("cannot list referrers of %s: %w", d.DigestStr(), ociclient.ClassifyError(repo, err))
	}
	tag, err := ociremote.AttestationTag(d, ociremote.WithRemoteOptions(ropts...))
	if err != nil {
		return "", err
	}
	desc, err := remote.Head(tag, ropts...)
	switch {
	case err == nil:
		h.Write([]byte("\x00" + desc.Digest.String()))
	case !ociclient.IsNotFound(err):
		return "", fmt.Errorf("cannot read %s: %w", tag, ociclient.ClassifyError(repo, err))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
