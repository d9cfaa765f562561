package localstack

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// pki is the control plane's key material: a CA, the API server's serving certificate, the
// service-account signing key, and static bearer tokens per identity.
type pki struct {
	dir                         string
	caCert, servingCert, key    string // files
	saKey, saPub, tokens        string // files
	caPEM                       []byte
	adminToken, controllerToken string
	// kcmToken is kube-controller-manager's: the user its bootstrap RBAC names.
	kcmToken string
}

// Identities with static tokens. The admin is the platform operator: cluster-admin, and in the
// break-glass group so that it may create Stagecoach-managed Applications (as an installer does).
const (
	AdminUser        = "admin"
	BreakGlassGroup  = "stagecoach:break-glass"
	ControllerUser   = "system:serviceaccount:stagecoach-system:stagecoach-controller"
	controllerGroups = "system:serviceaccounts,system:serviceaccounts:stagecoach-system,system:authenticated"
	// KubeControllerManagerUser is bound to ClusterRole system:kube-controller-manager by the API
	// server's bootstrap policy; with --use-service-account-credentials each controller then acts as
	// its own service account in kube-system (system:controller:deployment-controller, ...), as
	// in a real cluster.
	KubeControllerManagerUser = "system:kube-controller-manager"
)

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{dir: dir, caCert: filepath.Join(dir, "ca.crt"), servingCert: filepath.Join(dir, "apiserver.crt"),
		key: filepath.Join(dir, "apiserver.key"), saKey: filepath.Join(dir, "sa.key"), saPub: filepath.Join(dir, "sa.pub"),
		tokens: filepath.Join(dir, "tokens.csv")}

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "stagecoach-e2e-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})

	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 0, 0, 1)}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	p.adminToken, p.controllerToken, p.kcmToken = token(), token(), token()
	files := map[string][]byte{
		p.caCert:      p.caPEM,
		p.servingCert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}),
		p.key:         pemKey(srvKey),
		p.saKey:       pemKey(saKey),
		p.saPub:       pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub}),
		p.tokens: []byte(strings.Join([]string{
			fmt.Sprintf("%s,%s,admin-uid,\"system:masters,%s\"", p.adminToken, AdminUser, BreakGlassGroup),
			fmt.Sprintf("%s,%s,stagecoach-controller-uid,\"%s\"", p.controllerToken, ControllerUser, controllerGroups),
			fmt.Sprintf("%s,%s,kube-controller-manager-uid,\"system:authenticated\"", p.kcmToken, KubeControllerManagerUser),
		}, "\n") + "\n"),
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func pemKey(k *ecdsa.PrivateKey) []byte {
	der, _ := x509.MarshalECPrivateKey(k)
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

func token() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// writeKubeconfig writes a self-contained kubeconfig for server with a bearer token.
func writeKubeconfig(path, server string, caPEM []byte, user, tok string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: tok}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = "local"
	return clientcmd.WriteToFile(*cfg, path)
}
