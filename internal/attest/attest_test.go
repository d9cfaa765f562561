package attest_test

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	. "github.com/onsi/gomega"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/attest"
	"github.com/stagecoach-dev/stagecoach/internal/verify"
	"github.com/stagecoach-dev/stagecoach/internal/verify/verifytest"
)

const (
	slsaV1  = "https://slsa.dev/provenance/v1"
	spdx    = "https://spdx.dev/Document"
	cdx     = "https://cyclonedx.org/bom"
	vuln    = "https://cosign.sigstore.dev/attestation/vuln/v1"
	openvex = "https://openvex.dev/ns"
)

var (
	releaseCI = verifytest.GitHubActions("org/app", "release.yml", "refs/tags/v1.0.0")
	trustCI   = verify.Identity{Issuer: "^https://token.actions.githubusercontent.com$",
		Subject: "^https://github.com/org/app/.github/workflows/release.yml@refs/tags/v.*$"}
)

// newRegistry starts an in-memory OCI 1.1 registry (referrers API on) on 127.0.0.1.
func newRegistry(t *testing.T) string { return newRegistryTB(t) }

func newRegistryTB(t testing.TB) string { return newCountingRegistry(t, nil) }

// newCountingRegistry is newRegistry counting the requests it serves in requests (when not nil).
func newCountingRegistry(t testing.TB, requests *atomic.Int64) string {
	t.Helper()
	reg := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)), ggcrregistry.WithReferrersSupport(true))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests != nil {
			requests.Add(1)
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// provenance is an SLSA v1 provenance as GitHub's release workflows write it.
func provenance(repository, builder string) map[string]any {
	return map[string]any{
		"buildDefinition": map[string]any{
			"buildType": "https://actions.github.io/buildtypes/workflow/v1",
			"externalParameters": map[string]any{"workflow": map[string]any{
				"ref": "refs/tags/v1.0.0", "repository": repository, "path": ".github/workflows/release.yml"}},
		},
		"runDetails": map[string]any{"builder": map[string]any{"id": builder}},
	}
}

const (
	ourRepo    = "https://github.com/org/app"
	ourBuilder = "https://github.com/actions/runner/github-hosted"
	fromOurs   = `predicate.buildDefinition.externalParameters.workflow.repository == "https://github.com/org/app" && ` +
		`predicate.runDetails.builder.id.startsWith("https://github.com/actions/runner/")`
	noCritical = `!predicate.scanner.result.vulnerabilities.exists(v, v.severity == "CRITICAL")`
)

// sbom is an SPDX document with n packages.
func sbom(n int) map[string]any {
	pkgs := make([]any, n)
	for i := range pkgs {
		pkgs[i] = map[string]any{"name": fmt.Sprintf("package-%d", i), "versionInfo": "1.0.0", "licenseConcluded": "Apache-2.0"}
	}
	return map[string]any{"spdxVersion": "SPDX-2.3", "name": "app", "packages": pkgs}
}

func TestCheck(t *testing.T) {
	host := newRegistry(t)
	sigstore := verifytest.NewSigstore(t)
	untrusted := verifytest.NewSigstore(t)
	builder := verifytest.NewKeyPair(t)
	stranger := verifytest.NewKeyPair(t)

	keyReq := func(t *testing.T, predicateType, condition string, limit int64) attest.Requirement {
		v, err := verify.New(verify.Options{Keys: [][]byte{builder.PublicPEM}, MaxAttestationSize: limit})
		if err != nil {
			t.Fatal(err)
		}
		return requirement(t, predicateType, condition, v)
	}
	keylessReq := func(t *testing.T, predicateType, condition string) attest.Requirement {
		v, err := verify.New(verify.Options{Identities: []verify.Identity{trustCI}, TrustedRoot: sigstore.TrustedRoot()})
		if err != nil {
			t.Fatal(err)
		}
		return requirement(t, predicateType, condition, v)
	}

	tests := []struct {
		name string
		// setup pushes an image, attaches what the case needs and returns the reference.
		setup      func(t *testing.T, repo string) string
		reqs       func(t *testing.T) []attest.Requirement
		wantPassed bool
		wantReason string
		wantInMsg  []string
	}{
		{
			name: "SLSA provenance v1 signed keyless by the release workflow, from our repository and builder",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				sigstore.AttestBundle(t, t.Context(), ref, verifytest.Statement(t, digestOf(ref), slsaV1, provenance(ourRepo, ourBuilder)), releaseCI, verifytest.Keyless{})
				return ref
			},
			reqs:       func(t *testing.T) []attest.Requirement { return []attest.Requirement{keylessReq(t, slsaV1, fromOurs)} },
			wantPassed: true,
			wantInMsg:  []string{"attestation " + slsaV1 + " signed keyless by", releaseCI.Subject, "meets"},
		},
		{
			name: "provenance of another source repository",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				sigstore.AttestBundle(t, t.Context(), ref, verifytest.Statement(t, digestOf(ref), slsaV1, provenance("https://github.com/org/fork", ourBuilder)), releaseCI, verifytest.Keyless{})
				return ref
			},
			reqs:       func(t *testing.T) []attest.Requirement { return []attest.Requirement{keylessReq(t, slsaV1, fromOurs)} },
			wantReason: stagecoachv1.ReasonAttestationRefused,
			wantInMsg:  []string{slsaV1, "does not meet the condition", "workflow.repository", releaseCI.Subject},
		},
		{
			name: "provenance from another builder",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				sigstore.AttestBundle(t, t.Context(), ref, verifytest.Statement(t, digestOf(ref), slsaV1, provenance(ourRepo, "https://ci.example/self-hosted")), releaseCI, verifytest.Keyless{})
				return ref
			},
			reqs:       func(t *testing.T) []attest.Requirement { return []attest.Requirement{keylessReq(t, slsaV1, fromOurs)} },
			wantReason: stagecoachv1.ReasonAttestationRefused,
			wantInMsg:  []string{"does not meet the condition", "builder.id"},
		},
		{
			name: "provenance signed by a workflow of another repository",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				sigstore.AttestBundle(t, t.Context(), ref, verifytest.Statement(t, digestOf(ref), slsaV1, provenance(ourRepo, ourBuilder)),
					verifytest.GitHubActions("org/fork", "release.yml", "refs/tags/v1.0.0"), verifytest.Keyless{})
				return ref
			},
			reqs:       func(t *testing.T) []attest.Requirement { return []attest.Requirement{keylessReq(t, slsaV1, fromOurs)} },
			wantReason: stagecoachv1.ReasonAttestationRefused,
			wantInMsg:  []string{"identity mismatch", "org/fork"},
		},
		{
			name: "provenance certified by an untrusted Sigstore",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				untrusted.AttestBundle(t, t.Context(), ref, verifytest.Statement(t, digestOf(ref), slsaV1, provenance(ourRepo, ourBuilder)), releaseCI, verifytest.Keyless{})
				return ref
			},
			reqs:       func(t *testing.T) []attest.Requirement { return []attest.Requirement{keylessReq(t, slsaV1, fromOurs)} },
			wantReason: stagecoachv1.ReasonAttestationRefused,
			wantInMsg:  []string{"does not chain to a Fulcio"},
		},
		{
			name: "provenance about another digest, attached to this one",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				other := verifytest.PushRandomImage(t, repo, "v2")
				sigstore.AttestBundle(t, t.Context(), ref, verifytest.Statement(t, digestOf(other), slsaV1, provenance(ourRepo, ourBuilder)), releaseCI, verifytest.Keyless{})
				return ref
			},
			reqs:       func(t *testing.T) []attest.Requirement { return []attest.Requirement{keylessReq(t, slsaV1, "")} },
			wantReason: stagecoachv1.ReasonAttestationRefused,
			wantInMsg:  []string{"the statement is about sha256:", "not sha256:"},
		},
		{
			name: "SLSA provenance under the legacy .att tag, signed keyless by the release workflow (cosign v2)",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				sigstore.AttestLegacy(t, t.Context(), ref, verifytest.Statement(t, digestOf(ref), slsaV1, provenance(ourRepo, ourBuilder)), releaseCI, verifytest.Keyless{})
				return ref
			},
			reqs:       func(t *testing.T) []attest.Requirement { return []attest.Requirement{keylessReq(t, slsaV1, fromOurs)} },
			wantPassed: true,
			wantInMsg:  []string{"signed keyless by", releaseCI.Subject, "attestation 1 in sha256-"},
		},
		{
			name: "legacy .att signed keyless by another workflow",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				sigstore.AttestLegacy(t, t.Context(), ref, verifytest.Statement(t, digestOf(ref), slsaV1, provenance(ourRepo, ourBuilder)),
					verifytest.GitHubActions("org/app", "nightly.yml", "refs/heads/main"), verifytest.Keyless{})
				return ref
			},
			reqs:       func(t *testing.T) []attest.Requirement { return []attest.Requirement{keylessReq(t, slsaV1, "")} },
			wantReason: stagecoachv1.ReasonAttestationRefused,
			wantInMsg:  []string{"identity mismatch", "nightly.yml"},
		},
		{
			name: "legacy .att signed keyless, tampered after logging",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				sigstore.AttestLegacy(t, t.Context(), ref, verifytest.Statement(t, digestOf(ref), slsaV1, provenance("https://github.com/org/fork", ourBuilder)), releaseCI,
					verifytest.Keyless{Tamper: func(st []byte) []byte { return bytes.Replace(st, []byte("org/fork"), []byte("org/app"), 1) }})
				return ref
			},
			reqs:       func(t *testing.T) []attest.Requirement { return []attest.Requirement{keylessReq(t, slsaV1, fromOurs)} },
			wantReason: stagecoachv1.ReasonAttestationRefused,
			wantInMsg:  []string{"tampered"},
		},
		{
			name: "legacy .att signed keyless without a log entry or timestamp",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				sigstore.AttestLegacy(t, t.Context(), ref, verifytest.Statement(t, digestOf(ref), slsaV1, provenance(ourRepo, ourBuilder)), releaseCI,
					verifytest.Keyless{NoLogEntry: true, NoTimestamp: true})
				return ref
			},
			reqs:       func(t *testing.T) []attest.Requirement { return []attest.Requirement{keylessReq(t, slsaV1, "")} },
			wantReason: stagecoachv1.ReasonAttestationRefused,
			wantInMsg:  []string{"no transparency log entry of the trusted root records this signature"},
		},
		{
			name: "no attestation, only a signature",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				sigstore.SignBundle(t, t.Context(), ref, releaseCI, verifytest.Keyless{})
				return ref
			},
			reqs:       func(t *testing.T) []attest.Requirement { return []attest.Requirement{keylessReq(t, slsaV1, "")} },
			wantReason: stagecoachv1.ReasonAttestationMissing,
			wantInMsg:  []string{"has no attestation of predicate type " + slsaV1, "attach one signed by the 1 trusted keyless identity"},
		},
		{
			name: "attestation of another predicate type only",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				verifytest.AttestBundle(t, t.Context(), ref, builder, verifytest.Statement(t, digestOf(ref), spdx, sbom(3)))
				return ref
			},
			reqs:       func(t *testing.T) []attest.Requirement { return []attest.Requirement{keyReq(t, cdx, "", 0)} },
			wantReason: stagecoachv1.ReasonAttestationMissing,
		},
		{
			name: "SPDX SBOM signed with the builder's key (bundle)",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				verifytest.AttestBundle(t, t.Context(), ref, builder, verifytest.Statement(t, digestOf(ref), spdx, sbom(3)))
				return ref
			},
			reqs: func(t *testing.T) []attest.Requirement {
				return []attest.Requirement{keyReq(t, spdx, `predicate.packages.all(p, p.licenseConcluded != "GPL-3.0-only")`, 0)}
			},
			wantPassed: true,
			wantInMsg:  []string{"signed by trusted key sha256:"},
		},
		{
			name: "CycloneDX SBOM under the legacy .att tag, signed with the builder's key",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				verifytest.AttestLegacy(t, t.Context(), ref, builder, verifytest.Statement(t, digestOf(ref), cdx,
					map[string]any{"bomFormat": "CycloneDX", "specVersion": "1.5", "components": []any{}}))
				return ref
			},
			reqs: func(t *testing.T) []attest.Requirement {
				return []attest.Requirement{keyReq(t, cdx, `predicate.bomFormat == "CycloneDX"`, 0)}
			},
			wantPassed: true,
			wantInMsg:  []string{"attestation 1 in sha256-", ".att"},
		},
		{
			name: "legacy .att signed by a key nobody trusts",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				verifytest.AttestLegacy(t, t.Context(), ref, stranger, verifytest.Statement(t, digestOf(ref), cdx, map[string]any{"bomFormat": "CycloneDX"}))
				return ref
			},
			reqs:       func(t *testing.T) []attest.Requirement { return []attest.Requirement{keyReq(t, cdx, "", 0)} },
			wantReason: stagecoachv1.ReasonAttestationRefused,
			wantInMsg:  []string{"no trusted key verifies it"},
		},
		{
			name: "legacy .att about another digest",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				other := verifytest.PushRandomImage(t, repo, "v2")
				verifytest.AttestLegacy(t, t.Context(), ref, builder, verifytest.Statement(t, digestOf(other), cdx, map[string]any{"bomFormat": "CycloneDX"}))
				return ref
			},
			reqs:       func(t *testing.T) []attest.Requirement { return []attest.Requirement{keyReq(t, cdx, "", 0)} },
			wantReason: stagecoachv1.ReasonAttestationRefused,
			wantInMsg:  []string{"the statement is about"},
		},
		{
			name: "bundle signed with a key nobody trusts",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				verifytest.AttestBundle(t, t.Context(), ref, stranger, verifytest.Statement(t, digestOf(ref), spdx, sbom(1)))
				return ref
			},
			reqs:       func(t *testing.T) []attest.Requirement { return []attest.Requirement{keyReq(t, spdx, "", 0)} },
			wantReason: stagecoachv1.ReasonAttestationRefused,
		},
		{
			name: "vulnerability scan with a critical finding",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				verifytest.AttestBundle(t, t.Context(), ref, builder, verifytest.Statement(t, digestOf(ref), vuln, map[string]any{
					"scanner": map[string]any{"uri": "pkg:github/aquasecurity/trivy", "result": map[string]any{"vulnerabilities": []any{
						map[string]any{"id": "CVE-2026-0001", "severity": "CRITICAL"}}}}}))
				return ref
			},
			reqs:       func(t *testing.T) []attest.Requirement { return []attest.Requirement{keyReq(t, vuln, noCritical, 0)} },
			wantReason: stagecoachv1.ReasonAttestationRefused,
			wantInMsg:  []string{"does not meet the condition", "CRITICAL"},
		},
		{
			name: "vulnerability scan without a critical finding, and an OpenVEX statement",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				verifytest.AttestBundle(t, t.Context(), ref, builder, verifytest.Statement(t, digestOf(ref), vuln, map[string]any{
					"scanner": map[string]any{"result": map[string]any{"vulnerabilities": []any{map[string]any{"id": "CVE-2026-0002", "severity": "LOW"}}}}}))
				verifytest.AttestBundle(t, t.Context(), ref, builder, verifytest.Statement(t, digestOf(ref), openvex, map[string]any{
					"@context": "https://openvex.dev/ns/v0.2.0", "statements": []any{map[string]any{
						"vulnerability": map[string]any{"name": "CVE-2026-0001"}, "status": "not_affected"}}}))
				return ref
			},
			reqs: func(t *testing.T) []attest.Requirement {
				return []attest.Requirement{keyReq(t, vuln, noCritical, 0),
					keyReq(t, "openvex", `predicate.statements.exists(s, s.vulnerability.name == "CVE-2026-0001" && s.status == "not_affected")`, 0)}
			},
			wantPassed: true,
			wantInMsg:  []string{vuln, openvex},
		},
		{
			name: "a condition that errors (a field the predicate lacks) does not pass",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				verifytest.AttestBundle(t, t.Context(), ref, builder, verifytest.Statement(t, digestOf(ref), slsaV1, map[string]any{"runDetails": map[string]any{}}))
				return ref
			},
			reqs:       func(t *testing.T) []attest.Requirement { return []attest.Requirement{keyReq(t, slsaV1, fromOurs, 0)} },
			wantReason: stagecoachv1.ReasonAttestationRefused,
			wantInMsg:  []string{"failed to evaluate", "no such key"},
		},
		{
			name: "a malformed statement (no subject)",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				verifytest.AttestBundle(t, t.Context(), ref, builder,
					[]byte(`{"_type":"https://in-toto.io/Statement/v1","predicateType":"`+slsaV1+`","predicate":{}}`))
				return ref
			},
			reqs:       func(t *testing.T) []attest.Requirement { return []attest.Requirement{keyReq(t, slsaV1, "", 0)} },
			wantReason: stagecoachv1.ReasonAttestationRefused,
			wantInMsg:  []string{"malformed in-toto statement", "subject"},
		},
		{
			name: "a statement that is not JSON",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				verifytest.AttachStatementBundle(t, t.Context(), ref, verifytest.AttestBundle(t, t.Context(), verifytest.PushRandomImage(t, repo, "v0"), builder, []byte("not json")), slsaV1)
				return ref
			},
			reqs:       func(t *testing.T) []attest.Requirement { return []attest.Requirement{keyReq(t, slsaV1, "", 0)} },
			wantReason: stagecoachv1.ReasonAttestationRefused,
			wantInMsg:  []string{"not an in-toto statement"},
		},
		{
			name: "an SBOM larger than the bound is refused unread",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				verifytest.AttestBundle(t, t.Context(), ref, builder, verifytest.Statement(t, digestOf(ref), spdx, sbom(2000)))
				verifytest.AttestLegacy(t, t.Context(), ref, builder, verifytest.Statement(t, digestOf(ref), spdx, sbom(2000)))
				return ref
			},
			reqs:       func(t *testing.T) []attest.Requirement { return []attest.Requirement{keyReq(t, spdx, "", 64<<10)} },
			wantReason: stagecoachv1.ReasonAttestationRefused,
			wantInMsg:  []string{"has 2 attestation(s)", "larger than the 65536 bytes an attestation may be: not read"},
		},
		{
			name: "a large SBOM within the bound is judged, a condition over all its packages too",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				verifytest.AttestBundle(t, t.Context(), ref, builder, verifytest.Statement(t, digestOf(ref), spdx, sbom(5000)))
				return ref
			},
			reqs: func(t *testing.T) []attest.Requirement {
				return []attest.Requirement{keyReq(t, "spdxjson", `predicate.packages.all(p, p.licenseConcluded == "Apache-2.0")`, 0)}
			},
			wantPassed: true,
		},
		{
			name: "every requirement must hold: the second is missing",
			setup: func(t *testing.T, repo string) string {
				ref := verifytest.PushRandomImage(t, repo, "v1")
				verifytest.AttestBundle(t, t.Context(), ref, builder, verifytest.Statement(t, digestOf(ref), spdx, sbom(1)))
				return ref
			},
			reqs: func(t *testing.T) []attest.Requirement {
				return []attest.Requirement{keyReq(t, spdx, "", 0), keyReq(t, slsaV1, "", 0)}
			},
			wantReason: stagecoachv1.ReasonAttestationMissing,
			wantInMsg:  []string{slsaV1},
		},
		{
			name: "a digest that does not exist",
			setup: func(t *testing.T, repo string) string {
				return repo + "@sha256:" + strings.Repeat("ab", 32)
			},
			reqs:       func(t *testing.T) []attest.Requirement { return []attest.Requirement{keyReq(t, spdx, "", 0)} },
			wantReason: stagecoachv1.ReasonImageNotFound,
		},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ref := tc.setup(t, fmt.Sprintf("%s/team/app%d", host, i))
			got, err := attest.Check(t.Context(), ref, tc.reqs(t))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Passed).To(Equal(tc.wantPassed), got.Message)
			g.Expect(got.Reason).To(Equal(tc.wantReason), got.Message)
			for _, s := range tc.wantInMsg {
				g.Expect(got.Message).To(ContainSubstring(s))
			}
			if !tc.wantPassed {
				g.Expect(got.Message).To(ContainSubstring(digestOf(ref)), "a refusal names the digest")
			}
		})
	}
}

func requirement(t *testing.T, predicateType, condition string, v *verify.Verifier) attest.Requirement {
	t.Helper()
	req := attest.Requirement{PredicateType: attest.PredicateTypeURI(predicateType), Signers: v}
	if condition != "" {
		c, err := attest.Compile(condition)
		if err != nil {
			t.Fatal(err)
		}
		req.Condition = c
	}
	return req
}

func digestOf(ref string) string {
	_, d, _ := strings.Cut(ref, "@")
	return d
}

func TestCompile(t *testing.T) {
	tests := []struct {
		name      string
		condition string
		statement string
		wantErr   string // from Compile
		want      bool
		wantEval  string // from Holds
	}{
		{name: "a field of the predicate", condition: `predicate.stage == "staging"`, statement: `{"predicate":{"stage":"staging"}}`, want: true},
		{name: "the predicate type", condition: `predicateType.startsWith("https://slsa.dev/")`, statement: `{"predicateType":"https://slsa.dev/provenance/v1","predicate":{}}`, want: true},
		{name: "the subject", condition: `subject.exists(s, s.digest.sha256 == "ab")`, statement: `{"subject":[{"digest":{"sha256":"ab"}}],"predicate":{}}`, want: true},
		{name: "false", condition: `predicate.stage == "prod"`, statement: `{"predicate":{"stage":"staging"}}`},
		{name: "does not parse", condition: `predicate.stage ==`, wantErr: "does not compile"},
		{name: "not a boolean", condition: `"yes"`, wantErr: "not a boolean"},
		{name: "an unknown variable", condition: `stage == "x"`, wantErr: "undeclared reference"},
		{name: "a missing field errors", condition: `predicate.nothing == 1`, statement: `{"predicate":{}}`, wantEval: "no such key"},
		{name: "a dynamic non-boolean errors", condition: `predicate.stage`, statement: `{"predicate":{"stage":"x"}}`, wantEval: "not a boolean"},
		{name: "too costly", condition: `predicate.xs.all(a, predicate.xs.all(b, predicate.xs.all(c, a + b + c >= 0)))`,
			statement: `{"predicate":{"xs":[` + strings.TrimSuffix(strings.Repeat("1,", 150), ",") + `]}}`, wantEval: "cost limit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c, err := attest.Compile(tc.condition)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			got, err := c.Holds(t.Context(), []byte(tc.statement))
			if tc.wantEval != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantEval)))
				g.Expect(got).To(BeFalse())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestPredicateTypeURI(t *testing.T) {
	g := NewWithT(t)
	g.Expect(attest.PredicateTypeURI("slsaprovenance1")).To(Equal(slsaV1))
	g.Expect(attest.PredicateTypeURI("SPDXJSON")).To(Equal(spdx))
	g.Expect(attest.PredicateTypeURI("https://example.com/p/v1")).To(Equal("https://example.com/p/v1"))
}

// Cached keeps a pass, and a refusal while what is attached stays the same, under a key of
// everything the verdict depends on: an attestation attached a moment later counts at once; a
// kept pass costs no registry request and a kept refusal no attestation read; a pass under one
// condition, one trust or one digest says nothing of another.
func TestCached(t *testing.T) {
	g := NewWithT(t)
	var requests atomic.Int64
	host := newCountingRegistry(t, &requests)
	builder, other := verifytest.NewKeyPair(t), verifytest.NewKeyPair(t)
	cache := verify.NewCache(0)
	now := time.Now()
	ref := verifytest.PushRandomImage(t, host+"/team/app", "v1")
	reqOf := func(condition string, kp verifytest.KeyPair) []attest.Requirement {
		v, err := verify.New(verify.Options{Keys: [][]byte{kp.PublicPEM}})
		g.Expect(err).NotTo(HaveOccurred())
		return []attest.Requirement{requirement(t, spdx, condition, v)}
	}
	ours := reqOf(`predicate.name == "app"`, builder)
	cached := func(t *testing.T, ref string, reqs []attest.Requirement) (attest.Verdict, int64) {
		before := requests.Load()
		got, err := attest.Cached(t.Context(), cache, now, ref, reqs)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		return got, requests.Load() - before
	}

	t.Run("a refusal while nothing is attached", func(t *testing.T) {
		got, _ := cached(t, ref, ours)
		NewWithT(t).Expect(got.Reason).To(Equal(stagecoachv1.ReasonAttestationMissing))
	})
	verifytest.AttestBundle(t, t.Context(), ref, builder, verifytest.Statement(t, digestOf(ref), spdx, sbom(1)))
	t.Run("an attestation attached since counts at once", func(t *testing.T) {
		got, _ := cached(t, ref, ours)
		NewWithT(t).Expect(got.Passed).To(BeTrue(), got.Message)
	})
	t.Run("a pass is kept: no registry request", func(t *testing.T) {
		got, n := cached(t, ref, ours)
		NewWithT(t).Expect(got.Passed).To(BeTrue())
		NewWithT(t).Expect(got.Message).To(ContainSubstring("meets predicate.name"))
		NewWithT(t).Expect(n).To(BeZero())
	})
	var first int64
	t.Run("another condition is judged afresh", func(t *testing.T) {
		var got attest.Verdict
		got, first = cached(t, ref, reqOf(`predicate.name == "other"`, builder))
		NewWithT(t).Expect(got.Reason).To(Equal(stagecoachv1.ReasonAttestationRefused))
	})
	t.Run("a refusal is kept while nothing attached changes: the attestation is not read again", func(t *testing.T) {
		got, n := cached(t, ref, reqOf(`predicate.name == "other"`, builder))
		NewWithT(t).Expect(got.Reason).To(Equal(stagecoachv1.ReasonAttestationRefused))
		NewWithT(t).Expect(got.Message).To(ContainSubstring("does not meet the condition"))
		NewWithT(t).Expect(n).To(BeNumerically("<", first), "the state reads only, not the bundle")
	})
	t.Run("another trust is judged afresh", func(t *testing.T) {
		got, _ := cached(t, ref, reqOf(`predicate.name == "app"`, other))
		NewWithT(t).Expect(got.Reason).To(Equal(stagecoachv1.ReasonAttestationRefused))
	})
	t.Run("another digest is judged afresh", func(t *testing.T) {
		got, _ := cached(t, verifytest.PushRandomImage(t, host+"/team/app", "v2"), ours)
		NewWithT(t).Expect(got.Reason).To(Equal(stagecoachv1.ReasonAttestationMissing))
	})
}
