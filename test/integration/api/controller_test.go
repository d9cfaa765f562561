package api

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/stagecoach-dev/stagecoach/controller"
)

// The controller serves the API on --api-bind-address with the token of --api-proxy-token-file.
func TestControllerServesTheAPI(t *testing.T) {
	g := NewWithT(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	addr := ln.Addr().String()
	g.Expect(ln.Close()).To(Succeed())
	tokenFile := filepath.Join(t.TempDir(), "token")
	// As a mounted Secret holds it: the token and a trailing newline.
	g.Expect(os.WriteFile(tokenFile, []byte("controller-test-token\n"), 0o600)).To(Succeed())

	stop, err := env.RunManager(t.Context(), func(o *controller.Options) {
		o.HooksBindAddress = "0"
		o.APIBindAddress, o.APIProxyTokenFile = addr, tokenFile
		o.SkipNameValidation = true
	})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(stop()).To(Succeed()) }()

	get := func(token string) (int, error) {
		req, err := http.NewRequestWithContext(t.Context(), "GET", "http://"+addr+"/api/v1/whoami", nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		return resp.StatusCode, nil
	}
	g.Eventually(func() (int, error) { return get("controller-test-token") }, 20*time.Second, 100*time.Millisecond).Should(Equal(http.StatusOK))
	g.Expect(get("another-token-entirely")).To(Equal(http.StatusUnauthorized))
}
