package attest_test

import (
	"testing"

	"github.com/stagecoach-dev/stagecoach/internal/attest"
	"github.com/stagecoach-dev/stagecoach/internal/verify"
	"github.com/stagecoach-dev/stagecoach/internal/verify/verifytest"
)

// BenchmarkCheck is what an SLSA provenance requirement adds to a promotion: finding and
// verifying a keyless provenance bundle and evaluating its condition, from a registry on
// loopback, beside the keyless signature check every verifying Stage already makes (the
// baseline, measured in the same run). Neither is cached here: each is a first look.
func BenchmarkCheck(b *testing.B) {
	host := newRegistryTB(b)
	sigstore := verifytest.NewSigstore(b)
	ref := verifytest.PushRandomImage(b, host+"/team/app", "v1")
	sigstore.SignBundle(b, b.Context(), ref, releaseCI, verifytest.Keyless{})
	sigstore.AttestBundle(b, b.Context(), ref, verifytest.Statement(b, digestOf(ref), slsaV1, provenance(ourRepo, ourBuilder)), releaseCI, verifytest.Keyless{})
	opts := verify.Options{Identities: []verify.Identity{trustCI}, TrustedRoot: sigstore.TrustedRoot(), NegativeTTL: -1}
	cond, err := attest.Compile(fromOurs)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("signature", func(b *testing.B) {
		for b.Loop() {
			v, err := verify.New(opts) // a new cache each time: no verdict is reused
			if err != nil {
				b.Fatal(err)
			}
			if verdict, err := v.Verify(b.Context(), ref); err != nil || !verdict.Verified {
				b.Fatalf("%v %+v", err, verdict)
			}
		}
	})
	b.Run("provenance", func(b *testing.B) {
		for b.Loop() {
			v, err := verify.New(opts)
			if err != nil {
				b.Fatal(err)
			}
			got, err := attest.Check(b.Context(), ref, []attest.Requirement{{PredicateType: slsaV1, Condition: cond, Signers: v}})
			if err != nil || !got.Passed {
				b.Fatalf("%v %+v", err, got)
			}
		}
	})
}
