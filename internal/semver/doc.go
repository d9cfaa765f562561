// Package semver reads semantic versions and version constraints, for choosing registry tags and
// for checking dependsOn ranges, with github.com/Masterminds/semver/v3: the library Flux's image
// policies and Helm use, so a constraint means the same thing in a Stage as in an ImagePolicy.
//
//	c, err := semver.ParseConstraint(">=1.2.0, <2 || ~3.1")
//	if err != nil { ... }
//	v, err := semver.Parse("v1.4.0")
//	if err == nil && c.Check(v) { ... }
//
// Two rules are Stagecoach's own: a version (a tag) needs all three numbers, optionally after a
// "v", so that "1.2" and "1.2.0" can never be two tags for one version; and errors name the text
// they were given. Prereleases only satisfy an alternative (the part between "||") that names one:
// ">=1.0.0-0" admits them, ">=1.0.0" does not.
package semver
