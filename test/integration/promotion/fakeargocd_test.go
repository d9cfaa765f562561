package promotion

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stagecoach-dev/stagecoach/test/fakeargocd"
)

// fakeArgoCD binds test/fakeargocd to a test: every write must succeed.
type fakeArgoCD struct {
	t   *testing.T
	app *fakeargocd.App
}

func newApplication(t *testing.T, ns, name string, spec map[string]any) *fakeArgoCD {
	t.Helper()
	app, err := fakeargocd.Create(t.Context(), env.Client, ns, name, spec)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return &fakeArgoCD{t: t, app: app}
}

func ociSpec(ns string) map[string]any { return fakeargocd.OCISpec(ns) }

func (f *fakeArgoCD) get() *unstructured.Unstructured {
	f.t.Helper()
	u, err := f.app.Get(f.t.Context())
	NewWithT(f.t).Expect(err).NotTo(HaveOccurred())
	return u
}

func (f *fakeArgoCD) update(mutate func(app *unstructured.Unstructured)) {
	f.t.Helper()
	NewWithT(f.t).Expect(f.app.Update(f.t.Context(), mutate)).To(Succeed())
}

func (f *fakeArgoCD) desiredRevision(app *unstructured.Unstructured) string {
	return fakeargocd.DesiredRevision(app)
}

// waitForRevision waits until Stagecoach has written the digest and asked for a refresh.
func (f *fakeArgoCD) waitForRevision(digest string, _ bool) {
	f.t.Helper()
	NewWithT(f.t).Eventually(func() bool { return fakeargocd.Applied(f.get(), digest) }, timeout, interval).
		Should(BeTrue(), "Stagecoach did not write %s to Application %s", digest, f.app.Key)
}

func (f *fakeArgoCD) refresh(now time.Time) {
	NewWithT(f.t).Expect(f.app.Refresh(f.t.Context(), now)).To(Succeed())
}

func (f *fakeArgoCD) sync(phase, message string, started, finished time.Time) {
	NewWithT(f.t).Expect(f.app.Sync(f.t.Context(), phase, message, started, finished)).To(Succeed())
}

func (f *fakeArgoCD) assess(health string, reconciledAt time.Time) {
	NewWithT(f.t).Expect(f.app.Assess(f.t.Context(), health, reconciledAt)).To(Succeed())
}

// deploy waits for Stagecoach's write of the digest, then plays a whole automated sync of it.
func (f *fakeArgoCD) deploy(digest string, plugin bool, phase, health string) {
	f.t.Helper()
	f.waitForRevision(digest, plugin)
	NewWithT(f.t).Expect(f.app.Deploy(f.t.Context(), phase, health)).To(Succeed())
}
