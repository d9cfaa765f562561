package localstack

import (
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// Watch calls onChange, from one goroutine, with every object of kind in the scenario's namespace
// as it is added or changed, and the time the change reached the test (status timestamps have
// only second resolution). Objects that exist already are passed first. The watch is established
// when Watch returns and ends with the test; a watch the API server closes is opened again.
func (sc *Scenario) Watch(apiVersion, kind string, onChange func(at time.Time, u *unstructured.Unstructured)) {
	sc.T.Helper()
	// client-go's dynamic client: controller-runtime's would complain that no logger is set.
	dc, err := dynamic.NewForConfig(sc.Config)
	sc.G.Expect(err).NotTo(HaveOccurred())
	gv, err := schema.ParseGroupVersion(apiVersion)
	sc.G.Expect(err).NotTo(HaveOccurred())
	mapping, err := sc.Client.RESTMapper().RESTMapping(gv.WithKind(kind).GroupKind(), gv.Version)
	sc.G.Expect(err).NotTo(HaveOccurred(), "no resource for %s %s", apiVersion, kind)
	ctx := sc.Ctx()
	open := func() (watch.Interface, error) {
		return dc.Resource(mapping.Resource).Namespace(sc.NS).Watch(ctx, metav1.ListOptions{})
	}
	w, err := open()
	sc.G.Expect(err).NotTo(HaveOccurred(), "watch %s in %s", kind, sc.NS)
	done := make(chan struct{})
	sc.T.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				w.Stop()
				return
			case e, ok := <-w.ResultChan():
				if !ok {
					for w, err = open(); err != nil; w, err = open() {
						select {
						case <-ctx.Done():
							return
						case <-time.After(100 * time.Millisecond):
						}
					}
					continue
				}
				if u, isObj := e.Object.(*unstructured.Unstructured); isObj && (e.Type == watch.Added || e.Type == watch.Modified) {
					onChange(time.Now(), u)
				}
			}
		}
	}()
}
