package verify

import (
	"context"
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
		keyID, err := v.verifyLegacySignature(ctx, local, hash)
		if err != nil {
			failures = append(failures, failure{format: FormatLegacy, what: what, err: err})
			continue
		}
		return v.verified(d, FormatLegacy, keyID, what), nil, nil
	}
	return Verdict{}, failures, nil
}

// verifyLegacySignature returns the ID of the first trusted key that verifies sig for hash.
func (v *Verifier) verifyLegacySignature(ctx context.Context, sig oci.Signature, hash v1.Hash) (string, error) {
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
		return k.id, nil
	}
	if len(v.keys) > 1 {
		return "", fmt.Errorf("no trusted key verifies it (last: %w)", lastErr)
	}
	return "", lastErr
}
