package api

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
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
