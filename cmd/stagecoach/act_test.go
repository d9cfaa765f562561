package main

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestParseUntil(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in      string
		want    time.Time
		wantErr string
	}{
		{in: "4h", want: now.Add(4 * time.Hour)},
		{in: "90m", want: now.Add(90 * time.Minute)},
		{in: "2026-12-24T18:00:00+01:00", want: time.Date(2026, 12, 24, 17, 0, 0, 0, time.UTC)},
		{in: "-1h", wantErr: `--until "-1h" must be in the future`},
		{in: "tomorrow", wantErr: `--until "tomorrow" is neither a time such as 2026-12-24T18:00:00Z nor a duration such as 4h`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			g := NewWithT(t)
			got, err := parseUntil(tc.in, now)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(tc.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Equal(tc.want)).To(BeTrue(), "got %s", got)
		})
	}
}

func TestVerbsRefuseBadArgumentsBeforeConnecting(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "promote without a stage", args: []string{"promote"}, wantErr: "accepts 1 arg(s), received 0"},
		{name: "unfreeze with both", args: []string{"unfreeze", "freeze-abc", "--stage", "web"}, wantErr: "name a Freeze to delete, or a Stage with --stage, not both"},
		{name: "unfreeze with neither", args: []string{"unfreeze"}, wantErr: "name a Freeze to delete, or a Stage with --stage, not both"},
		{name: "freeze until nonsense", args: []string{"freeze", "--reason", "x", "--until", "soon"}, wantErr: `--until "soon" is neither`},
		{name: "promote -o xml", args: []string{"promote", "web", "--digest", "sha256:x", "-o", "xml"}, wantErr: `unknown output format "xml": use text, json or yaml`},
		{name: "rollback --wait without time", args: []string{"rollback", "web", "--wait", "--timeout", "0s"}, wantErr: "--timeout must be positive"},
		{name: "approve -o table", args: []string{"approve", "web", "-o", "table"}, wantErr: `unknown output format "table"`},
		{name: "dora --since a week", args: []string{"dora", "--since", "a week"}, wantErr: `--since "a week" is neither a number of days`},
		{name: "history without a stage", args: []string{"history"}, wantErr: "accepts 1 arg(s), received 0"},
		{name: "abort without a stage", args: []string{"abort"}, wantErr: "accepts 1 arg(s), received 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(tc.args...)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}
