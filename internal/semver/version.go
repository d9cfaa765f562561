package semver

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is a parsed semantic version (semver.org 2.0.0).
type Version struct {
	Major, Minor, Patch uint64
	// Prerelease holds the dot-separated identifiers after "-", empty for a release.
	Prerelease []string
	// Build is the metadata after "+"; it never affects precedence.
	Build string
	// Original is the text Parse was given, including a leading "v".
	Original string
}

// Parse reads MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD] with an optional leading "v".
// All three numbers are required so that "1.2" and "1.2.0" can never be two tags for one version.
func Parse(s string) (Version, error) {
	v := Version{Original: s}
	rest := strings.TrimPrefix(s, "v")
	if rest == "" {
		return Version{}, fmt.Errorf("invalid version %q: empty", s)
	}
	if i := strings.IndexByte(rest, '+'); i >= 0 {
		v.Build = rest[i+1:]
		rest = rest[:i]
		if err := checkIdentifiers(v.Build, false); err != nil {
			return Version{}, fmt.Errorf("invalid version %q: build metadata: %w", s, err)
		}
	}
	if i := strings.IndexByte(rest, '-'); i >= 0 {
		pre := rest[i+1:]
		rest = rest[:i]
		if err := checkIdentifiers(pre, true); err != nil {
			return Version{}, fmt.Errorf("invalid version %q: prerelease: %w", s, err)
		}
		v.Prerelease = strings.Split(pre, ".")
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return Version{}, fmt.Errorf("invalid version %q: want MAJOR.MINOR.PATCH", s)
	}
	nums := [3]*uint64{&v.Major, &v.Minor, &v.Patch}
	for i, p := range parts {
		n, err := parseNumber(p)
		if err != nil {
			return Version{}, fmt.Errorf("invalid version %q: %w", s, err)
		}
		*nums[i] = n
	}
	return v, nil
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
func (v Version) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d.%d.%d", v.Major, v.Minor, v.Patch)
	if len(v.Prerelease) > 0 {
		b.WriteByte('-')
		b.WriteString(strings.Join(v.Prerelease, "."))
	}
	if v.Build != "" {
		b.WriteByte('+')
		b.WriteString(v.Build)
	}
	return b.String()
}

// IsPrerelease reports whether the version carries prerelease identifiers.
func (v Version) IsPrerelease() bool { return len(v.Prerelease) > 0 }

// Compare returns -1, 0 or +1 by semver precedence; build metadata is ignored.
func (v Version) Compare(o Version) int {
	for _, d := range [3][2]uint64{{v.Major, o.Major}, {v.Minor, o.Minor}, {v.Patch, o.Patch}} {
		if d[0] != d[1] {
			if d[0] < d[1] {
				return -1
			}
			return 1
		}
	}
	// A release ranks above any of its prereleases.
	switch {
	case len(v.Prerelease) == 0 && len(o.Prerelease) == 0:
		return 0
	case len(v.Prerelease) == 0:
		return 1
	case len(o.Prerelease) == 0:
		return -1
	}
	for i := 0; i < len(v.Prerelease) && i < len(o.Prerelease); i++ {
		if c := compareIdentifier(v.Prerelease[i], o.Prerelease[i]); c != 0 {
			return c
		}
	}
	switch {
	case len(v.Prerelease) < len(o.Prerelease):
		return -1
	case len(v.Prerelease) > len(o.Prerelease):
		return 1
	}
	return 0
}

// compareIdentifier orders numeric identifiers numerically and below alphanumeric ones.
func compareIdentifier(a, b string) int {
	an, aErr := strconv.ParseUint(a, 10, 64)
	bn, bErr := strconv.ParseUint(b, 10, 64)
	aNum, bNum := aErr == nil && isDigits(a), bErr == nil && isDigits(b)
	switch {
	case aNum && bNum:
		switch {
		case an < bn:
			return -1
		case an > bn:
			return 1
		}
		return 0
	case aNum:
		return -1
	case bNum:
		return 1
	}
	return strings.Compare(a, b)
}

func parseNumber(p string) (uint64, error) {
	if p == "" || !isDigits(p) {
		return 0, fmt.Errorf("%q is not a number", p)
	}
	if len(p) > 1 && p[0] == '0' {
		return 0, fmt.Errorf("%q has a leading zero", p)
	}
	n, err := strconv.ParseUint(p, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is too large", p)
	}
	return n, nil
}

// checkIdentifiers validates dot-separated [0-9A-Za-z-] identifiers; numeric prerelease
// identifiers may not have leading zeros.
func checkIdentifiers(s string, prerelease bool) error {
	if s == "" {
		return fmt.Errorf("empty")
	}
	for _, id := range strings.Split(s, ".") {
		if id == "" {
			return fmt.Errorf("empty identifier in %q", s)
		}
		for _, r := range id {
			if !(r == '-' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')) {
				return fmt.Errorf("identifier %q has character %q", id, r)
			}
		}
		if prerelease && isDigits(id) && len(id) > 1 && id[0] == '0' {
			return fmt.Errorf("identifier %q has a leading zero", id)
		}
	}
	return nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
