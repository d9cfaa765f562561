// Package semver parses semantic versions and version constraints, for choosing registry tags
// and for checking dependsOn ranges. It follows semver.org 2.0.0 precedence and accepts a
// leading "v" on versions.
//
//	c, err := semver.ParseConstraint(">=1.2.0, <2 || ~3.1")
//	if err != nil { ... }
//	v, err := semver.Parse("v1.4.0")
//	if err == nil && c.Check(v) { ... }
//
// Prereleases only satisfy an alternative that names one (">=1.0.0-0" does, ">=1.0.0" does not).
package semver
