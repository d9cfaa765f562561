package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	. "github.com/onsi/gomega"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"sigs.k8s.io/yaml"

	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
	"github.com/stagecoach-dev/stagecoach/internal/records"
	"github.com/stagecoach-dev/stagecoach/internal/verify/verifytest"
)

const recordsStream = "8d1e4f2a9c0b/staging/payments"

func recordsKey(t *testing.T) (*records.Signer, string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sv, err := signature.LoadECDSASignerVerifier(k, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	s, err := records.NewSigner(sv)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := cryptoutils.MarshalPublicKeyToPEM(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	return s, string(pem)
}

// writeStream writes n records: signers[i] signs record i+1.
func writeStream(t *testing.T, repo string, signers []*records.Signer) {
	t.Helper()
	store, err := records.NewStore(repo, ociclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	prev := ""
	for i, s := range signers {
		r := &records.Record{APIVersion: records.APIVersion, Stream: recordsStream, Seq: int64(i + 1), Prev: prev,
			Stage: records.StageRef{Namespace: "staging", Name: "payments"}, Service: "payments", Environment: "staging",
			Action: records.ActionPromote, Verdict: records.VerdictSucceeded, Actor: "ann@example.com",
			Version: &records.Version{Digest: "sha256:" + strings.Repeat("a", 64), Tag: "v1.0.0"},
			Times:   records.Times{Recorded: records.NewTime(time.Date(2026, 12, 1, 11, 0, i, 0, time.UTC))}}
		if i == 1 {
			r.BreakGlass = &records.BreakGlass{Reason: "hotfix for INC-42"}
		}
		w, err := records.NewWriter(store, s).Write(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		prev = w.Digest
	}
}

func TestRecordsVerify(t *testing.T) {
	recorder, pub := recordsKey(t)
	forger, _ := recordsKey(t)
	dir := t.TempDir()
	trustFile := filepath.Join(dir, "trust.yaml")
	trustYAML := "keys:\n- name: staging-recorder\n  publicKey: |\n    " + strings.ReplaceAll(strings.TrimSpace(pub), "\n", "\n    ") +
		"\n  repositories: [\"127.0.0.1:*/delivery/streams\"]\n  streams: [\"8d1e4f2a9c0b/staging/*\"]\n"
	if err := os.WriteFile(trustFile, []byte(trustYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	badTrust := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(badTrust, []byte("keys:\n- name: staging-recorder\n  publicKey: nope\n  streams: [x]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		signers []*records.Signer
		args    []string
		wantErr string
		wantOut []string
	}{
		{name: "clean stream", signers: []*records.Signer{recorder, recorder, recorder},
			wantOut: []string{"SEQ", "Promote", "Succeeded", "ann@example.com", "Promote (break-glass: hotfix for INC-42)", "staging-recorder", "3 records, every signature trusted, chain unbroken"}},
		{name: "forged record", signers: []*records.Signer{recorder, forger, recorder},
			wantErr: "has 1 break(s)", wantOut: []string{"BROKEN", "seq 2  Signature", "no trusted key bound to the stream verifies"}},
		{name: "json", signers: []*records.Signer{recorder}, args: []string{"-o", "json"}, wantOut: []string{`"breaks": []`, `"key": "staging-recorder"`}},
		{name: "empty stream", wantErr: "has 1 break(s)", wantOut: []string{"Empty"}},
		{name: "trust file refused", signers: []*records.Signer{recorder}, args: []string{"--trust", badTrust},
			wantErr: `keys[0] (name "staging-recorder"): publicKey is not a PEM public key`},
		{name: "unknown output", signers: []*records.Signer{recorder}, args: []string{"-o", "yaml"}, wantErr: `unknown output format "yaml"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
			defer srv.Close()
			repo := strings.TrimPrefix(srv.URL, "http://") + "/delivery/streams"
			writeStream(t, repo, tc.signers)
			out, err := run(append([]string{"records", "verify", repo, recordsStream, "--trust", trustFile}, tc.args...)...)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			} else {
				g.Expect(err).NotTo(HaveOccurred(), out)
			}
			for _, w := range tc.wantOut {
				g.Expect(out).To(ContainSubstring(w))
			}
			if len(tc.args) == 2 && tc.args[1] == "json" {
				var a records.Audit
				g.Expect(json.Unmarshal([]byte(out), &a)).To(Succeed())
				g.Expect(a.Entries).To(HaveLen(1))
			}
		})
	}
	t.Run("trust is required", func(t *testing.T) {
		_, err := run("records", "verify", "127.0.0.1:1/x", recordsStream)
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring(`required flag(s) "trust" not set`)))
	})
}

// resignKeyless replaces the signature of record seq with a keyless Sigstore bundle by ci, as a
// recorder signing from CI would write it (the dev.stagecoach.record.bundle annotation): the
// record bytes, and so the chain, stay.
func resignKeyless(t *testing.T, repo string, seq int64, sigstore *verifytest.Sigstore, ci verifytest.CI) {
	t.Helper()
	ref, err := name.NewTag(repo + ":" + records.Tag(recordsStream, seq))
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(ref, remote.WithContext(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	var m v1.Manifest
	if err := json.Unmarshal(desc.Manifest, &m); err != nil {
		t.Fatal(err)
	}
	delete(m.Annotations, "dev.stagecoach.record.signature")
	delete(m.Annotations, "dev.stagecoach.record.key-id")
	m.Annotations["dev.stagecoach.record.bundle"] = base64.StdEncoding.EncodeToString(sigstore.SignBlob(t, m.Layers[0].Data, ci, verifytest.Keyless{}))
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Put(ref, &remote.Descriptor{Descriptor: v1.Descriptor{MediaType: types.OCIManifestSchema1}, Manifest: raw}, remote.WithContext(t.Context())); err != nil {
		t.Fatal(err)
	}
}

// `stagecoach records verify` trusts a recorder's CI identity as the follower does (issue 31):
// a --trust entry of matchOIDCIdentity with the Sigstore's trusted root; a record another
// identity or another Sigstore signed is a break naming what it found.
func TestRecordsVerifyKeyless(t *testing.T) {
	signer, _ := recordsKey(t)
	sigstore, other := verifytest.NewSigstore(t), verifytest.NewSigstore(t)
	recorder := verifytest.GitHubActions("org/delivery", "record.yml", "refs/heads/main")
	nightly := verifytest.GitHubActions("org/delivery", "nightly.yml", "refs/heads/main")
	root, err := yaml.Marshal(string(sigstore.TrustedRoot()))
	if err != nil {
		t.Fatal(err)
	}
	trustFile := filepath.Join(t.TempDir(), "trust.yaml")
	if err := os.WriteFile(trustFile, []byte("keys:\n- name: staging-ci\n"+
		"  matchOIDCIdentity:\n  - issuer: ^https://token.actions.githubusercontent.com$\n"+
		"    subject: ^https://github.com/org/delivery/.github/workflows/record.yml@refs/heads/main$\n"+
		"  trustedRoot: "+strings.TrimSpace(string(root))+"\n"+
		"  repositories: [\"127.0.0.1:*/delivery/streams\"]\n  streams: [\"8d1e4f2a9c0b/staging/*\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// second signs record 2; the recorder's identity signs records 1 and 3.
		second  func(t *testing.T, repo string)
		wantErr string
		wantOut []string
	}{
		{name: "every record by the recorder's identity",
			second:  func(t *testing.T, repo string) { resignKeyless(t, repo, 2, sigstore, recorder) },
			wantOut: []string{"staging-ci", "3 records, every signature trusted, chain unbroken"}},
		{name: "a record by another identity",
			second:  func(t *testing.T, repo string) { resignKeyless(t, repo, 2, sigstore, nightly) },
			wantErr: "has 1 break(s)", wantOut: []string{"seq 2  Signature", "identity mismatch", nightly.Subject}},
		{name: "a record certified by another Sigstore",
			second:  func(t *testing.T, repo string) { resignKeyless(t, repo, 2, other, recorder) },
			wantErr: "has 1 break(s)", wantOut: []string{"seq 2  Signature", "does not chain to a Fulcio certificate authority of the trusted root"}},
		{name: "a record signed with a key", second: func(*testing.T, string) {},
			wantErr: "has 1 break(s)", wantOut: []string{"seq 2  Signature", "no trusted key bound to the stream verifies"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
			defer srv.Close()
			repo := strings.TrimPrefix(srv.URL, "http://") + "/delivery/streams"
			writeStream(t, repo, []*records.Signer{signer, signer, signer})
			resignKeyless(t, repo, 1, sigstore, recorder)
			resignKeyless(t, repo, 3, sigstore, recorder)
			tc.second(t, repo)
			out, err := run("records", "verify", repo, recordsStream, "--trust", trustFile)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)), out)
			} else {
				g.Expect(err).NotTo(HaveOccurred(), out)
			}
			for _, w := range tc.wantOut {
				g.Expect(out).To(ContainSubstring(w))
			}
		})
	}
}
