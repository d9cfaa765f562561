// Package hooks runs the controller with its notification hooks on 127.0.0.1 and shows that a
// verified Flux or Argo CD notification wakes the Stage that applies through the object it names,
// and that a refused one wakes nothing. The Stages here have no other trigger: their appliers'
// CRDs are installed after the Stages gave up on them, and their retry interval is an hour.
package hooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/controller"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

var (
	env      *testenv.Env
	hooksURL string
)

const (
	fluxKey   = "flux-hmac-key"
	argoToken = "argo-bearer-token"
)

func TestMain(m *testing.M) {
	testenv.SetLogger()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	env, err = testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for name, token := range map[string]string{"flux-hook": fluxKey, "argocd-hook": argoToken} {
		if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Data: map[string][]byte{"token": []byte(token)}}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	addr, err := freeAddress()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	hooksURL = "http://" + addr
	stop, err := env.RunManager(ctx, func(o *controller.Options) {
		o.HooksBindAddress = addr
		o.FluxHookSecret, o.ArgoCDHookSecret = "default/flux-hook", "default/argocd-hook"
		o.ApplierRetryInterval = time.Hour
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if err := stop(); err != nil {
		fmt.Fprintln(os.Stderr, "manager stopped with an error:", err)
		code = 1
	}
	return code
}

func freeAddress() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func post(t *testing.T, path, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, hooksURL+path, bytes.NewBufferString(body))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	for k, v := range header {
		req.Header.Set(k, v)
	}
	var resp *http.Response
	NewWithT(t).Eventually(func() error { resp, err = http.DefaultClient.Do(req.Clone(t.Context())); return err }, 10*time.Second, 50*time.Millisecond).Should(Succeed())
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func ready(g Gomega, t *testing.T, ns, name string) *metav1.Condition {
	s := &stagecoachv1.Stage{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
	return meta.FindStatusCondition(s.Status.Conditions, stagecoachv1.ConditionReady)
}

// stageWaitingForCRD creates a Stage whose applier kind is not installed yet, waits until it has
// said so, then installs the CRDs and the applier: from then on only a hook can wake the Stage.
func stageWaitingForCRD(t *testing.T, ns, name, kind, crds string, applier *unstructured.Unstructured) {
	t.Helper()
	g := NewWithT(t)
	env.CreatePlaceholderUpstream(t, ns)
	g.Expect(env.Client.Create(t.Context(), &stagecoachv1.Stage{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: stagecoachv1.StageSpec{Service: "payments", Environment: name,
			ApplyRef: stagecoachv1.ApplierReference{Kind: kind, Name: name},
			Source:   stagecoachv1.StageSource{Upstream: &stagecoachv1.UpstreamSource{Stage: testenv.PlaceholderUpstream}}},
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := ready(g, t, ns, name)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(ContainSubstring("is not installed"))
	}, 20*time.Second, 50*time.Millisecond).Should(Succeed())
	_, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{crds}, ErrorIfPathMissing: true, MaxTime: time.Minute})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() error { return env.Client.Create(t.Context(), applier) }, 10*time.Second, 50*time.Millisecond).Should(Succeed())
}

func notWoken(t *testing.T, ns, name string) {
	t.Helper()
	NewWithT(t).Consistently(func(g Gomega) {
		g.Expect(ready(g, t, ns, name).Reason).To(Equal(stagecoachv1.ReasonApplierUnreadable))
	}, time.Second, 50*time.Millisecond).Should(Succeed())
}

func wokenWithinASecond(t *testing.T, ns, name string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(ready(g, t, ns, name).Status).To(Equal(metav1.ConditionTrue))
	}, time.Second, 20*time.Millisecond).Should(Succeed())
}

func TestFluxHookWakesTheStage(t *testing.T) {
	g := NewWithT(t)
	const ns, name = "default", "dev"
	k := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"interval": "10m", "prune": true,
		"sourceRef": map[string]any{"kind": "OCIRepository", "name": name}}}}
	k.SetAPIVersion("kustomize.toolkit.fluxcd.io/v1")
	k.SetKind("Kustomization")
	k.SetNamespace(ns)
	k.SetName(name)
	k.SetLabels(map[string]string{stagecoachv1.StageLabel: name})
	stageWaitingForCRD(t, ns, name, "Kustomization", testenv.FluxCRDs, k)

	body := `{"involvedObject":{"kind":"Kustomization","namespace":"default","name":"dev","apiVersion":"kustomize.toolkit.fluxcd.io/v1"},` +
		`"severity":"info","reason":"ReconciliationSucceeded","message":"Reconciliation finished","metadata":{"revision":"latest@sha256:abc"},"reportingController":"kustomize-controller"}`
	mac := hmac.New(sha256.New, []byte(fluxKey))
	mac.Write([]byte(body))
	good := "sha256=" + hex.EncodeToString(mac.Sum(nil))

	status, _ := post(t, "/hooks/flux", body, map[string]string{"X-Signature": "sha256=" + hex.EncodeToString([]byte("forged"))})
	g.Expect(status).To(Equal(http.StatusUnauthorized))
	status, _ = post(t, "/hooks/flux", body[:40], map[string]string{"X-Signature": good})
	g.Expect(status).To(Equal(http.StatusUnauthorized))
	notWoken(t, ns, name)

	status, msg := post(t, "/hooks/flux", body, map[string]string{"X-Signature": good})
	g.Expect(status).To(Equal(http.StatusAccepted), msg)
	g.Expect(msg).To(ContainSubstring("woke 1 Stage(s) applying through Kustomization default/dev"))
	wokenWithinASecond(t, ns, name)
}

func TestArgoCDHookWakesTheStage(t *testing.T) {
	g := NewWithT(t)
	const ns, name = "default", "prod"
	a := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"project": "default",
		"source":      map[string]any{"repoURL": "oci://registry.example/deploy/payments", "path": "."},
		"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": ns},
		"syncPolicy":  map[string]any{"automated": map[string]any{}}}}}
	a.SetAPIVersion("argoproj.io/v1alpha1")
	a.SetKind("Application")
	a.SetNamespace(ns)
	a.SetName(name)
	a.SetLabels(map[string]string{stagecoachv1.StageLabel: name})
	stageWaitingForCRD(t, ns, name, "Application", testenv.ArgoCDCRDs, a)

	body := `{"app":"prod","namespace":"default","revision":"sha256:abc","phase":"Succeeded","health":"Healthy","sync":"Synced"}`
	status, _ := post(t, "/hooks/argocd", body, map[string]string{"Authorization": "Bearer nope"})
	g.Expect(status).To(Equal(http.StatusUnauthorized))
	status, _ = post(t, "/hooks/argocd", body, nil)
	g.Expect(status).To(Equal(http.StatusUnauthorized))
	notWoken(t, ns, name)

	status, msg := post(t, "/hooks/argocd", body, map[string]string{"Authorization": "Bearer " + argoToken})
	g.Expect(status).To(Equal(http.StatusAccepted), msg)
	wokenWithinASecond(t, ns, name)
}
