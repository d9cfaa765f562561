package verify

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

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

// FuzzIdentityMatch: an identity compiles exactly when both expressions are non-empty regular
// expressions, and then matches a certificate only when each expression matches the whole value
// (the leftmost-longest match from the start reaches the end); a literal matches itself and
// nothing longer.
func FuzzIdentityMatch(f *testing.F) {
	f.Add("^https://token.actions.githubusercontent.com$", "^https://github.com/org/app/.*$",
		"https://token.actions.githubusercontent.com", "https://github.com/org/app/.github/workflows/r.yml@refs/tags/v1")
	f.Add("https://gitlab.com", "a|b", "https://gitlab.com", "ab")
	f.Add("a)|(.*", ".*", "x", "y")
	f.Add("(?m)x$", "", "x\ny", "")
	f.Fuzz(func(t *testing.T, issuerExpr, subjectExpr, issuer, subject string) {
		m, err := compileIdentity(Identity{Issuer: issuerExpr, Subject: subjectExpr})
		_, issuerErr := regexp.Compile(issuerExpr)
		_, subjectErr := regexp.Compile(subjectExpr)
		valid := issuerExpr != "" && subjectExpr != "" && issuerErr == nil && subjectErr == nil
		if (err == nil) != valid {
			t.Fatalf("compileIdentity(%q, %q) = %v, want valid=%v", issuerExpr, subjectExpr, err, valid)
		}
		if err == nil {
			want := wholeMatch(issuerExpr, issuer) && wholeMatch(subjectExpr, subject)
			if got := m.matches(issuer, subject); got != want {
				t.Fatalf("identity {%q, %q} matches (%q, %q) = %v, want %v", issuerExpr, subjectExpr, issuer, subject, got, want)
			}
		}
		if issuer == "" || subject == "" || !utf8.ValidString(issuer) || !utf8.ValidString(subject) {
			return // a Kubernetes string field, where identities come from, is valid UTF-8
		}
		literal, err := compileIdentity(Identity{Issuer: regexp.QuoteMeta(issuer), Subject: regexp.QuoteMeta(subject)})
		if err != nil {
			t.Fatalf("quoted literals do not compile: %v", err)
		}
		if !literal.matches(issuer, subject) || literal.matches(issuer+"x", subject) || literal.matches(issuer, "x"+subject) {
			t.Fatalf("literal identity (%q, %q) matches other values, or not itself", issuer, subject)
		}
	})
}

// wholeMatch is the oracle: expr matches all of s.
func wholeMatch(expr, s string) bool {
	re := regexp.MustCompile(`\A(?:` + expr + `)`)
	re.Longest()
	loc := re.FindStringIndex(s)
	return loc != nil && loc[1] == len(s)
}

// FuzzParseTrustedRoot: a trusted root is refused, or it names a Fulcio and a log or timestamp
// authority, and its fingerprint is the hash of its content.
func FuzzParseTrustedRoot(f *testing.F) {
	f.Add(PublicGoodTrustedRoot())
	f.Add([]byte(`{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`))
	f.Add([]byte(`{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1","certificateAuthorities":[{"certChain":{"certificates":[{"rawBytes":"MAA="}]},"validFor":{"start":"2021-01-01T00:00:00Z"}}]}`))
	f.Add([]byte(`{"tlogs":[{"logId":{"keyId":""},"publicKey":{}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := ParseTrustedRoot(data)
		if err != nil {
			return
		}
		if len(tr.material.FulcioCertificateAuthorities()) == 0 {
			t.Fatal("accepted a root without a Fulcio")
		}
		if len(tr.material.RekorLogs()) == 0 && len(tr.material.TimestampingAuthorities()) == 0 {
			t.Fatal("accepted a root with neither log nor timestamp authority")
		}
		sum := sha256.Sum256(data)
		if tr.Fingerprint != hex.EncodeToString(sum[:]) {
			t.Fatalf("fingerprint %s is not the hash of the content", tr.Fingerprint)
		}
		again, err := trustedRootFor(bytes.Clone(data))
		if err != nil || again.Fingerprint != tr.Fingerprint {
			t.Fatalf("parsing again: %v", err)
		}
	})
}
