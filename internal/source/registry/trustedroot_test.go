package registry

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

func TestTrustedRoot(t *testing.T) {
	root := []byte(`{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`)
	secrets := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: "sigstore"}, Data: map[string][]byte{"trusted_root.json": root}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: "named"}, Data: map[string][]byte{"root.json": root}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "elsewhere"}, Data: map[string][]byte{"trusted_root.json": root}},
	).Build()
	stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: "app"}}
	in := func(name, key string) *stagecoachv1.TrustedRootSource {
		return &stagecoachv1.TrustedRootSource{SecretRef: stagecoachv1.LocalObjectReference{Name: name}, Key: key}
	}

	tests := []struct {
		name      string
		src       *stagecoachv1.TrustedRootSource
		want      []byte
		wantBlock string
	}{
		{name: "unset: the public instance's", src: nil},
		{name: "default entry", src: in("sigstore", ""), want: root},
		{name: "named entry", src: in("named", "root.json"), want: root},
		{name: "missing Secret", src: in("nope", ""), wantBlock: "Secret 'dev/nope' with the Sigstore trusted root cannot be read"},
		{name: "only the Stage's namespace", src: in("elsewhere", ""), wantBlock: "Secret 'dev/elsewhere' with the Sigstore trusted root cannot be read"},
		{name: "missing entry", src: in("sigstore", "other.json"), wantBlock: "Secret 'dev/sigstore' has no other.json entry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			data, block, err := TrustedRoot(t.Context(), secrets, stage, tt.src)
			g.Expect(err).NotTo(HaveOccurred())
			if tt.wantBlock != "" {
				g.Expect(block).NotTo(BeNil())
				g.Expect(block.Gate).To(Equal(stagecoachv1.GateSignature))
				g.Expect(block.Reason).To(Equal(stagecoachv1.ReasonKeysUnreadable))
				g.Expect(block.Message).To(ContainSubstring(tt.wantBlock))
				return
			}
			g.Expect(block).To(BeNil())
			g.Expect(data).To(Equal(tt.want))
		})
	}
}
