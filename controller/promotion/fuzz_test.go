package promotion

import (
	"testing"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// A signing key Secret is whatever its author wrote: reading it never panics, and a Secret that
// reads gives a signer and the public key Stagecoach tells its own commits by.
func FuzzSignerFrom(f *testing.F) {
	f.Add("git.asc", []byte("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nxx\n-----END PGP PRIVATE KEY BLOCK-----\n"), []byte("secret"))
	f.Add("identity", []byte("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"), []byte(""))
	f.Add("identity", []byte("not a key"), []byte("pw"))
	f.Add("other", []byte("x"), []byte(""))
	f.Fuzz(func(t *testing.T, key string, value, passphrase []byte) {
		data := map[string][]byte{key: value, "passphrase": passphrase, "password": passphrase}
		signer, _, err := SignerFrom(data)
		if err == nil && signer == nil {
			t.Fatal("SignerFrom returned neither a signer nor an error")
		}
	})
}

// A promotion.git.set value is a template from a Stage's spec: rendering any text never panics,
// and what renders holds no template action left undone.
func FuzzRenderValue(f *testing.F) {
	f.Add("")
	f.Add("{{ .Digest }}")
	f.Add("ghcr.io/acme/web@{{ .Digest }}")
	f.Add("{{ .Version }}-{{ .Stage }}")
	f.Add("{{ .Nope }}")
	f.Add("{{")
	f.Add("{{ printf \"%s\" .Digest }}")
	version := &stagecoachv1.VersionReference{Digest: "sha256:0123", Tag: "v1.2.3"}
	f.Fuzz(func(t *testing.T, value string) {
		out, err := RenderValue(value, "prod", version)
		if err != nil {
			return
		}
		if value == "" && out != version.Digest {
			t.Fatalf("an empty value renders the digest, got %q", out)
		}
	})
}
