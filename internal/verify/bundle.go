package verify

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	"github.com/sigstore/cosign/v3/pkg/types"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	sgbundle "github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	sgverify "github.com/sigstore/sigstore-go/pkg/verify"

	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
)

// bundleArtifactTypePrefix matches the artifact types cosign gives Sigstore bundle referrers
// (application/vnd.dev.sigstore.bundle.v0.3+json).
const bundleArtifactTypePrefix = "application/vnd.dev.sigstore.bundle"

// emptyConfigMediaType is the config of artifacts that carry their type elsewhere.
const emptyConfigMediaType = "application/vnd.oci.empty.v1+json"

// inTotoPayloadType is the DSSE payload type of an in-toto statement.
const inTotoPayloadType = "application/vnd.in-toto+json"

// checkBundles verifies the Sigstore bundles attached to the digest as OCI referrers.
func (v *Verifier) checkBundles(ctx context.Context, d name.Digest, hash v1.Hash, ropts []remote.Option) (Verdict, []failure, error) {
	repo := d.Context().Name()
	// The registry's referrers API, or the sha256-<hex> referrers tag when it has none.
	idx, err := remote.Referrers(d, ropts...)
	if err != nil {
		if ociclient.IsNotFound(err) {
			return Verdict{}, nil, nil
		}
		return Verdict{}, nil, fmt.Errorf("cannot list referrers of %s: %w", d.DigestStr(), ociclient.ClassifyError(repo, err))
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return Verdict{}, nil, fmt.Errorf("cannot read referrers of %s: %w", d.DigestStr(), ociclient.ClassifyError(repo, err))
	}
	want, err := digestBytes(hash)
	if err != nil {
		return Verdict{}, nil, err
	}

	var failures []failure
	for _, desc := range im.Manifests {
		ref := d.Context().Digest(desc.Digest.String())
		switch {
		case strings.HasPrefix(desc.ArtifactType, bundleArtifactTypePrefix):
		case desc.ArtifactType == "" || desc.ArtifactType == emptyConfigMediaType:
			// Some registries report the config media type instead of the manifest's artifactType.
			ok, err := isBundleManifest(ref, ropts)
			if err != nil {
				return Verdict{}, nil, fmt.Errorf("cannot read referrer %s of %s: %w", desc.Digest, d.DigestStr(), ociclient.ClassifyError(repo, err))
			}
			if !ok {
				continue
			}
		default:
			continue // other referrers (SBOMs, other tools' attestations) are not signatures
		}
		what := "bundle " + desc.Digest.String()
		b, err := ociremote.Bundle(ref, ociremote.WithRemoteOptions(ropts...))
		if err != nil {
			if ociclient.IsInfrastructure(err) {
				return Verdict{}, nil, fmt.Errorf("cannot read %s of %s: %w", what, d.DigestStr(), ociclient.ClassifyError(repo, err))
			}
			failures = append(failures, failure{format: FormatBundle, what: what, err: err})
			continue
		}
		keyID, signer, err := v.verifyBundle(ctx, b, hash, want, func() error { return checkBundleClaim(b, hash, want) })
		if err != nil {
			failures = append(failures, failure{format: FormatBundle, what: what, err: err, part: partOf(err, FailureKey), signer: signer})
			continue
		}
		return v.verified(d, FormatBundle, keyID, signer, what), nil, nil
	}
	return Verdict{}, failures, nil
}

// verifyBundle verifies b, after checking that what it signs is this very digest: a bundle with
// a Fulcio certificate against the trusted identities (returning who signed), one signed with a
// key against the trusted keys (returning the ID of the first that verifies).
func (v *Verifier) verifyBundle(ctx context.Context, b *sgbundle.Bundle, hash v1.Hash, want []byte, claim func() error) (string, *Signer, error) {
	// Claim first: it does not depend on the key, and a bundle copied from another digest
	// must fail whatever key signed it.
	if err := claim(); err != nil {
		return "", nil, &partError{part: FailureClaim, err: err}
	}
	vc, err := b.VerificationContent()
	if err != nil {
		return "", nil, failed(FailureForm, "bundle has no verification material: %v", err)
	}
	if leaf := vc.Certificate(); leaf != nil {
		if v.keyless == nil {
			return "", nil, failed(FailureForm, "signed keyless (a certificate naming %s), but only keys are trusted: list the signer in verify.matchOIDCIdentity",
				subjectOf(leaf))
		}
		signer, err := v.keyless.verifyBundle(b, leaf, hash.Algorithm, want)
		return "", signer, err
	}
	if len(v.keys) == 0 {
		return "", nil, failed(FailureForm, "signed with a key, but only keyless identities are trusted: add its public key to verify.secretRef")
	}
	var lastErr error
	for _, k := range v.keys {
		co := &cosign.CheckOpts{
			SigVerifier:     k.verifier,
			IgnoreTlog:      true,
			Offline:         true,
			NewBundleFormat: true,
		}
		// WithArtifactDigest makes sigstore-go check the statement subject (or message digest) too.
		if _, err := cosign.VerifyNewBundle(ctx, co, sgverify.WithArtifactDigest(hash.Algorithm, want), b); err != nil {
			lastErr = err
			continue
		}
		return k.id, nil, nil
	}
	if len(v.keys) > 1 {
		return "", nil, fmt.Errorf("no trusted key verifies it (last: %w)", lastErr)
	}
	return "", nil, lastErr
}

// subjectOf names a certificate's identity for messages, as well as it can.
func subjectOf(cert *x509.Certificate) string {
	s, err := certificate.SummarizeCertificate(cert)
	if err != nil {
		return fmt.Sprintf("%q", cert.Subject.String())
	}
	return signerOf(s).String()
}

// checkBundleClaim requires the bundle to sign exactly this manifest digest: a DSSE bundle must
// carry a cosign signing statement whose subject has the digest; a message-signature bundle must
// have the digest as its message digest.
func checkBundleClaim(b *sgbundle.Bundle, hash v1.Hash, want []byte) error {
	if env := b.GetDsseEnvelope(); env != nil {
		if env.GetPayloadType() != inTotoPayloadType {
			return fmt.Errorf("bundle payload type %q is not an in-toto statement", env.GetPayloadType())
		}
		var st struct {
			PredicateType string `json:"predicateType"`
			Subject       []struct {
				Digest map[string]string `json:"digest"`
			} `json:"subject"`
		}
		if err := json.Unmarshal(env.GetPayload(), &st); err != nil {
			return fmt.Errorf("bundle statement is not valid JSON: %w", err)
		}
		if st.PredicateType != types.CosignSignPredicateType {
			return fmt.Errorf("bundle is an attestation of type %q, not a cosign signature (%s)", st.PredicateType, types.CosignSignPredicateType)
		}
		for _, s := range st.Subject {
			if s.Digest[hash.Algorithm] == hash.Hex {
				return nil
			}
		}
		return fmt.Errorf("bundle signs another digest, not %s", hash)
	}
	if ms := b.GetMessageSignature(); ms != nil {
		md := ms.GetMessageDigest()
		if md.GetAlgorithm() == protocommon.HashAlgorithm_SHA2_256 && bytes.Equal(md.GetDigest(), want) {
			return nil
		}
		return fmt.Errorf("bundle signs message digest %s, not %s", hex.EncodeToString(md.GetDigest()), hash)
	}
	return errors.New("bundle has neither a DSSE envelope nor a message signature")
}

// isBundleManifest reads a referrer manifest and reports whether it carries a Sigstore bundle.
// Errors are registry errors only; a manifest that does not parse is simply not a bundle.
func isBundleManifest(ref name.Digest, ropts []remote.Option) (bool, error) {
	desc, err := remote.Get(ref, ropts...)
	if err != nil {
		return false, err
	}
	var m struct {
		ArtifactType string `json:"artifactType"`
		Layers       []struct {
			MediaType string `json:"mediaType"`
		} `json:"layers"`
	}
	if json.Unmarshal(desc.Manifest, &m) != nil {
		return false, nil
	}
	if strings.HasPrefix(m.ArtifactType, bundleArtifactTypePrefix) {
		return true, nil
	}
	return len(m.Layers) == 1 && strings.HasPrefix(m.Layers[0].MediaType, bundleArtifactTypePrefix), nil
}
