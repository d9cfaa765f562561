package gitedit

import (
	"testing"

	. "github.com/onsi/gomega"
)

const digest = "sha256:2222222222222222222222222222222222222222222222222222222222222222"

// The images entry of a kustomization takes the digest; comments, key order, the sequence's
// indentation and every other line stay as written.
func TestKustomizationImage(t *testing.T) {
	for _, tc := range []struct {
		name, in, image, want, wantErr string
	}{
		{name: "a tag becomes the digest; comments and order stay", image: "payments",
			in: `# staging overlay
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../../base # the shared base
images:
- name: payments # the service
  newName: registry.example/payments
  newTag: v1.0.0
- name: proxy
  newTag: "1.2"
`,
			want: `# staging overlay
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../../base # the shared base
images:
- name: payments # the service
  newName: registry.example/payments
  digest: ` + digest + `
- name: proxy
  newTag: "1.2"
`},
		{name: "indented sequences stay indented", image: "payments",
			in: `images:
  - name: payments
    digest: sha256:1111111111111111111111111111111111111111111111111111111111111111
`,
			want: `images:
  - name: payments
    digest: ` + digest + `
`},
		{name: "no entry of that name", image: "payments", in: "images:\n- name: proxy\n  newTag: \"1\"\n",
			wantErr: `not found: no document has an images entry named "payments"`},
		{name: "not YAML", image: "payments", in: "images: [\n", wantErr: "it is not YAML"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			out, err := KustomizationImage([]byte(tc.in), tc.image, digest)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(out)).To(Equal(tc.want))
		})
	}
}

// A dotted key path takes the value (a Helm values key, any field path); the maps on the way are
// created, the rest of the file stays.
func TestValue(t *testing.T) {
	for _, tc := range []struct {
		name, in, path, want, wantErr string
	}{
		{name: "an existing key, comments kept", path: "image.digest",
			in:   "replicas: 2 # two\nimage:\n  repository: registry.example/payments\n  digest: old # pinned by Stagecoach\nresources: {}\n",
			want: "replicas: 2 # two\nimage:\n  repository: registry.example/payments\n  digest: " + digest + " # pinned by Stagecoach\nresources: {}\n"},
		{name: "a quoted value stays quoted", path: "image.tag", in: "image:\n  tag: \"v1\"\n",
			want: "image:\n  tag: \"" + digest + "\"\n"},
		{name: "maps created on the way", path: "image.digest", in: "replicas: 2\n",
			want: "replicas: 2\nimage:\n  digest: " + digest + "\n"},
		{name: "the document that has the key, of several", path: "spec.ref.commit",
			in:   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nspec:\n  ref:\n    branch: main\n",
			want: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nspec:\n  ref:\n    branch: main\n    commit: " + digest + "\n"},
		{name: "a path through a value that is not a map", path: "replicas.count", in: "replicas: 2\n", wantErr: "replicas.count"},
		{name: "an empty key", path: "image..digest", in: "a: b\n", wantErr: `the key path "image..digest" has an empty key`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			out, err := Value([]byte(tc.in), tc.path, digest)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(out)).To(Equal(tc.want))
		})
	}
}
