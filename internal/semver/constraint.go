package semver

import (
	"fmt"
	"strings"

	mm "github.com/Masterminds/semver/v3"
)

// Constraint is a parsed version constraint such as ">=1.2.0, <2 || ~3.1", in the syntax of
// github.com/Masterminds/semver/v3 (alternatives separated by "||"; comparators separated by
// commas or spaces; =, !=, >, >=, <, <=, ~, ~>, ^, wildcards "1.x", "1.2.*", "*", partial
// versions "1.2", and hyphen ranges "1.2 - 1.4.5").
type Constraint struct {
	original string
	c        *mm.Constraints
}

// ParseConstraint parses a constraint; the error names the constraint and what is wrong with it.
func ParseConstraint(s string) (Constraint, error) {
	if strings.TrimSpace(s) == "" {
		return Constraint{}, fmt.Errorf("invalid semver constraint %q: empty", s)
	}
	c, err := mm.NewConstraint(s)
	if err != nil {
		return Constraint{}, fmt.Errorf("invalid semver constraint %q (write it as for Flux's ImagePolicy, e.g. \">=1.2.0, <2 || ~3.1\"): %w", s, err)
	}
	return Constraint{original: s, c: c}, nil
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
func (c Constraint) Check(v Version) bool { return c.c.Check(v.v) }
