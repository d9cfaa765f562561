package stage

import (
	"context"
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

var testAppGVK = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"}

// fakeApplierCache answers Get from one object (nil: not cached) and says whether its informer synced.
type fakeApplierCache struct {
	cache.Cache
	obj    *unstructured.Unstructured
	synced bool
}

func (f *fakeApplierCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if f.obj == nil {
		return apierrors.NewNotFound(schema.GroupResource{Group: "argoproj.io", Resource: "applications"}, key.Name)
	}
	f.obj.DeepCopyInto(obj.(*unstructured.Unstructured))
	return nil
}

func (f *fakeApplierCache) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	return fakeInformer{synced: f.synced}, nil
}

type fakeInformer struct {
	cache.Informer
	synced bool
}

func (f fakeInformer) HasSynced() bool { return f.synced }

// stubReader answers every Get with err, or with obj.
type stubReader struct {
	client.Reader
	obj   *unstructured.Unstructured
	err   error
	reads int
}

func (s *stubReader) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	s.reads++
	if s.err != nil {
		return s.err
	}
	s.obj.DeepCopyInto(obj.(*unstructured.Unstructured))
	return nil
}

func testApp(rv, from string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(testAppGVK)
	u.SetNamespace("prod")
	u.SetName("payments")
	u.SetResourceVersion(rv)
	u.SetAnnotations(map[string]string{"read-from": from})
	return u
}

// Appliers are read from the label-selected cache only when it can answer as well as the API
// server: otherwise live, which also tells a Forbidden answer from a missing object.
func TestApplierReaderReadsLiveWhenTheCacheCannotAnswer(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "argoproj.io", Resource: "applications"}, "payments", errors.New("no"))
	for _, tc := range []struct {
		name    string
		watched bool
		synced  bool
		cached  *unstructured.Unstructured
		written string // resourceVersion of the controller's last write
		live    error
		want    string // where the object came from, or the error
	}{
		{name: "cached and fresh", watched: true, synced: true, cached: testApp("100", "cache"), want: "cache"},
		{name: "kind not watched", synced: true, cached: testApp("100", "cache"), want: "live"},
		{name: "informer not synced", watched: true, cached: testApp("100", "cache"), want: "live"},
		{name: "not in the cache", watched: true, synced: true, want: "live"},
		{name: "not in the cache and forbidden", watched: true, synced: true, live: forbidden, want: "forbidden"},
		{name: "cached before our write", watched: true, synced: true, cached: testApp("100", "cache"), written: "120", want: "live"},
		{name: "cached at our write", watched: true, synced: true, cached: testApp("120", "cache"), written: "120", want: "cache"},
		{name: "cached after our write", watched: true, synced: true, cached: testApp("130", "cache"), written: "120", want: "cache"},
		{name: "resourceVersion not comparable", watched: true, synced: true, cached: testApp("x1", "cache"), written: "120", want: "live"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			live := &stubReader{obj: testApp("140", "live"), err: tc.live}
			a := &ApplierReader{cache: &fakeApplierCache{obj: tc.cached, synced: tc.synced}, live: live}
			if tc.watched {
				a.watch(testAppGVK)
			}
			if tc.written != "" {
				a.wrote(testApp(tc.written, "write"))
			}
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(testAppGVK)
			err := a.Get(t.Context(), client.ObjectKey{Namespace: "prod", Name: "payments"}, got)
			if tc.want == "forbidden" {
				g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.GetAnnotations()["read-from"]).To(Equal(tc.want))
		})
	}
}

// Only writes that reach the API server (not dry runs) make a cached applier stale.
func TestWriteTrackingClientRecordsWrites(t *testing.T) {
	for _, tc := range []struct {
		name      string
		dryRun    bool
		wantFresh bool
	}{
		{name: "patch", wantFresh: false},
		{name: "dry run", dryRun: true, wantFresh: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			app := testApp("", "store")
			c := fake.NewClientBuilder().WithObjects(app.DeepCopy()).Build()
			a := &ApplierReader{}
			w := WriteTrackingClient{Client: c, appliers: a}
			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(testAppGVK)
			g.Expect(c.Get(t.Context(), client.ObjectKeyFromObject(app), obj)).To(Succeed())
			stale := obj.DeepCopy()
			orig := obj.DeepCopy()
			obj.SetLabels(map[string]string{"changed": "yes"})
			var opts []client.PatchOption
			if tc.dryRun {
				opts = append(opts, client.DryRunAll)
			}
			g.Expect(w.Patch(t.Context(), obj, client.MergeFrom(orig), opts...)).To(Succeed())
			g.Expect(a.fresh(stale)).To(Equal(tc.wantFresh))
		})
	}
}

func TestOnlyConflicts(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "stagecoach.dev", Resource: "stages"}, "prod", errors.New("modified"))
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{name: "conflict", err: conflict, want: true},
		{name: "wrapped conflict", err: fmt.Errorf("failed to patch the status of Stage %q: %w", "prod", conflict), want: true},
		{name: "joined conflicts", err: errors.Join(conflict, fmt.Errorf("x: %w", conflict)), want: true},
		{name: "conflict and another error", err: errors.Join(conflict, errors.New("registry down")), want: false},
		{name: "another error", err: errors.New("registry down"), want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(onlyConflicts(tc.err)).To(Equal(tc.want))
		})
	}
}
