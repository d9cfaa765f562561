// Package version holds the build's version, set at link time with -X.
package version

// Version of this build; "dev" unless the Makefile stamps it.
var Version = "dev"
