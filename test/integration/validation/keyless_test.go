package validation

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
)

// Keyless verification (issue 31): identities as Flux spells them, where the trusted root comes
// from, and what the API server refuses with a reason a person understands.
func TestKeylessVerifySpec(t *testing.T) {
	const github = `{issuer: "^https://token.actions.githubusercontent.com$", subject: "^https://github.com/org/app/.github/workflows/release.yml@refs/tags/v.*$"}`
	cases := []struct {
		name    string
		verify  string
		wantMsg string // empty: accepted
	}{
		{name: "identities alone: the public Sigstore root", verify: `{matchOIDCIdentity: [` + github + `]}`},
		{name: "identities with a trusted root in a Secret", verify: `{matchOIDCIdentity: [` + github + `], trustedRoot: {secretRef: {name: sigstore}}}`},
		{name: "keys, identities and a trusted root in a named entry", verify: `{secretRef: {name: cosign-keys}, matchOIDCIdentity: [` + github + `],
  trustedRoot: {secretRef: {name: sigstore}, key: root.json}}`},
		{name: "empty identity list beside keys", verify: `{secretRef: {name: cosign-keys}, matchOIDCIdentity: []}`,
			wantMsg: "matchOIDCIdentity must list at least one {issuer, subject}: an empty list trusts no keyless signer"},
		{name: "empty identity list alone", verify: `{matchOIDCIdentity: []}`,
			wantMsg: "matchOIDCIdentity must list at least one {issuer, subject}"},
		{name: "trusted root without identities", verify: `{secretRef: {name: cosign-keys}, trustedRoot: {secretRef: {name: sigstore}}}`,
			wantMsg: "trustedRoot is for keyless signatures: set matchOIDCIdentity"},
		{name: "trusted root without its Secret", verify: `{matchOIDCIdentity: [` + github + `], trustedRoot: {key: trusted_root.json}}`,
			wantMsg: "trustedRoot.secretRef: Required value"},
		{name: "trusted root entry that is no key name", verify: `{matchOIDCIdentity: [` + github + `], trustedRoot: {secretRef: {name: sigstore}, key: "../x y"}}`,
			wantMsg: "trustedRoot.key"},
		{name: "identity without subject", verify: `{matchOIDCIdentity: [{issuer: "^https://gitlab.com$", subject: ""}]}`,
			wantMsg: "matchOIDCIdentity[0].subject"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := object("Stage", fmt.Sprintf("keyless-%d", i), `
service: payments
environment: dev
applyRef: {kind: OCIRepository, name: payments}
source: {registry: {repository: registry.example/deploy/payments, verify: `+tc.verify+`}}`)
			err := env.Client.Create(t.Context(), obj)
			if tc.wantMsg == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(env.Client.Delete(t.Context(), obj)).To(Succeed())
				return
			}
			g.Expect(err).To(HaveOccurred(), "the API server accepted an invalid verify")
			g.Expect(err.Error()).To(ContainSubstring(tc.wantMsg))
		})
	}
}
