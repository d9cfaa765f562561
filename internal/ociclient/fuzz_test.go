package ociclient

import (
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// FuzzKeychainFromDockerConfig: any Secret content either is refused with an error that does not
// quote a password, or yields a keychain that answers for any registry without panicking.
func FuzzKeychainFromDockerConfig(f *testing.F) {
	f.Add([]byte(`{"auths":{"registry.example":{"auth":"dXNlcjpzM2NyZXQ="}}}`), "registry.example")
	f.Add([]byte(`{"registry.example":{"username":"u","password":"s3cret"}}`), "registry.example")
	f.Add([]byte(`{"auths":{"https://index.docker.io/v1/":{"identitytoken":"tok"}}}`), "index.docker.io")
	f.Add([]byte(`{"auths":{"r:5000":{"auth":"bm8tY29sb24="}}}`), "r:5000")
	f.Add([]byte(`{"auths":null}`), "x")
	f.Add([]byte(`[]`), "x")
	f.Fuzz(func(t *testing.T, data []byte, host string) {
		kc, err := KeychainFromDockerConfig(data)
		if err != nil {
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("error quotes a password: %v", err)
			}
			return
		}
		reg, err := name.NewRegistry(host, name.Insecure)
		if err != nil {
			return
		}
		auth, err := kc.Resolve(reg)
		if err != nil {
			return
		}
		if auth == nil {
			t.Fatalf("nil authenticator for %q", host)
		}
		_, _ = authn.Authorization(t.Context(), auth)
	})
}
