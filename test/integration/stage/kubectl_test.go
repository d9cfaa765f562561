package stage

import (
	"path/filepath"
	"regexp"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

func kubectl(t *testing.T, args ...string) (string, error) { return env.Kubectl(t, args...) }

func TestKubectlGetShowsPrinterColumns(t *testing.T) {
	ns := newNamespace(t)
	newStage(t, ns, "payments", "Kustomization", "payments")
	eventuallyReady(t, ns, "payments", metav1.ConditionFalse, stagecoachv1.ReasonApplierUnreadable, "is missing")

	out, err := kubectl(t, "get", "stages", "-n", ns)
	g := NewWithT(t)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`(?m)^NAME\s+ENVIRONMENT\s+VERSION\s+READY\s+REASON\s+AGE\s*$`))
	g.Expect(out).To(MatchRegexp(`(?m)^payments\s+prod\s+False\s+ApplierUnreadable\s+\d+s\s*$`))

	out, err = kubectl(t, "get", "promotions", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("No resources found"))
}

func TestKubectlWaitOnReady(t *testing.T) {
	ns := newNamespace(t)
	g := NewWithT(t)
	newStage(t, ns, "payments", "Kustomization", "payments")

	// kubectl wait returns as soon as the condition holds.
	out, err := kubectl(t, "wait", "--for=condition=Ready=False", "stage/payments", "-n", ns, "--timeout=30s")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("stage.stagecoach.dev/payments condition met"))

	g.Expect(env.Client.Create(t.Context(), kustomization(ns, "payments", stageLabel("payments")))).To(Succeed())
	out, err = kubectl(t, "wait", "--for=condition=Ready", "stage/payments", "-n", ns, "--timeout=30s")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("condition met"))

	// And it does not return while the condition does not hold.
	out, err = kubectl(t, "wait", "--for=condition=Ready=False", "stage/payments", "-n", ns, "--timeout=2s")
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(MatchRegexp(regexp.QuoteMeta("timed out waiting for the condition")))
}

// The install manifests build with kustomize and the API server accepts every object in them.
func TestInstallManifestsApply(t *testing.T) {
	g := NewWithT(t)
	out, err := kubectl(t, "create", "namespace", "stagecoach-system")
	g.Expect(err).NotTo(HaveOccurred(), out)
	out, err = kubectl(t, "apply", "--dry-run=server", "-k", filepath.Join(testenv.RepoRoot(), "manifests"))
	g.Expect(err).NotTo(HaveOccurred(), out)
	for _, want := range []string{
		"customresourcedefinition.apiextensions.k8s.io/stages.stagecoach.dev",
		"clusterrole.rbac.authorization.k8s.io/stagecoach-controller",
		"role.rbac.authorization.k8s.io/stagecoach-leader-election",
		"deployment.apps/stagecoach-controller",
	} {
		g.Expect(out).To(ContainSubstring(want))
	}
}

// The Flux wiring is accepted by the Flux CRDs' schemas.
func TestFluxManifestsApply(t *testing.T) {
	g := NewWithT(t)
	out, err := kubectl(t, "create", "namespace", "flux-system")
	g.Expect(err).NotTo(HaveOccurred(), out)
	out, err = kubectl(t, "apply", "--dry-run=server", "-k", filepath.Join(testenv.RepoRoot(), "manifests", "flux"))
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("provider.notification.toolkit.fluxcd.io/stagecoach created (server dry run)"))
	g.Expect(out).To(ContainSubstring("alert.notification.toolkit.fluxcd.io/stagecoach created (server dry run)"))
}
