package registry

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// TrustedRoot reads the Sigstore trusted_root.json a Stage's verify.trustedRoot names, from a
// Secret of its namespace; nil ref means the public Sigstore instance's (nil data). A Secret or
// entry a person must create or fix is a signature block (KeysUnreadable: no version can pass
// without it), not an error.
func TrustedRoot(ctx context.Context, secrets client.Reader, stage *stagecoachv1.Stage, ref *stagecoachv1.TrustedRootSource) ([]byte, *stagecoachv1.GateBlock, error) {
	if ref == nil {
		return nil, nil, nil
	}
	block := func(format string, args ...any) ([]byte, *stagecoachv1.GateBlock, error) {
		return nil, &stagecoachv1.GateBlock{Gate: stagecoachv1.GateSignature, Reason: stagecoachv1.ReasonKeysUnreadable,
			Message: fmt.Sprintf(format, args...)}, nil
	}
	name, key := ref.SecretRef.Name, ref.GetKey()
	secret := &corev1.Secret{}
	if err := secrets.Get(ctx, client.ObjectKey{Namespace: stage.Namespace, Name: name}, secret); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return block("Secret '%s/%s' with the Sigstore trusted root cannot be read (%v): create it or fix verify.trustedRoot",
				stage.Namespace, name, err)
		}
		return nil, nil, fmt.Errorf("failed to read Secret %s/%s for Stage %q: %w", stage.Namespace, name, stage.Name, err)
	}
	data := secret.Data[key]
	if len(data) == 0 {
		return block("Secret '%s/%s' has no %s entry: put the trusted_root.json of the Sigstore instance there, or set verify.trustedRoot.key",
			stage.Namespace, name, key)
	}
	return data, nil, nil
}
