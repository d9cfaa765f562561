package records

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/sigstore/sigstore/pkg/signature"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/stagecoach-dev/stagecoach/internal/ociclient"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
	"github.com/stagecoach-dev/stagecoach/internal/records"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

// stagecoachCLI builds the stagecoach binary from the checkout and returns a function that runs
// it against env as an admin.
func stagecoachCLI(t *testing.T, envs ...*testenv.Env) []func(args ...string) (string, error) {
	t.Helper()
	g := NewWithT(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "stagecoach")
	// -race, as the suites compile: the packages are built already (a plain build compiled every
	// dependency once more, about ten CPU-minutes on a fresh machine).
	build := exec.CommandContext(t.Context(), "go", "build", "-race", "-o", bin, "./cmd/stagecoach")
	build.Dir = testenv.RepoRoot()
	out, err := build.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	var runs []func(args ...string) (string, error)
	for i, env := range envs {
		user, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
		g.Expect(err).NotTo(HaveOccurred())
		kubeconfig, err := user.KubeConfig()
		g.Expect(err).NotTo(HaveOccurred())
		path := filepath.Join(dir, "kubeconfig-"+string(rune('a'+i)))
		g.Expect(os.WriteFile(path, kubeconfig, 0o600)).To(Succeed())
		runs = append(runs, func(args ...string) (string, error) {
			out, err := exec.CommandContext(t.Context(), bin, append(args, "--kubeconfig", path)...).CombinedOutput()
			return string(out), err
		})
	}
	return runs
}

// `stagecoach plan` shows staging's stream and the record its last Promotion wrote in cluster A,
// and prod's upstream stream and how far it read in cluster B; with --trust it reads staging's
// stream from the registry and says what prod would take, which version it refuses, and how
// many records it skips.
func TestPlanShowsRecordsAndWhatAFollowerWouldTake(t *testing.T) {
	g := NewWithT(t)
	v1, v2 := pushVersion(t, "p1"), pushVersion(t, "p2")
	nsA, nsB, stream := pipeline(t)
	startA(t, nil)
	startB(t)
	verifyInStaging(t, nsA, "staging-v1", v1, "p1")
	followed(t, nsB, v1, 2)
	p2 := failInStaging(t, nsA, "staging-v2", v2, "p2")
	g.Eventually(func(g Gomega) {
		g.Expect(getStage(g, t, envB, nsB, "prod").Status.UpstreamSeen.Seq).To(Equal(int64(4)))
	}, timeout, interval).Should(Succeed())
	head := getStage(g, t, envA, nsA, "staging").Status.Stream.Digest
	runs := stagecoachCLI(t, envA, envB)
	inA, inB := runs[0], runs[1]

	out, err := inA("plan", "staging", "-n", nsA)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("  stream:    " + stream + ", record 4 (" + head + ")\n"))
	g.Expect(out).To(ContainSubstring("  recorded:  Promotion staging-v2: Verify, record 4 " + p2.Status.Record.Ref + "\n"))

	out, err = inB("plan", "prod", "-n", nsB)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("  follows:   stream " + stream + " in " + reg.streams() + ", read up to record 4 (" + head + ")\n"))
	g.Expect(out).NotTo(ContainSubstring("would take"), "no preview without --trust")

	// Someone appends a record no trusted key signed.
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	g.Expect(err).NotTo(HaveOccurred())
	sv, err := signature.LoadECDSASignerVerifier(priv, crypto.SHA256)
	g.Expect(err).NotTo(HaveOccurred())
	evil, err := records.NewSigner(sv)
	g.Expect(err).NotTo(HaveOccurred())
	store, err := records.NewStore(reg.streams(), ociclient.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = records.NewWriter(store, evil).Write(t.Context(), &records.Record{APIVersion: records.APIVersion, Stream: stream, Seq: 5, Prev: head,
		Stage: records.StageRef{Namespace: nsA, Name: "staging"}, Service: "payments", Environment: "staging",
		Action: records.ActionVerify, Verdict: records.VerdictVerified, Version: &records.Version{Digest: v2, Tag: "p2"},
		Times: records.Times{Recorded: records.NewTime(time.Now())}})
	g.Expect(err).NotTo(HaveOccurred())

	out, err = inB("plan", "prod", "-n", nsB, "--trust", trustFile)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("    would take p1 (" + short(v1) + "): verified upstream in record 2 (upstreamSeq=4 upstreamHead=" + head + ")\n"))
	g.Expect(out).To(ContainSubstring("      refused p2 (" + short(v2) + "): it failed verification upstream: Failed (record 4)\n"))
	g.Expect(out).To(ContainSubstring("      skipped 1 record(s): no trusted key signed them\n"))

	out, err = inB("plan", "prod", "-n", nsB, "--trust", trustFile, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred(), out)
	var explained []plan.Explanation
	g.Expect(json.Unmarshal([]byte(out), &explained)).To(Succeed(), out)
	g.Expect(explained).To(HaveLen(1))
	g.Expect(explained[0].Records).NotTo(BeNil())
	pv := explained[0].Records.Follows.Preview
	g.Expect(pv).NotTo(BeNil())
	g.Expect(pv.Takes).To(Equal(&plan.PreviewVersion{Tag: "p1", Digest: v1, Seq: 2}))
	g.Expect(pv.UpstreamSeq).To(Equal(int64(4)))
	g.Expect(pv.Skipped).To(Equal(1))
	g.Expect(pv.Refused).To(ConsistOf(HaveField("Digest", v2)))

	_, err = inB("plan", "prod", "-n", nsB, "--trust", filepath.Join(t.TempDir(), "none.yaml"))
	g.Expect(err).To(HaveOccurred())
}

// short is how plan names a digest: sha256: and its first 12 hex digits.
func short(digest string) string { return digest[:len("sha256:")+12] }
