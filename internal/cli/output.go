package cli

import (
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

var outputScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = stagecoachv1.AddToScheme(s)
	return s
}()

// PrintObject writes a Stagecoach object as JSON or YAML, with its apiVersion and kind (the
// client leaves them empty on typed objects), as `kubectl get -o` would.
func PrintObject(out io.Writer, format string, obj client.Object) error {
	if err := checkOutput(format); err != nil {
		return err
	}
	obj = obj.DeepCopyObject().(client.Object)
	gvk, err := apiutil.GVKForObject(obj, outputScheme)
	if err != nil {
		return fmt.Errorf("failed to name the kind of %s: %w", obj.GetName(), err)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	obj.SetManagedFields(nil)
	return printStructured(out, format, obj)
}

// Deleted is what a delete verb prints with -o json|yaml.
type Deleted struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Deleted    bool   `json:"deleted"`
}

// PrintDeleted writes that a Freeze was deleted, as JSON or YAML.
func PrintDeleted(out io.Writer, format, namespace, name string) error {
	return printStructured(out, format, Deleted{APIVersion: stagecoachv1.GroupVersion.String(), Kind: "Freeze",
		Namespace: namespace, Name: name, Deleted: true})
}

// PrintValue writes any value as JSON or YAML.
func PrintValue(out io.Writer, format string, v any) error {
	if err := checkOutput(format); err != nil {
		return err
	}
	return printStructured(out, format, v)
}
