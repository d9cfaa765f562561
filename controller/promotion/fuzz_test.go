package promotion

import (
	"testing"
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
