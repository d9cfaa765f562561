package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/verify"
)

// GateSignature is the blockedBy gate of cosign signatures.
const GateSignature = "signature"

// Reasons of the signature gate besides the verifier's own (SignatureMissing, SignatureInvalid,
// ImageNotFound).
const (
	ReasonVerificationUnavailable = "VerificationUnavailable"
	ReasonKeysUnreadable          = "KeysUnreadable"
)

// signatureBlock verifies digest in the Stage's registry with the keys of verify.secretRef. It
// returns nil and the verdict's message when a trusted key signed this very digest; a block
// otherwise. Verdicts are cached per digest and key set (process-wide), so asking again is cheap.
func (r *StageReconciler) signatureBlock(ctx context.Context, stage *stagecoachv1.Stage, digest string, now time.Time) (*stagecoachv1.GateBlock, string, error) {
	src := stage.Spec.Source.Registry
	block := func(reason, msg string, until *metav1.Time) *stagecoachv1.GateBlock {
		return &stagecoachv1.GateBlock{Gate: GateSignature, Reason: reason, Message: msg, Until: until}
	}
	var keys [][]byte
	if ref := src.Verify.SecretRef; ref != nil {
		secret := &corev1.Secret{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: stage.Namespace, Name: ref.Name}, secret); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
				return block(ReasonKeysUnreadable, fmt.Sprintf("Secret '%s/%s' with the cosign public keys cannot be read (%v): create it or fix verify.secretRef",
					stage.Namespace, ref.Name, err), nil), "", nil
			}
			return nil, "", fmt.Errorf("failed to read Secret %s/%s for Stage %q: %w", stage.Namespace, ref.Name, stage.Name, err)
		}
		var err error
		if keys, err = verify.KeysFromSecretData(secret.Data); err != nil {
			return block(ReasonKeysUnreadable, fmt.Sprintf("Secret '%s/%s': %v", stage.Namespace, ref.Name, err), nil), "", nil
		}
	}
	identities := make([]verify.Identity, 0, len(src.Verify.MatchOIDCIdentity))
	for _, id := range src.Verify.MatchOIDCIdentity {
		identities = append(identities, verify.Identity{Issuer: id.Issuer, Subject: id.Subject})
	}
	keychain, credBlock, err := r.registryKeychain(ctx, stage, src.SecretRef)
	if err != nil || credBlock != nil {
		if credBlock != nil {
			credBlock.Gate = GateSignature
		}
		return credBlock, "", err
	}
	v, err := verify.New(verify.Options{Keys: keys, Identities: identities, Keychain: keychain, Insecure: src.Insecure, Cache: r.verdicts})
	if err != nil {
		return block(ReasonKeysUnreadable, fmt.Sprintf("Stage %s cannot verify signatures: %v", stage.Name, err), nil), "", nil
	}
	verdict, err := v.Verify(ctx, src.Repository+"@"+digest)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return nil, "", err
		}
		retry := metav1.NewTime(now.Add(verify.DefaultNegativeTTL))
		return block(ReasonVerificationUnavailable, fmt.Sprintf("cannot check the signature of %s: %v", digest, err), &retry), "", nil
	}
	if !verdict.Verified {
		// A signature pushed later is seen once the cached verdict expires.
		retry := metav1.NewTime(now.Add(verify.DefaultNegativeTTL))
		return block(verdict.Reason, verdict.Message, &retry), "", nil
	}
	return nil, verdict.Message, nil
}
