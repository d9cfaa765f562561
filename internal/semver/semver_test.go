package semver

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr string
	}{
		{in: "1.2.3", want: "1.2.3"},
		{in: "v1.2.3", want: "1.2.3"},
		{in: "1.2.3-rc.1", want: "1.2.3-rc.1"},
		{in: "1.2.3-rc.1+build.5", want: "1.2.3-rc.1+build.5"},
		{in: "0.0.0", want: "0.0.0"},
		{in: "1.2", wantErr: "want MAJOR.MINOR.PATCH"},
		{in: "1.2.3.4", wantErr: "want MAJOR.MINOR.PATCH"},
		{in: "01.2.3", wantErr: "leading zero"},
		{in: "1.2.3-01", wantErr: "leading zero"},
		{in: "1.2.3-", wantErr: "empty"},
		{in: "1.2.3-a..b", wantErr: "empty identifier"},
		{in: "1.2.3-a_b", wantErr: "character"},
		{in: "latest", wantErr: "want MAJOR.MINOR.PATCH"},
		{in: "v", wantErr: "empty"},
		{in: "1.x.3", wantErr: "not a number"},
		{in: "99999999999999999999.0.0", wantErr: "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			g := NewWithT(t)
			v, err := Parse(tt.in)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				g.Expect(err.Error()).To(ContainSubstring(tt.in))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(v.String()).To(Equal(tt.want))
			g.Expect(v.Original).To(Equal(tt.in))
		})
	}
}

func TestCompare(t *testing.T) {
	// Ascending order from semver.org §11, plus v-prefix and build metadata cases.
	ordered := []string{
		"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
		"1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "1.10.0", "2.0.0",
	}
	for i := range ordered {
		for j := range ordered {
			a, b := ordered[i], ordered[j]
			t.Run(a+" vs "+b, func(t *testing.T) {
				g := NewWithT(t)
				want := 0
				if i < j {
					want = -1
				} else if i > j {
					want = 1
				}
				g.Expect(MustParse(a).Compare(MustParse(b))).To(Equal(want))
			})
		}
	}
	t.Run("v prefix and build metadata do not matter", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(MustParse("v1.2.3+abc").Compare(MustParse("1.2.3+def"))).To(Equal(0))
	})
	t.Run("sorting a shuffled list restores the order", func(t *testing.T) {
		g := NewWithT(t)
		shuffled := []string{"1.1.0", "1.0.0-beta.11", "2.0.0", "1.0.0-alpha", "1.0.0", "1.0.0-beta.2",
			"1.10.0", "1.0.0-rc.1", "1.0.0-alpha.beta", "1.0.1", "1.0.0-beta", "1.0.0-alpha.1"}
		slices.SortFunc(shuffled, func(a, b string) int { return MustParse(a).Compare(MustParse(b)) })
		g.Expect(shuffled).To(Equal(ordered))
	})
}

func TestConstraint(t *testing.T) {
	tests := []struct {
		constraint string
		match      []string
		noMatch    []string
	}{
		{">=1.0.0", []string{"1.0.0", "1.5.0", "v2.0.0", "10.0.0"}, []string{"0.9.9", "1.1.0-rc.1", "1.0.0-rc.1"}},
		{">= 1.0.0", []string{"1.0.0"}, []string{"0.9.0"}},
		{">1.2.3", []string{"1.2.4"}, []string{"1.2.3", "1.2.2"}},
		{">1.2", []string{"1.3.0"}, []string{"1.2.9", "1.2.0"}},
		{">1", []string{"2.0.0"}, []string{"1.99.0"}},
		{"<2", []string{"1.99.99", "0.1.0"}, []string{"2.0.0", "2.0.0-rc.1", "1.5.0-rc.1"}},
		{"<2.0.0", []string{"1.9.0"}, []string{"2.0.0"}},
		{"<=1.2", []string{"1.2.9", "1.0.0"}, []string{"1.3.0"}},
		{"<=1.2.3", []string{"1.2.3"}, []string{"1.2.4"}},
		{"~1.2", []string{"1.2.0", "1.2.9"}, []string{"1.3.0", "1.1.9"}},
		{"~1.2.3", []string{"1.2.3", "1.2.10"}, []string{"1.2.2", "1.3.0"}},
		{"~>1.2.3", []string{"1.2.5"}, []string{"1.3.0"}},
		{"~1", []string{"1.0.0", "1.9.0"}, []string{"2.0.0"}},
		{"^1.2.3", []string{"1.2.3", "1.9.9"}, []string{"1.2.2", "2.0.0", "2.0.0-rc.1"}},
		{"^0.2.3", []string{"0.2.3", "0.2.9"}, []string{"0.3.0", "0.2.2"}},
		{"^0.0.3", []string{"0.0.3"}, []string{"0.0.4", "0.0.2"}},
		{"^1.2", []string{"1.2.0", "1.99.0"}, []string{"2.0.0", "1.1.0"}},
		{"^0", []string{"0.0.1", "0.9.0"}, []string{"1.0.0"}},
		{"1.x", []string{"1.0.0", "1.9.9"}, []string{"2.0.0", "0.9.0"}},
		{"1.2.x", []string{"1.2.0", "1.2.7"}, []string{"1.3.0"}},
		{"1.2.*", []string{"1.2.1"}, []string{"1.1.0"}},
		{"1", []string{"1.4.0"}, []string{"2.0.0"}},
		{"*", []string{"0.0.0", "5.0.0"}, []string{"5.0.0-rc.1"}},
		{"1.2.3", []string{"1.2.3", "v1.2.3"}, []string{"1.2.4"}},
		{"=1.2.3", []string{"1.2.3"}, []string{"1.2.4"}},
		{"!=1.2.3", []string{"1.2.4"}, []string{"1.2.3"}},
		{">=1.0.0, <2", []string{"1.0.0", "1.9.0"}, []string{"2.0.0", "0.1.0"}},
		{">=1.0.0 <2", []string{"1.5.0"}, []string{"2.1.0"}},
		{">=1.0.0,<1.5.0 || >=2.0.0", []string{"1.4.0", "2.3.0"}, []string{"1.5.0", "1.9.0"}},
		{"1.x || 3.x", []string{"1.1.0", "3.0.0"}, []string{"2.0.0"}},
		// Prereleases only when the alternative names one.
		{">=1.0.0-0", []string{"1.0.0-alpha", "1.2.0-rc.1", "1.0.0"}, []string{"0.9.0-rc.1"}},
		{">=2.0.0-rc.1, <3", []string{"2.0.0-rc.1", "2.0.0-rc.2", "2.0.0", "2.1.0-beta"}, []string{"2.0.0-beta", "3.0.0-rc.1"}},
		{"1.2.3-rc.1", []string{"1.2.3-rc.1"}, []string{"1.2.3-rc.2", "1.2.3"}},
		{">=1.0.0 || >=2.0.0-rc.1", []string{"2.0.0-rc.2", "1.0.0"}, []string{"1.5.0-rc.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.constraint, func(t *testing.T) {
			g := NewWithT(t)
			c, err := ParseConstraint(tt.constraint)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.String()).To(Equal(tt.constraint))
			for _, v := range tt.match {
				g.Expect(c.Check(MustParse(v))).To(BeTrue(), "%s should satisfy %s", v, tt.constraint)
			}
			for _, v := range tt.noMatch {
				g.Expect(c.Check(MustParse(v))).To(BeFalse(), "%s should not satisfy %s", v, tt.constraint)
			}
		})
	}
}

func TestParseConstraintErrors(t *testing.T) {
	tests := []struct {
		constraint string
		wantErr    string
	}{
		{"", "empty"},
		{"   ", "empty"},
		{">=1.0.0 ||", "empty alternative"},
		{">=", "has no version"},
		{"1.2.3 - 2.0.0", "hyphen ranges are not supported"},
		{"!=1.2", "needs a complete version"},
		{">*", "matches nothing"},
		{"<x", "matches nothing"},
		{">=1.x.3", "a number follows a wildcard"},
		{">=1.2-rc.1", "a prerelease needs MAJOR.MINOR.PATCH"},
		{">=1.2.3.4", "want up to MAJOR.MINOR.PATCH"},
		{">=abc", "not a number"},
		{"=>1.0.0", "not a number"},
	}
	for _, tt := range tests {
		t.Run(tt.constraint, func(t *testing.T) {
			g := NewWithT(t)
			_, err := ParseConstraint(tt.constraint)
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
			g.Expect(err.Error()).To(ContainSubstring("invalid semver constraint"))
		})
	}
}

func FuzzParseConstraint(f *testing.F) {
	for _, seed := range []string{">=1.0.0", "^1.2 || ~3", "1.x, !=1.2.3", ">= 2.0.0-rc.1 <3", "*"} {
		f.Add(seed, "1.2.3")
	}
	f.Fuzz(func(t *testing.T, constraint, version string) {
		c, err := ParseConstraint(constraint)
		if err != nil {
			return
		}
		v, err := Parse(version)
		if err != nil {
			return
		}
		// Must not panic, and must be deterministic.
		if c.Check(v) != c.Check(v) {
			t.Fatalf("Check(%q) on %q is not deterministic", version, constraint)
		}
		if v.Compare(v) != 0 {
			t.Fatalf("%q does not equal itself", version)
		}
	})
}
