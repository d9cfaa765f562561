package localstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// FieldOwner is the server-side-apply field manager of everything the stack and its scenarios apply.
const FieldOwner = client.FieldOwner("stagecoach-e2e")

// NewScheme knows the core kinds, CRDs and Stagecoach's kinds; Argo CD and Flux objects are unstructured.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, stagecoachv1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// decodeYAML splits a multi-document YAML stream into objects.
func decodeYAML(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// ApplyYAML server-side applies every object of a YAML stream.
func ApplyYAML(ctx context.Context, c client.Client, data []byte) error {
	objs, err := decodeYAML(data)
	if err != nil {
		return fmt.Errorf("bad YAML: %w", err)
	}
	for _, o := range objs {
		if err := Apply(ctx, c, o); err != nil {
			return err
		}
	}
	return nil
}

// Apply server-side applies one object, taking over fields others own.
func Apply(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	o.SetManagedFields(nil)
	o.SetResourceVersion("")
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), FieldOwner, client.ForceOwnership); err != nil {
		return fmt.Errorf("failed to apply %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
	}
	return nil
}

// applyFiles applies the named YAML files, or every *.yaml in dir except kustomization.yaml.
func applyFiles(ctx context.Context, c client.Client, dir string, names ...string) error {
	if len(names) == 0 {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".yaml") && e.Name() != "kustomization.yaml" {
				names = append(names, e.Name())
			}
		}
	}
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		if err := ApplyYAML(ctx, c, data); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(dir, n), err)
		}
	}
	return nil
}

// installCRDs applies the CRDs in dirs and waits until every one is Established.
func installCRDs(ctx context.Context, c client.Client, dirs ...string) error {
	var crds []*unstructured.Unstructured
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("failed to read the CRD folder %s: %w", dir, err)
		}
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".yaml") {
				continue
			}
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				return err
			}
			objs, err := decodeYAML(data)
			if err != nil {
				return fmt.Errorf("%s: %w", filepath.Join(dir, e.Name()), err)
			}
			for _, o := range objs {
				if o.GetKind() == "CustomResourceDefinition" {
					crds = append(crds, o)
				}
			}
		}
	}
	// Applied together: the API server takes a while per CRD (it rebuilds its OpenAPI), mostly waiting.
	errs := make([]error, len(crds))
	var wg sync.WaitGroup
	for i, o := range crds {
		wg.Go(func() { errs[i] = Apply(ctx, c, o) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	names := make([]string, 0, len(crds))
	for _, o := range crds {
		names = append(names, o.GetName())
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range names {
		for {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			err := c.Get(ctx, client.ObjectKey{Name: n}, crd)
			if err == nil && established(crd) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("CRD %s not Established within 30s (last error: %v)", n, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
