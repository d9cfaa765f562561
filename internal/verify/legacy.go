package verify

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	"github.com/sigstore/cosign/v3/pkg/oci"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	"github.com/sigstore/cosign/v3/pkg/oci/static"

	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
)

// checkLegacy verifies the signatures under the digest's .sig tag. It reads them once and then
// verifies locally, so trying several keys costs no extra requests.
func (v *Verifier) checkLegacy(ctx context.Context, d name.Digest, hash v1.Hash, ropts []remote.Option) (Verdict, []failure, error) {
	repo := d.Context().Name()
	oopts := []ociremote.Option{ociremote.WithRemoteOptions(ropts...)}
	tag, err := ociremote.SignatureTag(d, oopts...)
	if err != nil {
		return Verdict{}, nil, fmt.Errorf("cannot name the signature tag of %s: %w", d, err)
	}
	sigs, err := ociremote.Signatures(tag, oopts...) // a missing tag is an empty list
	if err != nil {
		return Verdict{}, nil, fmt.Errorf("cannot read signatures %s: %w", tag, ociclient.ClassifyError(repo, err))
	}
	list, err := sigs.Get()
	if err != nil {
		if ociclient.IsInfrastructure(err) {
			return Verdict{}, nil, fmt.Errorf("cannot read signatures %s: %w", tag, ociclient.ClassifyError(repo, err))
		}
		return Verdict{}, []failure{{format: FormatLegacy, what: "signature tag " + tag.TagStr(), err: err}}, nil
	}

	var failures []failure
	for i, sig := range list {
		what := fmt.Sprintf("legacy signature %d in %s", i+1, tag.TagStr())
		// Copy reads payload and annotations now, so network trouble is not mistaken for a bad signature.
		local, err := static.Copy(sig)
		if err != nil {
			if ociclient.IsInfrastructure(err) {
				return Verdict{}, nil, fmt.Errorf("cannot read %s: %w", what, ociclient.ClassifyError(repo, err))
			}
			failures = append(failures, failure{format: FormatLegacy, what: what, err: err})
			continue
		}
		keyID, signer, err := v.verifyLegacySignature(ctx, local, hash)
		if err != nil {
			failures = append(failures, failure{format: FormatLegacy, what: what, err: err, part: partOf(err, FailureKey), signer: signer})
			continue
		}
		return v.verified(d, FormatLegacy, keyID, signer, what), nil, nil
	}
	return Verdict{}, failures, nil
}

// verifyLegacySignature verifies sig for hash: with the trusted keys first (returning the ID of
// the first that verifies), then, when it carries a Fulcio certificate, keyless against the
// trusted identities (returning who signed).
func (v *Verifier) verifyLegacySignature(ctx context.Context, sig oci.Signature, hash v1.Hash) (string, *Signer, error) {
	payload, err := sig.Payload()
	if err != nil {
		return "", nil, failed(FailureForm, "payload unreadable: %v", err)
	}
	// Claim first: a signature copied from another digest's .sig tag must fail whoever signed it.
	if err := checkLegacyClaim(payload, hash); err != nil {
		return "", nil, &partError{part: FailureClaim, err: err}
	}
	cert, err := sig.Cert()
	if err != nil {
		return "", nil, failed(FailureForm, "certificate annotation unreadable: %v", err)
	}
	var lastErr error
	for _, k := range v.keys {
		co := &cosign.CheckOpts{
			SigVerifier: k.verifier,
			IgnoreTlog:  true,
			Offline:     true,
			// Without the claim check a signature copied from another digest's .sig tag verifies.
			ClaimVerifier: cosign.SimpleClaimVerifier,
		}
		if _, err := cosign.VerifyImageSignature(ctx, sig, hash, co); err != nil {
			lastErr = err
			continue
		}
		return k.id, nil, nil
	}
	switch {
	case cert != nil && v.keyless != nil:
		signer, err := v.keyless.verifyLegacy(sig, cert)
		return "", signer, err
	case cert != nil && len(v.keys) == 0:
		return "", nil, failed(FailureForm, "signed keyless (a certificate naming %s), but only keys are trusted: list the signer in verify.matchOIDCIdentity",
			subjectOf(cert))
	case len(v.keys) == 0:
		return "", nil, failed(FailureForm, "signed with a key, but only keyless identities are trusted: add its public key to verify.secretRef")
	case len(v.keys) > 1:
		return "", nil, fmt.Errorf("no trusted key verifies it (last: %w)", lastErr)
	}
	return "", nil, lastErr
}

// checkLegacyClaim requires a simple-signing payload to name this very manifest digest.
func checkLegacyClaim(payload []byte, hash v1.Hash) error {
	var p struct {
		Critical struct {
			Image struct {
				Digest string `json:"docker-manifest-digest"`
			} `json:"image"`
		} `json:"critical"`
	}
	if err := json.Unmarshal(payload, &p); err != nil {
		return fmt.Errorf("invalid or missing digest in claim: payload is not a simple-signing document: %w", err)
	}
	if p.Critical.Image.Digest != hash.String() {
		return fmt.Errorf("invalid or missing digest in claim: the payload signs %q, not %s", p.Critical.Image.Digest, hash)
	}
	return nil
}
