package hooks

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stagecoach-dev/stagecoach/controller"
	"github.com/stagecoach-dev/stagecoach/controller/hooks"
)

// writeCert writes a self-signed certificate for localhost and its key, as a mounted
// kubernetes.io/tls Secret would hold them.
func writeCert(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	g := NewWithT(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	g.Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	g.Expect(err).NotTo(HaveOccurred())
	keyDER, err := x509.MarshalECPrivateKey(key)
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	g.Expect(os.WriteFile(certFile, certPEM, 0o600)).To(Succeed())
	g.Expect(os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)).To(Succeed())
	pool = x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(certPEM)).To(BeTrue())
	return certFile, keyFile, pool
}

// A second controller on the API server serves its hooks over TLS (certificate files), and its
// Flux hook names a Secret that does not exist yet: the hook answers 503 and, once the Secret is
// created, goes on answering 503 until the failed read's short cache ends, then takes the key.
func TestHooksTLSAndAMissingSecret(t *testing.T) {
	g := NewWithT(t)
	certFile, keyFile, pool := writeCert(t)
	addr, err := freeAddress()
	g.Expect(err).NotTo(HaveOccurred())
	const secretName = "flux-hook-later"
	stop, err := env.RunManager(context.Background(), func(o *controller.Options) {
		o.HooksBindAddress = addr
		o.HooksTLSCertFile, o.HooksTLSKeyFile = certFile, keyFile
		o.FluxHookSecret, o.ArgoCDHookSecret = "default/"+secretName, "default/argocd-hook"
		o.ApplierRetryInterval = time.Hour
		o.SkipNameValidation = true
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { NewWithT(t).Expect(stop()).To(Succeed()) })

	tlsClient := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}}}
	post := func(c *http.Client, scheme, path, body string, header map[string]string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, scheme+"://"+addr+path, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			return nil, err
		}
		resp.Body.Close()
		return resp, nil
	}
	argo := map[string]string{"Authorization": "Bearer " + argoToken}
	const argoBody = `{"app":"none","namespace":"default"}`

	t.Run("hooks answer over TLS", func(t *testing.T) {
		g := NewWithT(t)
		// The server answers 503 until the manager's caches have synced: wait for the 202.
		var resp *http.Response
		g.Eventually(func(g Gomega) {
			var err error
			resp, err = post(tlsClient, "https", "/hooks/argocd", argoBody, argo)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(resp.StatusCode).To(Equal(http.StatusAccepted))
		}, 20*time.Second, 50*time.Millisecond).Should(Succeed())
		g.Expect(resp.TLS).NotTo(BeNil())
	})
	t.Run("plain HTTP is not served", func(t *testing.T) {
		g := NewWithT(t)
		resp, err := post(&http.Client{Timeout: 5 * time.Second}, "http", "/hooks/argocd", argoBody, argo)
		if err == nil {
			g.Expect(resp.StatusCode).NotTo(Equal(http.StatusAccepted))
		}
	})
	t.Run("a missing Secret: 503, remembered briefly, then read", func(t *testing.T) {
		g := NewWithT(t)
		const key = "flux-key-created-later"
		body := `{"involvedObject":{"kind":"Kustomization","namespace":"default","name":"none","apiVersion":"kustomize.toolkit.fluxcd.io/v1"},"reason":"ReconciliationSucceeded"}`
		mac := hmac.New(sha256.New, []byte(key))
		mac.Write([]byte(body))
		signed := map[string]string{"X-Signature": "sha256=" + hex.EncodeToString(mac.Sum(nil))}

		// Taken before the request: the server's failed read is no earlier, so its cache ends no earlier
		// than failedAt+TTL (a time taken after the response could be later than the server's).
		failedAt := time.Now()
		resp, err := post(tlsClient, "https", "/hooks/flux", body, signed)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.StatusCode).To(Equal(http.StatusServiceUnavailable))
		g.Expect(env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: secretName},
			Data: map[string][]byte{"token": []byte(key)}})).To(Succeed())
		t.Cleanup(func() {
			_ = env.Client.Delete(context.WithoutCancel(t.Context()), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: secretName}})
		})
		resp, err = post(tlsClient, "https", "/hooks/flux", body, signed)
		g.Expect(err).NotTo(HaveOccurred())
		if time.Since(failedAt) < hooks.SecretFailureTTL-time.Second {
			g.Expect(resp.StatusCode).To(Equal(http.StatusServiceUnavailable), "the failed read is remembered for %s", hooks.SecretFailureTTL)
		}
		g.Eventually(func() (int, error) {
			resp, err := post(tlsClient, "https", "/hooks/flux", body, signed)
			if err != nil {
				return 0, err
			}
			return resp.StatusCode, nil
		}, hooks.SecretFailureTTL+5*time.Second, 200*time.Millisecond).Should(Equal(http.StatusAccepted))
		g.Expect(time.Since(failedAt)).To(BeNumerically(">=", hooks.SecretFailureTTL), "the Secret was read again before the failure's cache ended")
	})
}
