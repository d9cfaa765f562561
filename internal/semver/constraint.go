package semver

import (
	"fmt"
	"math"
	"strings"
)

// Constraint is a parsed version constraint such as ">=1.2.0, <2 || ~3.1".
//
// Grammar: alternatives separated by "||" (OR); each alternative is a list of comparators
// separated by commas and/or spaces (AND). A comparator is an optional operator
// (=, ==, !=, >, >=, <, <=, ~, ~>, ^) followed by a version that may be partial ("1", "1.2")
// or wildcarded ("1.x", "1.2.*", "*"). A bare version is exact when complete ("1.2.3") and a
// range when partial ("1.2" means 1.2.x).
//
// Prereleases are excluded unless the alternative names one: ">=1.0.0" never matches
// 1.1.0-rc.1, while ">=1.0.0-0" matches every prerelease from 1.0.0-0 on.
type Constraint struct {
	original string
	groups   []group
}

type group struct {
	comparators []comparator
	// namesPrerelease is true when a comparator in this alternative was written with a prerelease.
	namesPrerelease bool
}

type operator int

const (
	opEQ operator = iota
	opNE
	opGT
	opGE
	opLT
	opLE
)

type comparator struct {
	op operator
	v  Version
}

// operators in the order they must be tried: two-character ones before their prefixes.
var operators = []string{"==", "!=", ">=", "<=", "~>", "=", ">", "<", "~", "^"}

// ParseConstraint parses a constraint; the error names the constraint and the offending part.
func ParseConstraint(s string) (Constraint, error) {
	c := Constraint{original: s}
	if strings.TrimSpace(s) == "" {
		return Constraint{}, fmt.Errorf("invalid semver constraint %q: empty", s)
	}
	for _, alt := range strings.Split(s, "||") {
		g, err := parseGroup(alt)
		if err != nil {
			return Constraint{}, fmt.Errorf("invalid semver constraint %q: %w", s, err)
		}
		c.groups = append(c.groups, g)
	}
	return c, nil
}

// MustParseConstraint is ParseConstraint for constants in tests; it panics on error.
func MustParseConstraint(s string) Constraint {
	c, err := ParseConstraint(s)
	if err != nil {
		panic(err)
	}
	return c
}

// String returns the constraint as written.
func (c Constraint) String() string { return c.original }

// Check reports whether v satisfies the constraint.
func (c Constraint) Check(v Version) bool {
	for _, g := range c.groups {
		if g.check(v) {
			return true
		}
	}
	return false
}

func (g group) check(v Version) bool {
	if v.IsPrerelease() && !g.namesPrerelease {
		return false
	}
	for _, cmp := range g.comparators {
		if !cmp.check(v) {
			return false
		}
	}
	return true
}

func (c comparator) check(v Version) bool {
	r := v.Compare(c.v)
	switch c.op {
	case opEQ:
		return r == 0
	case opNE:
		return r != 0
	case opGT:
		return r > 0
	case opGE:
		return r >= 0
	case opLT:
		return r < 0
	case opLE:
		return r <= 0
	}
	return false
}

func parseGroup(alt string) (group, error) {
	fields := strings.Fields(strings.ReplaceAll(alt, ",", " "))
	if len(fields) == 0 {
		return group{}, fmt.Errorf("empty alternative around \"||\"")
	}
	var g group
	for i := 0; i < len(fields); i++ {
		tok := fields[i]
		if tok == "-" {
			return group{}, fmt.Errorf("hyphen ranges are not supported; write \">=A, <=B\"")
		}
		// Allow a space between operator and version: ">= 1.0.0".
		if isOperator(tok) {
			if i+1 >= len(fields) {
				return group{}, fmt.Errorf("operator %q has no version", tok)
			}
			i++
			tok += fields[i]
		}
		cmps, namesPre, err := parseComparator(tok)
		if err != nil {
			return group{}, err
		}
		g.comparators = append(g.comparators, cmps...)
		g.namesPrerelease = g.namesPrerelease || namesPre
	}
	return g, nil
}

func isOperator(tok string) bool {
	for _, op := range operators {
		if tok == op {
			return true
		}
	}
	return false
}

// partial is a possibly incomplete version from a constraint; n counts the numbers given.
type partial struct {
	nums [3]uint64
	n    int
	pre  []string
}

func (p partial) floor() Version {
	return Version{Major: p.nums[0], Minor: p.nums[1], Patch: p.nums[2], Prerelease: p.pre}
}

// bump returns the lowest version above every version matching the first k numbers of p, as
// X.Y.Z-0 so that the next line's prereleases stay out; ok is false on overflow (no bound).
func (p partial) bump(k int) (Version, bool) {
	if p.nums[k-1] == math.MaxUint64 {
		return Version{}, false
	}
	v := Version{Prerelease: []string{"0"}}
	dst := [3]*uint64{&v.Major, &v.Minor, &v.Patch}
	for i := 0; i < k-1; i++ {
		*dst[i] = p.nums[i]
	}
	*dst[k-1] = p.nums[k-1] + 1
	return v, true
}

func parsePartial(s string) (partial, error) {
	orig := s
	s = strings.TrimPrefix(s, "v")
	var p partial
	if i := strings.IndexByte(s, '+'); i >= 0 {
		s = s[:i] // build metadata never matters for precedence
	}
	if i := strings.IndexByte(s, '-'); i >= 0 {
		pre := s[i+1:]
		s = s[:i]
		if err := checkIdentifiers(pre, true); err != nil {
			return partial{}, fmt.Errorf("version %q: prerelease: %w", orig, err)
		}
		p.pre = strings.Split(pre, ".")
	}
	parts := strings.Split(s, ".")
	if len(parts) > 3 || s == "" {
		return partial{}, fmt.Errorf("version %q: want up to MAJOR.MINOR.PATCH", orig)
	}
	wild := false
	for i, part := range parts {
		if part == "x" || part == "X" || part == "*" {
			wild = true
			continue
		}
		if wild {
			return partial{}, fmt.Errorf("version %q: a number follows a wildcard", orig)
		}
		n, err := parseNumber(part)
		if err != nil {
			return partial{}, fmt.Errorf("version %q: %w", orig, err)
		}
		p.nums[i] = n
		p.n = i + 1
	}
	if p.pre != nil && p.n != 3 {
		return partial{}, fmt.Errorf("version %q: a prerelease needs MAJOR.MINOR.PATCH", orig)
	}
	return p, nil
}

// parseComparator expands one comparator into primitive comparisons on complete versions.
func parseComparator(tok string) ([]comparator, bool, error) {
	op := ""
	for _, o := range operators {
		if strings.HasPrefix(tok, o) {
			op = o
			break
		}
	}
	p, err := parsePartial(tok[len(op):])
	if err != nil {
		return nil, false, err
	}
	namesPre := p.pre != nil
	lower := p.floor()
	// upperFor returns "< the first version past the first k numbers", or nothing on overflow.
	upperFor := func(k int) []comparator {
		if u, ok := p.bump(k); ok {
			return []comparator{{opLT, u}}
		}
		return nil
	}
	switch op {
	case "", "=", "==":
		if p.n == 3 {
			return []comparator{{opEQ, lower}}, namesPre, nil
		}
		if p.n == 0 {
			return nil, namesPre, nil
		}
		return append([]comparator{{opGE, lower}}, upperFor(p.n)...), namesPre, nil
	case "!=":
		if p.n != 3 {
			return nil, false, fmt.Errorf("%q: != needs a complete version", tok)
		}
		return []comparator{{opNE, lower}}, namesPre, nil
	case ">":
		switch p.n {
		case 0:
			return nil, false, fmt.Errorf("%q matches nothing", tok)
		case 3:
			return []comparator{{opGT, lower}}, namesPre, nil
		}
		u, ok := p.bump(p.n)
		if !ok {
			return nil, false, fmt.Errorf("%q matches nothing", tok)
		}
		u.Prerelease = nil
		return []comparator{{opGE, u}}, namesPre, nil
	case ">=":
		return []comparator{{opGE, lower}}, namesPre, nil
	case "<":
		switch p.n {
		case 0:
			return nil, false, fmt.Errorf("%q matches nothing", tok)
		case 3:
			return []comparator{{opLT, lower}}, namesPre, nil
		}
		lower.Prerelease = []string{"0"}
		return []comparator{{opLT, lower}}, namesPre, nil
	case "<=":
		switch p.n {
		case 0:
			return nil, namesPre, nil
		case 3:
			return []comparator{{opLE, lower}}, namesPre, nil
		}
		return upperFor(p.n), namesPre, nil
	case "~", "~>":
		if p.n == 0 {
			return nil, namesPre, nil
		}
		// ~1.2.3 and ~1.2 allow patch changes; ~1 allows minor changes.
		return append([]comparator{{opGE, lower}}, upperFor(min(p.n, 2))...), namesPre, nil
	case "^":
		if p.n == 0 {
			return nil, namesPre, nil
		}
		// ^ allows changes that do not modify the left-most non-zero number.
		var k int
		switch {
		case p.nums[0] != 0 || p.n == 1:
			k = 1
		case p.nums[1] != 0 || p.n == 2:
			k = 2
		default:
			k = 3
		}
		return append([]comparator{{opGE, lower}}, upperFor(k)...), namesPre, nil
	}
	return nil, false, fmt.Errorf("%q: unknown operator", tok)
}
