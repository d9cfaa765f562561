package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/stagecoach-dev/stagecoach/internal/verify"
)

// cosignVerifier checks digests against the cosign public keys (every *.pub file) in keysDir,
// offline, legacy .sig and Sigstore bundles alike, with the claim checked: the same verification
// the controller applies to registry sources. Registries are read anonymously.
func cosignVerifier(keysDir string) (func(ctx context.Context, imageRef string) error, error) {
	entries, err := os.ReadDir(keysDir)
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{}
	for _, e := range entries {
		// A mounted Secret also holds ..data and timestamped directories: skip them.
		if strings.HasPrefix(e.Name(), "..") || !strings.HasSuffix(e.Name(), ".pub") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(keysDir, e.Name()))
		if err != nil {
			return nil, err
		}
		data[e.Name()] = b
	}
	if len(data) == 0 {
		return nil, errNoKeys
	}
	keys, err := verify.KeysFromSecretData(data)
	if err != nil {
		return nil, err
	}
	v, err := verify.New(verify.Options{Keys: keys})
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
