//go:build tools

// Package fluxbuild pins the notification-controller main package so that `go mod tidy` records its dependency graph.
package fluxbuild

import _ "github.com/fluxcd/notification-controller"
