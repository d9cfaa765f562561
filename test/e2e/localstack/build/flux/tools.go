//go:build tools

// Package fluxbuild pins the main packages of the three Flux controllers the stack runs, so that
// `go mod tidy` records one dependency graph for all of them: built from one module, they share
// their compiled dependencies (Kubernetes, controller-runtime, the cloud SDKs) in the build cache.
package fluxbuild

import (
	_ "github.com/fluxcd/kustomize-controller"
	_ "github.com/fluxcd/notification-controller"
	_ "github.com/fluxcd/source-controller"
)
