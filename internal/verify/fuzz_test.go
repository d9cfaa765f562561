package verify

import (
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/cosign/v3/pkg/types"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protodsse "github.com/sigstore/protobuf-specs/gen/pb-go/dsse"
	sgbundle "github.com/sigstore/sigstore-go/pkg/bundle"
)

// FuzzKeysFromSecretData: a key Secret's entries either are refused or every key returned is a
// usable public key.
func FuzzKeysFromSecretData(f *testing.F) {
	f.Add("cosign.pub", []byte("-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----\n"))
	f.Add("cosign.key", []byte("x"))
	f.Add("a.pub", []byte{})
	f.Fuzz(func(t *testing.T, entry string, data []byte) {
		keys, err := KeysFromSecretData(map[string][]byte{entry: data})
		if err != nil {
			return
		}
		for _, k := range keys {
			if _, err := parseKey(k); err != nil {
				t.Fatalf("KeysFromSecretData accepted a key parseKey refuses: %v", err)
			}
		}
	})
}

// FuzzCheckBundleClaim: a DSSE bundle's claim passes only when its statement is a cosign signature
// whose subjects name the digest.
func FuzzCheckBundleClaim(f *testing.F) {
	const hexDigest = "aa00000000000000000000000000000000000000000000000000000000000000"
	good, _ := json.Marshal(map[string]any{"predicateType": types.CosignSignPredicateType,
		"subject": []map[string]any{{"digest": map[string]string{"sha256": hexDigest}}}})
	f.Add(good, inTotoPayloadType)
	f.Add([]byte(`{"predicateType":"x","subject":[]}`), inTotoPayloadType)
	f.Add([]byte(`{"subject":[{"digest":null}]}`), inTotoPayloadType)
	f.Add([]byte(`not json`), "text/plain")
	f.Fuzz(func(t *testing.T, payload []byte, payloadType string) {
		hash := v1.Hash{Algorithm: "sha256", Hex: hexDigest}
		want, _ := hex.DecodeString(hexDigest)
		b := &sgbundle.Bundle{Bundle: &protobundle.Bundle{Content: &protobundle.Bundle_DsseEnvelope{
			DsseEnvelope: &protodsse.Envelope{Payload: payload, PayloadType: payloadType}}}}
		if err := checkBundleClaim(b, hash, want); err != nil {
			return
		}
		var st struct {
			PredicateType string `json:"predicateType"`
			Subject       []struct {
				Digest map[string]string `json:"digest"`
			} `json:"subject"`
		}
		named := false
		if json.Unmarshal(payload, &st) == nil {
			for _, s := range st.Subject {
				named = named || strings.EqualFold(s.Digest["sha256"], hexDigest) && s.Digest["sha256"] == hexDigest
			}
		}
		if payloadType != inTotoPayloadType || st.PredicateType != types.CosignSignPredicateType || !named {
			t.Fatalf("claim accepted for payload %q of type %q", payload, payloadType)
		}
	})
}
