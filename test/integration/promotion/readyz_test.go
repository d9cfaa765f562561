package promotion

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

// A Stage that names a generic kind (v1/ConfigMap) as its applier, created and then deleted, never
// leaves /readyz failing: not when the controller (with the install's ClusterRole) may not watch
// ConfigMaps, and not when an operator granted it and the kind's informer ran.
func TestReadyzAfterAGenericKindStage(t *testing.T) {
	tests := []struct {
		name       string
		grant      bool
		wantReason string
		wantMsg    string
	}{
		{name: "the controller may not watch ConfigMaps", wantReason: stagecoachv1.ReasonApplierUnreadable,
			wantMsg: "cannot be watched: the controller may not list (cluster-wide) configmaps"},
		{name: "the controller was granted ConfigMaps", grant: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			user := "system:serviceaccount:stagecoach-system:readyz-" + ns
			out, err := env.Kubectl(t, "apply", "-f", filepath.Join(testenv.RepoRoot(), "manifests", "rbac", "role.yaml"))
			g.Expect(err).NotTo(HaveOccurred(), out)
			out, err = env.Kubectl(t, "create", "clusterrolebinding", "readyz-"+ns, "--clusterrole=stagecoach-controller", "--user="+user)
			g.Expect(err).NotTo(HaveOccurred(), out)
			if tt.grant {
				out, err = env.Kubectl(t, "create", "clusterrole", "configmaps-"+ns, "--verb=get,list,watch,patch", "--resource=configmaps")
				g.Expect(err).NotTo(HaveOccurred(), out)
				out, err = env.Kubectl(t, "create", "clusterrolebinding", "configmaps-"+ns, "--clusterrole=configmaps-"+ns, "--user="+user)
				g.Expect(err).NotTo(HaveOccurred(), out)
			}
			restricted, err := env.AddUser(envtest.User{Name: user, Groups: []string{"system:authenticated"}}, nil)
			g.Expect(err).NotTo(HaveOccurred())

			g.Expect(env.Client.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings",
				Labels: map[string]string{stagecoachv1.StageLabel: "settings"}}})).To(Succeed())
			stage := newStage(t, ns, "settings", func(s *stagecoachv1.Stage) {
				s.Spec.ApplyRef = stagecoachv1.ApplierReference{APIVersion: "v1", Kind: "ConfigMap", Name: "settings",
					Set: []stagecoachv1.FieldSetting{{Path: "/metadata/annotations/digest", Value: "{{ .Digest }}"}}}
				s.Spec.Author = author.DeepCopy()
				s.Spec.Completion = &stagecoachv1.CompletionRules{ObservedMatches: []stagecoachv1.ObservedMatch{
					{Input: "metadata.annotations.digest", Output: "metadata.annotations.digest"}}}
			})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			g.Expect(err).NotTo(HaveOccurred())
			probes := ln.Addr().String()
			g.Expect(ln.Close()).To(Succeed())
			stop, err := env.RunManagerAs(context.Background(), restricted.Config(), func(o *controller.Options) {
				o.ApplierRetryInterval = 500 * time.Millisecond
				o.SkipNameValidation = true
				o.HealthProbeBindAddress = probes
			})
			g.Expect(err).NotTo(HaveOccurred())
			t.Cleanup(func() { NewWithT(t).Expect(stop()).To(Succeed()) })

			if tt.wantReason != "" {
				eventuallyCondition(t, ns, "settings", stagecoachv1.ConditionReady, metav1.ConditionFalse, tt.wantReason, tt.wantMsg)
			} else {
				g.Eventually(func(g Gomega) {
					s := getStage(g, t.Context(), ns, "settings")
					g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
				}, timeout, interval).Should(Succeed())
			}
			readyz := func(g Gomega) {
				req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+probes+"/readyz?verbose", nil)
				g.Expect(err).NotTo(HaveOccurred())
				resp, err := http.DefaultClient.Do(req)
				g.Expect(err).NotTo(HaveOccurred())
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				g.Expect(resp.StatusCode).To(Equal(http.StatusOK), string(body))
			}
			g.Eventually(readyz, timeout, interval).Should(Succeed(), "/readyz with the Stage")

			g.Expect(env.Client.Delete(t.Context(), stage)).To(Succeed())
			g.Eventually(func(g Gomega) {
				g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(stage), &stagecoachv1.Stage{})).NotTo(Succeed())
			}, timeout, interval).Should(Succeed())
			g.Consistently(readyz, 5*time.Second, 250*time.Millisecond).Should(Succeed(), "/readyz after the Stage was deleted")
		})
	}
}
