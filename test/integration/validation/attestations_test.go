package validation

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
)

// Required attestations (issue 41): each names its predicate type and who must have signed it,
// on a registry source's verify or an upstream source's.
func TestAttestationRequirements(t *testing.T) {
	const github = `{issuer: "^https://token.actions.githubusercontent.com$", subject: "^https://github.com/org/app/.github/workflows/release.yml@refs/tags/v.*$"}`
	const registry = `{registry: {repository: registry.example/deploy/payments, verify: {secretRef: {name: cosign-keys}, attestations: [%s]}}}`
	const upstream = `{upstream: {stage: staging, verify: {attestations: [%s]}}}`
	cases := []struct {
		name    string
		source  string
		attest  string // spec.attest, when set
		wantMsg string // empty: accepted
	}{
		{name: "attest with a repository over plain HTTP", source: fmt.Sprintf(upstream, `{predicateType: spdxjson, secretRef: {name: k}}`),
			attest: `{repository: registry.internal/mirror/payments, insecure: true, secretRef: {name: push}}`},
		{name: "attest insecure without a repository", source: fmt.Sprintf(upstream, `{predicateType: spdxjson, secretRef: {name: k}}`),
			attest: `{insecure: true}`, wantMsg: "attest.insecure is for attest.repository"},
		{name: "SLSA provenance signed keyless, with a condition", source: fmt.Sprintf(registry,
			`{predicateType: slsaprovenance1, matchOIDCIdentity: [`+github+`], condition: 'predicate.runDetails.builder.id != ""'}`)},
		{name: "a promotion attestation on an upstream source, signed with a key", source: fmt.Sprintf(upstream,
			`{predicateType: "https://stagecoach.dev/attestation/promotion/v1", secretRef: {name: staging-key}, condition: 'predicate.stage == "staging"'}`)},
		{name: "no signer", source: fmt.Sprintf(registry, `{predicateType: spdxjson}`),
			wantMsg: "an attestation needs who must have signed it"},
		{name: "an empty identity list is no signer", source: fmt.Sprintf(registry, `{predicateType: spdxjson, matchOIDCIdentity: []}`),
			wantMsg: "an attestation needs who must have signed it"},
		{name: "a trusted root without identities", source: fmt.Sprintf(registry,
			`{predicateType: spdxjson, secretRef: {name: k}, trustedRoot: {secretRef: {name: sigstore}}}`),
			wantMsg: "trustedRoot is for keyless signatures"},
		{name: "no predicate type", source: fmt.Sprintf(registry, `{secretRef: {name: k}}`),
			wantMsg: "predicateType: Required value"},
		{name: "an upstream verify without attestations", source: `{upstream: {stage: staging, verify: {attestations: []}}}`,
			wantMsg: "attestations: Invalid value"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := object("Stage", fmt.Sprintf("attest-%d", i), `
service: payments
environment: dev
applyRef: {kind: OCIRepository, name: payments}
source: `+tc.source+attestYAML(tc.attest))
			err := env.Client.Create(t.Context(), obj)
			if tc.wantMsg == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(env.Client.Delete(t.Context(), obj)).To(Succeed())
				return
			}
			g.Expect(err).To(HaveOccurred(), "the API server accepted an invalid attestation requirement")
			g.Expect(err.Error()).To(ContainSubstring(tc.wantMsg))
		})
	}
}

func attestYAML(attest string) string {
	if attest == "" {
		return ""
	}
	return "\nattest: " + attest
}
