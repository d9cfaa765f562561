// Package imagesign signs a release image the way `cosign sign --key` (v2, the legacy format)
// does, offline: a simple-signing payload naming the image's digest, signed with a cosign
// private key, in a signature manifest whose layer carries the dev.cosignproject.cosign/signature
// annotation, stored under the tag sha256-<hex>.sig of the image's repository. `make release`
// writes that manifest into an OCI layout beside the image; `make image-push` pushes it with the
// image. internal/verify (and `cosign verify --key`) check it.
//
//	signer, err := imagesign.LoadKey(keyPEM, password)
//	sig, err := imagesign.Sign(signer, "ghcr.io/stagecoach-dev/stagecoach", digest)
//	err = imagesign.WriteLayout("dist/image-signature", sig)
//	err = imagesign.Push(ctx, "dist/image-signature", "ghcr.io/stagecoach-dev/stagecoach", digest)
package imagesign

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	ggcrempty "github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	"github.com/sigstore/cosign/v3/pkg/oci/empty"
	"github.com/sigstore/cosign/v3/pkg/oci/mutate"
	"github.com/sigstore/cosign/v3/pkg/oci/static"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// refNameAnnotation names a manifest of an OCI layout (its tag).
const refNameAnnotation = "org.opencontainers.image.ref.name"

// Signature is an image's cosign signature manifest and the tag it goes under.
type Signature struct {
	// Image is the signature manifest (one simple-signing layer).
	Image v1.Image
	// Tag is sha256-<hex>.sig, for the image's digest.
	Tag string
}

// LoadKey reads a cosign private key (`cosign generate-key-pair`: an encrypted PEM block,
// ENCRYPTED SIGSTORE PRIVATE KEY or ENCRYPTED COSIGN PRIVATE KEY) with its password.
func LoadKey(keyPEM, password []byte) (signature.Signer, error) {
	s, err := cosign.LoadPrivateKey(keyPEM, password, nil)
	if err != nil {
		return nil, fmt.Errorf("cannot read the cosign private key (check the file and COSIGN_PASSWORD): %w", err)
	}
	return s, nil
}

// LoadKeyFile is LoadKey on a file.
func LoadKeyFile(path string, password []byte) (signature.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the cosign private key: %w", err)
	}
	s, err := LoadKey(data, password)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Sign signs repository@digest: the payload's docker-reference is the repository the image is
// pushed to, and its docker-manifest-digest the digest (what a verifier checks).
func Sign(signer signature.Signer, repository string, digest v1.Hash) (Signature, error) {
	ref, err := name.NewDigest(repository + "@" + digest.String())
	if err != nil {
		return Signature{}, fmt.Errorf("image %s@%s: %w", repository, digest, err)
	}
	pl, err := (&payload.Cosign{Image: ref}).MarshalJSON()
	if err != nil {
		return Signature{}, err
	}
	raw, err := signer.SignMessage(bytes.NewReader(pl))
	if err != nil {
		return Signature{}, fmt.Errorf("sign %s: %w", ref, err)
	}
	sig, err := static.NewSignature(pl, base64.StdEncoding.EncodeToString(raw))
	if err != nil {
		return Signature{}, err
	}
	// No creation time in the manifest: the same signature bytes give the same manifest.
	sigs, err := mutate.AppendSignatures(empty.Signatures(), false, sig)
	if err != nil {
		return Signature{}, err
	}
	return Signature{Image: sigs, Tag: Tag(digest)}, nil
}

// Tag is where cosign keeps the signatures of digest: sha256-<hex>.sig.
func Tag(digest v1.Hash) string { return digest.Algorithm + "-" + digest.Hex + ".sig" }

// WriteLayout writes the signature as the one manifest of an OCI layout at dir (replacing one
// there), named by its tag.
func WriteLayout(dir string, sig Signature) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, ggcrempty.Index)
	if err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	if err := p.AppendImage(sig.Image, layout.WithAnnotations(map[string]string{refNameAnnotation: sig.Tag})); err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	return nil
}

// ReadLayout reads the signature WriteLayout wrote.
func ReadLayout(dir string) (Signature, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return Signature{}, fmt.Errorf("signature layout %s: %w", dir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return Signature{}, err
	}
	if len(m.Manifests) != 1 || !strings.HasSuffix(m.Manifests[0].Annotations[refNameAnnotation], ".sig") {
		return Signature{}, fmt.Errorf("signature layout %s does not hold one sha256-<hex>.sig manifest: run make release again", dir)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		return Signature{}, err
	}
	return Signature{Image: img, Tag: m.Manifests[0].Annotations[refNameAnnotation]}, nil
}

// Push sends the signature at dir to repository, under the tag of digest; it refuses a
// signature of another digest (an older release's).
func Push(ctx context.Context, dir, repository string, digest v1.Hash, opts ...remote.Option) (string, error) {
	sig, err := ReadLayout(dir)
	if err != nil {
		return "", err
	}
	if sig.Tag != Tag(digest) {
		return "", fmt.Errorf("the signature in %s is %s, not that of the image %s: run make release again (with COSIGN_KEY) or delete %s",
			dir, sig.Tag, digest, dir)
	}
	repo, err := name.NewRepository(repository)
	if err != nil {
		return "", fmt.Errorf("repository %q: %w", repository, err)
	}
	tag := repo.Tag(sig.Tag)
	if err := remote.Write(tag, sig.Image, append(opts, remote.WithContext(ctx))...); err != nil {
		return "", fmt.Errorf("push the signature to %s: %w", tag, err)
	}
	return tag.String(), nil
}
