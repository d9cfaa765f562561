package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/verify"
)

// Keyless trust in the keys directory, spelled as a Stage's spec.source.registry.verify: the
// mounted Secret is the plugin's secretRef and trustedRoot.secretRef at once.
const (
	// cmpIdentitiesFile lists the keyless identities: {matchOIDCIdentity: [{issuer, subject}]}.
	cmpIdentitiesFile = "verify.yaml"
	// cmpTrustedRootFile is the trusted_root.json keyless signatures are checked against (the
	// default key of verify.trustedRoot); absent: the public Sigstore instance's.
	cmpTrustedRootFile = "trusted_root.json"
)

// cmpKeyless is verify.yaml. Strict: a misspelt field must not leave the plugin trusting nothing
// the user meant, or more.
type cmpKeyless struct {
	MatchOIDCIdentity []stagecoachv1.OIDCIdentityMatch `json:"matchOIDCIdentity"`
}

// cosignVerifier checks digests against the cosign public keys (every *.pub file) in keysDir and
// the keyless identities of its verify.yaml (checked against its trusted_root.json, else the
// public Sigstore instance's), offline, legacy .sig and Sigstore bundles alike, with the claim
// checked: the same verification the controller applies to registry sources. Registries are read
// anonymously.
func cosignVerifier(keysDir string) (func(ctx context.Context, imageRef string) error, error) {
	entries, err := os.ReadDir(keysDir)
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{}
	var opts verify.Options
	for _, e := range entries {
		// A mounted Secret also holds ..data and timestamped directories: skip them.
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		read := func() ([]byte, error) { return os.ReadFile(filepath.Join(keysDir, e.Name())) }
		switch {
		case strings.HasSuffix(e.Name(), ".pub"):
			b, err := read()
			if err != nil {
				return nil, err
			}
			data[e.Name()] = b
		case e.Name() == cmpIdentitiesFile:
			b, err := read()
			if err != nil {
				return nil, err
			}
			if opts.Identities, err = parseCMPKeyless(b); err != nil {
				return nil, err
			}
		case e.Name() == cmpTrustedRootFile:
			if opts.TrustedRoot, err = read(); err != nil {
				return nil, err
			}
		}
	}
	if opts.TrustedRoot != nil && len(opts.Identities) == 0 {
		return nil, fmt.Errorf("%s is for keyless signatures, but there is no %s listing the identities that sign (matchOIDCIdentity: [{issuer, subject}])",
			cmpTrustedRootFile, cmpIdentitiesFile)
	}
	if len(data) == 0 && len(opts.Identities) == 0 {
		return nil, errNoKeys
	}
	if len(data) > 0 {
		if opts.Keys, err = verify.KeysFromSecretData(data); err != nil {
			return nil, err
		}
	}
	v, err := verify.New(opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, imageRef string) error {
		verdict, err := v.Verify(ctx, imageRef)
		if err != nil {
			return fmt.Errorf("cannot check the signature: %w", err)
		}
		if !verdict.Verified {
			return fmt.Errorf("%s: %s", verdict.Reason, verdict.Message)
		}
		return nil
	}, nil
}

// parseCMPKeyless reads verify.yaml; errors name the file and what to fix.
func parseCMPKeyless(b []byte) ([]verify.Identity, error) {
	var doc cmpKeyless
	if err := yaml.UnmarshalStrict(b, &doc); err != nil {
		return nil, fmt.Errorf("%s is not of the form {matchOIDCIdentity: [{issuer, subject}]}: %w", cmpIdentitiesFile, err)
	}
	if len(doc.MatchOIDCIdentity) == 0 {
		return nil, errors.New(cmpIdentitiesFile + " lists no matchOIDCIdentity: list at least one {issuer, subject}, or remove the file to trust only the *.pub keys")
	}
	ids := make([]verify.Identity, len(doc.MatchOIDCIdentity))
	for i, m := range doc.MatchOIDCIdentity {
		ids[i] = verify.Identity{Issuer: m.Issuer, Subject: m.Subject}
	}
	return ids, nil
}
