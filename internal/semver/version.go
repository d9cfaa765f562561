package semver

import (
	"fmt"
	"strings"

	mm "github.com/Masterminds/semver/v3"
)

// Version is a parsed semantic version (semver.org 2.0.0). The zero Version is not a version:
// get one from Parse.
type Version struct {
	v        *mm.Version
	original string
}

// Parse reads MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD] with an optional leading "v".
// All three numbers are required (the library's NewVersion would read "1.2" as 1.2.0), so that
// "1.2" and "1.2.0" can never be two tags for one version.
func Parse(s string) (Version, error) {
	v, err := mm.StrictNewVersion(strings.TrimPrefix(s, "v"))
	if err != nil {
		return Version{}, fmt.Errorf("invalid version %q: want MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD], optionally after \"v\": %w", s, err)
	}
	return Version{v: v, original: s}, nil
}

// MustParse is Parse for constants in tests and tables; it panics on a bad version.
func MustParse(s string) Version {
	v, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return v
}

// String renders the version canonically, without a leading "v".
func (v Version) String() string { return v.v.String() }

// Original is the text Parse was given, including a leading "v".
func (v Version) Original() string { return v.original }

// IsPrerelease reports whether the version carries prerelease identifiers.
func (v Version) IsPrerelease() bool { return v.v.Prerelease() != "" }

// Compare returns -1, 0 or +1 by semver precedence; build metadata is ignored.
func (v Version) Compare(o Version) int { return v.v.Compare(o.v) }
