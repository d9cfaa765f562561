package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func TestNewRefusesWeakTokens(t *testing.T) {
	for _, tc := range []struct {
		name, token, wantErr string
	}{
		{name: "no token", token: "", wantErr: "the API needs a proxy token"},
		{name: "only the Bearer prefix", token: "Bearer ", wantErr: "the API needs a proxy token"},
		{name: "the manifests' placeholder", token: "Bearer CHANGE-ME", wantErr: "placeholder or shorter than 16"},
		{name: "short", token: "0123456789", wantErr: "placeholder or shorter than 16"},
		{name: "long enough", token: "0123456789abcdef"},
		{name: "long enough, with the prefix argocd-secret carries", token: "Bearer 0123456789abcdef\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := New(Options{Reader: fake.NewClientBuilder().Build(), Config: &rest.Config{}, Scheme: runtime.NewScheme(),
				Mapper: meta.NewDefaultRESTMapper(nil), ProxyToken: tc.token})
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

// A request that outlives Options.Timeout is stopped and answered 504 in JSON.
func TestTimeout(t *testing.T) {
	g := NewWithT(t)
	hanging := interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{
		List: func(ctx context.Context, _ client.WithWatch, _ client.ObjectList, _ ...client.ListOption) error {
			<-ctx.Done()
			return ctx.Err()
		}})
	s, err := New(Options{Reader: hanging, Config: &rest.Config{}, Scheme: runtime.NewScheme(), Mapper: meta.NewDefaultRESTMapper(nil),
		ProxyToken: "0123456789abcdef", Timeout: 50 * time.Millisecond})
	g.Expect(err).NotTo(HaveOccurred())
	req := httptest.NewRequestWithContext(t.Context(), "GET", "/api/v1/pipelines/shop", nil)
	req.Header.Set("Authorization", "Bearer 0123456789abcdef")
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	g.Expect(rec.Code).To(Equal(http.StatusGatewayTimeout))
	var body Error
	g.Expect(json.Unmarshal(rec.Body.Bytes(), &body)).To(Succeed())
	g.Expect(body.Reason).To(Equal("Timeout"))
	g.Expect(body.Message).To(ContainSubstring("took too long"))
}
