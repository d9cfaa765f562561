package v1alpha1

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestApplierReferenceGroupVersionKind(t *testing.T) {
	cases := []struct {
		name        string
		ref         ApplierReference
		want        schema.GroupVersionKind
		wantBuiltin bool
		wantErr     string
	}{
		{name: "Application", ref: ApplierReference{Kind: "Application"}, want: schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"}, wantBuiltin: true},
		{name: "ApplicationSet", ref: ApplierReference{Kind: "ApplicationSet"}, want: schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "ApplicationSet"}, wantBuiltin: true},
		{name: "OCIRepository", ref: ApplierReference{Kind: "OCIRepository"}, want: schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "OCIRepository"}, wantBuiltin: true},
		{name: "Kustomization", ref: ApplierReference{Kind: "Kustomization"}, want: schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}, wantBuiltin: true},
		{name: "HelmRelease", ref: ApplierReference{Kind: "HelmRelease"}, want: schema.GroupVersionKind{Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmRelease"}, wantBuiltin: true},
		{name: "explicit version of a built-in kind", ref: ApplierReference{APIVersion: "helm.toolkit.fluxcd.io/v2beta2", Kind: "HelmRelease"}, want: schema.GroupVersionKind{Group: "helm.toolkit.fluxcd.io", Version: "v2beta2", Kind: "HelmRelease"}, wantBuiltin: true},
		{name: "same kind name in another group is not built in", ref: ApplierReference{APIVersion: "kustomize.config.k8s.io/v1beta1", Kind: "Kustomization"}, want: schema.GroupVersionKind{Group: "kustomize.config.k8s.io", Version: "v1beta1", Kind: "Kustomization"}},
		{name: "other kind with apiVersion", ref: ApplierReference{APIVersion: "kappctrl.k14s.io/v1alpha1", Kind: "App"}, want: schema.GroupVersionKind{Group: "kappctrl.k14s.io", Version: "v1alpha1", Kind: "App"}},
		{name: "other kind without apiVersion", ref: ApplierReference{Kind: "App"}, wantErr: "applyRef.apiVersion is required for kind App"},
		{name: "malformed apiVersion", ref: ApplierReference{APIVersion: "a/b/c", Kind: "App"}, wantErr: "unexpected GroupVersion string"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := tc.ref.GroupVersionKind()
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				g.Expect(tc.ref.Builtin()).To(BeFalse())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
			g.Expect(tc.ref.Builtin()).To(Equal(tc.wantBuiltin))
		})
	}
}

func TestStageDefaults(t *testing.T) {
	no := false
	limit := int32(3)
	cases := []struct {
		name         string
		spec         StageSpec
		wantDeadline time.Duration
		wantGrace    time.Duration
		wantAuto     bool
		wantLimit    int32
	}{
		{name: "defaults", wantDeadline: 10 * time.Minute, wantGrace: 10 * time.Second, wantAuto: true, wantLimit: 1},
		{name: "set", spec: StageSpec{
			Verification: &VerificationPolicy{ProgressDeadline: &metav1.Duration{Duration: time.Minute}, Grace: &metav1.Duration{Duration: 0}},
			Rollback:     &RollbackPolicy{Automatic: &no, Limit: &limit},
		}, wantDeadline: time.Minute, wantGrace: 0, wantAuto: false, wantLimit: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := &Stage{Spec: tc.spec}
			g.Expect(s.GetProgressDeadline()).To(Equal(tc.wantDeadline))
			g.Expect(s.GetGrace()).To(Equal(tc.wantGrace))
			g.Expect(s.GetAutomaticRollback()).To(Equal(tc.wantAuto))
			g.Expect(s.GetRollbackLimit()).To(Equal(tc.wantLimit))
		})
	}
}

func TestTrustedRootSourceGetKey(t *testing.T) {
	cases := []struct {
		name string
		src  TrustedRootSource
		want string
	}{
		{name: "default", src: TrustedRootSource{SecretRef: LocalObjectReference{Name: "sigstore"}}, want: "trusted_root.json"},
		{name: "named", src: TrustedRootSource{SecretRef: LocalObjectReference{Name: "sigstore"}, Key: "root.json"}, want: "root.json"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(tc.src.GetKey()).To(Equal(tc.want))
		})
	}
}
