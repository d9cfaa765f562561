package cli

import (
	"bytes"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

func TestDora(t *testing.T) {
	promote, rollback := stagecoachv1.ActionPromote, stagecoachv1.ActionRollback
	ok, rolled := stagecoachv1.PhaseSucceeded, stagecoachv1.PhaseRolledBack
	c := fake.NewClientBuilder().WithScheme(newScheme(t)).WithObjects(
		fixtureStage("payments-dev", "dev", ""), fixtureStage("payments-prod", "prod", "payments-dev"),
		fixtureStage("search-prod", "prod", ""),
		fixturePromotion("dev-1", "payments-dev", promote, digest1, "v1", ok, 0, 0, 1, 2, 3, 3),
		fixturePromotion("prod-1", "payments-prod", promote, digest1, "v1", ok, 10, 10, 11, 12, 20, 20),
		fixturePromotion("prod-2", "payments-prod", promote, digest2, "v2", rolled, 30, 30, 31, -1, -1, 40),
		fixturePromotion("prod-2-rollback", "payments-prod", rollback, digest1, "v1", ok, 40, 40, 41, 42, 50, 50),
	).Build()
	now := t0.Add(24 * time.Hour)
	tests := []struct {
		name    string
		opts    DoraOptions
		golden  string
		wantErr string
	}{
		{name: "json, one service", opts: DoraOptions{Namespace: "shop", Service: "payments", Since: 7 * 24 * time.Hour, Output: "json"}, golden: "dora.json"},
		{name: "yaml", opts: DoraOptions{Namespace: "shop", Service: "payments", Since: 7 * 24 * time.Hour, Output: "yaml"}, golden: "dora.yaml"},
		{name: "text, every service", opts: DoraOptions{Namespace: "shop", Since: 7 * 24 * time.Hour}, golden: "dora.txt"},
		{name: "a window before everything", opts: DoraOptions{Namespace: "shop", Service: "payments", Since: time.Hour, Output: "json"}, golden: "dora-empty-window.json"},
		{name: "unknown output", opts: DoraOptions{Namespace: "shop", Since: time.Hour, Output: "xml"}, wantErr: `unknown output format "xml": use text, json or yaml`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := Dora(t.Context(), c, tt.opts, &out, now)
			if tt.wantErr != "" {
				NewWithT(t).Expect(err).To(MatchError(tt.wantErr))
				return
			}
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
			golden(t, tt.golden, out.String())
		})
	}
}

func TestParseSince(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{in: "30d", want: 30 * 24 * time.Hour},
		{in: "12h", want: 12 * time.Hour},
		{in: "0d", wantErr: true},
		{in: "-1h", wantErr: true},
		{in: "a week", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ParseSince(tt.in)
			if tt.wantErr {
				g.Expect(err).To(MatchError(ContainSubstring("is neither a number of days")))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}
