package promotion

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/source/registry"
	"github.com/stagecoach-dev/stagecoach/internal/verify"
)

// signers is who a Stage trusts to sign, as verify (signatures) and each verify.attestations
// entry name them: the cosign keys of a Secret, and keyless identities with their trusted root.
type signers struct {
	secretRef  *stagecoachv1.LocalObjectReference
	identities []stagecoachv1.OIDCIdentityMatch
	root       *stagecoachv1.TrustedRootSource
	// gate is the gate a block holds the version at; field is the spec field naming the signers
	// (for the Secret's messages) and what, the noun of "cannot verify ...".
	gate, field, what string
}

// verifier is the one assembly of what checks signatures by s: the signature gate's and the
// attestations gate's. It reads the keys, the trusted root, then the registry's credentials
// (keychain, which may block on its own gate). The block says what keeps it from being built (a
// Secret unreadable, a broken trusted root or key); errors are for retries only.
func (r *Runner) verifier(ctx context.Context, stage *stagecoachv1.Stage, s signers, insecure bool,
	keychain func() (authn.Keychain, *stagecoachv1.GateBlock, error)) (*verify.Verifier, *stagecoachv1.GateBlock, error) {
	held := func(reason, msg string) (*verify.Verifier, *stagecoachv1.GateBlock, error) {
		return nil, &stagecoachv1.GateBlock{Gate: s.gate, Reason: reason, Message: msg}, nil
	}
	keys, unreadable, err := r.trustedKeys(ctx, stage, s.secretRef, s.field+".secretRef")
	if err != nil {
		return nil, nil, err
	}
	if unreadable != "" {
		return held(stagecoachv1.ReasonKeysUnreadable, unreadable)
	}
	identities := make([]verify.Identity, 0, len(s.identities))
	for _, id := range s.identities {
		identities = append(identities, verify.Identity{Issuer: id.Issuer, Subject: id.Subject})
	}
	root, rootBlock, err := registry.TrustedRoot(ctx, r.APIReader, stage, s.root)
	if err != nil {
		return nil, nil, err
	}
	if rootBlock != nil {
		return held(rootBlock.Reason, rootBlock.Message)
	}
	if root == nil && len(identities) > 0 {
		// The controller's trusted root, for keyless signers only (verify.New refuses a root
		// without identities); nil still: the shipped one.
		root = r.SigstoreTrustedRoot
	}
	kc, credBlock, err := keychain()
	if err != nil || credBlock != nil {
		return nil, credBlock, err
	}
	v, err := verify.New(verify.Options{Keys: keys, Identities: identities, TrustedRoot: root, Keychain: kc, Insecure: insecure,
		Cache: r.Verdicts, Transport: r.RegistryTransport})
	if err != nil {
		return held(stagecoachv1.ReasonKeysUnreadable, fmt.Sprintf("Stage %s cannot verify %s: %v", stage.Name, s.what, err))
	}
	return v, nil, nil
}
