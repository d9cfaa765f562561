package cli

import (
	"bytes"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

func TestHistory(t *testing.T) {
	promote, rollback := stagecoachv1.ActionPromote, stagecoachv1.ActionRollback
	c := fake.NewClientBuilder().WithScheme(newScheme(t)).WithObjects(
		fixtureStage("payments-prod", "prod", ""),
		fixturePromotion("prod-1", "payments-prod", promote, digest1, "v1", stagecoachv1.PhaseSucceeded, 10, 10, 11, 12, 20, 20),
		fixturePromotion("prod-2", "payments-prod", promote, digest2, "v2", stagecoachv1.PhaseRolledBack, 15, 30, 31, -1, -1, 40),
		fixturePromotion("prod-2-rollback", "payments-prod", rollback, digest1, "v1", stagecoachv1.PhaseSucceeded, 40, 40, 41, 42, 50, 50),
		fixturePromotion("prod-3", "payments-prod", promote, digest2, "v2", stagecoachv1.PhasePending, 55, -1, -1, -1, -1, -1),
		fixturePromotion("other", "payments-dev", promote, digest2, "v2", stagecoachv1.PhaseSucceeded, 1, 1, 2, 3, 4, 4),
	).Build()
	tests := []struct {
		name    string
		opts    HistoryOptions
		golden  string
		wantErr string
	}{
		{name: "json", opts: HistoryOptions{Namespace: "shop", Stage: "payments-prod", Output: "json"}, golden: "history.json"},
		{name: "text", opts: HistoryOptions{Namespace: "shop", Stage: "payments-prod"}, golden: "history.txt"},
		{name: "missing Stage", opts: HistoryOptions{Namespace: "shop", Stage: "nope"}, wantErr: `stage "nope" not found in namespace "shop" (use -n NAMESPACE)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := History(t.Context(), c, tt.opts, &out)
			if tt.wantErr != "" {
				NewWithT(t).Expect(err).To(MatchError(tt.wantErr))
				return
			}
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
			golden(t, tt.golden, out.String())
		})
	}
}

func TestPrintObject(t *testing.T) {
	p := fixturePromotion("prod-1", "payments-prod", stagecoachv1.ActionPromote, digest1, "v1", stagecoachv1.PhaseSucceeded, 10, 10, 11, 12, 20, 20)
	for _, format := range []string{"json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			var out bytes.Buffer
			NewWithT(t).Expect(PrintObject(&out, format, p)).To(Succeed())
			golden(t, "promotion."+format, out.String())
		})
	}
	t.Run("deleted Freeze", func(t *testing.T) {
		var out bytes.Buffer
		NewWithT(t).Expect(PrintDeleted(&out, "json", "shop", "freeze-abc")).To(Succeed())
		golden(t, "deleted.json", out.String())
	})
}
