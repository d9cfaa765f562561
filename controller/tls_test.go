package controller

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// writeCert writes a self-signed certificate for 127.0.0.1 and its key.
func writeCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// A server's certificate comes from files, re-read when they change; a missing one is named.
func TestServeTLSFromFiles(t *testing.T) {
	g := NewWithT(t)
	certFile, keyFile := writeCert(t, t.TempDir())
	certs := &certReloader{certFile: certFile, keyFile: keyFile}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) }))
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.GetCertificate}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pemBytes, err := os.ReadFile(certFile)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pool.AppendCertsFromPEM(pemBytes)).To(BeTrue())
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/hooks/argocd", strings.NewReader(`{"app":"payments","namespace":"prod"}`))
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer argo-token")
	resp, err := c.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusAccepted))
	g.Expect(resp.TLS).NotTo(BeNil())

	_, err = (&certReloader{certFile: filepath.Join(t.TempDir(), "absent.crt"), keyFile: keyFile}).GetCertificate(nil)
	g.Expect(err).To(MatchError(ContainSubstring("failed to read the TLS certificate")))
}
