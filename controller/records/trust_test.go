package records

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	recordsource "github.com/stagecoach-dev/stagecoach/internal/source/records"
	"github.com/stagecoach-dev/stagecoach/internal/verify/verifytest"
)

// The trust ConfigMap is read again as it changes; what cannot be used leaves followers
// UpstreamUntrusted saying what to fix, and a failed read of the API server keeps the keys.
func TestTrustWatchLoad(t *testing.T) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	pem, err := cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	publicKey := "  publicKey: |\n    " + strings.ReplaceAll(strings.TrimSpace(string(pem)), "\n", "\n    ") + "\n"
	valid := "keys:\n- name: staging\n  repositories: [\"registry.example/delivery/streams\"]\n  streams: [\"c/staging/*\"]\n" + publicKey
	// The form before keys were bound to repositories: refused, saying how to fix it.
	streamsOnly := "keys:\n- name: staging\n  streams: [\"c/staging/*\"]\n" + publicKey
	// Keyless (issue 31): the recorder's CI identity instead of its key, checked against a
	// Sigstore's trusted root given inline.
	root, err := yaml.Marshal(string(verifytest.NewSigstore(t).TrustedRoot()))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	keylessEntry := "keys:\n- name: staging-ci\n  repositories: [\"registry.example/delivery/streams\"]\n  streams: [\"c/staging/*\"]\n" +
		"  matchOIDCIdentity:\n  - issuer: ^https://token.actions.githubusercontent.com$\n" +
		"    subject: ^https://github.com/org/delivery/.github/workflows/record.yml@refs/heads/main$\n"
	keyless := keylessEntry + "  trustedRoot: " + strings.TrimSpace(string(root)) + "\n"
	keylessBadRoot := keylessEntry + "  trustedRoot: '{}'\n"

	key := client.ObjectKey{Namespace: "stagecoach-system", Name: "upstream-trust"}
	var getErr error
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if getErr != nil {
				return getErr
			}
			return c.Get(ctx, k, obj, opts...)
		}}).Build()
	follower := &recordsource.Source{}
	w := &TrustWatch{Reader: c, Key: key, Follower: follower}
	set := func(g Gomega, data map[string]string) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		if err := c.Get(t.Context(), key, cm); apierrors.IsNotFound(err) {
			cm.Data = data
			g.Expect(c.Create(t.Context(), cm)).To(Succeed())
			return
		}
		cm.Data = data
		g.Expect(c.Update(t.Context(), cm)).To(Succeed())
	}
	steps := []struct {
		name    string
		change  func(g Gomega)
		wantMsg string // "" means trusted
		// wantKeyless: the trusted config's first entry trusts keyless identities.
		wantKeyless bool
	}{
		{name: "missing", wantMsg: "upstream trust ConfigMap stagecoach-system/upstream-trust (--upstream-trust) does not exist: create it"},
		{name: "forbidden", change: func(Gomega) {
			getErr = apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, key.Name, errors.New("no RBAC"))
		}, wantMsg: "cannot be read: grant the controller's service account get on it"},
		{name: "without the key", change: func(g Gomega) { getErr = nil; set(g, map[string]string{"trust.yaml": valid}) },
			wantMsg: "has no key upstream-trust.yaml"},
		{name: "invalid", change: func(g Gomega) { set(g, map[string]string{TrustConfigMapKey: "keys: []"}) },
			wantMsg: "key upstream-trust.yaml is invalid: upstream trust config lists no keys"},
		{name: "keys bound to streams alone", change: func(g Gomega) { set(g, map[string]string{TrustConfigMapKey: streamsOnly}) },
			wantMsg: `key upstream-trust.yaml is invalid: upstream trust config keys[0] (name "staging"): repositories is empty; ` +
				`a key is bound to the repositories its streams are read from as well as to the streams: add repositories: [`},
		{name: "valid", change: func(g Gomega) { set(g, map[string]string{TrustConfigMapKey: valid}) }},
		{name: "keyless identities with a trusted root that is not one", change: func(g Gomega) { set(g, map[string]string{TrustConfigMapKey: keylessBadRoot}) },
			wantMsg: `key upstream-trust.yaml is invalid: upstream trust config keys[0] (name "staging-ci"): matchOIDCIdentity: trusted root:`},
		{name: "keyless identities", change: func(g Gomega) { set(g, map[string]string{TrustConfigMapKey: keyless}) }, wantKeyless: true},
		{name: "the API server times out: the keys stay", change: func(Gomega) { getErr = apierrors.NewTimeoutError("slow", 1) }},
		{name: "deleted", change: func(g Gomega) {
			getErr = nil
			g.Expect(c.Delete(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})).To(Succeed())
		}, wantMsg: "does not exist"},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			g := NewWithT(t)
			if step.change != nil {
				step.change(g)
			}
			w.load(t.Context())
			st := follower.State(&stagecoachv1.Stage{})
			if step.wantMsg == "" {
				g.Expect(st.Reason).To(BeEmpty(), st.Message)
				g.Expect(follower.Trust).NotTo(BeNil())
				if step.wantKeyless {
					g.Expect(follower.Trust.Keys[0].Keyless()).To(BeTrue())
				}
				return
			}
			g.Expect(st.Reason).To(Equal(stagecoachv1.ReasonUpstreamUntrusted))
			g.Expect(st.Message).To(ContainSubstring(step.wantMsg))
			g.Expect(st.Message).To(HaveSuffix("until then no upstream record is trusted and Stages following upstreamRecords take nothing"))
		})
	}
}
