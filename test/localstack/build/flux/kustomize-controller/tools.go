//go:build tools

// Package fluxbuild pins the kustomize-controller main package so that `go mod tidy` records its dependency graph.
package fluxbuild

import _ "github.com/fluxcd/kustomize-controller"
