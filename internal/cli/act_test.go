package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// TestCreatePromotion runs every verb that creates a Promotion against a fake API server that
// answers SelfSubjectReviews as alice (or fails them, when whoAmIFails).
func TestCreatePromotion(t *testing.T) {
	const d1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	stage := &stagecoachv1.Stage{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Status:     stagecoachv1.StageStatus{Candidate: &stagecoachv1.CandidateVersion{Version: "v1.0.0", Digest: d1}},
	}
	type verb func(ctx context.Context, c client.Client, out io.Writer) (*stagecoachv1.Promotion, error)
	cases := []struct {
		name        string
		verb        verb
		whoAmIFails bool
		wantErr     string
		wantAsked   int
		wantOut     string
		want        stagecoachv1.PromotionSpec
	}{
		{
			name: "promote a tag",
			verb: func(ctx context.Context, c client.Client, out io.Writer) (*stagecoachv1.Promotion, error) {
				return Promote(ctx, c, PromoteOptions{Namespace: "shop", Stage: "web", Version: "v1.0.0", BreakGlass: true}, out)
			},
			wantAsked: 1,
			wantOut:   `^promotion\.stagecoach\.dev/web-\w+ created: promotes Stage web to v1\.0\.0 \(` + d1 + `\)\n$`,
			want: stagecoachv1.PromotionSpec{Stage: "web", Action: stagecoachv1.ActionPromote, RequestedBy: "alice",
				Reason: "promote by alice with the stagecoach CLI", BreakGlass: true,
				Version: &stagecoachv1.VersionReference{Digest: d1, Tag: "v1.0.0"}},
		},
		{
			name: "promote a tag the Stage does not know, before asking who",
			verb: func(ctx context.Context, c client.Client, out io.Writer) (*stagecoachv1.Promotion, error) {
				return Promote(ctx, c, PromoteOptions{Namespace: "shop", Stage: "web", Version: "v9"}, out)
			},
			whoAmIFails: true,
			wantErr:     `version "v9" is not known to Stage shop/web`,
		},
		{
			name: "promote to a Stage that is not there",
			verb: func(ctx context.Context, c client.Client, out io.Writer) (*stagecoachv1.Promotion, error) {
				return Promote(ctx, c, PromoteOptions{Namespace: "shop", Stage: "api", Digest: d1}, out)
			},
			wantErr: `stage "api" not found in namespace "shop" (use -n NAMESPACE)`,
		},
		{
			name: "roll back to the last verified version",
			verb: func(ctx context.Context, c client.Client, out io.Writer) (*stagecoachv1.Promotion, error) {
				return Rollback(ctx, c, RollbackOptions{Namespace: "shop", Stage: "web", Reason: "broken"}, out)
			},
			wantAsked: 1,
			wantOut:   `^promotion\.stagecoach\.dev/web-\w+ created: rolls Stage web back to its last verified version\n$`,
			want:      stagecoachv1.PromotionSpec{Stage: "web", Action: stagecoachv1.ActionRollback, RequestedBy: "alice", Reason: "broken"},
		},
		{
			name: "roll back to a digest",
			verb: func(ctx context.Context, c client.Client, out io.Writer) (*stagecoachv1.Promotion, error) {
				return Rollback(ctx, c, RollbackOptions{Namespace: "shop", Stage: "web", Digest: d1}, out)
			},
			wantAsked: 1,
			wantOut:   `^promotion\.stagecoach\.dev/web-\w+ created: rolls Stage web back to v1\.0\.0 \(` + d1 + `\)\n$`,
			want: stagecoachv1.PromotionSpec{Stage: "web", Action: stagecoachv1.ActionRollback, RequestedBy: "alice",
				Reason: "rollback by alice with the stagecoach CLI", Version: &stagecoachv1.VersionReference{Digest: d1, Tag: "v1.0.0"}},
		},
		{
			name: "unfreeze a Stage",
			verb: func(ctx context.Context, c client.Client, out io.Writer) (*stagecoachv1.Promotion, error) {
				return UnfreezeStage(ctx, c, "shop", "web", "", out)
			},
			wantAsked: 1,
			wantOut:   `^promotion\.stagecoach\.dev/web-\w+ created: unfreezes Stage web\n$`,
			want: stagecoachv1.PromotionSpec{Stage: "web", Action: stagecoachv1.ActionUnfreeze, RequestedBy: "alice",
				Reason: "unfreeze by alice with the stagecoach CLI"},
		},
		{
			name: "abort a Stage's Promotion",
			verb: func(ctx context.Context, c client.Client, out io.Writer) (*stagecoachv1.Promotion, error) {
				return AbortStage(ctx, c, "shop", "web", "canary is failing", out)
			},
			wantAsked: 1,
			wantOut:   `^promotion\.stagecoach\.dev/web-\w+ created: aborts the running Promotion of Stage web\n$`,
			want:      stagecoachv1.PromotionSpec{Stage: "web", Action: stagecoachv1.ActionAbort, RequestedBy: "alice", Reason: "canary is failing"},
		},
		{
			name: "abort when the API server will not say who",
			verb: func(ctx context.Context, c client.Client, out io.Writer) (*stagecoachv1.Promotion, error) {
				return AbortStage(ctx, c, "shop", "web", "", out)
			},
			whoAmIFails: true,
			wantAsked:   1,
			wantErr:     "failed to ask the API server who you are (SelfSubjectReview): forbidden",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			scheme := runtime.NewScheme()
			g.Expect(stagecoachv1.AddToScheme(scheme)).To(Succeed())
			g.Expect(authenticationv1.AddToScheme(scheme)).To(Succeed())
			asked := 0
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(stage.DeepCopy()).WithInterceptorFuncs(interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					review, ok := obj.(*authenticationv1.SelfSubjectReview)
					if !ok {
						return c.Create(ctx, obj, opts...)
					}
					asked++
					if tc.whoAmIFails {
						return errors.New("forbidden")
					}
					review.Status.UserInfo = authenticationv1.UserInfo{Username: "alice"}
					return nil
				},
			}).Build()
			var out bytes.Buffer
			p, err := tc.verb(t.Context(), c, &out)
			g.Expect(asked).To(Equal(tc.wantAsked), "SelfSubjectReviews")
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				g.Expect(p).To(BeNil())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out.String()).To(MatchRegexp(tc.wantOut))
			g.Expect(p.Spec).To(Equal(tc.want))
			g.Expect(p.Labels).To(HaveKeyWithValue(stagecoachv1.PromotionStageLabel, "web"))
			stored := &stagecoachv1.Promotion{}
			g.Expect(c.Get(t.Context(), client.ObjectKeyFromObject(p), stored)).To(Succeed())
			g.Expect(stored.Spec).To(Equal(tc.want))
		})
	}
}
