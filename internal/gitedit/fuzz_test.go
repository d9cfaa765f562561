package gitedit

import (
	"bytes"
	"testing"
)

// A file from a repository is input nobody checked: an edit never panics, and an edit that
// succeeded is idempotent (promoting the same version again changes no byte, so it commits nothing).
func FuzzValue(f *testing.F) {
	f.Add([]byte("image:\n  repository: ghcr.io/acme/web\n  tag: v1 # pinned\n"), "image.digest", "sha256:0123")
	f.Add([]byte("replicas: 2\n---\nimage: {}\n"), "image.digest", "sha256:0123")
	f.Add([]byte("image: v1\n"), "image.digest", "x")
	f.Add([]byte("- a\n- b\n"), "a.b", "x")
	f.Add([]byte(""), "a", "x")
	f.Add([]byte("a: &x {b: 1}\nc: *x\n"), "c.b", "2")
	f.Fuzz(func(t *testing.T, content []byte, dotted, value string) {
		idempotent(t, content, func(b []byte) ([]byte, error) { return Value(b, dotted, value) })
	})
}

func FuzzKustomizationImage(f *testing.F) {
	f.Add([]byte("images:\n- name: web\n  newTag: v1\n"), "web", "sha256:0123")
	f.Add([]byte("images:\n- name: web\n  newName: ghcr.io/acme/web\n  digest: sha256:aaaa\n"), "web", "sha256:0123")
	f.Add([]byte("resources: [a.yaml]\n---\nimages: [{name: api}]\n"), "api", "sha256:0123")
	f.Add([]byte("images: web\n"), "web", "x")
	f.Add([]byte("{"), "web", "x")
	f.Fuzz(func(t *testing.T, content []byte, image, digest string) {
		idempotent(t, content, func(b []byte) ([]byte, error) { return KustomizationImage(b, image, digest) })
	})
}

// idempotent fails when edit, having succeeded on content, fails on or changes its own result.
func idempotent(t *testing.T, content []byte, edit func([]byte) ([]byte, error)) {
	out, err := edit(content)
	if err != nil {
		return
	}
	again, err := edit(out)
	if err != nil {
		t.Fatalf("the edited file cannot be edited again: %v\n%s", err, out)
	}
	if !bytes.Equal(out, again) {
		t.Fatalf("a second identical edit changed the file:\n%s\n---\n%s", out, again)
	}
}
