package semver

import (
	"slices"
	"strings"
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
		{in: "1.2", wantErr: "invalid semantic version"},
		{in: "1.2.3.4", wantErr: "invalid characters"},
		{in: "01.2.3", wantErr: "starts with 0"},
		{in: "1.2.3-01", wantErr: "starts with 0"},
		{in: "1.2.3-", wantErr: "invalid prerelease"},
		{in: "1.2.3-a..b", wantErr: "invalid prerelease"},
		{in: "1.2.3-a_b", wantErr: "invalid prerelease"},
		{in: "latest", wantErr: "invalid semantic version"},
		{in: "v", wantErr: "empty"},
		{in: "1.x.3", wantErr: "invalid characters"},
		{in: "99999999999999999999.0.0", wantErr: "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			g := NewWithT(t)
			v, err := Parse(tt.in)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				g.Expect(err.Error()).To(ContainSubstring(tt.in))
				g.Expect(err.Error()).To(ContainSubstring("want MAJOR.MINOR.PATCH"))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(v.String()).To(Equal(tt.want))
			g.Expect(v.Original()).To(Equal(tt.in))
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
		// "<3" is below 3.0.0, and 3.0.0-rc.1 is (Masterminds, as in Flux; the hand parser read it as <3.0.0-0).
		{">=2.0.0-rc.1, <3", []string{"2.0.0-rc.1", "2.0.0-rc.2", "2.0.0", "2.1.0-beta", "3.0.0-rc.1"}, []string{"2.0.0-beta", "3.0.0"}},
		{"1.2.3-rc.1", []string{"1.2.3-rc.1"}, []string{"1.2.3-rc.2", "1.2.3"}},
		{">=1.0.0 || >=2.0.0-rc.1", []string{"2.0.0-rc.2", "1.0.0"}, []string{"1.5.0-rc.1"}},
		// Forms the hand parser refused and Masterminds (so Flux) reads.
		{"1.2.3 - 2.0.0", []string{"1.2.3", "1.9.0", "2.0.0"}, []string{"1.2.2", "2.0.1"}},
		{"!=1.2", []string{"1.1.9", "1.3.0"}, []string{"1.2.0", "1.2.5"}},
		{"=>1.0.0", []string{"1.0.0", "2.0.0"}, []string{"0.9.0"}},
		{">=1.2-rc.1", []string{"1.2.0-rc.1", "1.2.0", "1.3.0"}, []string{"1.2.0-beta", "1.1.0"}},
		{">*", []string{"0.0.1", "5.0.0"}, []string{"0.0.0"}},
		{"<x", nil, []string{"0.0.0", "1.0.0"}},
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
		{">=1.0.0 ||", "improper constraint"},
		{">=", "improper constraint"},
		{">=1.2.3.4", "improper constraint"},
		{">=abc", "improper constraint"},
		// Masterminds bounds what it parses: at most 32 alternatives and 512 bytes.
		{strings.Repeat("1.x || ", 32) + "1.x", "too many constraint groups"},
		{">=1.0.0," + strings.Repeat(" <9.0.0", 80), "too long"},
	}
	for _, tt := range tests {
		t.Run(tt.constraint, func(t *testing.T) {
			g := NewWithT(t)
			_, err := ParseConstraint(tt.constraint)
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
			g.Expect(err.Error()).To(ContainSubstring("invalid semver constraint"))
			g.Expect(err.Error()).To(ContainSubstring(strings.TrimSpace(tt.constraint)))
		})
	}
}

// FuzzParseConstraint feeds constraints and versions as users and registries write them: parsing
// must not panic, and Check must be deterministic.
func FuzzParseConstraint(f *testing.F) {
	for _, seed := range []string{">=1.0.0", "^1.2 || ~3", "1.x, !=1.2.3", ">= 2.0.0-rc.1 <3", "*",
		"1.2.3 - 2.0.0", "=>1.0.0", ">=1.2-rc.1", "<x", ">=", "||", "~>1.2.3", "v1.2.3", ">=1.x.3"} {
		f.Add(seed, "1.2.3")
		f.Add(seed, "v2.0.0-rc.1+build.5")
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
		if c.Check(v) != c.Check(v) {
			t.Fatalf("Check(%q) on %q is not deterministic", version, constraint)
		}
	})
}

// FuzzParse checks what registry tags go through: a version equals itself and its canonical form,
// and Compare is antisymmetric.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{"1.2.3", "v1.2.3", "1.0.0-alpha.1", "1.0.0-rc.1+build.5", "0.0.0", "1.2", "latest", "v"} {
		f.Add(seed, "1.0.0-beta.11")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		va, err := Parse(a)
		if err != nil {
			return
		}
		if va.Original() != a {
			t.Fatalf("Original() of %q is %q", a, va.Original())
		}
		canonical, err := Parse(va.String())
		if err != nil {
			t.Fatalf("%q parsed, but its canonical form %q does not: %v", a, va.String(), err)
		}
		if va.Compare(va) != 0 || va.Compare(canonical) != 0 {
			t.Fatalf("%q does not equal itself or its canonical form %q", a, va.String())
		}
		vb, err := Parse(b)
		if err != nil {
			return
		}
		if va.Compare(vb) != -vb.Compare(va) {
			t.Fatalf("Compare(%q, %q) = %d but Compare(%q, %q) = %d", a, b, va.Compare(vb), b, a, vb.Compare(va))
		}
	})
}
