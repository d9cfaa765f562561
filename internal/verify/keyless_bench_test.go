package verify

import (
	"testing"

	"github.com/stagecoach-dev/stagecoach/internal/verify/verifytest"
)

// Keyless verification of one digest with no cached verdict: a new Verifier (the trusted root is
// parsed once per process, as in the controller) checks the chain, identity, signature, log
// entry, timestamps and SCT.
func BenchmarkKeylessVerifyCold(b *testing.B) {
	sigstore := verifytest.NewSigstore(b)
	ci := verifytest.GitHubActions("org/app", "release.yml", "refs/tags/v1.0.0")
	root := sigstore.TrustedRoot()
	for _, format := range []string{FormatLegacy, FormatBundle} {
		b.Run(format, func(b *testing.B) {
			reg := newTestRegistry(b, nil)
			ref := verifytest.PushRandomImage(b, reg.host+"/team/app", "v1")
			if format == FormatLegacy {
				sigstore.SignLegacy(b, b.Context(), ref, ci, verifytest.Keyless{})
			} else {
				sigstore.SignBundle(b, b.Context(), ref, ci, verifytest.Keyless{})
			}
			for b.Loop() {
				v, err := New(Options{Identities: []Identity{trustCI}, TrustedRoot: root})
				if err != nil {
					b.Fatal(err)
				}
				verdict, err := v.Verify(b.Context(), ref)
				if err != nil || !verdict.Verified {
					b.Fatalf("verdict %+v, err %v", verdict, err)
				}
			}
		})
	}
}

// A cached keyless verdict, beside BenchmarkVerifyCached (keys): the same lookup.
func BenchmarkKeylessVerifyCached(b *testing.B) {
	sigstore := verifytest.NewSigstore(b)
	reg := newTestRegistry(b, nil)
	ref := verifytest.PushRandomImage(b, reg.host+"/team/app", "v1")
	sigstore.SignBundle(b, b.Context(), ref, verifytest.GitHubActions("org/app", "release.yml", "refs/tags/v1.0.0"), verifytest.Keyless{})
	v, err := New(Options{Identities: []Identity{trustCI}, TrustedRoot: sigstore.TrustedRoot()})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := v.Verify(b.Context(), ref); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		verdict, err := v.Verify(b.Context(), ref)
		if err != nil || !verdict.Verified {
			b.Fatalf("verdict %+v, err %v", verdict, err)
		}
	}
}

// What a reconcile pays for a cached verdict: the controller builds a Verifier from the Stage each
// time (keys parsed; identities compiled and the trusted root hashed), then finds the verdict in
// the shared cache.
func BenchmarkVerifyCachedWithNew(b *testing.B) {
	sigstore := verifytest.NewSigstore(b)
	kp := verifytest.NewKeyPair(b)
	root := sigstore.TrustedRoot()
	for _, tc := range []struct {
		name string
		opts Options
		sign func(ref string)
	}{
		{name: "key", opts: Options{Keys: [][]byte{kp.PublicPEM}}, sign: func(ref string) { verifytest.SignLegacy(b, b.Context(), ref, kp) }},
		{name: "keyless", opts: Options{Identities: []Identity{trustCI}, TrustedRoot: root}, sign: func(ref string) {
			sigstore.SignBundle(b, b.Context(), ref, verifytest.GitHubActions("org/app", "release.yml", "refs/tags/v1.0.0"), verifytest.Keyless{})
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			reg := newTestRegistry(b, nil)
			ref := verifytest.PushRandomImage(b, reg.host+"/team/app", "v1")
			tc.sign(ref)
			opts := tc.opts
			opts.Cache = NewCache(0)
			warm, err := New(opts)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := warm.Verify(b.Context(), ref); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				v, err := New(opts)
				if err != nil {
					b.Fatal(err)
				}
				verdict, err := v.Verify(b.Context(), ref)
				if err != nil || !verdict.Verified {
					b.Fatalf("verdict %+v, err %v", verdict, err)
				}
			}
		})
	}
}
