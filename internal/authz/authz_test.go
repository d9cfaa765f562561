package authz

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// reviewer answers SubjectAccessReviews the way the API server would for a fixed set of rights,
// and records every review asked.
type reviewer struct {
	mu     sync.Mutex
	asked  []authorizationv1.SubjectAccessReviewSpec
	allows func(spec authorizationv1.SubjectAccessReviewSpec) bool
}

func (r *reviewer) client(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	NewWithT(t).Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			review, ok := obj.(*authorizationv1.SubjectAccessReview)
			if !ok {
				return c.Create(ctx, obj, opts...)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			r.asked = append(r.asked, review.Spec)
			review.Status.Allowed = r.allows(review.Spec)
			return nil
		},
	}).Build()
}

func (r *reviewer) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.asked)
}

var secrets = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// May asks as the author in exactly their groups and system:authenticated (what impersonating
// them would add), keeps a yes for ReviewTTL, and never keeps a no.
func TestMay(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	tina := &stagecoachv1.StageAuthor{User: "tina", Groups: []string{"release-managers", "dev"}}
	for _, tc := range []struct {
		name string
		// granted answers the reviews; asks are the times (offsets from now) May is asked at.
		granted   func(authorizationv1.SubjectAccessReviewSpec) bool
		asks      []time.Duration
		want      []bool
		wantAsked int
	}{
		{name: "a yes is kept within the TTL", granted: func(authorizationv1.SubjectAccessReviewSpec) bool { return true },
			asks: []time.Duration{0, ReviewTTL - time.Second}, want: []bool{true, true}, wantAsked: 1},
		{name: "a yes is asked again after the TTL", granted: func(authorizationv1.SubjectAccessReviewSpec) bool { return true },
			asks: []time.Duration{0, ReviewTTL}, want: []bool{true, true}, wantAsked: 2},
		{name: "a no is never kept", granted: func(authorizationv1.SubjectAccessReviewSpec) bool { return false },
			asks: []time.Duration{0, time.Second}, want: []bool{false, false}, wantAsked: 2},
		{name: "a right of one group is not the author's without it", granted: func(s authorizationv1.SubjectAccessReviewSpec) bool {
			// Only members of ops may: tina does not list ops, so the review must not carry it.
			for _, g := range s.Groups {
				if g == "ops" {
					return true
				}
			}
			return false
		}, asks: []time.Duration{0}, want: []bool{false}, wantAsked: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r := &reviewer{allows: tc.granted}
			c := r.client(t)
			var reviews Reviews
			for i, at := range tc.asks {
				got, err := reviews.May(t.Context(), c, now.Add(at), tina, "get", secrets, "shop", "pull")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got).To(Equal(tc.want[i]), "ask %d", i)
			}
			g.Expect(r.count()).To(Equal(tc.wantAsked))
			spec := r.asked[0]
			g.Expect(spec.User).To(Equal("tina"))
			g.Expect(spec.Groups).To(ConsistOf("dev", "release-managers", "system:authenticated"))
			g.Expect(*spec.ResourceAttributes).To(Equal(authorizationv1.ResourceAttributes{Namespace: "shop", Verb: "get", Version: "v1",
				Resource: "secrets", Name: "pull"}))
		})
	}
}

// A Stage's Secret is read only as far as its author may get it, with one reason per cause.
func TestSecretsGet(t *testing.T) {
	pull := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "pull"}, Data: map[string][]byte{"k": []byte("v")}}
	for _, tc := range []struct {
		name       string
		author     *stagecoachv1.StageAuthor
		secret     string
		granted    bool
		wantReason string
		wantMsg    string
	}{
		{name: "no author", secret: "pull", granted: true, wantReason: stagecoachv1.ReasonAuthorMissing,
			wantMsg: "Stage 'web' names no spec.author, and the controller uses Secret 'pull' (spec.source.registry.secretRef) only as whoever set the Stage"},
		{name: "an author who may not", author: &stagecoachv1.StageAuthor{User: "tina"}, secret: "pull", wantReason: stagecoachv1.ReasonAuthorForbidden,
			wantMsg: "the Stage's author tina may not get Secret 'shop/pull' (spec.source.registry.secretRef), so the controller does not use it: grant tina get on that Secret"},
		{name: "an author who may, a Secret not there", author: &stagecoachv1.StageAuthor{User: "tina"}, secret: "missing", granted: true,
			wantReason: stagecoachv1.ReasonCredentialsUnreadable, wantMsg: "Secret 'shop/missing' (spec.source.registry.secretRef) cannot be read"},
		{name: "an author who may", author: &stagecoachv1.StageAuthor{User: "tina"}, secret: "pull", granted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r := &reviewer{allows: func(authorizationv1.SubjectAccessReviewSpec) bool { return tc.granted }}
			c := r.client(t, pull)
			s := &Secrets{Reader: c, Client: c, Reviews: &Reviews{}}
			stage := &stagecoachv1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: stagecoachv1.StageSpec{Author: tc.author}}
			got, err := s.Get(t.Context(), stage, tc.secret, "spec.source.registry.secretRef")
			if tc.wantReason == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got.Data).To(Equal(pull.Data))
				return
			}
			g.Expect(got).To(BeNil())
			refusal, ok := AsRefusal(err)
			g.Expect(ok).To(BeTrue(), "%v", err)
			g.Expect(refusal.Reason).To(Equal(tc.wantReason))
			g.Expect(refusal.Message).To(ContainSubstring(tc.wantMsg))
			if tc.author == nil {
				g.Expect(r.count()).To(BeZero(), "no author: nobody to ask about")
			}
		})
	}
}

// What the controller creates as an author reaches the API server as the author: the
// impersonation headers name the user, each listed group and system:authenticated, and nothing
// else.
func TestImpersonatorActsAsTheAuthor(t *testing.T) {
	g := NewWithT(t)
	var mu sync.Mutex
	var headers http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		headers = r.Header.Clone()
		mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		var obj map[string]any
		_ = json.Unmarshal(body, &obj)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(obj)
	}))
	t.Cleanup(srv.Close)
	scheme := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	i := &Impersonator{Config: &rest.Config{Host: srv.URL}, Options: client.Options{Scheme: scheme, Mapper: mapper}}

	c, err := i.AsAuthor(&stagecoachv1.StageAuthor{User: "alice", Groups: []string{"release-managers"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "run"}})).To(Succeed())
	mu.Lock()
	defer mu.Unlock()
	g.Expect(headers.Get("Impersonate-User")).To(Equal("alice"))
	g.Expect(headers.Values("Impersonate-Group")).To(ConsistOf("release-managers", "system:authenticated"))

	var none *Impersonator
	_, err = none.AsAuthor(&stagecoachv1.StageAuthor{User: "alice"})
	g.Expect(err).To(MatchError(ContainSubstring("cannot act as alice")))
}
