package records

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/stagecoach-dev/stagecoach/internal/records/trust"
	"github.com/stagecoach-dev/stagecoach/internal/verify/verifytest"
)

// signKeyless replaces the signature of the record under tag with a keyless one by ci, certified
// by sigstore: the record bytes stay, so its digest (and the chain) does too.
func (r *testRegistry) signKeyless(t testing.TB, tag string, sigstore *verifytest.Sigstore, ci verifytest.CI) {
	t.Helper()
	ref, err := name.NewTag(r.repository() + ":" + tag)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(ref, remote.WithContext(t.Context()))
	if err != nil {
		t.Fatalf("get %s: %v", ref, err)
	}
	var m v1.Manifest
	if err := json.Unmarshal(desc.Manifest, &m); err != nil {
		t.Fatal(err)
	}
	bundle := sigstore.SignBlob(t, m.Layers[0].Data, ci, verifytest.Keyless{})
	delete(m.Annotations, annotationSignature)
	delete(m.Annotations, annotationKeyID)
	m.Annotations[annotationBundle] = base64.StdEncoding.EncodeToString(bundle)
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Put(ref, rawManifest(raw), remote.WithContext(t.Context())); err != nil {
		t.Fatalf("put %s: %v", ref, err)
	}
}

// keylessTrust is a trust config whose entry "staging-ci" trusts the release workflow of
// org/delivery keyless, certified by root (nil: the public Sigstore instance's), plus entries
// of keys.
func keylessTrust(t testing.TB, root []byte, keys map[string]testKey) *trust.Config {
	t.Helper()
	entry := map[string]any{"name": "staging-ci", "repositories": []string{testRepositories}, "streams": []string{testStream},
		"matchOIDCIdentity": []map[string]string{{"issuer": "^https://token.actions.githubusercontent.com$",
			"subject": "^https://github.com/org/delivery/.github/workflows/record.yml@refs/heads/main$"}}}
	if root != nil {
		entry["trustedRoot"] = string(root)
	}
	entries := []any{entry}
	for n, k := range keys {
		entries = append(entries, map[string]any{"name": n, "publicKey": k.pub, "repositories": []string{testRepositories}, "streams": []string{testStream}})
	}
	b, err := yaml.Marshal(map[string]any{"keys": entries})
	if err != nil {
		t.Fatal(err)
	}
	tc, err := trust.Parse(b)
	if err != nil {
		t.Fatalf("trust config: %v\n%s", err, b)
	}
	return tc
}

// Keyless records (issue 31): a follower trusts the records a CI identity signed keyless (a
// Sigstore bundle beside the record, certified by the entry's trusted root); another identity's,
// or another Sigstore's, are skipped like any record no trusted entry signed, and an audit names
// the identity the certificate carries.
func TestFollowKeylessRecords(t *testing.T) {
	oldKey, _, _ := cosignKeys(t)
	sigstore, other := verifytest.NewSigstore(t), verifytest.NewSigstore(t)
	recorder := verifytest.GitHubActions("org/delivery", "record.yml", "refs/heads/main")
	nightly := verifytest.GitHubActions("org/delivery", "nightly.yml", "refs/heads/main")

	for _, tc := range []struct {
		name string
		// sign re-signs records 1 and 2 (a release) keyless; nil leaves the key's signatures.
		sign        func(t *testing.T, reg *testRegistry)
		trust       func(t *testing.T) *trust.Config
		wantOffered bool
		wantAudit   []string // in the first break's message
	}{
		{name: "signed by the trusted identity",
			sign:  func(t *testing.T, reg *testRegistry) { signBoth(t, reg, sigstore, recorder) },
			trust: func(t *testing.T) *trust.Config { return keylessTrust(t, sigstore.TrustedRoot(), nil) }, wantOffered: true},
		{name: "signed by another identity",
			sign:      func(t *testing.T, reg *testRegistry) { signBoth(t, reg, sigstore, nightly) },
			trust:     func(t *testing.T) *trust.Config { return keylessTrust(t, sigstore.TrustedRoot(), nil) },
			wantAudit: []string{"staging-ci: identity mismatch", nightly.Subject}},
		{name: "certified by another Sigstore",
			sign:      func(t *testing.T, reg *testRegistry) { signBoth(t, reg, other, recorder) },
			trust:     func(t *testing.T) *trust.Config { return keylessTrust(t, sigstore.TrustedRoot(), nil) },
			wantAudit: []string{"does not chain to a Fulcio certificate authority of the trusted root"}},
		{name: "the public instance's root does not vouch for a private Sigstore",
			sign:      func(t *testing.T, reg *testRegistry) { signBoth(t, reg, sigstore, recorder) },
			trust:     func(t *testing.T) *trust.Config { return keylessTrust(t, nil, nil) },
			wantAudit: []string{"does not chain"}},
		{name: "signed with a key, only identities trusted",
			trust:     func(t *testing.T) *trust.Config { return keylessTrust(t, sigstore.TrustedRoot(), nil) },
			wantAudit: []string{"no trusted key bound to the stream verifies its signature"}},
		{name: "signed keyless, only keys trusted",
			sign:      func(t *testing.T, reg *testRegistry) { signBoth(t, reg, sigstore, recorder) },
			trust:     func(t *testing.T) *trust.Config { return trustOf(t, map[string]testKey{"staging": oldKey}, testStream) },
			wantAudit: []string{"no keyless entry (matchOIDCIdentity) is bound to stream"}},
		{name: "a key and an identity both trusted, while a recorder moves to keyless",
			sign: func(t *testing.T, reg *testRegistry) { reg.signKeyless(t, Tag(testStream, 2), sigstore, recorder) },
			trust: func(t *testing.T) *trust.Config {
				return keylessTrust(t, sigstore.TrustedRoot(), map[string]testKey{"staging": oldKey})
			}, wantOffered: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			reg := newRegistry(t)
			up := newUpstream(t, reg.store(t), oldKey, testStream)
			up.release(digestOf('a'))
			if tc.sign != nil {
				tc.sign(t, reg)
			}
			cfg := tc.trust(t)
			f := &Follower{Store: reg.store(t), Trust: cfg}
			v, err := f.Read(t.Context(), testStream, nil, nil)
			g.Expect(err).NotTo(HaveOccurred())
			audit, err := AuditStream(t.Context(), reg.store(t), cfg, testStream)
			g.Expect(err).NotTo(HaveOccurred())
			if tc.wantOffered {
				g.Expect(offered(v)).To(Equal([]string{digestOf('a')}))
				g.Expect(v.Skipped).To(BeZero())
				g.Expect(v.Head).To(Equal(Seen{Seq: 2, Digest: up.head}), "the record digest does not depend on how it is signed")
				g.Expect(audit.Breaks).To(BeEmpty())
				return
			}
			g.Expect(offered(v)).To(BeEmpty())
			g.Expect(v.Skipped).To(Equal(2))
			g.Expect(audit.Breaks).To(HaveLen(2))
			g.Expect(audit.Breaks[0].Kind).To(Equal(breakSignature))
			for _, s := range tc.wantAudit {
				g.Expect(audit.Breaks[0].Message).To(ContainSubstring(s))
			}
		})
	}
}

func signBoth(t *testing.T, reg *testRegistry, sigstore *verifytest.Sigstore, ci verifytest.CI) {
	t.Helper()
	for seq := int64(1); seq <= 2; seq++ {
		reg.signKeyless(t, Tag(testStream, seq), sigstore, ci)
	}
}
