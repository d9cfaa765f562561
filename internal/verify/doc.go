// Package verify checks cosign signatures of image digests before Stagecoach offers them.
//
// A Verifier trusts a set of public keys (every *.pub entry of a Secret) and, for a digest,
// looks first for Sigstore bundles attached as OCI referrers (cosign v3's default) and then for
// legacy signatures under the <repo>:sha256-<hex>.sig tag (cosign v2's default). Verification is
// offline: no transparency log, no Fulcio. A signature only counts when what it signs is this very
// digest, so a signature copied from another digest is rejected.
//
//	keys, err := verify.KeysFromSecretData(secret.Data)
//	v, err := verify.New(verify.Options{Keys: keys, Keychain: kc, Cache: sharedCache})
//	verdict, err := v.Verify(ctx, "registry.example/deploy/payments@sha256:...")
//	// err != nil: could not check (registry down, credentials refused) — retry later.
//	// !verdict.Verified: verdict.Reason is SignatureMissing, SignatureInvalid or ImageNotFound.
//
// Verdicts are cached per repository, digest and trusted key set: verified ones until evicted,
// missing or invalid ones for NegativeTTL, errors never.
package verify
