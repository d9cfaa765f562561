// Package verify checks cosign signatures of image digests before Stagecoach offers them.
//
// A Verifier trusts a set of public keys (every *.pub entry of a Secret), a set of keyless
// identities (the OIDC issuer and subject a short-lived Fulcio certificate names, such as a
// GitHub Actions workflow at a tag), or both. For a digest it looks first for Sigstore bundles
// attached as OCI referrers (cosign v3's default) and then for legacy signatures under the
// <repo>:sha256-<hex>.sig tag (cosign v2's default). A signature only counts when what it signs
// is this very digest, so a signature copied from another digest is rejected.
//
// Verification is offline. Keys: no transparency log, no Fulcio. Keyless: against a Sigstore
// trusted root (the public instance's, shipped with Stagecoach, or a trusted_root.json given):
// the certificate chains to its Fulcio, names a trusted identity, carries an SCT of its CT log,
// and a log entry (or a signed timestamp) of the root's logs and timestamp authorities says the
// signature was made while the certificate was valid. A refusal names the part that failed
// (Verdict.Failure) and, for keyless, who the certificate says signed.
//
//	keys, err := verify.KeysFromSecretData(secret.Data)
//	v, err := verify.New(verify.Options{Keys: keys, Keychain: kc, Cache: sharedCache})
//	v, err := verify.New(verify.Options{Identities: []verify.Identity{{
//		Issuer:  "^https://token.actions.githubusercontent.com$",
//		Subject: "^https://github.com/org/app/.github/workflows/release.yml@refs/tags/v.*$"}}})
//	verdict, err := v.Verify(ctx, "registry.example/deploy/payments@sha256:...")
//	// err != nil: could not check (registry down, credentials refused) — retry later.
//	// !verdict.Verified: verdict.Reason is SignatureMissing, SignatureInvalid or ImageNotFound.
//	// verdict.Signer: who signed keyless (issuer, subject, workflow, ref).
//
// BlobVerifier checks the same keyless trust over bytes that are not images (a Sigstore bundle
// as `cosign sign-blob --bundle` writes it): Stagecoach's signed records use it.
//
// Verdicts are cached per repository, digest and trust (the key set, the identity set and the
// trusted root's content): verified ones until evicted, missing or invalid ones for NegativeTTL
// or until the registry source lists the repository again (Cache.ForgetUnsigned), errors never.
package verify
