// Package api serves internal/api over real HTTP with a real API server behind it (RBAC
// authorization and the admission policies of manifests/policies), and calls it the way Argo
// CD's proxy extension does: with the proxy token and Argo CD's user headers.
package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/stagecoach-dev/stagecoach/controller"
	"github.com/stagecoach-dev/stagecoach/internal/api"
	"github.com/stagecoach-dev/stagecoach/test/integration/testenv"
)

const (
	token   = "s3cret-proxy-token"
	maxBody = 4 << 10
)

var (
	env *testenv.Env
	// server acts as the Argo CD user alone (the default); groupsServer also with the groups of
	// Argocd-User-Groups (--api-trust-argocd-groups).
	server, groupsServer *httptest.Server
)

func TestMain(m *testing.M) {
	testenv.SetLogger()
	var err error
	env, err = testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		scheme, err := controller.NewScheme()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		// The test API server's admin may impersonate anyone, as the controller's ClusterRole
		// lets it impersonate users and groups.
		for _, s := range []struct {
			trustGroups bool
			server      **httptest.Server
		}{{false, &server}, {true, &groupsServer}} {
			srv, err := api.New(api.Options{Reader: env.Client, Config: env.Config, Scheme: scheme, ProxyToken: token,
				MaxBody: maxBody, Log: ctrl.Log.WithName("api"), TrustGroupsHeader: s.trustGroups})
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			*s.server = httptest.NewServer(srv.Handler())
			defer (*s.server).Close()
		}
		return m.Run()
	}()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "failed to stop the test API server:", err)
	}
	os.Exit(code)
}

// caller is who calls through the proxy: the token it carries and the headers the API receives.
// As Argo CD forwards them, a logged-in user comes with Argocd-Username and Argocd-User-Id (for a
// local account both are its name): id is the user unless set, and "-" sends none.
type caller struct {
	token  string // "" sends no Authorization header
	user   string
	id     string
	groups string
	app    string // Argocd-Application-Name, namespace:name
	// trustGroups calls the API that takes Argocd-User-Groups (--api-trust-argocd-groups).
	trustGroups bool
}

// do sends a request and decodes the JSON answer into a map.
func (c caller) do(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var reader io.Reader = http.NoBody
	switch b := body.(type) {
	case nil:
	case []byte:
		reader = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		reader = bytes.NewReader(data)
	}
	base := server.URL
	if c.trustGroups {
		base = groupsServer.URL
	}
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, reader)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.user != "" {
		req.Header.Set("Argocd-Username", c.user)
	}
	switch c.id {
	case "":
		if c.user != "" {
			req.Header.Set("Argocd-User-Id", c.user)
		}
	case "-":
	default:
		req.Header.Set("Argocd-User-Id", c.id)
	}
	if c.groups != "" {
		req.Header.Set("Argocd-User-Groups", c.groups)
	}
	req.Header.Set("Argocd-Application-Name", c.app)
	req.Header.Set("Argocd-Project-Name", "default")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	NewWithT(t).Expect(resp.Header.Get("Content-Type")).To(Equal("application/json"))
	out := map[string]any{}
	NewWithT(t).Expect(json.NewDecoder(resp.Body).Decode(&out)).To(Succeed())
	return resp.StatusCode, out
}

// applyManifests creates every object of a multi-document YAML file (once per suite).
func applyManifests(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return
		}
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		obj := &unstructured.Unstructured{}
		NewWithT(t).Expect(utilyaml.Unmarshal(doc, &obj.Object)).To(Succeed())
		if len(strings.TrimSpace(string(doc))) == 0 || len(obj.Object) == 0 {
			continue
		}
		if err := env.Client.Create(t.Context(), obj); !apierrors.IsAlreadyExists(err) {
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
		}
	}
}

var policies = filepath.Join(testenv.RepoRoot(), "manifests", "policies", "approval-guard.yaml")
